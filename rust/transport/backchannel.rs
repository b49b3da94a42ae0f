// SPDX-License-Identifier: GPL-2.0

//! The NFSv4.1 backchannel: nfsd's callbacks (CB_RECALL of delegations and
//! the rest of the callback program) to a client over the client's own
//! connection, the backward direction of RFC 8167. Built in unless
//! `SVCRDMA_RS_BACKCHANNEL=n` (Kconfig `SVCRDMA_RS_BACKCHANNEL`), which
//! only the test that proves the backchannel tests uses.
//!
//! - Setup: nfsd builds its callback client on a session's connection
//!   with the client transport whose identifier is the connection's class
//!   identifier plus `XPRT_TRANSPORT_BC`. This module registers that class
//!   ([`register_class`]); its `setup` ([`bind`]) makes an `rpc_xprt` that
//!   rides on the connection and links it to the connection
//!   (`xpt_bc_xprt`), once per connection. References: the caller (nfsd's
//!   RPC client) gets the first; the link owns a second, which sunrpc
//!   drops when it frees the connection; each backchannel also holds a
//!   reference on this module, dropped when sunrpc destroys it. The
//!   plumbing (allocation, links, references, the C entry points) is
//!   `sunrpc`'s ([`BcOps`]); this module decides what to build and sends.
//! - Calls (`send_request`, [`send_call`], in rpciod): inline only, an `RDMA_MSG` with
//!   no chunks, through the connection's send path like a Reply (the send
//!   context returns to the pool when the Send completes). One larger than
//!   the client's inline receive size fails with `EMSGSIZE`. Up to
//!   [`BC_CREDITS`] Calls are outstanding; the receive queue keeps as many
//!   buffers for their Replies.
//! - Replies ([`receive_reply`], from `xpo_recvfrom`): an `RDMA_MSG`
//!   without chunks whose RPC message is a REPLY is delivered to the
//!   waiting request and never reaches nfsd as a Call. One that matches no
//!   outstanding Call is dropped with a line in the log.
//! - Teardown: when sunrpc deletes the connection it closes the
//!   backchannel (waiting Calls fail with `ENOTCONN`); the backchannel
//!   lives on while nfsd's callback client or the connection still refers
//!   to it, and is destroyed by sunrpc after the last reference.
//!
//! The connection outlives every use of a backchannel's link back to it:
//! nfsd keeps a reference on the connection for as long as its callback
//! client exists, and the client's tasks are the only callers of
//! `send_request`.

use kernel::prelude::*;

use super::{
    class::{BC_IDENT, CLASS},
    connection::Connection,
    sq::{post_reply, Posted},
};
use crate::{
    log::{pr_info_ratelimited, pr_warn_ratelimited},
    proto::{
        inline::{max_inline_reply, BC_CREDITS},
        rpcrdma::{
            backward::{encode_call_header, granted_calls, CALL_HEADER_LEN},
            Header,
        },
    },
    sunrpc::{
        BcOps, BcParams, BoundBackchannel, ClientClass, ClientRegistration, ReplyMiss, RpcRqst,
        RpcXprt, SetupArgs, SvcXprt,
    },
};

/// The client transport class nfsd's callback client finds by identifier.
static BC_CLASS: ClientClass<RdmaBc> = ClientClass::new();

/// How long a backward Call waits for its Reply before sunrpc gives up
/// (nfsd sets its own timeout for its callbacks; this is the default).
const CALL_TIMEOUT_MS: u32 = 60_000;

/// Registers the backchannel's client transport class.
pub(crate) fn register_class(module: &'static ThisModule) -> Result<ClientRegistration<RdmaBc>> {
    BC_CLASS.register(c"svcrdma_rs backchannel", module, BC_IDENT)
}

/// The backchannel: what sunrpc calls on the client transports of
/// [`BC_CLASS`], each riding on one of our connections.
pub(crate) struct RdmaBc;

#[vtable]
impl BcOps for RdmaBc {
    /// The counterpart of C's xprt_setup_rdma_bc().
    fn setup(args: &SetupArgs<'_>) -> Result<BoundBackchannel> {
        bind(args)
    }

    /// The counterpart of C's xprt_rdma_bc_send_request().
    fn send_request(server: &SvcXprt, rq: &mut RpcRqst<'_>) -> Result {
        if server.is_dead() {
            return Err(ENOTCONN);
        }
        // `bind` links only our connections.
        let conn = CLASS.conn_of(server).ok_or(ENOTCONN)?;
        send_call(conn, rq).inspect_err(|e| {
            if *e == ENOTCONN {
                // The connection is closing: fail this and the waiting
                // Calls now (the tasks do not reconnect) rather than let
                // them retry until sunrpc deletes the connection and
                // closes us.
                rq.xprt().disconnect_done();
            }
        })
    }

