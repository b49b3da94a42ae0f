// SPDX-License-Identifier: GPL-2.0

//! RDMA connection manager identifiers (`struct rdma_cm_id`) and events.
//!
//! An object that receives an id's events implements [`CmHandler`] and is
//! [`Anchored`]: the id's `context` is a counted reference to its anchor
//! ([`AnchorRef`]), held until the id is destroyed, silenced or re-pointed,
//! so the object cannot be freed while an event may reach it. The one
//! `extern "C"` handler, [`handle`], is generic over the object's type.

use core::{cell::Cell, marker::PhantomData, ptr::NonNull};

use kernel::{error::to_result, prelude::*};

use super::Device;
use crate::{
    anchor::{Anchor, AnchorRef, Anchored},
    bindings,
    net::{sockaddr_to_proto, IpSockAddr, NetRef},
    proto::addr::SockAddr,
};

/// Connection-request backlog of a listener.
pub(crate) const LISTEN_BACKLOG: i32 = 32;

/// Receives the CM events of the ids pointing at it.
///
/// Every id this module makes keeps a count on its handler's anchor, so
/// the handler lives while its ids can deliver events. An id's events are
/// delivered one at a time, under the id's handler lock.
pub(crate) trait CmHandler: Anchored {
    /// An event other than `CONNECT_REQUEST` on `id`. The id stays ours
    /// (its owner destroys it).
    fn event(self: Pin<&Self>, id: CmIdRef<'_>, event: &CmEvent<'_>);

    /// A connection request on a listening id pointing at `self`. Refused
    /// (rejected, and the new id destroyed by the CM) unless `req` is
    /// adopted ([`ConnRequest::adopt`]). By default, refuses.
    fn connect_request(self: Pin<&Self>, req: ConnRequest<'_>) {
        let _ = req;
    }
}

/// An RDMA CM identifier this module created and destroys when dropped.
///
/// # Invariants
///
/// `ptr` points to a live `rdma_cm_id` created by `rdma_create_id()` (or
/// adopted from a connection request), owned by this value and destroyed
/// only by its `Drop`. Its `event_handler` and `context` change only under
/// its handler lock, and are either [`ignore_events`] and null, or
/// `handle::<H>` and a count on the anchor of an `H` (from
/// [`AnchorRef::into_raw`]), which the id owns.
pub(crate) struct CmId {
    ptr: NonNull<bindings::rdma_cm_id>,
}

// SAFETY: the RDMA CM serializes operations on an id internally; an id may
// be used and destroyed from any thread.
unsafe impl Send for CmId {}
// SAFETY: see `Send`; `&CmId` only offers operations the CM serializes.
unsafe impl Sync for CmId {}

impl CmId {
    /// Creates an RC identifier in the TCP port space of `net`, whose
    /// events go to `handler`.
    pub(crate) fn new<H: CmHandler>(net: NetRef<'_>, handler: Pin<&H>) -> Result<Self> {
        let ctx = AnchorRef::new(handler).into_raw();
        // SAFETY: `net` is live (`NetRef`); `handle::<H>` takes a context
        // that is a counted anchor of an `H`, which `ctx` is.
        let ptr = unsafe {
            bindings::svcrdma_rs_rdma_create_id(
                net.as_ptr(),
                Some(handle::<H>),
                ctx.as_ptr().cast(),
                bindings::RDMA_PS_TCP,
                bindings::IB_QPT_RC,
            )
        };
        match kernel::error::from_err_ptr(ptr).map(NonNull::new) {
            // INVARIANT: `rdma_create_id()` succeeded: a live id, ours, with
            // `handle::<H>` and the counted `ctx`.
            Ok(Some(ptr)) => Ok(Self { ptr }),
            Ok(None) => {
                // SAFETY: no id took the count: given back once.
                unsafe { Anchor::release_raw(ctx) };
                Err(ENOMEM)
            }
            Err(e) => {
                // SAFETY: as above.
                unsafe { Anchor::release_raw(ctx) };
                Err(e)
            }
        }
    }

    /// The C object.
    pub(crate) fn as_ptr(&self) -> *mut bindings::rdma_cm_id {
        self.ptr.as_ptr()
    }

    /// Whether `id` (an event's) is this id.
    pub(crate) fn is(&self, id: &CmIdRef<'_>) -> bool {
        self.ptr == id.ptr
    }

