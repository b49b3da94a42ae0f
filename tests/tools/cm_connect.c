// SPDX-License-Identifier: GPL-2.0
/*
 * cm_connect: a minimal RDMA CM client for svcrdma_rs tests.
 *
 *   cm_connect [-6] ADDR PORT
 *
 * Reads commands from stdin, one per line, and answers each with one line
 * on stdout starting with "= " (anything else on stdout is not an answer),
 * so a test makes many connections from one process (starting a verbs
 * process costs seconds in an emulated guest):
 *   connect [HEX]   connects an RC queue pair to ADDR:PORT, sending HEX
 *                   (bytes in hex, may be empty) as the CM private data;
 *                   answers one of
 *                     ESTABLISHED private=<hex of the server's private data>
 *                     REJECTED status=<n>
 *                     ERROR <what>
 *                   and holds an established connection
 *   release         disconnects the held connection; answers RELEASED once
 *                   the disconnect completed, or ERROR
 * It exits at end of input, releasing what it holds.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netdb.h>
#include <rdma/rdma_cma.h>

#define EVENT_TIMEOUT_MS 20000

static struct rdma_event_channel *ch;
static struct addrinfo *peer;

/* One connection attempt and what it holds. */
struct conn {
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	int established;
};

/*
 * Waits for the next event of @id (events of other ids are acknowledged and
 * dropped: they belong to released connections). Returns 0 with *out set,
 * or -1 on timeout or error.
 */
static int next_event(struct rdma_cm_id *id, struct rdma_cm_event **out)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;

	for (;;) {
		int n = poll(&p, 1, EVENT_TIMEOUT_MS);

		if (n <= 0)
			return -1;
		if (rdma_get_cm_event(ch, &ev))
			return -1;
		if (ev->id == id) {
			*out = ev;
			return 0;
		}
		rdma_ack_cm_event(ev);
	}
}