    /// The counterpart of C's xprt_rdma_bc_allocate().
    fn buf_alloc(rq: &mut RpcRqst<'_>) -> Result {
        rq.alloc_buffers()
    }

    /// The counterpart of C's xprt_rdma_bc_free().
    fn buf_free(rq: &mut RpcRqst<'_>) {
        rq.free_buffers();
    }

    /// sunrpc deletes the connection: waiting Calls fail. The counterpart
    /// of C's xprt_rdma_bc_close().
    fn close(x: &RpcXprt) {
        x.disconnect_done();
    }
}

/// Builds a backchannel on the connection of `args` and binds it there.
fn bind(args: &SetupArgs<'_>) -> Result<BoundBackchannel> {
    let conn = CLASS.conn_of(args.server()).ok_or(EINVAL)?;
    let netid = if args.is_ipv6() { c"rdma6" } else { c"rdma" };
    let params = BcParams {
        slots: BC_CREDITS,
        max_payload: (max_inline_reply(&conn.info.client) as usize).saturating_sub(CALL_HEADER_LEN),
        timeout_ms: CALL_TIMEOUT_MS,
        proto: c"rdma",
        netid,
    };
    let bc = BC_CLASS.new_backchannel(args, &params)?.bind()?;
    conn.backchannel_bound();
    pr_info_ratelimited!("connection {}: NFSv4.1 backchannel bound\n", conn.id);
    Ok(bc)
}

/// Sends the backward Call of `rq` inline on `conn`. The counterpart of C's
/// rpcrdma_bc_send_request().
///
/// The send context may be allocated here if the pool is empty
/// (`GFP_KERNEL`): allowed, as this runs in process context without locks
/// held, and rpciod's tasks run in a `memalloc_nofs` scope, so reclaim
/// does not recurse into file systems. Waiting for a send-queue slot is
/// allowed for the same reason; a closing connection ends the wait.
fn send_call(conn: &Connection, rq: &mut RpcRqst<'_>) -> Result {
    let live = conn.live().ok_or(ENOTCONN)?;
    let limit = max_inline_reply(&conn.info.client) as usize;
    let len = CALL_HEADER_LEN.saturating_add(rq.send_len());
    if len > limit {
        pr_warn_ratelimited!(
            "connection {}: a {}-byte backward Call exceeds the client's {}-byte inline receive size, not sent\n",
            conn.id,
            len,
            limit
        );
        return Err(EMSGSIZE);
    }
    // Pool empty and at its bound: sunrpc retries after a short delay.
    let mut ctxt = live.ctxt_get(false).ok_or(ENOMEM)?;
    let built = (|| -> Result<usize> {
        let n = encode_call_header(&mut ctxt.send_buf[..], rq.xid(), BC_CREDITS)
            .map_err(|_| EMSGSIZE)?;
        let body = ctxt.send_buf.get_mut(n..).ok_or(EMSGSIZE)?;
        Ok(n + rq.copy_call(body)?)
    })();
    let total = match built {
        Ok(t) => t,
        Err(e) => {
            conn.ctxt_put(ctxt);
            return Err(e);
        }
    };
    ctxt.chain.clear();
    if let Err(e) = ctxt.send_inline(live.res.pd().local_dma_lkey(), total, None) {
        conn.ctxt_put(ctxt);
        return Err(e);
    }
    rq.stamp_transmit();
    // The context goes with the Send and returns to the pool when it
    // completes; on failure it is returned, and a failed post closes the
    // connection.
    super::stats::count(&conn.stats.c.backward_calls, 1);
    match post_reply(live, ctxt) {
        Posted::Ok => Ok(()),
        Posted::Refused(_) => Err(ENOTCONN),
    }
}

/// Delivers a backward Reply (`header`, with `body` the RPC message after
/// it) received on `conn` to the backward Call waiting for it. The body is
/// copied before this returns. The counterpart of C's
/// svc_rdma_handle_bc_reply().
pub(super) fn receive_reply(conn: &Connection, header: &Header<'_>, body: &[u8]) {
    let Some(bc) = conn.xprt().backchannel() else {
        pr_warn_ratelimited!(
            "connection {}: a backward Reply but no backchannel, dropped\n",
            conn.id
        );
        return;
    };
    match bc.complete_reply(header.xid, body) {
        // The Reply carries the client's grant for our backward Calls.
        Ok(()) => bc.set_window(granted_calls(header, BC_CREDITS)),
        Err(ReplyMiss::NoRequest) => pr_warn_ratelimited!(
            "connection {}: a backward Reply (XID {:#010x}) matches no outstanding Call, dropped\n",
            conn.id,
            header.xid
        ),
        Err(ReplyMiss::TooLong { room }) => pr_warn_ratelimited!(
            "connection {}: a {}-byte backward Reply exceeds its Call's {}-byte receive buffer, dropped\n",
            conn.id,
            body.len(),
            room
        ),
    }
}
