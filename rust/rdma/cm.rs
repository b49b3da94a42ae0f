// SPDX-License-Identifier: GPL-2.0

//! RDMA connection manager identifiers (`struct rdma_cm_id`) and events.

use core::ptr::NonNull;

use kernel::{error::to_result, prelude::*};

use super::Device;
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

    /// The peer's address, as a `sockaddr` pointer into the id.
    pub(crate) fn dst_sockaddr(&self) -> *const bindings::sockaddr {
        // SAFETY: `self.ptr` is live (type invariant); taking a field's
        // address reads nothing.
        unsafe { (&raw const (*self.as_ptr()).route.addr.dst_addr).cast() }
    }

    /// The bound source address, as a `sockaddr` pointer into the id.
    pub(crate) fn src_sockaddr(&self) -> *const bindings::sockaddr {
        // SAFETY: `self.ptr` is live (type invariant); taking a field's
        // address reads nothing.
        unsafe { (&raw const (*self.as_ptr()).route.addr.src_addr).cast() }
    }
}

impl CmId {
    /// Points the id's events at `handler` with `context` and accepts the
    /// connection request it was created for, sending `private` as CM
    /// private data. Both happen under the id's handler lock (as
    /// `rdma_accept()` requires), so no event sees the old context after.
    ///
    /// The result says whether the id was re-pointed: a caller whose old
    /// context holds the id learns from the type alone whether it may free
    /// that context ([`Accept::Repointed`]) or not ([`Accept::NotRepointed`]:
    /// events still go to the old handler and context).
    ///
    /// # Safety
    ///
    /// `context` must stay valid, and `handler` accept it, until the id is
    /// destroyed. Must not be called from this id's handler.
    pub(crate) unsafe fn repoint_and_accept(
        &self,
        handler: Handler,
        context: *mut c_void,
        private: &[u8],
        initiator_depth: u8,
    ) -> Accept {
        let Ok(len) = u8::try_from(private.len()) else {
            return Accept::NotRepointed(EINVAL);
        };
        let mut param = bindings::rdma_conn_param {
            private_data: private.as_ptr().cast(),
            private_data_len: len,
            responder_resources: 0,
            initiator_depth,
            ..Default::default()
        };
        // We are not in the id's handler, so taking its lock cannot
        // deadlock; the CM copies the private data.
        // SAFETY: the id is live (invariant); `param` and `private` outlive the call.
        let ret = unsafe {
            bindings::rdma_lock_handler(self.as_ptr());
            (*self.as_ptr()).event_handler = Some(handler);
            (*self.as_ptr()).context = context;
            let ret = bindings::rdma_accept(self.as_ptr(), &mut param);
            bindings::rdma_unlock_handler(self.as_ptr());
            ret
        };
        Accept::Repointed(to_result(ret))
    }

    /// Points the id's events at a handler that ignores them, under the
    /// id's handler lock: once this returns, no handler call with the old
    /// context runs or starts, so the context may go while the id lives on
    /// (until it is dropped). Must not be called from the id's own handler:
    /// its lock is held there, and this would deadlock (never unsound).
    pub(crate) fn silence(&self) {
        // SAFETY: the id is live (invariant). We are not in its handler, so
        // taking the lock cannot deadlock; it waits for a running handler.
        unsafe {
            bindings::rdma_lock_handler(self.as_ptr());
            (*self.as_ptr()).event_handler = Some(ignore_events);
            (*self.as_ptr()).context = core::ptr::null_mut();
            bindings::rdma_unlock_handler(self.as_ptr());
        }
    }

    /// Sets the QP's local ACK timeout (IB/RoCE): 4.096 µs × 2^`timeout`
    /// per try. Without it, a passive side takes the value the client asked
    /// for, which may be hours. Other transports ignore it.
    pub(crate) fn set_ack_timeout(&self, timeout: u8) {
        // SAFETY: the id is live (invariant). An error only means the
        // transport has no such timeout.
        let _ = unsafe { bindings::rdma_set_ack_timeout(self.as_ptr(), timeout) };
    }

    /// Starts a disconnect; events follow on the handler.
    pub(crate) fn disconnect(&self) {
        // SAFETY: the id is live (invariant). Failure means it was not
        // connected, which is what we want anyway.
        let _ = unsafe { bindings::rdma_disconnect(self.as_ptr()) };
    }

    /// The device the id is bound to.
    pub(crate) fn device(&self) -> Option<Device<'_>> {
        // SAFETY: the id is live (invariant); its device lives while it does.
        unsafe { Device::from_raw((*self.as_ptr()).device, (*self.as_ptr()).port_num) }
    }
}

