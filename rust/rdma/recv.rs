// SPDX-License-Identifier: GPL-2.0

//! A ring of receive buffers, each posted ahead, completed by the device
//! and handed to its owner as a [`RecvSlot`].
//!
//! Every buffer is mapped once, when the ring is made, and reused: posted,
//! completed, read by whoever took its slot, posted again. A buffer is the
//! device's while posted and the slot holder's after its completion; the
//! slot is the only way to read it ([`RecvRing::message`]) and is consumed
//! by the repost ([`RecvRing::repost`]), so a message can never be read
//! while the device may write the buffer. The completion finds its buffer
//! from the `ib_cqe` at the buffer's start and tells the ring's owner,
//! which implements [`RecvHandler`]. A ring is part of an
//! [`super::endpoint::Endpoint`], and posted on its QP only.

use core::cell::UnsafeCell;

use kernel::{
    error::to_result,
    prelude::*,
    sync::atomic::{ordering::Relaxed, Atomic},
};

use super::{
    dma::{Dir, DmaDev, MappedBuf},
    qp::Qp,
    Pd,
};
use crate::bindings;

/// What the owner of a [`RecvRing`] does with its completions. They run
/// where the receive CQ is polled: in the thread the owner polls it from
/// ([`super::endpoint::Endpoint::poll_receives`]), or in the CQ's work item.
pub(crate) trait RecvHandler: Sync + Sized {
    /// Bytes of each receive buffer.
    const BUF_SIZE: u32;

    /// A receive completed and the receive CQ asks for a poll: returns
    /// whether the owner sees to one soon
    /// ([`super::endpoint::Endpoint::poll_receives`]); if not, the CQ's
    /// work item polls. Any context, interrupts off included: no sleeping,
    /// no lock an interrupt may not take.
    fn receives_ready(&self) -> bool;

    /// A receive completed: `slot` holds its message until it is reposted.
    fn received(&self, slot: RecvSlot);

    /// A receive failed or was flushed (`status`); its buffer stays with
    /// the ring, unposted.
    fn receive_failed(&self, status: u32);
}

/// A completed receive: the right to read its buffer and, by consuming
/// this, to post it again.
///
/// # Invariants
///
/// Made only by a receive's completion, for buffer `index` of the ring
/// with id `ring`, which the device no longer uses; there is at most one
/// per buffer, and none while the buffer is posted.
pub(crate) struct RecvSlot {
    ring: u64,
    index: u16,
}

/// Ids of rings, never reused.
static NEXT_RING: Atomic<u64> = Atomic::new(1);

/// One receive buffer and the work request that posts it.
///
/// The C-visible parts sit in `UnsafeCell`s: the device reads the work
/// request and writes the buffer while it is posted.
#[repr(C)]
struct RecvBuf<T> {
    /// First: the completion finds the buffer from it.
    cqe: UnsafeCell<bindings::ib_cqe>,
    wr: UnsafeCell<bindings::ib_recv_wr>,
    sge: UnsafeCell<bindings::ib_sge>,
    owner: *const T,
    ring: u64,
    index: u16,
    /// Bytes received by the last completion.
    len: UnsafeCell<u32>,
    buf: MappedBuf,
}

/// The receive buffers of a connection.
///
/// # Invariants
///
/// Every buffer is boxed (it never moves) and outlives any posted work
/// request that refers to it (the endpoint destroys the QP before dropping
/// the ring); its `owner` outlives every completion (the promise made to
/// [`RecvRing::new`]).
pub(crate) struct RecvRing<T: RecvHandler> {
    id: u64,
    bufs: KVec<KBox<RecvBuf<T>>>,
    /// `post_all` ran.
    posted: Atomic<bool>,
}

// The ring is shared between the completion work item and the slot
// holders (posted buffers: the device's; completed ones: whoever holds
// their slot, the only one to touch them). The owner pointer is only used
// for shared references to a `Sync` owner.
// SAFETY: so each buffer is used by one party at a time.
unsafe impl<T: RecvHandler> Send for RecvRing<T> {}
// SAFETY: as above.
unsafe impl<T: RecvHandler> Sync for RecvRing<T> {}

impl<T: RecvHandler> RecvRing<T> {
    /// Allocates and maps `count` buffers of `T::BUF_SIZE` bytes on `dma`
    /// for `owner`, with the PD's local key.
    ///
    /// # Safety
    ///
    /// `owner` must outlive every completion of the ring's receives.
    pub(super) unsafe fn new(dma: &DmaDev, pd: &Pd, count: u32, owner: *const T) -> Result<Self> {
        let mut ring = Self {
            id: NEXT_RING.fetch_add(1, Relaxed),
            bufs: KVec::with_capacity(count as usize, GFP_KERNEL)?,
            posted: Atomic::new(false),
        };
        for i in 0..count {
            let index = u16::try_from(i).map_err(|_| EINVAL)?;
            let buf = MappedBuf::new(dma, T::BUF_SIZE as usize, Dir::FromDevice)?;
            let b = RecvBuf {
                cqe: UnsafeCell::new(bindings::ib_cqe {
                    done: Some(recv_done::<T>),
                }),
                wr: UnsafeCell::new(Default::default()),
                sge: UnsafeCell::new(bindings::ib_sge {
                    addr: buf.addr(),
                    length: T::BUF_SIZE,
                    lkey: pd.local_dma_lkey(),
                }),
                owner,
                ring: ring.id,
                index,
                len: UnsafeCell::new(0),
                buf,
            };
            // If the box cannot be had, `b` drops and unmaps.
            let mut b = KBox::new(b, GFP_KERNEL)?;
            let (cqe, sge) = (b.cqe.get(), b.sge.get());
            let wr = b.wr.get_mut();
            wr.__bindgen_anon_1.wr_cqe = cqe;
            wr.sg_list = sge;
            wr.num_sge = 1;
            // INVARIANT: boxed, never posted yet.
            ring.bufs.push(b, GFP_KERNEL)?;
        }
        Ok(ring)
    }

