// SPDX-License-Identifier: GPL-2.0

//! RDMA connection manager identifiers (`struct rdma_cm_id`) and events.

use core::ptr::NonNull;

use kernel::{error::to_result, prelude::*};

use crate::{bindings, proto::addr::SockAddr};

/// How the CM calls us: `(id, event) -> 0` keeps the id, non-zero makes the
/// CM destroy it (for a connection request: refuse the connection).
pub(crate) type Handler =
    unsafe extern "C" fn(*mut bindings::rdma_cm_id, *mut bindings::rdma_cm_event) -> c_int;

/// Connection-request backlog of a listener.
pub(crate) const LISTEN_BACKLOG: i32 = 32;

/// An RDMA CM identifier this module created and destroys when dropped.
///
/// # Invariants
///
/// `ptr` points to a live `rdma_cm_id` created by `rdma_create_id()`, owned
/// by this value and destroyed only by its `Drop`.
pub(crate) struct CmId {
    ptr: NonNull<bindings::rdma_cm_id>,
}

// SAFETY: the RDMA CM serializes operations on an id internally; an id may
// be used and destroyed from any thread.
unsafe impl Send for CmId {}
// SAFETY: see `Send`; `&CmId` only offers operations the CM serializes.
unsafe impl Sync for CmId {}

impl CmId {
    /// Creates an RC identifier in the TCP port space of `net`.
    ///
    /// # Safety
    ///
    /// `handler` is called with `context` in the id's `context` field until
    /// the id is destroyed: `context` must stay valid that long, and
    /// `handler` must accept it.
    pub(crate) unsafe fn new(
        net: *mut bindings::net,
        handler: Handler,
        context: *mut c_void,
    ) -> Result<Self> {
        // SAFETY: `net` is a live namespace (from sunrpc); the handler and
        // context contract is the caller's.
        let ptr = unsafe {
            bindings::svcrdma_rs_create_id(
                net,
                Some(handler),
                context,
                bindings::RDMA_PS_TCP,
                bindings::IB_QPT_RC,
            )
        };
        let ptr = kernel::error::from_err_ptr(ptr)?;
        // INVARIANT: `rdma_create_id()` succeeded, so `ptr` is a live id that
        // we now own.
        NonNull::new(ptr).map(|ptr| Self { ptr }).ok_or(ENOMEM)
    }

    /// The C object.
    pub(crate) fn as_ptr(&self) -> *mut bindings::rdma_cm_id {
        self.ptr.as_ptr()
    }

    /// Binds to `addr` and listens. An IPv6 listener takes IPv6 only, so
    /// that an IPv4 listener can share its port, as nfsd asks for both.
    ///
    /// # Safety
    ///
    /// `addr` must point to a valid `sockaddr_in` or `sockaddr_in6`.
    pub(crate) unsafe fn listen(&self, addr: *mut bindings::sockaddr) -> Result {
        // SAFETY: `addr` is readable (caller's promise).
        if u32::from(unsafe { (*addr).sa_family }) == bindings::AF_INET6 {
            // SAFETY: `self.ptr` is live (type invariant).
            to_result(unsafe { bindings::rdma_set_afonly(self.as_ptr(), 1) })?;
        }
        // SAFETY: `self.ptr` is live; `addr` is valid (caller's promise).
        to_result(unsafe { bindings::rdma_bind_addr(self.as_ptr(), addr) })?;
        // SAFETY: `self.ptr` is live and bound.
        to_result(unsafe { bindings::rdma_listen(self.as_ptr(), LISTEN_BACKLOG) })
    }

    /// The bound source address, as a `sockaddr` pointer into the id.
    pub(crate) fn src_sockaddr(&self) -> *const bindings::sockaddr {
        // SAFETY: `self.ptr` is live (type invariant); taking a field's
        // address reads nothing.
        unsafe { (&raw const (*self.as_ptr()).route.addr.src_addr).cast() }
    }
}

impl Drop for CmId {
    fn drop(&mut self) {
        // SAFETY: `self.ptr` is live and ours (type invariant). This waits for
        // a running event handler to return, and no handler runs afterwards.
        unsafe { bindings::rdma_destroy_id(self.as_ptr()) };
    }
}

/// The identifier an event handler was called for; not owned.
pub(crate) struct CmIdRef<'a> {
    id: &'a bindings::rdma_cm_id,
}

impl<'a> CmIdRef<'a> {
    /// Borrows the id a handler was given.
    ///
    /// # Safety
    ///
    /// `ptr` must be the live id passed to a running event handler; the
    /// borrow must not outlive the handler call.
    pub(crate) unsafe fn from_raw(ptr: *mut bindings::rdma_cm_id) -> Self {
        // SAFETY: per the function's safety requirements.
        Self {
            id: unsafe { &*ptr },
        }
    }

    /// The peer's address, if it is IPv4 or IPv6.
    pub(crate) fn peer(&self) -> Option<SockAddr> {
        // SAFETY: `dst_addr` is a `sockaddr_storage` inside a live id.
        unsafe { super::sockaddr_to_proto((&raw const self.id.route.addr.dst_addr).cast()) }
    }

    /// The RDMA device's name (`rxe0`, `siw0`, …), if bound to one.
    pub(crate) fn device_name(&self) -> Option<&'a CStr> {
        let dev = self.id.device;
        if dev.is_null() {
            return None;
        }
        // SAFETY: a bound id's device is live while the id is; `name` is a
        // NUL-terminated array inside it.
        Some(unsafe { CStr::from_char_ptr((*dev).name.as_ptr()) })
    }
}

/// A CM event, borrowed for the duration of the handler call.
pub(crate) struct CmEvent<'a> {
    ev: &'a bindings::rdma_cm_event,
}

impl<'a> CmEvent<'a> {
    /// Borrows the event a handler was given.
    ///
    /// # Safety
    ///
    /// `ptr` must be the event passed to a running handler; the borrow must
    /// not outlive the handler call.
    pub(crate) unsafe fn from_raw(ptr: *mut bindings::rdma_cm_event) -> Self {
        // SAFETY: per the function's safety requirements.
        Self {
            ev: unsafe { &*ptr },
        }
    }

    /// The event type (`RDMA_CM_EVENT_*`).
    pub(crate) fn kind(&self) -> bindings::rdma_cm_event_type {
        self.ev.event
    }
}