/// The handler of a silenced id ([`CmId::silence`]): keeps the id.
///
/// # Safety
///
/// Called by the RDMA CM only; it reads nothing.
unsafe extern "C" fn ignore_events(
    _id: *mut bindings::rdma_cm_id,
    _event: *mut bindings::rdma_cm_event,
) -> c_int {
    0
}

impl Drop for CmId {
    fn drop(&mut self) {
        // SAFETY: `self.ptr` is live and ours (type invariant). This waits for
        // a running event handler to return, and no handler runs afterwards.
        unsafe { bindings::rdma_destroy_id(self.as_ptr()) };
    }
}

/// What [`CmId::repoint_and_accept`] did.
#[must_use]
pub(crate) enum Accept {
    /// Nothing changed: the id's events still go to its old handler and
    /// context (the error says why).
    NotRepointed(Error),
    /// The id's events go to the new handler and context; the accept's
    /// result.
    Repointed(Result),
}

/// The identifier an event handler was called for; not owned.
#[derive(Clone, Copy)]
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
        Self {
            // SAFETY: per the function's safety requirements.
            id: unsafe { &*ptr },
        }
    }

    /// The C object.
    pub(crate) fn as_ptr(&self) -> *mut bindings::rdma_cm_id {
        core::ptr::from_ref(self.id).cast_mut()
    }

    /// The context pointer the id carries (for a connection request, the
    /// listener's, inherited).
    pub(crate) fn context(&self) -> *mut c_void {
        self.id.context
    }

    /// The device the id is bound to (a connection request's always is).
    pub(crate) fn device(&self) -> Option<Device<'a>> {
        // SAFETY: a bound id's device lives while the id does (`'a`).
        unsafe { Device::from_raw(self.id.device, self.id.port_num) }
    }

    /// Takes ownership of a connection request's new id.
    ///
    /// # Safety
    ///
    /// Only for the id of a `CONNECT_REQUEST` event, and only if the handler
    /// then returns 0 (the CM leaves the id to us). The returned `CmId` must
    /// not be dropped inside this handler call (destroying an id from its
    /// own handler deadlocks).
    pub(crate) unsafe fn adopt(self) -> CmId {
        // INVARIANT: a live id, now ours (caller's promise).
        CmId {
            ptr: NonNull::from(self.id),
        }
    }

    /// Points a connection request's id at `handler` with `context`.
    ///
    /// # Safety
    ///
    /// Only from within this id's own handler (the CM holds its handler
    /// lock); `context` must stay valid, and `handler` accept it, until the
    /// id is destroyed or re-pointed.
    pub(crate) unsafe fn repoint_in_handler(&self, handler: Handler, context: *mut c_void) {
        let id = self.as_ptr();
        // SAFETY: we hold the handler lock (caller's promise), so no event
        // is delivered while the fields change.
        unsafe {
            (*id).event_handler = Some(handler);
            (*id).context = context;
        }
    }

    /// Rejects the connection request this id was created for. The handler
    /// must then return non-zero, so the CM destroys the id.
    pub(crate) fn reject(&self) {
        // SAFETY: a live id in its connection-request handler.
        let _ = unsafe {
            bindings::rdma_reject(
                self.as_ptr(),
                core::ptr::null(),
                0,
                bindings::IB_CM_REJ_CONSUMER_DEFINED as u8,
            )
        };
    }

    /// The peer's address, if it is IPv4 or IPv6.
    pub(crate) fn peer(&self) -> Option<SockAddr> {
        // SAFETY: `dst_addr` is a `sockaddr_storage` inside a live id.
        unsafe { super::sockaddr_to_proto((&raw const self.id.route.addr.dst_addr).cast()) }
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
        Self {
            // SAFETY: per the function's safety requirements.
            ev: unsafe { &*ptr },
        }
    }

    /// The event type (`RDMA_CM_EVENT_*`).
    pub(crate) fn kind(&self) -> bindings::rdma_cm_event_type {
        self.ev.event
    }

    /// The connection parameters of a connection request (or established)
    /// event.
    fn conn(&self) -> &bindings::rdma_conn_param {
        // SAFETY: `conn` is the union member the CM fills for connection
        // events; every bit pattern is a valid `rdma_conn_param`.
        unsafe { &self.ev.param.conn }
    }

    /// The peer's CM private data (empty when none was sent).
    pub(crate) fn private_data(&self) -> &'a [u8] {
        let c = self.conn();
        if c.private_data.is_null() {
            return &[];
        }
        // SAFETY: the CM gives `private_data_len` readable bytes at
        // `private_data` for the duration of the event.
        unsafe {
            core::slice::from_raw_parts(
                c.private_data.cast::<u8>(),
                usize::from(c.private_data_len),
            )
        }
    }

    /// How many RDMA Reads the peer will accept from us at once.
    pub(crate) fn initiator_depth(&self) -> u8 {
        self.conn().initiator_depth
    }
}
