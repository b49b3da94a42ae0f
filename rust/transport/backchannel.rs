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
//!   reference on this module, dropped when sunrpc destroys it.
//! - Calls ([`send_request`], in rpciod): inline only, an `RDMA_MSG` with
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
//! [`send_request`].

use kernel::prelude::*;

use super::{
    connection::Connection,
    ops::{BC_IDENT, CLASS},
    sq::post_reply,
};
use crate::{
    bindings,
    log::{pr_info_ratelimited, pr_warn_ratelimited},
    proto::{
        inline::{max_inline_reply, BC_CREDITS},
        rpcrdma::{
            backward::{encode_call_header, granted_calls, CALL_HEADER_LEN},
            Header,
        },
    },
    sunrpc::{ClientClass, ClientRegistration, ReplyMiss, RpcRqst, RpcXprt, SvcXprt},
};

/// The client transport class nfsd's callback client finds by identifier.
static BC_CLASS: ClientClass = ClientClass::new();

/// How long a backward Call waits for its Reply before sunrpc gives up
/// (nfsd sets its own timeout for its callbacks; this is the default).
const CALL_TIMEOUT_MS: u32 = 60_000;

/// One backchannel transport, allocated by `xprt_alloc()`: sunrpc's part
/// first, then its timeout, which sunrpc reads through a pointer and which
/// so lives as long as the transport.
#[repr(C)]
struct BcXprt {
    xprt: bindings::rpc_xprt,
    timeout: bindings::rpc_timeout,
}

/// What sunrpc calls on a backchannel. Slots, congestion window, buffers
/// and waiting are sunrpc's generic ones; no connect, bind or timer: the
/// transport is always connected while its connection is.
static BC_OPS: bindings::rpc_xprt_ops = bindings::rpc_xprt_ops {
    set_buffer_size: None,
    reserve_xprt: Some(bindings::xprt_reserve_xprt_cong),
    release_xprt: Some(bindings::xprt_release_xprt_cong),
    alloc_slot: Some(bindings::xprt_alloc_slot),
    free_slot: Some(bindings::xprt_free_slot),
    rpcbind: None,
    set_port: None,
    connect: None,
    get_srcaddr: None,
    get_srcport: None,
    buf_alloc: Some(buf_alloc),
    buf_free: Some(buf_free),
    prepare_request: None,
    send_request: Some(send_request),
    abort_send_request: None,
    wait_for_reply_request: Some(bindings::xprt_wait_for_reply_request_def),
    timer: None,
    release_request: Some(bindings::xprt_release_rqst_cong),
    close: Some(close),
    destroy: Some(destroy),
    set_connect_timeout: None,
    print_stats: Some(print_stats),
    enable_swap: None,
    disable_swap: None,
    inject_disconnect: None,
    bc_setup: None,
    bc_maxpayload: None,
    bc_num_slots: None,
    bc_free_rqst: None,
    bc_destroy: None,
};

/// Registers the backchannel's client transport class.
pub(crate) fn register_class(module: &'static ThisModule) -> Result<ClientRegistration> {
    BC_CLASS.register(c"svcrdma_rs backchannel", module, BC_IDENT, setup)
}

/// The class's `setup`: a backchannel for the connection in `args`.
///
/// # Safety
///
/// Called by sunrpc only, with the arguments its transport-class
/// contract (`xprt_class::setup`) gives (live objects it holds).
unsafe extern "C" fn setup(args: *mut bindings::xprt_create) -> *mut bindings::rpc_xprt {
    // SAFETY: sunrpc passes valid creation arguments for the call's
    // duration.
    let args = unsafe { &*args };
    // SAFETY: as above.
    match unsafe { bind(args) } {
        Ok(x) => x,
        Err(e) => e.to_ptr(),
    }
}

