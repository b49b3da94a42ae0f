// SPDX-License-Identifier: GPL-2.0

//! The transport class and the `svc_xprt_ops` table sunrpc calls.
//!
//! Each op is a small `extern "C"` trampoline that recovers our type — a
//! [`Listener`] or a [`Connection`], told apart by `XPT_LISTENER` — and calls
//! the stage that implements it.

use kernel::prelude::*;

use super::{
    accept, connection::Connection, ctxt::CallCtxt, listener, listener::Listener, recvfrom, sendto,
};
use crate::{
    bindings, params,
    sunrpc::{Flag, Registration, SvcXprt, XprtClass},
};

/// The transport class this module registers (its name is `xprt_name`).
pub(super) static CLASS: XprtClass = XprtClass::new();

/// What sunrpc calls on our transports.
static OPS: bindings::svc_xprt_ops = bindings::svc_xprt_ops {
    xpo_create: Some(xpo_create),
    xpo_accept: Some(xpo_accept),
    xpo_has_wspace: Some(xpo_has_wspace),
    xpo_recvfrom: Some(xpo_recvfrom),
    xpo_sendto: Some(xpo_sendto),
    xpo_result_payload: Some(xpo_result_payload),
    xpo_release_ctxt: Some(xpo_release_ctxt),
    xpo_detach: Some(xpo_detach),
    xpo_free: Some(xpo_free),
    xpo_kill_temp_xprt: Some(xpo_kill_temp_xprt),
    xpo_handshake: None,
};

/// The class's transport identifier. nfsd builds an NFSv4.1 callback client
/// on a session's connection with the client transport whose identifier is
/// this one plus `XPRT_TRANSPORT_BC`. That must not be the C transport's
/// (`XPRT_TRANSPORT_RDMA`): rpcrdma.ko's backchannel would take our
/// connection for one of its own. Our backchannel's class
/// ([`super::backchannel`]) answers to it; in a module built without it
/// (`SVCRDMA_RS_BACKCHANNEL=n`) none does, so nfsd's callback setup fails
/// cleanly and it tells the client its callback path is down.
const IDENT: i32 = bindings::XPRT_TRANSPORT_RDMA | 0x1_0000;

/// The backchannel's client transport identifier: [`IDENT`] plus
/// `XPRT_TRANSPORT_BC` (bit 31, the sign bit of C's `int`).
#[cfg(svcrdma_rs_backchannel)]
pub(super) const BC_IDENT: i32 = IDENT | i32::MIN;

/// Registers the class under the `xprt_name` parameter.
///
/// If the name is taken, loading fails with one line that says what to do.
/// The usual holder of `rdma` is the kernel's own `rpcrdma.ko` (the NFS/RDMA
/// client and the C server), loaded before us: unloading it and loading us
/// first (which the `softdep` in `modprobe/svcrdma_rs.conf`, installed
/// by `make install`, does on every later load) gives us the name and
/// leaves its client working; another name is the way out when it cannot
/// be unloaded.
pub(crate) fn register_class(module: &'static ThisModule) -> Result<Registration> {
    let name = params::xprt_name()?;
    CLASS
        .register(
            name,
            module,
            &OPS,
            bindings::RPCSVC_MAXPAYLOAD,
            IDENT,
        )
        .inspect_err(|e| {
            if *e != EEXIST {
                return;
            }
            if name.to_bytes() == b"rdma" {
                pr_err!(
                    "transport name \"rdma\" is already registered, by rpcrdma.ko (the C transport) if it is loaded: \"rmmod rpcrdma\" (needs no NFS/RDMA mount and no rdma listener), then \"modprobe svcrdma_rs\"; /etc/modprobe.d/svcrdma_rs.conf (make install) makes every later load of rpcrdma load svcrdma_rs first; or load with xprt_name=<another name>, e.g. \"modprobe svcrdma_rs xprt_name=rdma_rs\", and write that name to /proc/fs/nfsd/portlist\n"
                );
            } else {
                pr_err!(
                    "transport name \"{}\" is already registered: load with xprt_name=<another name> and write that name to /proc/fs/nfsd/portlist\n",
                    name
                );
            }
        })
}