    /// Binds to `addr` and listens. An IPv6 listener takes IPv6 only, so
    /// that an IPv4 listener can share its port, as nfsd asks for both.
    pub(crate) fn listen(&self, addr: &IpSockAddr) -> Result {
        if addr.is_v6() {
            // SAFETY: `self.ptr` is live (type invariant).
            to_result(unsafe { bindings::rdma_set_afonly(self.as_ptr(), 1) })?;
        }
        // SAFETY: `self.ptr` is live; the CM copies the address it reads
        // (a whole `sockaddr_in`/`sockaddr_in6`).
        to_result(unsafe { bindings::rdma_bind_addr(self.as_ptr(), addr.as_ptr().cast_mut()) })?;
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

    /// A copy of the peer's address, if it is IPv4 or IPv6.
    pub(crate) fn dst_addr(&self) -> Option<IpSockAddr> {
        // SAFETY: `dst_addr` is a `sockaddr_storage` inside a live id.
        unsafe { IpSockAddr::copy_from(self.dst_sockaddr()) }
    }

    /// A copy of the bound source address, if it is IPv4 or IPv6.
    pub(crate) fn src_addr(&self) -> Option<IpSockAddr> {
        // SAFETY: `src_addr` is a `sockaddr_storage` inside a live id.
        unsafe { IpSockAddr::copy_from(self.src_sockaddr()) }
    }

    /// Replaces the id's handler and context under its handler lock;
    /// returns the old context.
    ///
    /// # Safety
    ///
    /// `handler` and `context` must be a pair as the type invariant allows,
    /// whose count the id now owns; the caller owns the returned one.
    /// Not from this id's own handler (its lock is held there).
    unsafe fn swap_handler(
        &self,
        handler: bindings::rdma_cm_event_handler,
        context: *mut c_void,
        then: impl FnOnce() -> c_int,
    ) -> (*mut c_void, c_int) {
        let id = self.as_ptr();
        // We are not in the id's handler, so taking the lock cannot
        // deadlock; it waits for a running handler, and no event is
        // delivered while the fields change.
        // SAFETY: the id is live (invariant); the pair is valid (caller's).
        unsafe {
            bindings::rdma_lock_handler(id);
            let old = (*id).context;
            (*id).event_handler = handler;
            (*id).context = context;
            let ret = then();
            bindings::rdma_unlock_handler(id);
            (old, ret)
        }
    }
}

impl CmId {
    /// Points the id's events at `handler` and accepts the connection
    /// request it was created for, sending `private` as CM private data.
    /// Both happen under the id's handler lock (as `rdma_accept()`
    /// requires), so no event reaches the old handler after; the old
    /// handler's count is given back once the lock is released.
    ///
    /// The result says whether the id was re-pointed: a caller whose old
    /// handler holds the id learns from the type alone whether it may free
    /// that handler ([`Accept::Repointed`]) or not ([`Accept::NotRepointed`]:
    /// events still go to the old handler).
    ///
    /// Must not be called from this id's handler: its lock is held there,
    /// and this would deadlock.
    pub(crate) fn repoint_and_accept<H: CmHandler>(
        &self,
        handler: Pin<&H>,
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
        let ctx = AnchorRef::new(handler).into_raw();
        let id = self.as_ptr();
        // The CM copies the private data; `param` outlives the call.
        // SAFETY: `handle::<H>` with a counted anchor of an `H`, now the id's; not in the handler (documented).
        let (old, ret) = unsafe {
            self.swap_handler(Some(handle::<H>), ctx.as_ptr().cast(), || {
                bindings::rdma_accept(id, &mut param)
            })
        };
        // SAFETY: the old context's count was the id's, and is ours now.
        unsafe { release_context(old) };
        Accept::Repointed(to_result(ret))
    }