    /// Posts the buffers `indices` names on `qp`, linked, in one call:
    /// only buffers nobody holds (all of them before the first post, or
    /// slots' buffers).
    fn post(&self, qp: &Qp, indices: impl Iterator<Item = u16>) -> Result {
        let mut head: *mut bindings::ib_recv_wr = core::ptr::null_mut();
        // Each request points to the one linked before it: the list goes in
        // reverse, which does not matter (any buffer takes any message).
        for index in indices {
            let b = self.bufs.get(usize::from(index)).ok_or(EINVAL)?;
            b.buf.sync_for_device(T::BUF_SIZE as usize);
            // Nobody holds the buffer and it is not posted (the caller's
            // rule): its work request is ours to link.
            // SAFETY: so nothing else reads or writes the request now.
            unsafe { (*b.wr.get()).next = head };
            head = b.wr.get();
        }
        if head.is_null() {
            return Ok(());
        }
        let posting = qp.posting().ok_or(ENOTCONN)?;
        // Every request of the list is a buffer's, not posted (above);
        // they, their SGEs and mappings outlive the post (invariant). The
        // device copies the list during the call.
        // SAFETY: so the list is valid and ours to post.
        to_result(unsafe { bindings::svcrdma_rs_ib_post_recv(posting.as_ptr(), head) })
    }

    /// Posts every buffer, once (at accept); later calls fail.
    pub(super) fn post_all(&self, qp: &Qp) -> Result {
        if self.posted.xchg(true, Relaxed) {
            return Err(EINVAL);
        }
        // Indexes fit a u16 (`new` made them so).
        self.post(qp, (0..self.bufs.len()).map(|i| i as u16))
    }

    /// Posts the buffers of `slots` again, in one call; the slots are used
    /// up (consuming a slot hands its buffer, not posted while the slot
    /// lives, back to the device). A slot of another ring is dropped, its
    /// buffer left alone, and the call fails.
    pub(super) fn repost(&self, qp: &Qp, slots: impl Iterator<Item = RecvSlot>) -> Result {
        let mut foreign = false;
        let ours = slots.filter_map(|s| {
            foreign |= s.ring != self.id;
            (s.ring == self.id).then_some(s.index)
        });
        self.post(qp, ours)?;
        if foreign {
            return Err(EINVAL);
        }
        Ok(())
    }

    /// The bytes the receive of `slot` brought (`None`: not this ring's).
    pub(super) fn message<'a>(&'a self, slot: &'a RecvSlot) -> Option<&'a [u8]> {
        if slot.ring != self.id {
            return None;
        }
        let b = self.bufs.get(usize::from(slot.index))?;
        // The completion that made the slot wrote `len` first; the slot
        // passed to us through a lock (the owner's queue).
        // SAFETY: nothing writes `len` until the repost, which takes the slot.
        let len = unsafe { *b.len.get() } as usize;
        b.buf.get(..len.min(T::BUF_SIZE as usize))
    }
}

/// A receive completed (or was flushed).
///
/// # Safety
///
/// Called by the CQ only, for a work request posted by [`RecvRing::post`]
/// of a `RecvRing<T>`.
unsafe extern "C" fn recv_done<T: RecvHandler>(
    _cq: *mut bindings::ib_cq,
    wc: *mut bindings::ib_wc,
) {
    // SAFETY: the CQ passes a valid completion for the call's duration.
    let wc = unsafe { &*wc };
    // Our receives carry the `cqe` of their `RecvBuf<T>`, the first field
    // of a `#[repr(C)]` struct, which outlives the completion (invariant of
    // `RecvRing`).
    // SAFETY: so the pointer is that of a live `RecvBuf<T>`.
    let b = unsafe { &*wc.__bindgen_anon_1.wr_cqe.cast::<RecvBuf<T>>() };
    // SAFETY: the owner outlives the ring's completions (`RecvRing::new`).
    let owner = unsafe { &*b.owner };
    if wc.status != bindings::IB_WC_SUCCESS {
        owner.receive_failed(wc.status);
        return;
    }
    // The device is done with the buffer, and nobody holds a slot for it
    // (it was posted): this completion is its only user until the slot it
    // makes is taken.
    // SAFETY: so nothing else reads or writes `len` now.
    unsafe { *b.len.get() = wc.byte_len };
    b.buf.sync_for_cpu(T::BUF_SIZE as usize);
    // INVARIANT: the buffer's receive completed and it is not posted; this
    // is its one slot.
    owner.received(RecvSlot {
        ring: b.ring,
        index: b.index,
    });
}