/* Waits for event @want on @id; prints an ERROR line naming @what if another comes. */
static int expect_event(struct rdma_cm_id *id, enum rdma_cm_event_type want, const char *what)
{
	struct rdma_cm_event *ev;

	if (next_event(id, &ev)) {
		printf("ERROR %s: no event\n", what);
		return -1;
	}
	if (ev->event != want) {
		printf("ERROR %s: event %s status=%d\n", what, rdma_event_str(ev->event), ev->status);
		rdma_ack_cm_event(ev);
		return -1;
	}
	rdma_ack_cm_event(ev);
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

static void conn_free(struct conn *c)
{
	if (c->id && c->id->qp)
		rdma_destroy_qp(c->id);
	if (c->cq)
		ibv_destroy_cq(c->cq);
	if (c->pd)
		ibv_dealloc_pd(c->pd);
	if (c->id)
		rdma_destroy_id(c->id);
	memset(c, 0, sizeof(*c));
}

/*
 * One attempt of conn_open(). Returns as conn_open() does, or 3 when
 * rdma_connect() failed with EADDRINUSE (nothing printed).
 */
static int conn_try(struct conn *c, const unsigned char *pdata, int plen)
{
	struct rdma_conn_param cp;
	struct ibv_qp_init_attr qa;
	struct rdma_cm_event *ev;
	int i;

	memset(c, 0, sizeof(*c));
	if (rdma_create_id(ch, &c->id, NULL, RDMA_PS_TCP)) {
		printf("ERROR rdma_create_id: %s\n", strerror(errno));
		c->id = NULL;
		return 1;
	}
	if (rdma_resolve_addr(c->id, NULL, peer->ai_addr, 5000)) {
		printf("ERROR rdma_resolve_addr: %s\n", strerror(errno));
		goto err;
	}
	if (expect_event(c->id, RDMA_CM_EVENT_ADDR_RESOLVED, "resolve addr"))
		goto err;
	if (rdma_resolve_route(c->id, 5000)) {
		printf("ERROR rdma_resolve_route: %s\n", strerror(errno));
		goto err;
	}
	if (expect_event(c->id, RDMA_CM_EVENT_ROUTE_RESOLVED, "resolve route"))
		goto err;
	c->pd = ibv_alloc_pd(c->id->verbs);
	c->cq = c->pd ? ibv_create_cq(c->id->verbs, 16, NULL, NULL, 0) : NULL;
	if (!c->cq) {
		printf("ERROR pd/cq\n");
		goto err;
	}
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = qa.recv_cq = c->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 8;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	if (rdma_create_qp(c->id, c->pd, &qa)) {
		printf("ERROR rdma_create_qp: %s\n", strerror(errno));
		goto err;
	}
	memset(&cp, 0, sizeof(cp));
	cp.private_data = plen ? pdata : NULL;
	cp.private_data_len = plen;
	cp.responder_resources = 1;
	cp.initiator_depth = 1;
	cp.retry_count = 7;
	cp.rnr_retry_count = 7;
	if (rdma_connect(c->id, &cp)) {
		if (errno == EADDRINUSE) {
			conn_free(c);
			return 3;
		}
		printf("ERROR rdma_connect: %s\n", strerror(errno));
		goto err;
	}
	if (next_event(c->id, &ev)) {
		printf("ERROR connect: no event\n");
		goto err;
	}
	if (ev->event == RDMA_CM_EVENT_REJECTED) {
		printf("REJECTED status=%d\n", ev->status);
		rdma_ack_cm_event(ev);
		conn_free(c);
		return 2;
	}
	if (ev->event != RDMA_CM_EVENT_ESTABLISHED) {
		printf("ERROR event %s status=%d\n", rdma_event_str(ev->event), ev->status);
		rdma_ack_cm_event(ev);
		goto err;
	}
	printf("ESTABLISHED private=");
	for (i = 0; i < ev->param.conn.private_data_len; i++)
		printf("%02x", ((const unsigned char *)ev->param.conn.private_data)[i]);
	printf("\n");
	rdma_ack_cm_event(ev);
	c->established = 1;
	return 0;
err:
	conn_free(c);
	return 1;
}

/*
 * Connects with @plen bytes of private data; prints the result line.
 * Returns 0 (established, held in @c), 2 (rejected) or 1 (error); on
 * anything but 0, @c holds nothing.
 *
 * On siw the CM's port is bound by a kernel TCP socket; when an earlier
 * connection of this client on the same port is still in TIME_WAIT, the
 * connect fails with EADDRINUSE before anything reaches the server (seen
 * once in ~40 connections). That is the client's port choice, not what
 * these tests look at: a fresh id gets another port.
 */
static int conn_open(struct conn *c, const unsigned char *pdata, int plen)
{
	int tries, ret = 3;

	for (tries = 0; tries < 5 && ret == 3; tries++)
		ret = conn_try(c, pdata, plen);
	if (ret == 3) {
		printf("ERROR rdma_connect: %s (5 tries)\n", strerror(EADDRINUSE));
		ret = 1;
	}
	return ret;
}

/* Disconnects and waits until the disconnect completed; frees @c. */
static int conn_release(struct conn *c)
{
	int ret = 0;

	if (!c->established) {
		printf("ERROR no connection held\n");
		return 1;
	}
	/* Fails if the server disconnected first: its event is queued. */
	rdma_disconnect(c->id);
	if (expect_event(c->id, RDMA_CM_EVENT_DISCONNECTED, "disconnect"))
		ret = 1;
	conn_free(c);
	return ret;
}

static int script(void)
{
	unsigned char pdata[256];
	struct conn c = { 0 };
	char line[1024];

	while (fgets(line, sizeof(line), stdin)) {
		char *arg;
		int plen = 0;

		line[strcspn(line, "\r\n")] = 0;
		fputs("= ", stdout);
		arg = strchr(line, ' ');
		if (arg)
			*arg++ = 0;
		if (!strcmp(line, "connect")) {
			if (c.established) {
				printf("ERROR a connection is already held\n");
			} else if (arg && *arg &&
				   (plen = parse_hex(arg, pdata, sizeof(pdata))) < 0) {
				printf("ERROR bad private data hex\n");
			} else {
				conn_open(&c, pdata, plen);
			}
		} else if (!strcmp(line, "release")) {
			if (!conn_release(&c))
				printf("RELEASED\n");
		} else {
			printf("ERROR unknown command '%s'\n", line);
		}
		fflush(stdout);
	}
	if (c.established)
		conn_release(&c);
	return 0;
}

int main(int argc, char **argv)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM };
	int c;

	hints.ai_family = AF_INET;
	while ((c = getopt(argc, argv, "6")) != -1) {
		switch (c) {
		case '6': hints.ai_family = AF_INET6; break;
		default: return 1;
		}
	}
	if (optind + 2 != argc) {
		fprintf(stderr, "usage: cm_connect [-6] ADDR PORT (commands on stdin)\n");
		return 1;
	}
	/* Answers, so that a test waiting for one is not left hanging. */
	if (getaddrinfo(argv[optind], argv[optind + 1], &hints, &peer)) {
		printf("= ERROR getaddrinfo\n");
		return 1;
	}
	ch = rdma_create_event_channel();
	if (!ch) {
		printf("= ERROR rdma_create_event_channel: %s\n", strerror(errno));
		return 1;
	}
	return script();
}
