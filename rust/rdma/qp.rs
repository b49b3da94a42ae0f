// SPDX-License-Identifier: GPL-2.0

//! Reliable-connected queue pairs, created on a CM id (`rdma_create_qp()`).

use kernel::{
    error::to_result,
    prelude::*,
    sync::{
        atomic::{
            ordering::{Acquire, Full, Release},
            Atomic,
        },
        Completion,
    },
};

use core::ptr::NonNull;

use super::{cm::CmId, Cq, Pd};
use crate::{
    anchor::{Anchor, AnchorRef, Anchored},
    bindings,
};

/// Receives the asynchronous events of the QPs pointing at it. Each such
/// QP keeps a count on the handler's anchor until it is destroyed. May be
/// called in interrupt context.
pub(crate) trait QpEventHandler: Anchored {
    /// An asynchronous event on a QP made with `self` as its handler.
    fn qp_event(self: Pin<&Self>, event: QpEvent);
}

/// An asynchronous QP event (`struct ib_event`'s type).
#[derive(Clone, Copy)]
pub(crate) struct QpEvent {
    kind: bindings::ib_event_type,
}

impl QpEvent {
    /// The event's number (`IB_EVENT_*`), for the log and tracing.
    pub(crate) fn raw(&self) -> u32 {
        self.kind
    }

    /// Whether the event only informs (path migrated, communication
    /// established, send queue drained, last WQE reached), rather than
    /// reporting an error on the QP.
    pub(crate) fn is_informational(&self) -> bool {
        matches!(
            self.kind,
            bindings::IB_EVENT_PATH_MIG
                | bindings::IB_EVENT_COMM_EST
                | bindings::IB_EVENT_SQ_DRAINED
                | bindings::IB_EVENT_QP_LAST_WQE_REACHED
        )
    }
}

/// The QP event handler of every QP pointing at an `H`.
///
/// # Safety
///
/// Called by the device only, with a valid event and the context given at
/// QP creation: a counted anchor of an `H`, held until the QP is destroyed
/// (after which no event is delivered).
unsafe extern "C" fn handle_qp_event<H: QpEventHandler>(
    event: *mut bindings::ib_event,
    context: *mut c_void,
) {
    // SAFETY: the device passes a valid event for the call's duration.
    let kind = unsafe { (*event).event };
    // SAFETY: a counted anchor of an `H`, held for the call (contract).
    let h = unsafe { AnchorRef::<H>::borrow_raw(context.cast::<Anchor>()) };
    h.qp_event(QpEvent { kind });
}

/// Sizes of a queue pair.
pub(crate) struct QpCaps {
    /// Send work requests.
    pub(crate) send_wr: u32,
    /// Receive work requests.
    pub(crate) recv_wr: u32,
    /// Scatter/gather entries per send.
    pub(crate) send_sge: u32,
    /// Scatter/gather entries per receive.
    pub(crate) recv_sge: u32,
}

/// [`Qp`]'s life: live, being drained, waiting for [`Qp::to_error`] calls
/// to leave, destroyed.
const LIVE: u32 = 0;
const DRAINING: u32 = 1;
const CLOSING: u32 = 2;
const DESTROYED: u32 = 3;

/// What [`Qp::destroy`] sleeps on. Each is completed once and stays so.
#[pin_data]
struct Waits {
    /// `users` reached zero with the state `DRAINING` or later: no post
    /// that saw the QP `LIVE` is under way any more.
    #[pin]
    drained_users: Completion,
    /// `users` reached zero with the state `CLOSING` or later: no
    /// [`Qp::to_error`] that saw the QP below `CLOSING` is under way.
    #[pin]
    closing_users: Completion,
    /// The state is `DESTROYED` (for a second [`Qp::destroy`]).
    #[pin]
    destroyed: Completion,
}

/// The QP of a CM id; drained and destroyed by [`Qp::destroy`] or when
/// dropped.
///
/// # Invariants
///
/// `id` is a live CM id whose QP was created by [`Qp::new`], and outlives
/// this value (owners drop the QP first). The QP lives while `state` is
/// below `DESTROYED`, and while `users` counts a [`Qp::to_error`] that
/// saw it below `CLOSING` or a [`Posting`]; requests are posted only under
/// a `Posting`, so none is posted once draining begins. `handler` is a
/// count on the anchor of the QP's event handler, owned by the QP until it
/// is destroyed. `waits` are completed as their documentation says.
pub(crate) struct Qp {
    id: *mut bindings::rdma_cm_id,
    qp: *mut bindings::ib_qp,
    handler: NonNull<Anchor>,
    state: Atomic<u32>,
    /// [`Qp::to_error`] calls and posts ([`Posting`]) under way.
    users: Atomic<u32>,
    waits: Pin<KBox<Waits>>,
}