/// Builds a backchannel on the connection `args.bc_xprt` and links it
/// there. Returns it with the caller's reference.
///
/// # Safety
///
/// `args` must be the arguments of a running `setup`: sunrpc holds a
/// reference on this module and the caller one on `args.bc_xprt`.
unsafe fn bind(args: &bindings::xprt_create) -> Result<*mut bindings::rpc_xprt> {
    if args.bc_xprt.is_null() || args.dstaddr.is_null() {
        return Err(EINVAL);
    }
    // SAFETY: the caller holds the server transport (function contract).
    let sx = unsafe { SvcXprt::from_raw(args.bc_xprt) };
    let conn = CLASS.conn_of(sx).ok_or(EINVAL)?;
    // SAFETY: the address is valid for the call (function contract).
    let family = unsafe { (*args.dstaddr).sa_family };
    let netid = if u32::from(family) == bindings::AF_INET6 {
        c"rdma6"
    } else {
        c"rdma"
    };
    let max_payload =
        (max_inline_reply(&conn.info.client) as usize).saturating_sub(CALL_HEADER_LEN);

    // SAFETY: nfsd's namespace is live during the call.
    let raw = unsafe { RpcXprt::alloc(args.net, core::mem::size_of::<BcXprt>(), BC_CREDITS) }?;
    // SAFETY: fresh from `alloc`; ours alone until linked below.
    let x = unsafe { RpcXprt::from_raw(raw) };
    // SAFETY: `raw` is a `BcXprt` (allocated with its size, zeroed).
    let timeout = unsafe { core::ptr::addr_of_mut!((*raw.cast::<BcXprt>()).timeout) };
    // The class, ops and the timeout (same allocation) outlive it; the
    // connection outlives every op that uses the link back (module doc).
    // SAFETY: so; and the transport is new and ours alone.
    unsafe {
        x.init_connected(
            BC_CLASS.as_ptr(),
            &BC_OPS,
            BC_IDENT,
            max_payload,
            args.bc_xprt,
            timeout,
            CALL_TIMEOUT_MS,
        )
    };
    // SAFETY: new and ours alone; `addrlen` bytes at `dstaddr`.
    if let Err(e) = unsafe { x.set_peer(args.dstaddr, args.addrlen, c"rdma", netid) } {
        // SAFETY: never handed to anyone.
        unsafe { discard(x) };
        return Err(e);
    }
    // The link's reference; the first is the caller's.
    x.get();
    if !sx.bind_backchannel(x) {
        // Another setup bound one first; this one was never seen.
        // SAFETY: as above.
        unsafe { discard(x) };
        return Err(EAGAIN);
    }
    // SAFETY: the module is live (sunrpc holds a reference on the class's
    // owner during `setup`); `destroy` puts this one.
    unsafe { bindings::__module_get(BC_CLASS.owner()) };
    conn.backchannel_bound();
    pr_info_ratelimited!("connection {}: NFSv4.1 backchannel bound\n", conn.id);
    Ok(raw)
}

/// Frees a backchannel that `bind` built but nobody saw.
///
/// # Safety
///
/// `x` must come from `RpcXprt::alloc` and never have been handed out or
/// linked.
unsafe fn discard(x: &RpcXprt) {
    // SAFETY: ours alone (function contract).
    unsafe {
        x.free_peer_strings();
        RpcXprt::free(x.as_ptr());
    }
}

/// The `send_request` op: sends a backward Call (in rpciod, or the thread
/// of a synchronous task; never under a spinlock).
///
/// # Safety
///
/// Called by sunrpc only, with the arguments its `rpc_xprt_ops` contract
/// gives (live objects it holds for the call).
unsafe extern "C" fn send_request(rqst: *mut bindings::rpc_rqst) -> c_int {
    // SAFETY: sunrpc passes a live request for the op's duration.
    let mut rq = unsafe { RpcRqst::from_raw(rqst) };
    let xprt = rq.xprt();
    let server = xprt.server();
    // SAFETY: the connection outlives the callback client's tasks (module
    // doc).
    let sx = unsafe { SvcXprt::from_raw(server) };
    if sx.is_dead() {
        return ENOTCONN.to_errno();
    }
    // `bind` links only our connections.
    let Some(conn) = CLASS.conn_of(sx) else {
        return ENOTCONN.to_errno();
    };
    match send_call(conn, &mut rq) {
        Ok(()) => 0,
        Err(e) if e == ENOTCONN => {
            // The connection is closing: fail this and the waiting Calls
            // now (the tasks do not reconnect) rather than let them retry
            // until sunrpc deletes the connection and closes us.
            xprt.disconnect_done();
            e.to_errno()
        }
        Err(e) => e.to_errno(),
    }
}

