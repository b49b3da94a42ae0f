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
#include <rdma/ib_cm.h>
#include <rdma/rdma_cm.h>
#include <rdma/rw.h>

/* shims.c: linux/sunrpc/svc_xprt.h: a transport's flags and addresses */
void svcrdma_rs_xprt_set_flag(struct svc_xprt *xprt, int bit);
bool svcrdma_rs_xprt_test_flag(const struct svc_xprt *xprt, int bit);
void svcrdma_rs_xprt_clear_flag(struct svc_xprt *xprt, int bit);
size_t svcrdma_rs_sockaddr_len(const struct sockaddr *sa);
void svcrdma_rs_svc_xprt_set_local(struct svc_xprt *xprt, const struct sockaddr *sa);
void svcrdma_rs_svc_xprt_set_remote(struct svc_xprt *xprt, const struct sockaddr *sa);
void svcrdma_rs_xprt_clear_remote_port(struct svc_xprt *xprt);

/* shims.c: linux/sunrpc/svc.h: requests */
void svcrdma_rs_rqst_set_secure(struct svc_rqst *rqstp);

/* shims.c: rdma/rdma_cm.h: the RDMA CM */
struct rdma_cm_id *svcrdma_rs_rdma_create_id(struct net *net,
					     rdma_cm_event_handler handler,
					     void *context,
					     enum rdma_ucm_port_space ps,
					     enum ib_qp_type qp_type);

/* shims.c: rdma/ib_verbs.h: devices, PDs, CQs, QPs and MRs */
bool svcrdma_rs_rdma_protocol_ib(const struct ib_device *dev, u32 port);
bool svcrdma_rs_rdma_protocol_roce(const struct ib_device *dev, u32 port);
bool svcrdma_rs_rdma_protocol_iwarp(const struct ib_device *dev, u32 port);
bool svcrdma_rs_rdma_cap_read_inv(struct ib_device *dev, u32 port);
bool svcrdma_rs_ib_device_try_get(struct ib_device *dev);
struct ib_pd *svcrdma_rs_ib_alloc_pd(struct ib_device *dev, unsigned int flags);
void svcrdma_rs_ib_dealloc_pd(struct ib_pd *pd);
struct ib_cq *svcrdma_rs_ib_alloc_cq_any(struct ib_device *dev, void *private,
					 int nr_cqe, enum ib_poll_context poll_ctx);
/*
 * A CQ polled by its consumer: a completion calls notify(cq, cq_context)
 * instead of queueing the CQ's work; svcrdma_rs_cq_defer hands it to that
 * work after all (ib_cq_poll_work polls, calls each done and re-arms), and
 * svcrdma_rs_cq_arm asks for the next notification (> 0: completions may
 * have come in meanwhile).
 */
struct ib_cq *svcrdma_rs_ib_alloc_cq_notify(struct ib_device *dev, void *private, int nr_cqe,
					    void (*notify)(struct ib_cq *cq, void *private));
void svcrdma_rs_cq_defer(struct ib_cq *cq);
int svcrdma_rs_cq_arm(struct ib_cq *cq);
int svcrdma_rs_ib_post_recv(struct ib_qp *qp, const struct ib_recv_wr *wr);
int svcrdma_rs_ib_post_send(struct ib_qp *qp, const struct ib_send_wr *wr,
			    const struct ib_send_wr **bad_wr);
int svcrdma_rs_qp_to_error(struct ib_qp *qp);
int svcrdma_rs_ib_dereg_mr(struct ib_mr *mr);
u32 svcrdma_rs_mr_refresh_key(struct ib_mr *mr);

/* shims.c: rdma/ib_verbs.h: DMA mapping on an RDMA device */
u64 svcrdma_rs_ib_dma_map_single(struct ib_device *dev, void *cpu_addr, size_t size,
				 enum dma_data_direction dir);
void svcrdma_rs_ib_dma_unmap_single(struct ib_device *dev, u64 addr, size_t size,
				    enum dma_data_direction dir);
int svcrdma_rs_ib_dma_mapping_error(struct ib_device *dev, u64 dma_addr);
void svcrdma_rs_ib_dma_sync_single_for_cpu(struct ib_device *dev, u64 addr, size_t size,
					   enum dma_data_direction dir);
void svcrdma_rs_ib_dma_sync_single_for_device(struct ib_device *dev, u64 addr, size_t size,
					      enum dma_data_direction dir);
u64 svcrdma_rs_ib_dma_map_page(struct ib_device *dev, struct page *page,
			       unsigned long offset, size_t size,
			       enum dma_data_direction dir);