// SAFETY: posting work requests is thread-safe in the verbs API.
unsafe impl Send for Qp {}
// SAFETY: as above.
unsafe impl Sync for Qp {}

impl Qp {
    /// Creates an RC QP on `id` with completions on `send_cq`/`recv_cq`.
    /// Asynchronous QP events go to `handler`, which cannot go before the
    /// QP is destroyed.
    ///
    /// # Safety
    ///
    /// `id` must outlive the returned `Qp`, as must the CQs and PD (only
    /// [`super::endpoint::Endpoint`], which owns them all, makes QPs).
    pub(super) unsafe fn new<H: QpEventHandler>(
        id: &CmId,
        pd: &Pd,
        send_cq: &Cq,
        recv_cq: &Cq,
        caps: &QpCaps,
        handler: Pin<&H>,
    ) -> Result<(Self, QpCaps)> {
        let waits = KBox::pin_init(
            pin_init!(Waits {
                drained_users <- Completion::new(),
                closing_users <- Completion::new(),
                destroyed <- Completion::new(),
            }),
            GFP_KERNEL,
        )?;
        let ctx = AnchorRef::new(handler).into_raw();
        let mut attr = bindings::ib_qp_init_attr {
            event_handler: Some(handle_qp_event::<H>),
            qp_context: ctx.as_ptr().cast(),
            send_cq: send_cq.as_ptr(),
            recv_cq: recv_cq.as_ptr(),
            cap: bindings::ib_qp_cap {
                max_send_wr: caps.send_wr,
                max_recv_wr: caps.recv_wr,
                max_send_sge: caps.send_sge,
                max_recv_sge: caps.recv_sge,
                ..Default::default()
            },
            sq_sig_type: bindings::IB_SIGNAL_REQ_WR,
            qp_type: bindings::IB_QPT_RC,
            ..Default::default()
        };
        // `attr` has a handler taking the counted anchor of an `H` it is given.
        let (id_ptr, pd_ptr) = (id.as_ptr(), pd.as_ptr());
        // SAFETY: the id, PD and CQs are live; `attr` is initialized.
        let made = to_result(unsafe { bindings::rdma_create_qp(id_ptr, pd_ptr, &mut attr) });
        if let Err(e) = made {
            // SAFETY: no QP was made: the count is still ours, given back once.
            unsafe { Anchor::release_raw(ctx) };
            return Err(e);
        }
        // The device may round the capacities up.
        let got = QpCaps {
            send_wr: attr.cap.max_send_wr,
            recv_wr: attr.cap.max_recv_wr,
            send_sge: attr.cap.max_send_sge,
            recv_sge: attr.cap.max_recv_sge,
        };
        // SAFETY: `rdma_create_qp()` set the id's `qp`.
        let qp = unsafe { (*id.as_ptr()).qp };
        // INVARIANT: created on `id`, which the caller keeps alive; the QP
        // owns the count `ctx`.
        Ok((
            Self {
                id: id.as_ptr(),
                qp,
                handler: ctx,
                state: Atomic::new(LIVE),
                users: Atomic::new(0),
                waits,
            },
            got,
        ))
    }

    /// The count on the handler's anchor the QP holds until it is
    /// destroyed (whatever its state: only the pointer).
    pub(super) fn handler(&self) -> NonNull<Anchor> {
        self.handler
    }

