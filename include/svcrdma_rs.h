/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The one header bindgen reads for svcrdma_rs: the kernel APIs the module
 * calls, and the C shims (include/shims.c, include/params.c) that wrap the
 * static inlines and macros Rust cannot call directly.
 *
 * What is turned into Rust is chosen by include/bindings.list.
 */
#ifndef SVCRDMA_RS_H
#define SVCRDMA_RS_H

#include <linux/module.h>
#include <linux/sunrpc/svc.h>
#include <linux/sunrpc/svc_xprt.h>
#include <linux/sunrpc/xdr.h>
#include <linux/sunrpc/svc_rdma.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_cm.h>
#include <rdma/rw.h>

/* shims.c: sunrpc */
void svcrdma_rs_xprt_set_flag(struct svc_xprt *xprt, int bit);
bool svcrdma_rs_xprt_test_flag(const struct svc_xprt *xprt, int bit);
void svcrdma_rs_xprt_set_local(struct svc_xprt *xprt, const struct sockaddr *sa);
void svcrdma_rs_xprt_set_remote(struct svc_xprt *xprt, const struct sockaddr *sa);
size_t svcrdma_rs_sockaddr_len(const struct sockaddr *sa);

/* shims.c: RDMA CM */
struct rdma_cm_id *svcrdma_rs_create_id(struct net *net,
					rdma_cm_event_handler handler,
					void *context,
					enum rdma_ucm_port_space ps,
					enum ib_qp_type qp_type);

/* shims.c: time */
u64 svcrdma_rs_now_ms(void);

/* params.c: module parameters (module_param is a macro) */
const char *svcrdma_rs_param_xprt_name(void);

#endif /* SVCRDMA_RS_H */