void svcrdma_rs_ib_dma_unmap_page(struct ib_device *dev, u64 addr, size_t size,
				  enum dma_data_direction dir);
bool svcrdma_rs_ib_uses_virt_dma(struct ib_device *dev);
int svcrdma_rs_ib_dma_map_pages(struct ib_device *dev, struct page *const *pages,
				unsigned int npages, size_t offset, size_t len,
				enum dma_data_direction dir, u64 *addrs);
void svcrdma_rs_ib_dma_unmap_pages(struct ib_device *dev, const u64 *addrs,
				   unsigned int npages, size_t offset, size_t len,
				   enum dma_data_direction dir);
int svcrdma_rs_ib_dma_map_sg(struct ib_device *dev, struct scatterlist *sg,
			     int nents, enum dma_data_direction dir);
void svcrdma_rs_ib_dma_unmap_sg(struct ib_device *dev, struct scatterlist *sg,
				int nents, enum dma_data_direction dir);

/* shims.c: linux/mm.h: pages */
void *svcrdma_rs_page_address(struct page *page);
void svcrdma_rs_get_page(struct page *page);
void svcrdma_rs_put_page(struct page *page);
void svcrdma_rs_release_pages(struct page **pages, int nr);

/* shims.c: linux/scatterlist.h: scatterlists */
struct page *svcrdma_rs_sg_page(struct scatterlist *sg);
void svcrdma_rs_sg_set_page(struct scatterlist *sg, struct page *page,
			    unsigned int len, unsigned int offset);

/* shims.c: linux/timekeeping.h: time */
u64 svcrdma_rs_now_ms(void);

/* params.c: module parameters (module_param is a macro) */
const char *svcrdma_rs_param_xprt_name(void);
const char *svcrdma_rs_param_dma_mr_default(void);
bool svcrdma_rs_param_debug_enabled(void);

#ifdef CONFIG_SVCRDMA_RS_BACKCHANNEL
/*
 * shims.c: the sunrpc client transport the NFSv4.1 backchannel registers
 * (not built with SVCRDMA_RS_BACKCHANNEL=n; bindings from
 * include/bindings-backchannel.list).
 */
#include <linux/sunrpc/xprt.h>
#include <linux/sunrpc/sched.h>
#include <linux/sunrpc/addr.h>

/* linux/sunrpc/xprt.h: the client transport */
void svcrdma_rs_xprt_set_bound(struct rpc_xprt *xprt);
void svcrdma_rs_xprt_set_connected(struct rpc_xprt *xprt);
void svcrdma_rs_rpc_xprt_queue_lock(struct rpc_xprt *xprt);
void svcrdma_rs_rpc_xprt_queue_unlock(struct rpc_xprt *xprt);
void svcrdma_rs_rpc_xprt_transport_lock(struct rpc_xprt *xprt);
void svcrdma_rs_rpc_xprt_transport_unlock(struct rpc_xprt *xprt);

/* linux/sunrpc/addr.h: addresses */
unsigned short svcrdma_rs_rpc_get_port(const struct sockaddr *sa);

/* linux/sunrpc/svc_xprt.h: the backchannel a server transport carries */
struct rpc_xprt *svcrdma_rs_xprt_bc_read(struct svc_xprt *xprt);
struct rpc_xprt *svcrdma_rs_xprt_bc_bind(struct svc_xprt *xprt,
					 struct rpc_xprt *bc);

/* linux/string.h, linux/slab.h: allocation */
char *svcrdma_rs_kstrdup(const char *s);
void *svcrdma_rs_kmalloc(size_t size, gfp_t flags);
#endif /* CONFIG_SVCRDMA_RS_BACKCHANNEL */

/* trace.c: the tracepoints of svcrdma_rs_trace.h (strings NUL-terminated) */
void svcrdma_rs_trace_accept(u64 conn, const char *peer, const char *device, const char *model);
void svcrdma_rs_trace_reject(const char *peer, const char *device, const char *reason);
void svcrdma_rs_trace_decode_err(u64 conn, u32 xid, const char *reason);
void svcrdma_rs_trace_rdma_error(u64 conn, u32 xid, u32 err);
void svcrdma_rs_trace_post_err(u64 conn, u32 wrs, int rc);
void svcrdma_rs_trace_wc_err(u64 conn, u32 status, u32 vendor_err);
void svcrdma_rs_trace_qp_err(u64 conn, u32 event);
void svcrdma_rs_trace_cm_event(u64 conn, u32 event);
void svcrdma_rs_trace_sq_wait(u64 conn, u32 wrs);

#endif /* SVCRDMA_RS_H */
