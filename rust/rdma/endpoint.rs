// SPDX-License-Identifier: GPL-2.0

//! A connection's RDMA objects, owned together: its CM id, PD, two CQs, QP
//! and receive ring.
//!
//! The QP refers to the id, the PD and the CQs; the ring's buffers are
//! posted on the QP, and its owner (the QP's event handler, which also
//! handles the ring's and the posted chains' completions) is counted by the
//! QP until the QP is destroyed. An [`Endpoint`] holds all of them, and
//! lends them out only by reference, so none can go while the QP lives: its
//! drop destroys the QP (once every posted request has completed), then
//! drops the ring, the CQs, the PD and, last, the id, which keeps the
//! device.

use core::{marker::PhantomData, ptr::NonNull};

use kernel::prelude::*;

use super::{
    cm::CmId,
    dma::DmaDev,
    qp::{Posting, Qp, QpCaps, QpEventHandler},
    recv::{RecvHandler, RecvRing, RecvSlot},
    Cq, Pd,
};
use crate::{
    anchor::{Anchor, AnchorRef},
    bindings,
};

/// What owns an [`Endpoint`]: it receives the QP's events and the ring's
/// completions, and is handed to the completions of chains posted on it
/// ([`super::owned::SendOrder::post`]).
pub(crate) trait EndpointOwner: QpEventHandler + RecvHandler {}

impl<T: QpEventHandler + RecvHandler> EndpointOwner for T {}

/// A connection's CM id, PD, CQs, QP and receive ring (see the module
/// documentation).
///
/// # Invariants
///
/// `qp` was made on `id` with `pd`, `_send_cq` and `_recv_cq`, and with an
/// `H` as its event handler, on whose anchor it holds a count until it is
/// destroyed. The CQs' context is that anchor, and they complete only
/// requests posted on `qp`. `recv`'s owner is that `H`, and its buffers are
/// posted on `qp` only.
pub(crate) struct Endpoint<H: EndpointOwner> {
    // Dropped in field order, the QP first (destroyed by `drop` already).
    qp: Qp,
    recv: RecvRing<H>,
    /// Held for the QP only.
    _send_cq: Cq,
    _recv_cq: Cq,
    pd: Pd,
    dma: DmaDev,
    /// What the device made of the QP's sizes.
    caps: QpCaps,
    /// Last: the QP is destroyed on it, and it keeps the device.
    id: CmId,
}

impl<H: EndpointOwner> Endpoint<H> {
    /// Builds a QP of `caps` on `id` with `pd`, the CQs (new ones, which no
    /// QP has used) and a ring of `recv_buffers` receive buffers, all owned
    /// by the endpoint; `owner` gets the QP's events and every completion,
    /// and cannot go before the QP is destroyed. On failure, everything is
    /// dropped, the id too.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        id: CmId,
        pd: Pd,
        mut send_cq: Cq,
        mut recv_cq: Cq,
        caps: &QpCaps,
        recv_buffers: u32,
        owner: Pin<&H>,
    ) -> Result<Self> {
        let dev = id.device().ok_or(ENODEV)?;
        let dma = DmaDev::new(&dev)?;
        let anchor = NonNull::from(owner.get_ref().anchor());
        send_cq.set_context(anchor.as_ptr().cast());
        recv_cq.set_context(anchor.as_ptr().cast());
        // The ring before the QP: should the QP not be made, the ring drops
        // unposted. Its buffers are posted only on the QP made below, which
        // counts `owner` until it is destroyed, after the last completion.
        // SAFETY: so `owner` outlives every completion of the ring.
        let recv = unsafe { RecvRing::new(&dma, &pd, recv_buffers, owner.get_ref()) }?;
        // The id, PD and CQs become fields of the endpoint, dropped after
        // the QP, which its drop destroys first.
        // SAFETY: so they outlive the QP.
        let (qp, caps) = unsafe { Qp::new(&id, &pd, &send_cq, &recv_cq, caps, owner) }?;
        // INVARIANT: the QP was made just above on these objects, counting
        // `owner`, whose anchor the CQs carry; the CQs were new.
        Ok(Self {
            qp,
            recv,
            _send_cq: send_cq,
            _recv_cq: recv_cq,
            pd,
            dma,
            caps,
            id,
        })
    }

    /// The CM id.
    pub(crate) fn id(&self) -> &CmId {
        &self.id
    }

    /// The protection domain.
    pub(crate) fn pd(&self) -> &Pd {
        &self.pd
    }

    /// The device, for mappings that may outlive the endpoint.
    pub(crate) fn dma_dev(&self) -> &DmaDev {
        &self.dma
    }

    /// The QP's sizes, as the device made them.
    pub(crate) fn caps(&self) -> &QpCaps {
        &self.caps
    }

    /// Posts every receive buffer, once (at accept); later calls fail.
    pub(crate) fn post_receives(&self) -> Result {
        self.recv.post_all(&self.qp)
    }

    /// Posts the buffers of `slots` again, in one call; the slots are used
    /// up.
    pub(crate) fn repost(&self, slots: impl Iterator<Item = RecvSlot>) -> Result {
        self.recv.repost(&self.qp, slots)
    }

    /// The bytes the receive of `slot` brought (`None`: not this ring's).
    pub(crate) fn message<'a>(&'a self, slot: &'a RecvSlot) -> Option<&'a [u8]> {
        self.recv.message(slot)
    }

    /// Handles up to `budget` of the receive CQ's completions in the
    /// calling thread (each buffer's [`RecvHandler`] callback); returns how
    /// many.
    pub(crate) fn poll_receives(&self, budget: i32) -> i32 {
        self._recv_cq.poll(budget)
    }

    /// Asks for the receive CQ's next notification
    /// ([`RecvHandler::receives_ready`]); `true` if completions may have
    /// come in since the last poll.
    pub(crate) fn arm_receives(&self) -> bool {
        self._recv_cq.arm()
    }

    /// Hands the receive CQ to its work item, which polls it and re-arms it
    /// (after the owner stopped polling: its teardown).
    pub(crate) fn defer_receives(&self) {
        self._recv_cq.defer();
    }

    /// Moves the QP to the error state ([`Qp::to_error`]).
    pub(crate) fn to_error(&self) {
        self.qp.to_error();
    }

    /// Drains and destroys the QP ([`Qp::destroy`]): once this returns, no
    /// completion or QP event runs, and the owner is no longer counted.
    /// Sleeps; not on the endpoint's own completion path. Safe to repeat.
    pub(crate) fn destroy(&self) {
        self.qp.destroy();
    }

    /// Whether the QP is destroyed ([`Qp::is_destroyed`]).
    pub(super) fn is_destroyed(&self) -> bool {
        self.qp.is_destroyed()
    }

    /// The address of the owner's anchor, which the CQs carry as their
    /// context (to tell this endpoint's completions apart).
    pub(super) fn anchor_addr(&self) -> usize {
        self.qp.handler().as_ptr() as usize
    }

    /// Starts a post on the QP ([`Qp::posting`]); `None` once the QP is
    /// being destroyed.
    #[inline]
    pub(super) fn posting(&self) -> Option<EndpointPosting<'_, H>> {
        Some(EndpointPosting {
            posting: self.qp.posting()?,
            anchor: self.qp.handler(),
            _owner: PhantomData,
        })
    }
}