    /// Starts a post: `None` once [`Qp::destroy`] has begun (a request
    /// posted then could complete after the QP and its owner are gone).
    /// While the returned value lives, `destroy` waits.
    #[inline]
    pub(super) fn posting(&self) -> Option<Posting<'_>> {
        // Counted before the state is read, as in `to_error`: either this
        // sees the state off `LIVE`, or `destroy` waits for it.
        self.users.fetch_add(1, Full);
        if self.state.fetch_add(0, Full) != LIVE {
            self.user_done();
            return None;
        }
        // INVARIANT: counted while the state was `LIVE`.
        Some(Posting { qp: self })
    }

    /// Moves the QP to the error state at once: the peer can no longer
    /// reach our memory through it, and every posted request completes
    /// (flushed). Safe to repeat.
    pub(crate) fn to_error(&self) {
        // Counted before the state is read, and `destroy` sets the state
        // before it reads the count (fully ordered read-modify-writes, the
        // reads as adds of 0): either this call sees `CLOSING`, or
        // `destroy` waits for it.
        self.users.fetch_add(1, Full);
        if self.state.fetch_add(0, Full) < CLOSING {
            // SAFETY: the QP lives while we are counted (invariant).
            let _ = unsafe { bindings::svcrdma_rs_qp_to_error(self.qp) };
        }
        self.user_done();
    }

    /// A post or [`Qp::to_error`] is over: the last one under way tells a
    /// [`Qp::destroy`] that may wait for it. The count is given back before
    /// the state is read, and `destroy` sets the state before it reads the
    /// count (fully ordered read-modify-writes): if `destroy` saw a user
    /// left, the last user sees the state it set.
    fn user_done(&self) {
        if self.users.fetch_sub(1, Full) != 1 {
            return;
        }
        let state = self.state.fetch_add(0, Full);
        if state >= DRAINING {
            self.waits.drained_users.complete_all();
        }
        if state >= CLOSING {
            self.waits.closing_users.complete_all();
        }
    }

    /// Whether [`Qp::destroy`] has finished: no request of the QP is in the
    /// device's hands any more, and none completes.
    pub(crate) fn is_destroyed(&self) -> bool {
        self.state.load(Acquire) == DESTROYED
    }

    /// Moves the QP to the error state, waits until every posted work
    /// request has completed (flushed), and destroys it: once this returns,
    /// in whichever thread, no completion of its work requests and no QP
    /// event runs or starts, and nothing refers to its owner through it.
    /// Sleeps; must not run on the QP's own completion path. The first call
    /// does the work; the others wait for it. Posts from then on are
    /// refused ([`Qp::posting`]).
    pub(crate) fn destroy(&self) {
        if self.state.cmpxchg(LIVE, DRAINING, Full).is_err() {
            self.waits.destroyed.wait_for_completion();
            return;
        }
        // Posts under way finish first (new ones see `DRAINING`): whatever
        // they post is then ahead of the drain's marker, so flushed and
        // completed before the drain returns. Users counted now include no
        // new post (they see `DRAINING` and leave); the last to leave sees
        // `DRAINING` (`user_done`).
        if self.users.fetch_add(0, Full) != 0 {
            self.waits.drained_users.wait_for_completion();
        }
        // SAFETY: the QP is live (state `DRAINING`, set by us only).
        unsafe { bindings::ib_drain_qp(self.qp) };
        self.state.xchg(CLOSING, Full);
        // Likewise for the `to_error` calls that saw the QP below `CLOSING`.
        if self.users.fetch_add(0, Full) != 0 {
            self.waits.closing_users.wait_for_completion();
        }
        // SAFETY: the id is live (invariant) and its QP is ours; no
        // `to_error` uses it (none counted, and new ones see `CLOSING`).
        unsafe { bindings::rdma_destroy_qp(self.id) };
        // No QP event runs or starts now.
        // SAFETY: the QP's count (invariant), given back once: only the
        // call that moved the state off `LIVE` gets here.
        unsafe { Anchor::release_raw(self.handler) };
        self.state.store(DESTROYED, Release);
        self.waits.destroyed.complete_all();
    }
}

impl Drop for Qp {
    fn drop(&mut self) {
        self.destroy();
    }
}

/// A post to a live QP, under way ([`Qp::posting`]).
///
/// # Invariants
///
/// Counted in `qp.users` while `qp.state` was `LIVE`: the QP is not
/// drained or destroyed before this drops.
pub(super) struct Posting<'a> {
    qp: &'a Qp,
}

impl Posting<'_> {
    /// The C object, to post on.
    pub(super) fn as_ptr(&self) -> *mut bindings::ib_qp {
        self.qp.qp
    }
}

impl Drop for Posting<'_> {
    fn drop(&mut self) {
        self.qp.user_done();
    }
}
