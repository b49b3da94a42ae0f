// SPDX-License-Identifier: GPL-2.0

//! Listening endpoints: `xpo_create`, and the CM events on a listening id.
//!
//! nfsd asks for a listener per address family when an admin writes
//! `<name> <port>` to `/proc/fs/nfsd/portlist`; each one is an RDMA CM id
//! bound to the wildcard address of that family and listening. Connection
//! requests arrive as CM events on it.

use kernel::prelude::*;

use super::{ops::CLASS, xprt::RdmaXprt};
use crate::{
    bindings,
    log::{pr_warn_ratelimited, Show},
    rdma::{
        cm::{CmEvent, CmId, CmIdRef},
        sockaddr_to_proto,
    },
    sunrpc::Flag,
};

/// Creates a listener on `sa` for `serv` (sunrpc's `xpo_create`).
///
/// # Safety
///
/// sunrpc's contract: `serv` and `net` are live, `sa` points to `salen`
/// readable bytes.
pub(super) unsafe fn create(
    serv: *mut bindings::svc_serv,
    net: *mut bindings::net,
    sa: *mut bindings::sockaddr,
    salen: usize,
) -> Result<*mut bindings::svc_xprt> {
    let need = if salen >= size_of::<bindings::sa_family_t>() {
        // SAFETY: at least the family field is readable (`salen` says so).
        match u32::from(unsafe { (*sa).sa_family }) {
            bindings::AF_INET => size_of::<bindings::sockaddr_in>(),
            bindings::AF_INET6 => size_of::<bindings::sockaddr_in6>(),
            _ => return Err(EAFNOSUPPORT),
        }
    } else {
        return Err(EINVAL);
    };
    if salen < need {
        return Err(EINVAL);
    }

    let x = KBox::into_raw(KBox::new(RdmaXprt::new(), GFP_KERNEL)?);
    // SAFETY: `x` is a live allocation we own until sunrpc takes it.
    let xr = unsafe { &*x };
    // SAFETY: first and only init, before anything else sees the object;
    // `net` and `serv` come from sunrpc, and our class is registered (sunrpc
    // only calls `xpo_create` through it). From here on the object is freed
    // through sunrpc's reference count only.
    unsafe { xr.xprt().init(net, CLASS.as_ptr(), serv) };
    xr.xprt().set_flag(Flag::Listener);
    // RDMA's reliable connections provide congestion control (RFC 7530 3.1).
    xr.xprt().set_flag(Flag::CongCtrl);

    // SAFETY: the handler receives `x` as context until the id is destroyed;
    // the id is stored in `*x` and destroyed before `*x` is freed.
    let id = unsafe { CmId::new(net, listen_handler, x.cast()) };
    // SAFETY: `sa` holds a full `sockaddr_in`/`sockaddr_in6` (checked above).
    let id = id.and_then(|id| unsafe { id.listen(sa) }.map(|()| id));
    let id = match id {
        Ok(id) => id,
        Err(e) => {
            // SAFETY: `sa` is a valid address (checked above).
            if let Some(addr) = unsafe { sockaddr_to_proto(sa) } {
                pr_err!("cannot listen on {}: error {}\n", Show(addr), e.to_errno());
            }
            // SAFETY: initialized, never handed to sunrpc, one reference; the
            // CM id (if any) was dropped above, so no handler can run.
            unsafe { xr.xprt().put_failed() };
            return Err(e);
        }
    };
    // The bound address has the port the CM chose if nfsd asked for port 0.
    // SAFETY: the id's source address is a valid `sockaddr_storage` of the
    // requested family; sunrpc has not seen the transport yet.
    unsafe { xr.xprt().set_local(id.src_sockaddr()) };
    xr.set_cm_id(id);
    Ok(xr.xprt().as_ptr())
}

/// CM events on a listening id (and, for a connection request, on the new
/// connection's id, which inherits the listener's context).
///
/// # Safety
///
/// Called by the RDMA CM only, with the id's `context` set to the listening
/// `RdmaXprt`, which outlives the id.
unsafe extern "C" fn listen_handler(
    id: *mut bindings::rdma_cm_id,
    event: *mut bindings::rdma_cm_event,
) -> c_int {
    // SAFETY: the CM passes a live id and event for the call's duration.
    let (id, event) = unsafe { (CmIdRef::from_raw(id), CmEvent::from_raw(event)) };
    match event.kind() {
        bindings::RDMA_CM_EVENT_CONNECT_REQUEST => {
            // Accepting connections is the next stage of this transport;
            // until it exists, refuse cleanly: a non-zero return makes the
            // CM reject the request and destroy the new id.
            pr_warn_ratelimited!(
                "connection request from {} on {} refused: this build does not accept connections yet\n",
                Peer(id.peer()),
                DevName(id.device_name())
            );
            1
        }
        _ => 0,
    }
}

/// Formats an optional peer address.
struct Peer(Option<crate::proto::addr::SockAddr>);

impl kernel::fmt::Display for Peer {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match &self.0 {
            Some(a) => core::fmt::Display::fmt(a, f),
            None => f.write_str("(unknown address)"),
        }
    }
}

/// Formats an optional device name.
struct DevName<'a>(Option<&'a CStr>);

impl kernel::fmt::Display for DevName<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.0.and_then(|n| n.to_str().ok()) {
            Some(n) => f.write_str(n),
            None => f.write_str("(no device)"),
        }
    }
}