/// A receive CQ for an endpoint of `H`s: each completion asks the owner
/// ([`RecvHandler::receives_ready`]) whether it polls the CQ itself, and
/// hands the CQ to its work item if not.
pub(crate) fn recv_cq<H: EndpointOwner>(dev: &super::Device<'_>, entries: u32) -> Result<Cq> {
    // SAFETY: `recv_notify` runs in any context (it only borrows the owner
    // and calls its `receives_ready`, which allows that).
    unsafe { Cq::new_notified(dev, entries, recv_notify::<H>) }
}

/// The notification of a receive CQ made by [`recv_cq`].
///
/// # Safety
///
/// Called by the CQ only, once it is an endpoint's receive CQ: its context
/// is then the anchor of the endpoint's `H`, counted by the QP until it is
/// destroyed. A notification is not a completion, and on some devices
/// (mlx5: from the event queue's interrupt) it may still be running for
/// the drain's completion when the QP is destroyed; the anchor's object is
/// still there then, as the CQ is an endpoint's field, freed with it by
/// `ib_free_cq`, which waits for a running notification (the driver's CQ
/// teardown synchronizes with its interrupt).
unsafe extern "C" fn recv_notify<H: EndpointOwner>(cq: *mut bindings::ib_cq, context: *mut c_void) {
    if context.is_null() {
        // Before the endpoint set its context: no QP yet, no completion.
        // SAFETY: the CQ is live for the call.
        unsafe { bindings::svcrdma_rs_cq_defer(cq) };
        return;
    }
    // SAFETY: a counted anchor of an `H` while a completion can come
    // (contract).
    let owner = unsafe { AnchorRef::<H>::borrow_raw(context.cast::<Anchor>()) };
    if !owner.get_ref().receives_ready() {
        // SAFETY: the CQ is live for the call, and has its work item.
        unsafe { bindings::svcrdma_rs_cq_defer(cq) };
    }
}

impl<H: EndpointOwner> Drop for Endpoint<H> {
    fn drop(&mut self) {
        // Before any field goes: nothing completes or refers to the ring,
        // the CQs, the PD or the id any more.
        self.qp.destroy();
    }
}

/// A post under way on an endpoint's QP ([`Endpoint::posting`]), which
/// keeps the QP, and so its count on the owner, alive.
pub(super) struct EndpointPosting<'a, H: EndpointOwner> {
    posting: Posting<'a>,
    /// The QP's counted anchor, of an `H`.
    anchor: NonNull<Anchor>,
    _owner: PhantomData<&'a H>,
}

impl<H: EndpointOwner> EndpointPosting<'_, H> {
    /// The C object, to post on.
    pub(super) fn as_ptr(&self) -> *mut bindings::ib_qp {
        self.posting.as_ptr()
    }

    /// The endpoint's owner, for as long as the post is under way.
    pub(super) fn owner(&self) -> &H {
        // The post keeps the QP from being destroyed, so its count on the
        // owner's anchor (an `H`'s: the endpoint's invariant) is held while
        // `self` is borrowed.
        // SAFETY: so the anchor is a counted one of an `H`, for the borrow.
        unsafe { AnchorRef::<H>::borrow_raw(self.anchor.as_ptr()) }.get_ref()
    }
}
