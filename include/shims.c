// SPDX-License-Identifier: GPL-2.0
/*
 * C shims for svcrdma_rs: static inline functions and macros of the kernel
 * headers, which Rust cannot call, wrapped one-for-one. No logic lives here.
 */
#include "svcrdma_rs.h"

void svcrdma_rs_xprt_set_flag(struct svc_xprt *xprt, int bit)
{
	set_bit(bit, &xprt->xpt_flags);
}

bool svcrdma_rs_xprt_test_flag(const struct svc_xprt *xprt, int bit)
{
	return test_bit(bit, &xprt->xpt_flags);
}

size_t svcrdma_rs_sockaddr_len(const struct sockaddr *sa)
{
	switch (sa->sa_family) {
	case AF_INET:
		return sizeof(struct sockaddr_in);
	case AF_INET6:
		return sizeof(struct sockaddr_in6);
	}
	return 0;
}

void svcrdma_rs_xprt_set_local(struct svc_xprt *xprt, const struct sockaddr *sa)
{
	svc_xprt_set_local(xprt, sa, svcrdma_rs_sockaddr_len(sa));
}

void svcrdma_rs_xprt_set_remote(struct svc_xprt *xprt, const struct sockaddr *sa)
{
	svc_xprt_set_remote(xprt, sa, svcrdma_rs_sockaddr_len(sa));
}

struct rdma_cm_id *svcrdma_rs_create_id(struct net *net,
					rdma_cm_event_handler handler,
					void *context,
					enum rdma_ucm_port_space ps,
					enum ib_qp_type qp_type)
{
	/* The macro records KBUILD_MODNAME as the owner shown by `rdma resource`. */
	return rdma_create_id(net, handler, context, ps, qp_type);
}

u64 svcrdma_rs_now_ms(void)
{
	return ktime_get_coarse_ns() / NSEC_PER_MSEC;
}
