// SPDX-License-Identifier: GPL-2.0
/*
 * cm_connect: a minimal RDMA CM client for svcrdma_rs tests.
 *
 *   cm_connect [-6] [-p HEX] [-t SECS] [-u FILE] ADDR PORT
 *
 * Connects an RC queue pair to ADDR:PORT, sending HEX (bytes in hex, may be
 * empty) as the CM private data. Prints one line:
 *   ESTABLISHED private=<hex of the server's private data>
 *   REJECTED status=<n>
 *   ERROR <what>
 * and exits 0, 2 or 1 accordingly. Once established it holds the connection
 * until FILE exists (-u) or SECS pass (-t, default 30), then disconnects.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netdb.h>
#include <rdma/rdma_cma.h>

static struct rdma_event_channel *ch;

static int wait_event(enum rdma_cm_event_type want, struct rdma_cm_event **out)
{
	struct rdma_cm_event *ev;

	if (rdma_get_cm_event(ch, &ev)) {
		printf("ERROR rdma_get_cm_event: %s\n", strerror(errno));
		return -1;
	}
	if (ev->event != want) {
		*out = ev;
		return 1;
	}
	*out = ev;
	return 0;
}

static int parse_hex(const char *s, unsigned char *buf, int max)
{
	int n = 0;

	while (s[0] && s[1]) {
		unsigned int b;

		if (n == max || sscanf(s, "%2x", &b) != 1)
			return -1;
		buf[n++] = b;
		s += 2;
	}
	return s[0] ? -1 : n;
}

int main(int argc, char **argv)
{
	unsigned char pdata[256];
	int plen = 0, secs = 30, c, ret;
	const char *until = NULL;
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai;
	struct rdma_cm_id *id;
	struct rdma_cm_event *ev;
	struct rdma_conn_param cp;
	struct ibv_qp_init_attr qa;
	struct ibv_pd *pd;
	struct ibv_cq *cq;

	hints.ai_family = AF_INET;
	while ((c = getopt(argc, argv, "6p:t:u:")) != -1) {
		switch (c) {
		case '6': hints.ai_family = AF_INET6; break;
		case 'p':
			plen = parse_hex(optarg, pdata, sizeof(pdata));
			if (plen < 0) {
				printf("ERROR bad private data hex\n");
				return 1;
			}
			break;
		case 't': secs = atoi(optarg); break;
		case 'u': until = optarg; break;
		default: return 1;
		}
	}
	if (optind + 2 != argc) {
		fprintf(stderr, "usage: cm_connect [-6] [-p HEX] [-t SECS] [-u FILE] ADDR PORT\n");
		return 1;
	}
	if (getaddrinfo(argv[optind], argv[optind + 1], &hints, &ai)) {
		printf("ERROR getaddrinfo\n");
		return 1;
	}
	ch = rdma_create_event_channel();
	if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP)) {
		printf("ERROR rdma_create_id: %s\n", strerror(errno));
		return 1;
	}
	if (rdma_resolve_addr(id, NULL, ai->ai_addr, 5000) ||
	    wait_event(RDMA_CM_EVENT_ADDR_RESOLVED, &ev)) {
		printf("ERROR resolve addr\n");
		return 1;
	}
	rdma_ack_cm_event(ev);
	if (rdma_resolve_route(id, 5000) || wait_event(RDMA_CM_EVENT_ROUTE_RESOLVED, &ev)) {
		printf("ERROR resolve route\n");
		return 1;
	}
	rdma_ack_cm_event(ev);
	pd = ibv_alloc_pd(id->verbs);
	cq = pd ? ibv_create_cq(id->verbs, 16, NULL, NULL, 0) : NULL;
	if (!cq) {
		printf("ERROR pd/cq\n");
		return 1;
	}
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = qa.recv_cq = cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 8;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	if (rdma_create_qp(id, pd, &qa)) {
		printf("ERROR rdma_create_qp: %s\n", strerror(errno));
		return 1;
	}
	memset(&cp, 0, sizeof(cp));
	cp.private_data = plen ? pdata : NULL;
	cp.private_data_len = plen;
	cp.responder_resources = 1;
	cp.initiator_depth = 1;
	cp.retry_count = 7;
	cp.rnr_retry_count = 7;
	if (rdma_connect(id, &cp)) {
		printf("ERROR rdma_connect: %s\n", strerror(errno));
		return 1;
	}
	ret = wait_event(RDMA_CM_EVENT_ESTABLISHED, &ev);
	if (ret < 0)
		return 1;
	if (ret > 0) {
		if (ev->event == RDMA_CM_EVENT_REJECTED) {
			printf("REJECTED status=%d\n", ev->status);
			fflush(stdout);
			return 2;
		}
		printf("ERROR event %s status=%d\n", rdma_event_str(ev->event), ev->status);
		return 1;
	}
	printf("ESTABLISHED private=");
	for (c = 0; c < ev->param.conn.private_data_len; c++)
		printf("%02x", ((const unsigned char *)ev->param.conn.private_data)[c]);
	printf("\n");
	fflush(stdout);
	rdma_ack_cm_event(ev);
	for (c = 0; c < secs * 10; c++) {
		if (until && access(until, F_OK) == 0)
			break;
		usleep(100000);
	}
	rdma_disconnect(id);
	return 0;
}