    /// Points the id's events at a handler that ignores them, under the
    /// id's handler lock: once this returns, no event reaches the old
    /// handler (its count is given back), while the id lives on until it
    /// is dropped. Must not be called from the id's own handler: its lock
    /// is held there, and this would deadlock.
    pub(crate) fn silence(&self) {
        let ignore: bindings::rdma_cm_event_handler = Some(ignore_events);
        // SAFETY: the pair the invariant allows for a silenced id; not in the handler.
        let (old, _) = unsafe { self.swap_handler(ignore, core::ptr::null_mut(), || 0) };
        // SAFETY: the old context's count was the id's, and is ours now.
        unsafe { release_context(old) };
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

/// Gives back the count an id held through its `context`, if any.
///
/// # Safety
///
/// `context` is null or a counted anchor the caller owns (taken off an id
/// under its handler lock, or off a destroyed id).
unsafe fn release_context(context: *mut c_void) {
    if let Some(a) = NonNull::new(context.cast::<Anchor>()) {
        // SAFETY: a count the caller owns, given back once.
        unsafe { Anchor::release_raw(a) };
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

/// The CM handler of every id pointing at an `H`.
///
/// # Safety
///
/// Called by the RDMA CM only, with a live id and event, for an id whose
/// context is a counted anchor of an `H` ([`CmId`]'s invariant), or for the
/// new id of a `CONNECT_REQUEST`, which inherits the context of its
/// listening id: the CM holds the listening id's handler lock across the
/// call (for a wildcard listener, that of its per-device id, which
/// destroying the listening id destroys first, waiting for the lock), so
/// the listening id, and the count it holds, outlive the call.
unsafe extern "C" fn handle<H: CmHandler>(
    id: *mut bindings::rdma_cm_id,
    event: *mut bindings::rdma_cm_event,
) -> c_int {
    let Some(ptr) = NonNull::new(id) else {
        return 0;
    };
    let id = CmIdRef {
        ptr,
        _p: PhantomData,
    };
    // SAFETY: the CM passes a valid event for the call's duration.
    let ev = unsafe { &*event };
    let event = CmEvent { ev };
    // SAFETY: the id is live for the call (function contract).
    let ctx = unsafe { (*ptr.as_ptr()).context };
    // SAFETY: a counted anchor of an `H`, held at least for the call
    // (function contract).
    let h = unsafe { AnchorRef::<H>::borrow_raw(ctx.cast::<Anchor>()) };
    if event.ev.event != bindings::RDMA_CM_EVENT_CONNECT_REQUEST {
        h.event(id, &event);
        return 0;
    }
    let adopted = Cell::new(false);
    h.connect_request(ConnRequest {
        id,
        event: &event,
        adopted: &adopted,
    });
    if adopted.get() {
        // The id is ours now, pointing at its new handler.
        return 0;
    }
    // SAFETY: a live id in its connection-request handler.
    let _ = unsafe {
        bindings::rdma_reject(
            ptr.as_ptr(),
            core::ptr::null(),
            0,
            bindings::IB_CM_REJ_CONSUMER_DEFINED as u8,
        )
    };
    // The CM destroys the refused id.
    1
}

impl Drop for CmId {
    fn drop(&mut self) {
        // Nothing changes the context any more: that takes `&self` (or
        // runs in our own handler, which only adopts ids not yet ours).
        // SAFETY: `self.ptr` is live (type invariant).
        let ctx = unsafe { (*self.as_ptr()).context };
        // SAFETY: `self.ptr` is live and ours (type invariant). This waits for
        // a running event handler to return, and no handler runs afterwards.
        unsafe { bindings::rdma_destroy_id(self.as_ptr()) };
        // SAFETY: the destroyed id's count is ours now.
        unsafe { release_context(ctx) };
    }
}

/// What [`CmId::repoint_and_accept`] did.
#[must_use]
pub(crate) enum Accept {
    /// Nothing changed: the id's events still go to its old handler (the
    /// error says why).
    NotRepointed(Error),
    /// The id's events go to the new handler; the accept's result.
    Repointed(Result),
}

/// The identifier an event handler was called for; not owned.
///
/// # Invariants
///
/// `ptr` is the live id of a running event handler, for `'a`.
#[derive(Clone, Copy)]
pub(crate) struct CmIdRef<'a> {
    ptr: NonNull<bindings::rdma_cm_id>,
    _p: PhantomData<&'a bindings::rdma_cm_id>,
}

impl<'a> CmIdRef<'a> {
    /// The device the id is bound to (a connection request's always is).
    pub(crate) fn device(&self) -> Option<Device<'a>> {
        let id = self.ptr.as_ptr();
        // SAFETY: a live id (invariant); a bound id's device lives while
        // the id does (`'a`).
        unsafe { Device::from_raw((*id).device, (*id).port_num) }
    }

    /// The peer's address, if it is IPv4 or IPv6.
    pub(crate) fn peer(&self) -> Option<SockAddr> {
        let id = self.ptr.as_ptr();
        // SAFETY: `dst_addr` is a `sockaddr_storage` inside a live id.
        unsafe { sockaddr_to_proto((&raw const (*id).route.addr.dst_addr).cast()) }
    }
}

/// A connection request, in its `CONNECT_REQUEST` handler call
/// ([`CmHandler::connect_request`]): adopted, or refused when dropped.
pub(crate) struct ConnRequest<'a> {
    id: CmIdRef<'a>,
    event: &'a CmEvent<'a>,
    /// Set by [`ConnRequest::adopt`]; read by [`handle`].
    adopted: &'a Cell<bool>,
}

impl ConnRequest<'_> {
    /// The new connection's id.
    pub(crate) fn id(&self) -> CmIdRef<'_> {
        self.id
    }

