// SPDX-License-Identifier: GPL-2.0
/*
 * svcrdma_rs tracepoints (include/svcrdma_rs_trace.h): created here, and
 * each wrapped in a function for the Rust code (a trace_*() call is a
 * static inline Rust cannot call). Strings are NUL-terminated.
 */
#include <rdma/ib_verbs.h>
#include <rdma/rdma_cm.h>

#define CREATE_TRACE_POINTS
#include "svcrdma_rs_trace.h"

#include "svcrdma_rs.h"

void svcrdma_rs_trace_accept(u64 conn, const char *peer, const char *device, const char *model)
{
	trace_svcrdma_rs_accept(conn, peer, device, model);
}

void svcrdma_rs_trace_reject(const char *peer, const char *device, const char *reason)
{
	trace_svcrdma_rs_reject(peer, device, reason);
}

void svcrdma_rs_trace_decode_err(u64 conn, u32 xid, const char *reason)
{
	trace_svcrdma_rs_decode_err(conn, xid, reason);
}

void svcrdma_rs_trace_rdma_error(u64 conn, u32 xid, u32 err)
{
	trace_svcrdma_rs_rdma_error(conn, xid, err);
}

void svcrdma_rs_trace_post_err(u64 conn, u32 wrs, int rc)
{
	trace_svcrdma_rs_post_err(conn, wrs, rc);
}

void svcrdma_rs_trace_wc_err(u64 conn, u32 status, u32 vendor_err)
{
	trace_svcrdma_rs_wc_err(conn, status, vendor_err);
}

void svcrdma_rs_trace_qp_err(u64 conn, u32 event)
{
	trace_svcrdma_rs_qp_err(conn, event);
}

void svcrdma_rs_trace_cm_event(u64 conn, u32 event)
{
	trace_svcrdma_rs_cm_event(conn, event);
}

void svcrdma_rs_trace_sq_wait(u64 conn, u32 wrs)
{
	trace_svcrdma_rs_sq_wait(conn, wrs);
}
