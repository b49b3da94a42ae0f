// SPDX-License-Identifier: GPL-2.0

//! Listening endpoints: `xpo_create`, and the CM events on a listening id.
//!
//! nfsd asks for a listener per address family when an admin writes
//! `<name> <port>` to `/proc/fs/nfsd/portlist`; each one is an RDMA CM id
//! bound to the wildcard address of that family and listening. Connection
//! requests arrive as CM events on it ([`super::accept`]) and wait in the
//! listener's accept queue until an nfsd thread accepts them.

use kernel::{
    new_mutex,
    prelude::*,
    sync::{Arc, Mutex, SetOnce},
};

use super::{
    accept::{self, Pending},
    ops::CLASS,
    registry::{registry, Registry},
};
use crate::{
    bindings,
    log::Show,
    rdma::{
        cm::{CmEvent, CmId, CmIdRef},
        sockaddr_to_proto,
    },
    sunrpc::{Flag, SvcXprt},
};

/// A listening transport.
///
/// sunrpc holds it by its `xprt` field; its reference count owns it, and
/// `xpo_free` ([`Listener::free`]) frees it.
#[repr(C)]
#[pin_data]
pub(crate) struct Listener {
    /// sunrpc's part (first: shared layout with [`super::Connection`], and
    /// `XPT_LISTENER` tells them apart).
    xprt: SvcXprt,
    /// The listening id. Set once the id exists; dropped first, so no CM
    /// handler runs while the rest is torn down.
    cm_id: SetOnce<CmId>,
    /// Connection requests waiting for an nfsd thread to accept them.
    #[pin]
    queue: Mutex<KVec<KBox<Pending>>>,
    registry: Arc<Registry>,
}

impl Listener {
    /// sunrpc's part.
    pub(crate) fn xprt(&self) -> &SvcXprt {
        &self.xprt
    }

    /// The module's registry.
    pub(crate) fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// Queues the request `make` builds and wakes an nfsd thread to accept
    /// it. `make` runs under the queue lock once room is reserved, so queueing
    /// cannot fail after it; if no room can be made, `make` is not called.
    pub(super) fn queue_request(&self, make: impl FnOnce() -> KBox<Pending>) -> Result {
        {
            let mut q = self.queue.lock();
            q.reserve(1, GFP_KERNEL).map_err(|_| ENOMEM)?;
            if q.push_within_capacity(make()).is_err() {
                // Unreachable: room was reserved under the same lock.
                return Err(ENOMEM);
            }
        }
        self.xprt.set_flag(Flag::Conn);
        self.xprt.enqueue();
        Ok(())
    }

    /// Takes the oldest queued request; keeps `XPT_CONN` set while more wait.
    pub(super) fn dequeue(&self) -> Option<KBox<Pending>> {
        self.xprt.clear_flag(Flag::Conn);
        let mut q = self.queue.lock();
        let p = if q.is_empty() { None } else { q.remove(0).ok() };
        if !q.is_empty() {
            self.xprt.set_flag(Flag::Conn);
        }
        p
    }

    /// The listener behind a pointer sunrpc passed to one of our ops.
    ///
    /// # Safety
    ///
    /// `ptr` must be the `xprt` of a live `Listener` (`XPT_LISTENER` set on
    /// one of ours), alive for `'a`.
    pub(crate) unsafe fn from_svc_xprt<'a>(ptr: *mut bindings::svc_xprt) -> &'a Self {
        // SAFETY: `xprt` is the first field of a `#[repr(C)]` struct, so the
        // pointers coincide; liveness is the caller's promise.
        unsafe { &*ptr.cast::<Self>() }
    }

    /// Frees a listener sunrpc has released (its `xpo_free`).
    ///
    /// # Safety
    ///
    /// `ptr` must be the `xprt` of a `Listener` from [`create`] with no
    /// reference left.
    pub(crate) unsafe fn free(ptr: *mut bindings::svc_xprt) {
        // SAFETY: as in `from_svc_xprt`; the object came from
        // `KBox::into_raw` of a pinned box and nothing refers to it.
        drop(unsafe { Pin::new_unchecked(KBox::from_raw(ptr.cast::<Self>())) });
    }
}

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
    let registry = registry().ok_or(ENODEV)?;

    let l = KBox::pin_init(
        try_pin_init!(Listener {
            xprt: SvcXprt::uninit(),
            cm_id: SetOnce::new(),
            queue <- new_mutex!(KVec::new()),
            registry,
        }),
        GFP_KERNEL,
    )?;
    // SAFETY: the listener is never moved out of its box.
    let x = KBox::into_raw(unsafe { Pin::into_inner_unchecked(l) });
    // SAFETY: `x` is a live allocation we own until sunrpc takes it.
    let xr = unsafe { &*x };
    // SAFETY: first and only init, before anything else sees the object; `net` and `serv` come from sunrpc, and our class is registered (sunrpc only calls `xpo_create` through it). From here on the object is freed through sunrpc's reference count only.
    unsafe { xr.xprt.init(net, CLASS.as_ptr(), serv) };
    xr.xprt.set_flag(Flag::Listener);
    // RDMA's reliable connections provide congestion control (RFC 7530 3.1).
    xr.xprt.set_flag(Flag::CongCtrl);

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
            unsafe { xr.xprt.put_failed() };
            return Err(e);
        }
    };
    // The bound address has the port the CM chose if nfsd asked for port 0.
    // SAFETY: the id's source address is a valid `sockaddr_storage` of the
    // requested family; sunrpc has not seen the transport yet.
    unsafe { xr.xprt.set_local(id.src_sockaddr()) };
    xr.cm_id.populate(id);
    Ok(xr.xprt.as_ptr())
}

/// CM events on a listening id, and a connection request's first event.
///
/// # Safety
///
/// Called by the RDMA CM only, with the id's `context` set to the listening
/// `Listener`, which outlives the listening id (and is the context a new
/// connection's id inherits).
unsafe extern "C" fn listen_handler(
    id: *mut bindings::rdma_cm_id,
    event: *mut bindings::rdma_cm_event,
) -> c_int {
    // SAFETY: the CM passes a live id and event for the call's duration.
    let (id, event) = unsafe { (CmIdRef::from_raw(id), CmEvent::from_raw(event)) };
    match event.kind() {
        bindings::RDMA_CM_EVENT_CONNECT_REQUEST => {
            // SAFETY: the context of a listening id (inherited by the new id) is its `Listener`, live while the listening id is, which is at least for this call.
            let listener = unsafe { &*id.context().cast::<Listener>() };
            // SAFETY: the id and event of a running CONNECT_REQUEST handler.
            unsafe { accept::connect_request(listener, id, &event) }
        }
        _ => 0,
    }
}