    /// The peer's CM private data (empty when none was sent).
    pub(crate) fn private_data(&self) -> &[u8] {
        self.event.private_data()
    }

    /// How many RDMA Reads the peer will accept from us at once.
    pub(crate) fn initiator_depth(&self) -> u8 {
        self.event.initiator_depth()
    }

    /// Takes the request's new id, its events going to `handler` from now
    /// on; the CM leaves the id to us. The id must not be dropped inside
    /// this handler call: destroying it waits for the call (a deadlock).
    pub(crate) fn adopt<P: CmHandler>(self, handler: Pin<&P>) -> CmId {
        let ctx = AnchorRef::new(handler).into_raw();
        let id = self.id.ptr.as_ptr();
        // The inherited context (the listener's) was never counted by
        // this id: nothing to give back.
        // SAFETY: we run in the id's handler, under its handler lock, so no
        // event is delivered while the fields change.
        unsafe {
            (*id).event_handler = Some(handle::<P>);
            (*id).context = ctx.as_ptr().cast();
        }
        self.adopted.set(true);
        // INVARIANT: the handler returns 0 (`adopted`), so the CM leaves
        // the live id to us; it points at `handle::<P>` with a count it owns.
        CmId { ptr: self.id.ptr }
    }
}

/// What a CM event is, for the events a handler acts on.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum CmEventKind {
    /// The connection is established.
    Established,
    /// The peer disconnected.
    Disconnected,
    /// The id's device is going; its removal waits until the id is
    /// destroyed.
    DeviceRemoval,
    /// The connection failed to be established.
    ConnectError,
    /// The peer rejected the connection.
    Rejected,
    /// The peer cannot be reached.
    Unreachable,
    /// The connection left the TIMEWAIT state.
    TimewaitExit,
    /// The id's address moved to another device.
    AddrChange,
    /// Any other event.
    Other,
}

impl CmEventKind {
    /// The event's name as the kernel's `rdma_event_msg` spells it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            CmEventKind::Established => "established",
            CmEventKind::Disconnected => "disconnected",
            CmEventKind::DeviceRemoval => "device removal",
            CmEventKind::ConnectError => "connect error",
            CmEventKind::Rejected => "rejected",
            CmEventKind::Unreachable => "unreachable",
            CmEventKind::TimewaitExit => "timewait exit",
            CmEventKind::AddrChange => "address change",
            CmEventKind::Other => "other",
        }
    }
}

/// A CM event, borrowed for the duration of the handler call.
pub(crate) struct CmEvent<'a> {
    ev: &'a bindings::rdma_cm_event,
}

impl<'a> CmEvent<'a> {
    /// What the event is.
    pub(crate) fn kind(&self) -> CmEventKind {
        match self.ev.event {
            bindings::RDMA_CM_EVENT_ESTABLISHED => CmEventKind::Established,
            bindings::RDMA_CM_EVENT_DISCONNECTED => CmEventKind::Disconnected,
            bindings::RDMA_CM_EVENT_DEVICE_REMOVAL => CmEventKind::DeviceRemoval,
            bindings::RDMA_CM_EVENT_CONNECT_ERROR => CmEventKind::ConnectError,
            bindings::RDMA_CM_EVENT_REJECTED => CmEventKind::Rejected,
            bindings::RDMA_CM_EVENT_UNREACHABLE => CmEventKind::Unreachable,
            bindings::RDMA_CM_EVENT_TIMEWAIT_EXIT => CmEventKind::TimewaitExit,
            bindings::RDMA_CM_EVENT_ADDR_CHANGE => CmEventKind::AddrChange,
            _ => CmEventKind::Other,
        }
    }

    /// The event's number (`RDMA_CM_EVENT_*`), for tracing.
    pub(crate) fn raw(&self) -> u32 {
        self.ev.event
    }

    /// The event's status (0, a negative errno, or a reject reason).
    pub(crate) fn status(&self) -> i32 {
        self.ev.status
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