/// Sends the backward Call of `rq` inline on `conn`.
///
/// The send context may be allocated here if the pool is empty
/// (`GFP_KERNEL`): allowed, as this runs in process context without locks
/// held, and rpciod's tasks run in a `memalloc_nofs` scope, so reclaim
/// does not recurse into file systems. Waiting for a send-queue slot is
/// allowed for the same reason; a closing connection ends the wait.
fn send_call(conn: &Connection, rq: &mut RpcRqst<'_>) -> Result {
    let res = conn.res().ok_or(ENOTCONN)?;
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
    let mut ctxt = conn.ctxt_get(false).ok_or(ENOMEM)?;
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
    if let Err(e) = ctxt.send_inline(res.pd.local_dma_lkey(), total, None) {
        conn.ctxt_put(ctxt);
        return Err(e);
    }
    rq.stamp_transmit();
    // The context goes with the Send and returns to the pool when it
    // completes; on failure it is returned, and a failed post closes the
    // connection.
    super::stats::count(&conn.stats.c.backward_calls, 1);
    post_reply(conn, ctxt).map_err(|_| ENOTCONN)
}

/// Delivers a backward Reply (`header`, with `body` the RPC message after
/// it) received on `conn` to the backward Call waiting for it. The body is
/// copied before this returns.
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

/// The `buf_alloc` op: the request's Call and Reply buffers.
///
/// # Safety
///
/// Called by sunrpc only, with the arguments its `rpc_xprt_ops` contract
/// gives (live objects it holds for the call).
unsafe extern "C" fn buf_alloc(task: *mut bindings::rpc_task) -> c_int {
    // SAFETY: sunrpc passes a live task with its request.
    let mut rq = unsafe { RpcRqst::from_raw((*task).tk_rqstp) };
    match rq.alloc_buffers() {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// The `buf_free` op.
///
/// # Safety
///
/// Called by sunrpc only, with the arguments its `rpc_xprt_ops` contract
/// gives (live objects it holds for the call).
unsafe extern "C" fn buf_free(task: *mut bindings::rpc_task) {
    // SAFETY: sunrpc passes a live task with its request.
    let mut rq = unsafe { RpcRqst::from_raw((*task).tk_rqstp) };
    rq.free_buffers();
}

/// The `close` op: sunrpc deletes the connection.
///
/// # Safety
///
/// Called by sunrpc only, with the arguments its `rpc_xprt_ops` contract
/// gives (live objects it holds for the call).
unsafe extern "C" fn close(xprt: *mut bindings::rpc_xprt) {
    // SAFETY: sunrpc passes a live transport.
    unsafe { RpcXprt::from_raw(xprt) }.disconnect_done();
}

/// The `destroy` op: the last reference is gone.
///
/// # Safety
///
/// Called by sunrpc only, with the arguments its `rpc_xprt_ops` contract
/// gives (live objects it holds for the call).
unsafe extern "C" fn destroy(xprt: *mut bindings::rpc_xprt) {
    // SAFETY: sunrpc calls `destroy` once, after the last reference:
    // nothing else uses the transport.
    unsafe {
        let x = RpcXprt::from_raw(xprt);
        x.free_peer_strings();
        RpcXprt::free(xprt);
    }
    // SAFETY: taken by `bind` for this backchannel.
    unsafe { bindings::module_put(BC_CLASS.owner()) };
}

/// The `print_stats` op (only NFS client mounts show transport statistics;
/// a backchannel has none of its own).
///
/// # Safety
///
/// Called by sunrpc only, with the arguments its `rpc_xprt_ops` contract
/// gives (live objects it holds for the call).
unsafe extern "C" fn print_stats(_xprt: *mut bindings::rpc_xprt, _seq: *mut bindings::seq_file) {}
