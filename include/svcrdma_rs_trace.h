/* SPDX-License-Identifier: GPL-2.0 */
/*
 * svcrdma_rs tracepoints (tracefs: events/svcrdma_rs/), at the points
 * where the C svcrdma has its svcrdma_* events: connections accepted and
 * refused, transport headers refused, RDMA_ERRORs sent, failed posts and
 * completions, QP and CM events that end a connection, and threads
 * waiting for send-queue slots. include/trace.c creates them and wraps
 * each in a function the Rust code calls (rust/trace.rs).
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM svcrdma_rs
#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE svcrdma_rs_trace

#if !defined(_SVCRDMA_RS_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define _SVCRDMA_RS_TRACE_H

#include <linux/tracepoint.h>
#include <rdma/ib_cm.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_cm.h>
#include <trace/misc/rdma.h>

TRACE_EVENT(svcrdma_rs_accept,
	TP_PROTO(u64 conn, const char *peer, const char *device, const char *model),
	TP_ARGS(conn, peer, device, model),
	TP_STRUCT__entry(
		__field(u64, conn)
		__string(peer, peer)
		__string(device, device)
		__string(model, model)
	),
	TP_fast_assign(
		__entry->conn = conn;
		__assign_str(peer);
		__assign_str(device);
		__assign_str(model);
	),
	TP_printk("conn=%llu peer=%s device=%s model=%s", __entry->conn,
		  __get_str(peer), __get_str(device), __get_str(model))
);

TRACE_EVENT(svcrdma_rs_reject,
	TP_PROTO(const char *peer, const char *device, const char *reason),
	TP_ARGS(peer, device, reason),
	TP_STRUCT__entry(
		__string(peer, peer)
		__string(device, device)
		__string(reason, reason)
	),
	TP_fast_assign(
		__assign_str(peer);
		__assign_str(device);
		__assign_str(reason);
	),
	TP_printk("peer=%s device=%s reason=\"%s\"", __get_str(peer),
		  __get_str(device), __get_str(reason))
);

TRACE_EVENT(svcrdma_rs_decode_err,
	TP_PROTO(u64 conn, u32 xid, const char *reason),
	TP_ARGS(conn, xid, reason),
	TP_STRUCT__entry(
		__field(u64, conn)
		__field(u32, xid)
		__string(reason, reason)
	),
	TP_fast_assign(
		__entry->conn = conn;
		__entry->xid = xid;
		__assign_str(reason);
	),
	TP_printk("conn=%llu xid=0x%08x reason=\"%s\"", __entry->conn,
		  __entry->xid, __get_str(reason))
);

TRACE_EVENT(svcrdma_rs_rdma_error,
	TP_PROTO(u64 conn, u32 xid, u32 err),
	TP_ARGS(conn, xid, err),
	TP_STRUCT__entry(
		__field(u64, conn)
		__field(u32, xid)
		__field(u32, err)
	),
	TP_fast_assign(
		__entry->conn = conn;
		__entry->xid = xid;
		__entry->err = err;
	),
	TP_printk("conn=%llu xid=0x%08x err=%s", __entry->conn, __entry->xid,
		  __print_symbolic(__entry->err, { 1, "ERR_VERS" }, { 2, "ERR_CHUNK" }))
);

TRACE_EVENT(svcrdma_rs_post_err,
	TP_PROTO(u64 conn, u32 wrs, int rc),
	TP_ARGS(conn, wrs, rc),
	TP_STRUCT__entry(
		__field(u64, conn)
		__field(u32, wrs)
		__field(int, rc)
	),
	TP_fast_assign(
		__entry->conn = conn;
		__entry->wrs = wrs;
		__entry->rc = rc;
	),
	TP_printk("conn=%llu wrs=%u rc=%d", __entry->conn, __entry->wrs, __entry->rc)
);

TRACE_EVENT(svcrdma_rs_wc_err,
	TP_PROTO(u64 conn, u32 status, u32 vendor_err),
	TP_ARGS(conn, status, vendor_err),
	TP_STRUCT__entry(
		__field(u64, conn)
		__field(u32, status)
		__field(u32, vendor_err)
	),
	TP_fast_assign(
		__entry->conn = conn;
		__entry->status = status;
		__entry->vendor_err = vendor_err;
	),
	TP_printk("conn=%llu status=%s vendor_err=0x%x", __entry->conn,
		  rdma_show_wc_status(__entry->status), __entry->vendor_err)
);

/* An event that ends a connection: a QP event or a CM event, by number. */
DECLARE_EVENT_CLASS(svcrdma_rs_conn_event,
	TP_PROTO(u64 conn, u32 event),
	TP_ARGS(conn, event),
	TP_STRUCT__entry(
		__field(u64, conn)
		__field(u32, event)
	),
	TP_fast_assign(
		__entry->conn = conn;
		__entry->event = event;
	),
	TP_printk("conn=%llu event=%u", __entry->conn, __entry->event)
);

DEFINE_EVENT_PRINT(svcrdma_rs_conn_event, svcrdma_rs_qp_err,
	TP_PROTO(u64 conn, u32 event),
	TP_ARGS(conn, event),
	TP_printk("conn=%llu event=%s", __entry->conn, rdma_show_ib_event(__entry->event))
);

DEFINE_EVENT_PRINT(svcrdma_rs_conn_event, svcrdma_rs_cm_event,
	TP_PROTO(u64 conn, u32 event),
	TP_ARGS(conn, event),
	TP_printk("conn=%llu event=%s", __entry->conn, rdma_show_cm_event(__entry->event))
);

TRACE_EVENT(svcrdma_rs_sq_wait,
	TP_PROTO(u64 conn, u32 wrs),
	TP_ARGS(conn, wrs),
	TP_STRUCT__entry(
		__field(u64, conn)
		__field(u32, wrs)
	),
	TP_fast_assign(
		__entry->conn = conn;
		__entry->wrs = wrs;
	),
	TP_printk("conn=%llu wrs=%u", __entry->conn, __entry->wrs)
);

#endif /* _SVCRDMA_RS_TRACE_H */

#include <trace/define_trace.h>