/// Which of our types a transport pointer from sunrpc is.
enum Ours<'a> {
    Listener(&'a Listener),
    Connection(&'a Connection),
}

/// Recovers our transport from sunrpc's pointer.
///
/// # Safety
///
/// `xprt` must be one of our live transports, alive for `'a`.
unsafe fn ours<'a>(xprt: *mut bindings::svc_xprt) -> Ours<'a> {
    // SAFETY: a live, initialized `svc_xprt` (caller's promise).
    let x = unsafe { SvcXprt::from_raw(xprt) };
    if x.test_flag(Flag::Listener) {
        // SAFETY: our transports with `XPT_LISTENER` are `Listener`s.
        Ours::Listener(unsafe { Listener::from_svc_xprt(xprt) })
    } else {
        // SAFETY: our other transports are `Connection`s.
        Ours::Connection(unsafe { Connection::from_svc_xprt(xprt) })
    }
}

/// Creates a listener (`svc_xprt_ops::xpo_create`).
///
/// # Safety
///
/// Called by sunrpc only, with the arguments its `svc_xprt_ops` contract
/// gives (live objects it holds references on for the call).
unsafe extern "C" fn xpo_create(
    serv: *mut bindings::svc_serv,
    net: *mut bindings::net,
    sa: *mut bindings::sockaddr,
    salen: c_int,
    _flags: c_int,
) -> *mut bindings::svc_xprt {
    let Ok(salen) = usize::try_from(salen) else {
        return EINVAL.to_ptr();
    };
    // SAFETY: sunrpc passes a live service and namespace, and `salen`
    // readable bytes at `sa`.
    match unsafe { listener::create(serv, net, sa, salen) } {
        Ok(x) => x,
        Err(e) => e.to_ptr(),
    }
}

/// Accepts a pending connection of a listener (`xpo_accept`).
///
/// # Safety
///
/// Called by sunrpc only, with the arguments its `svc_xprt_ops` contract
/// gives (live objects it holds references on for the call).
unsafe extern "C" fn xpo_accept(xprt: *mut bindings::svc_xprt) -> *mut bindings::svc_xprt {
    // SAFETY: sunrpc holds a reference on the transport during the call.
    match unsafe { ours(xprt) } {
        Ours::Listener(l) => accept::accept(l),
        Ours::Connection(_) => core::ptr::null_mut(),
    }
}

/// Whether a connection can take another Reply now (`xpo_has_wspace`).
///
/// # Safety
///
/// Called by sunrpc only, with the arguments its `svc_xprt_ops` contract
/// gives (live objects it holds references on for the call).
unsafe extern "C" fn xpo_has_wspace(xprt: *mut bindings::svc_xprt) -> c_int {
    // SAFETY: sunrpc holds a reference on the transport during the call.
    match unsafe { ours(xprt) } {
        Ours::Connection(c) => c_int::from(c.has_wspace()),
        Ours::Listener(_) => 1,
    }
}

/// Receives the next Call for an nfsd thread (`xpo_recvfrom`).
///
/// # Safety
///
/// Called by sunrpc only, with the arguments its `svc_xprt_ops` contract
/// gives (live objects it holds references on for the call).
unsafe extern "C" fn xpo_recvfrom(rqstp: *mut bindings::svc_rqst) -> c_int {
    // SAFETY: sunrpc passes a live request whose transport it holds.
    let xprt = unsafe { (*rqstp).rq_xprt };
    // SAFETY: as above.
    match unsafe { ours(xprt) } {
        Ours::Connection(c) => recvfrom::recvfrom(c, rqstp),
        Ours::Listener(_) => 0,
    }
}

/// Sends an nfsd thread's Reply (`xpo_sendto`).
///
/// # Safety
///
/// Called by sunrpc only, with the arguments its `svc_xprt_ops` contract
/// gives (live objects it holds references on for the call).
unsafe extern "C" fn xpo_sendto(rqstp: *mut bindings::svc_rqst) -> c_int {
    // SAFETY: sunrpc passes a live request whose transport it holds.
    let xprt = unsafe { (*rqstp).rq_xprt };
    // SAFETY: as above.
    match unsafe { ours(xprt) } {
        Ours::Connection(c) => sendto::sendto(c, rqstp),
        Ours::Listener(_) => ENOTCONN.to_errno(),
    }
}

/// Notes where a Reply's payload is (`xpo_result_payload`).
///
/// # Safety
///
/// Called by sunrpc only, with the arguments its `svc_xprt_ops` contract
/// gives (live objects it holds references on for the call).
unsafe extern "C" fn xpo_result_payload(
    rqstp: *mut bindings::svc_rqst,
    offset: c_uint,
    length: c_uint,
) -> c_int {
    sendto::result_payload(rqstp, offset, length)
}

/// Releases a Call's receive context (`xpo_release_ctxt`).
///
/// # Safety
///
/// Called by sunrpc only, with the arguments its `svc_xprt_ops` contract
/// gives (live objects it holds references on for the call).
unsafe extern "C" fn xpo_release_ctxt(xprt: *mut bindings::svc_xprt, ctxt: *mut c_void) {
    if ctxt.is_null() {
        return;
    }
    // SAFETY: sunrpc holds a reference on the transport during the call.
    if let Ours::Connection(c) = unsafe { ours(xprt) } {
        // SAFETY: a non-null `rq_xprt_ctxt` on our connections is always a
        // context leaked by `recvfrom`, released once.
        c.ctxt_put(unsafe { KBox::from_raw(ctxt.cast::<CallCtxt>()) });
    }
}

/// Detaches a closing transport (`xpo_detach`).
///
/// # Safety
///
/// Called by sunrpc only, with the arguments its `svc_xprt_ops` contract
/// gives (live objects it holds references on for the call).
unsafe extern "C" fn xpo_detach(xprt: *mut bindings::svc_xprt) {
    // SAFETY: sunrpc holds a reference on the transport during the call.
    if let Ours::Connection(c) = unsafe { ours(xprt) } {
        c.detach();
    }
}

/// Frees a transport on its last reference (`xpo_free`).
///
/// # Safety
///
/// Called by sunrpc only, with the arguments its `svc_xprt_ops` contract
/// gives (live objects it holds references on for the call).
unsafe extern "C" fn xpo_free(xprt: *mut bindings::svc_xprt) {
    // SAFETY: sunrpc calls `xpo_free` once, on the last reference to one of
    // our transports; each kind is freed as the kind it is.
    unsafe {
        match ours(xprt) {
            Ours::Listener(_) => Listener::free(xprt),
            Ours::Connection(_) => Connection::free(xprt),
        }
    }
}

/// Nothing to do: our connections are not temporary sockets (`xpo_kill_temp_xprt`).
///
/// # Safety
///
/// Called by sunrpc only, with the arguments its `svc_xprt_ops` contract
/// gives (live objects it holds references on for the call).
unsafe extern "C" fn xpo_kill_temp_xprt(_xprt: *mut bindings::svc_xprt) {}
