// SPDX-License-Identifier: GPL-2.0
/*
 * C shims for svcrdma_rs: static inline functions and macros of the kernel
 * headers, which Rust cannot call, grouped by the header that defines them.
 * A shim that wraps one function or macro is named after it
 * (svcrdma_rs_ib_alloc_pd wraps ib_alloc_pd); the few that do a little
 * more (a bit of a flags field, a QP state change, a loop over a run of
 * pages) are named for what they do. No other logic lives here.
 */
#include "svcrdma_rs.h"
#include <linux/sunrpc/addr.h>

/* linux/sunrpc/svc_xprt.h: a transport's flags and addresses */

void svcrdma_rs_xprt_set_flag(struct svc_xprt *xprt, int bit)
{
	set_bit(bit, &xprt->xpt_flags);
}

bool svcrdma_rs_xprt_test_flag(const struct svc_xprt *xprt, int bit)
{
	return test_bit(bit, &xprt->xpt_flags);
}

void svcrdma_rs_xprt_clear_flag(struct svc_xprt *xprt, int bit)
{
	clear_bit(bit, &xprt->xpt_flags);
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

void svcrdma_rs_svc_xprt_set_local(struct svc_xprt *xprt, const struct sockaddr *sa)
{
	svc_xprt_set_local(xprt, sa, svcrdma_rs_sockaddr_len(sa));
}

void svcrdma_rs_svc_xprt_set_remote(struct svc_xprt *xprt, const struct sockaddr *sa)
{
	svc_xprt_set_remote(xprt, sa, svcrdma_rs_sockaddr_len(sa));
}

void svcrdma_rs_xprt_clear_remote_port(struct svc_xprt *xprt)
{
	rpc_set_port((struct sockaddr *)&xprt->xpt_remote, 0);
}

/* linux/sunrpc/svc.h: requests */

void svcrdma_rs_rqst_set_secure(struct svc_rqst *rqstp)
{
	set_bit(RQ_SECURE, &rqstp->rq_flags);
}

/* rdma/rdma_cm.h: the RDMA CM */

struct rdma_cm_id *svcrdma_rs_rdma_create_id(struct net *net,
					     rdma_cm_event_handler handler,
					     void *context,
					     enum rdma_ucm_port_space ps,
					     enum ib_qp_type qp_type)
{
	/* The macro records KBUILD_MODNAME as the owner shown by `rdma resource`. */
	return rdma_create_id(net, handler, context, ps, qp_type);
}

/* rdma/ib_verbs.h: devices, PDs, CQs, QPs and MRs */

bool svcrdma_rs_rdma_protocol_ib(const struct ib_device *dev, u32 port)
{
	return rdma_protocol_ib(dev, port);
}

bool svcrdma_rs_rdma_protocol_roce(const struct ib_device *dev, u32 port)
{
	return rdma_protocol_roce(dev, port);
}

bool svcrdma_rs_rdma_protocol_iwarp(const struct ib_device *dev, u32 port)
{
	return rdma_protocol_iwarp(dev, port);
}

bool svcrdma_rs_rdma_cap_read_inv(struct ib_device *dev, u32 port)
{
	return rdma_cap_read_inv(dev, port);
}

bool svcrdma_rs_ib_device_try_get(struct ib_device *dev)
{
	return ib_device_try_get(dev);
}

struct ib_pd *svcrdma_rs_ib_alloc_pd(struct ib_device *dev, unsigned int flags)
{
	return ib_alloc_pd(dev, flags);
}

void svcrdma_rs_ib_dealloc_pd(struct ib_pd *pd)
{
	ib_dealloc_pd(pd);
}

struct ib_cq *svcrdma_rs_ib_alloc_cq_any(struct ib_device *dev, void *private,
					 int nr_cqe, enum ib_poll_context poll_ctx)
{
	return ib_alloc_cq_any(dev, private, nr_cqe, poll_ctx);
}

struct ib_cq *svcrdma_rs_ib_alloc_cq_notify(struct ib_device *dev, void *private, int nr_cqe,
					    void (*notify)(struct ib_cq *cq, void *private))
{
	struct ib_cq *cq = ib_alloc_cq_any(dev, private, nr_cqe, IB_POLL_WORKQUEUE);

	/* The CQ was armed by ib_alloc_cq; no QP uses it yet. */
	if (!IS_ERR(cq))
		cq->comp_handler = notify;
	return cq;
}

void svcrdma_rs_cq_defer(struct ib_cq *cq)
{
	queue_work(cq->comp_wq, &cq->work);
}

int svcrdma_rs_cq_arm(struct ib_cq *cq)
{
	return ib_req_notify_cq(cq, IB_CQ_NEXT_COMP | IB_CQ_REPORT_MISSED_EVENTS);
}

int svcrdma_rs_ib_post_recv(struct ib_qp *qp, const struct ib_recv_wr *wr)
{
	return ib_post_recv(qp, wr, NULL);
}

int svcrdma_rs_ib_post_send(struct ib_qp *qp, const struct ib_send_wr *wr,
			    const struct ib_send_wr **bad_wr)
{
	return ib_post_send(qp, wr, bad_wr);
}

int svcrdma_rs_qp_to_error(struct ib_qp *qp)
{
	struct ib_qp_attr attr = { .qp_state = IB_QPS_ERR };

	return ib_modify_qp(qp, &attr, IB_QP_STATE);
}

int svcrdma_rs_ib_dereg_mr(struct ib_mr *mr)
{
	return ib_dereg_mr(mr);
}

u32 svcrdma_rs_mr_refresh_key(struct ib_mr *mr)
{
	ib_update_fast_reg_key(mr, ib_inc_rkey(mr->rkey));
	return mr->rkey;
}

/* rdma/ib_verbs.h: DMA mapping on an RDMA device */

u64 svcrdma_rs_ib_dma_map_single(struct ib_device *dev, void *cpu_addr, size_t size,
				 enum dma_data_direction dir)
{
	return ib_dma_map_single(dev, cpu_addr, size, dir);
}

void svcrdma_rs_ib_dma_unmap_single(struct ib_device *dev, u64 addr, size_t size,
				    enum dma_data_direction dir)
{
	ib_dma_unmap_single(dev, addr, size, dir);
}

int svcrdma_rs_ib_dma_mapping_error(struct ib_device *dev, u64 dma_addr)
{
	return ib_dma_mapping_error(dev, dma_addr);
}

void svcrdma_rs_ib_dma_sync_single_for_cpu(struct ib_device *dev, u64 addr, size_t size,
					   enum dma_data_direction dir)
{
	ib_dma_sync_single_for_cpu(dev, addr, size, dir);
}

void svcrdma_rs_ib_dma_sync_single_for_device(struct ib_device *dev, u64 addr, size_t size,
					      enum dma_data_direction dir)
{
	ib_dma_sync_single_for_device(dev, addr, size, dir);
}

u64 svcrdma_rs_ib_dma_map_page(struct ib_device *dev, struct page *page,
			       unsigned long offset, size_t size,
			       enum dma_data_direction dir)
{
	return ib_dma_map_page(dev, page, offset, size, dir);
}

void svcrdma_rs_ib_dma_unmap_page(struct ib_device *dev, u64 addr, size_t size,
				  enum dma_data_direction dir)
{
	ib_dma_unmap_page(dev, addr, size, dir);
}

bool svcrdma_rs_ib_uses_virt_dma(struct ib_device *dev)
{
	return ib_uses_virt_dma(dev);
}

/*
 * Unmaps a run mapped by svcrdma_rs_ib_dma_map_pages(): the bus addresses
 * of its first @npages pages, @len bytes from @offset in the first.
 */
void svcrdma_rs_ib_dma_unmap_pages(struct ib_device *dev, const u64 *addrs,
				   unsigned int npages, size_t offset, size_t len,
				   enum dma_data_direction dir)
{
	unsigned int i;

	/* ib_dma_unmap_page() does nothing on these devices. */
	if (ib_uses_virt_dma(dev))
		return;
	for (i = 0; i < npages && len; i++) {
		size_t n = min_t(size_t, PAGE_SIZE - offset, len);

		ib_dma_unmap_page(dev, addrs[i], n, dir);
		len -= n;
		offset = 0;
	}
}

/*
 * Maps a run of pages, each with ib_dma_map_page(): @len bytes from
 * @offset (below PAGE_SIZE) in pages[0], on through the pages after it,
 * at most @npages of them; writes each page's bus address to addrs[].
 * Returns the number of pages mapped, or a negative errno with none left
 * mapped. A loop here rather than a call per page: the run is one call.
 */
int svcrdma_rs_ib_dma_map_pages(struct ib_device *dev, struct page *const *pages,
				unsigned int npages, size_t offset, size_t len,
				enum dma_data_direction dir, u64 *addrs)
{
	size_t first = offset, done = 0;
	unsigned int i = 0;
	int err = -EINVAL;

	if (offset >= PAGE_SIZE)
		return -EINVAL;
	/*
	 * A device without a DMA device of its own (rxe, siw) takes kernel
	 * virtual addresses: ib_dma_map_page() there is page_address() plus the
	 * offset, and never fails. Decided once for the run, not per page.
	 */
	if (ib_uses_virt_dma(dev)) {
		while (done < len) {
			if (i == npages || !pages[i])
				return -EINVAL;
			addrs[i] = (uintptr_t)page_address(pages[i]) + offset;
			done += min_t(size_t, PAGE_SIZE - offset, len - done);
			offset = 0;
			i++;
		}
		return i;
	}
	while (done < len) {
		size_t n = min_t(size_t, PAGE_SIZE - offset, len - done);

		if (i == npages || !pages[i])
			goto undo;
		addrs[i] = ib_dma_map_page(dev, pages[i], offset, n, dir);
		if (ib_dma_mapping_error(dev, addrs[i])) {
			err = -EIO;
			goto undo;
		}
		i++;
		done += n;
		offset = 0;
	}
	return i;
undo:
	svcrdma_rs_ib_dma_unmap_pages(dev, addrs, i, first, done, dir);
	return err;
}

int svcrdma_rs_ib_dma_map_sg(struct ib_device *dev, struct scatterlist *sg,
			     int nents, enum dma_data_direction dir)
{
	return ib_dma_map_sg(dev, sg, nents, dir);
}

void svcrdma_rs_ib_dma_unmap_sg(struct ib_device *dev, struct scatterlist *sg,
				int nents, enum dma_data_direction dir)
{
	ib_dma_unmap_sg(dev, sg, nents, dir);
}

/* linux/mm.h: pages */

void *svcrdma_rs_page_address(struct page *page)
{
	return page_address(page);
}

void svcrdma_rs_get_page(struct page *page)
{
	get_page(page);
}

void svcrdma_rs_put_page(struct page *page)
{
	put_page(page);
}

void svcrdma_rs_release_pages(struct page **pages, int nr)
{
	release_pages(pages, nr);
}

/* linux/scatterlist.h: scatterlists */

struct page *svcrdma_rs_sg_page(struct scatterlist *sg)
{
	return sg_page(sg);
}

void svcrdma_rs_sg_set_page(struct scatterlist *sg, struct page *page,
			    unsigned int len, unsigned int offset)
{
	sg_set_page(sg, page, len, offset);
}

/* linux/timekeeping.h: time */

u64 svcrdma_rs_now_ms(void)
{
	return ktime_get_coarse_ns() / NSEC_PER_MSEC;
}

#ifdef CONFIG_SVCRDMA_RS_BACKCHANNEL
/* The NFSv4.1 backchannel's client transport (off only with SVCRDMA_RS_BACKCHANNEL=n). */

/* linux/sunrpc/xprt.h: the client transport */

void svcrdma_rs_xprt_set_bound(struct rpc_xprt *xprt)
{
	xprt_set_bound(xprt);
}

void svcrdma_rs_xprt_set_connected(struct rpc_xprt *xprt)
{
	xprt_set_connected(xprt);
}

void svcrdma_rs_rpc_xprt_queue_lock(struct rpc_xprt *xprt)
{
	spin_lock(&xprt->queue_lock);
}

void svcrdma_rs_rpc_xprt_queue_unlock(struct rpc_xprt *xprt)
{
	spin_unlock(&xprt->queue_lock);
}

void svcrdma_rs_rpc_xprt_transport_lock(struct rpc_xprt *xprt)
{
	spin_lock(&xprt->transport_lock);
}

void svcrdma_rs_rpc_xprt_transport_unlock(struct rpc_xprt *xprt)
{
	spin_unlock(&xprt->transport_lock);
}

/* linux/sunrpc/addr.h: addresses */

unsigned short svcrdma_rs_rpc_get_port(const struct sockaddr *sa)
{
	return rpc_get_port(sa);
}

/* linux/sunrpc/svc_xprt.h: the backchannel a server transport carries */

struct rpc_xprt *svcrdma_rs_xprt_bc_read(struct svc_xprt *xprt)
{
	return READ_ONCE(xprt->xpt_bc_xprt);
}

/* Sets xpt_bc_xprt if it was NULL; returns what it was. */
struct rpc_xprt *svcrdma_rs_xprt_bc_bind(struct svc_xprt *xprt,
					 struct rpc_xprt *bc)
{
	return cmpxchg(&xprt->xpt_bc_xprt, NULL, bc);
}

/* linux/string.h, linux/slab.h: allocation */

char *svcrdma_rs_kstrdup(const char *s)
{
	return kstrdup(s, GFP_KERNEL);
}

void *svcrdma_rs_kmalloc(size_t size, gfp_t flags)
{
	return kmalloc(size, flags);
}
#endif /* CONFIG_SVCRDMA_RS_BACKCHANNEL */
