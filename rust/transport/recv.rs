// SPDX-License-Identifier: GPL-2.0

//! Receive buffers: posted ahead, completed by the device, handed to nfsd.
//!
//! Each connection has one buffer per credit (plus backchannel), each of our
//! inline receive size, DMA-mapped once at accept and reposted after use.
//! A completion queues the buffer's index on the connection and wakes an
//! nfsd thread (`XPT_DATA`); `xpo_recvfrom` takes it from there.

use core::cell::UnsafeCell;

use kernel::{error::to_result, prelude::*};

use super::connection::Connection;
use crate::{
    bindings,
    proto::inline::RECV_SIZE,
    rdma::{qp::Qp, Device, Pd},
};

/// One receive buffer and the work request that posts it.
///
/// The C-visible parts sit in `UnsafeCell`s: the device reads the work
/// request and writes the buffer while it is posted.
#[repr(C)]
pub(crate) struct RecvCtxt {
    /// First: the completion finds the context from it.
    cqe: UnsafeCell<bindings::ib_cqe>,
    wr: UnsafeCell<bindings::ib_recv_wr>,
    sge: UnsafeCell<bindings::ib_sge>,
    conn: *const Connection,
    dev: *mut bindings::ib_device,
    index: u16,
    /// Bytes received by the last completion.
    len: UnsafeCell<u32>,
    dma: u64,
    buf: KVec<u8>,
}

/// The receive buffers of a connection.
///
/// # Invariants
///
/// Every context is DMA-mapped on `dev` for `RECV_SIZE` bytes at `dma`;
/// contexts never move (boxed) and outlive any posted work request (the
/// owner drains the QP before dropping the ring).
pub(crate) struct RecvRing {
    dev: *mut bindings::ib_device,
    ctxts: KVec<KBox<RecvCtxt>>,
}

// The ring is shared between the completion workqueue and nfsd threads
// (posted: the device; completed: whoever took its index from the ready
// queue).
// SAFETY: each context is used by one of them at a time.
unsafe impl Send for RecvRing {}
// SAFETY: as above.
unsafe impl Sync for RecvRing {}

impl RecvRing {
    /// Allocates and maps `count` buffers for `conn`.
    ///
    /// # Safety
    ///
    /// `dev` must outlive the ring, and `conn` every completion of it.
    pub(crate) unsafe fn new(
        dev: &Device<'_>,
        pd: &Pd,
        count: u32,
        conn: *const Connection,
    ) -> Result<Self> {
        let mut ring = Self {
            dev: dev.as_ptr(),
            ctxts: KVec::with_capacity(count as usize, GFP_KERNEL)?,
        };
        for i in 0..count {
            let index = u16::try_from(i).map_err(|_| EINVAL)?;
            let mut buf = KVec::with_capacity(RECV_SIZE as usize, GFP_KERNEL)?;
            buf.resize(RECV_SIZE as usize, 0, GFP_KERNEL)?;
            // SAFETY: `buf` is a live kmalloc'ed buffer of RECV_SIZE bytes
            // that stays put (its heap storage never moves).
            let dma = unsafe {
                bindings::svcrdma_rs_dma_map_single(
                    ring.dev,
                    buf.as_mut_ptr().cast(),
                    RECV_SIZE as usize,
                    bindings::DMA_FROM_DEVICE,
                )
            };
            // SAFETY: `dma` came from this device's mapping call.
            if unsafe { bindings::svcrdma_rs_dma_mapping_error(ring.dev, dma) } != 0 {
                return Err(ENOMEM);
            }
            let ctxt = RecvCtxt {
                cqe: UnsafeCell::new(bindings::ib_cqe {
                    done: Some(recv_done),
                }),
                wr: UnsafeCell::new(Default::default()),
                sge: UnsafeCell::new(bindings::ib_sge {
                    addr: dma,
                    length: RECV_SIZE,
                    lkey: pd.local_dma_lkey(),
                }),
                conn,
                dev: ring.dev,
                index,
                len: UnsafeCell::new(0),
                dma,
                buf,
            };
            let mut c = match KBox::new(ctxt, GFP_KERNEL) {
                Ok(c) => c,
                Err(e) => {
                    // SAFETY: mapped just above, never posted.
                    unsafe { unmap(ring.dev, dma) };
                    return Err(e.into());
                }
            };
            let (cqe, sge) = (c.cqe.get(), c.sge.get());
            let wr = c.wr.get_mut();
            wr.__bindgen_anon_1.wr_cqe = cqe;
            wr.sg_list = sge;
            wr.num_sge = 1;
            // INVARIANT: mapped above; the push cannot fail (capacity).
            if let Err(e) = ring.ctxts.push(c, GFP_KERNEL) {
                // SAFETY: mapped just above, never posted.
                unsafe { unmap(ring.dev, dma) };
                return Err(e.into());
            }
        }
        Ok(ring)
    }

    /// Posts buffer `index` on `qp`.
    pub(crate) fn post(&self, qp: &Qp, index: u16) -> Result {
        let c = self.ctxts.get(usize::from(index)).ok_or(EINVAL)?;
        // SAFETY: the buffer is ours (not posted: its index came back from a
        // completion, or it was never posted); hand it to the device.
        unsafe {
            bindings::svcrdma_rs_dma_sync_for_device(
                self.dev,
                c.dma,
                RECV_SIZE as usize,
                bindings::DMA_FROM_DEVICE,
            );
            to_result(bindings::svcrdma_rs_post_recv(qp.as_ptr(), c.wr.get()))
        }
    }

    /// Posts every buffer (at accept).
    pub(crate) fn post_all(&self, qp: &Qp) -> Result {
        for i in 0..self.ctxts.len() {
            self.post(qp, i as u16)?;
        }
        Ok(())
    }

    /// The bytes a completed buffer received.
    ///
    /// # Safety
    ///
    /// `index` must have come from the ready queue and not been reposted.
    pub(crate) unsafe fn message(&self, index: u16) -> Option<&[u8]> {
        let c = self.ctxts.get(usize::from(index))?;
        // SAFETY: the completion wrote `len` before queueing the index, and
        // the device no longer writes the buffer (caller's promise).
        let len = unsafe { *c.len.get() } as usize;
        c.buf.get(..len.min(RECV_SIZE as usize))
    }
}

impl Drop for RecvRing {
    fn drop(&mut self) {
        for c in self.ctxts.iter() {
            // SAFETY: mapped at creation (invariant); the QP was drained and
            // destroyed, so the device is done with the buffer.
            unsafe { unmap(self.dev, c.dma) };
        }
    }
}

/// Unmaps one receive buffer.
///
/// # Safety
///
/// `dma` must be a live receive mapping on `dev`, not posted.
unsafe fn unmap(dev: *mut bindings::ib_device, dma: u64) {
    // SAFETY: per the function's safety requirements.
    unsafe {
        bindings::svcrdma_rs_dma_unmap_single(
            dev,
            dma,
            RECV_SIZE as usize,
            bindings::DMA_FROM_DEVICE,
        )
    };
}

/// A receive completed (or was flushed).
///
/// # Safety
///
/// Called by the CQ only, for a work request posted by [`RecvRing::post`].
unsafe extern "C" fn recv_done(_cq: *mut bindings::ib_cq, wc: *mut bindings::ib_wc) {
    // SAFETY: the CQ passes a valid completion for the call's duration.
    let wc = unsafe { &*wc };
    // Our receives carry the `cqe` of their `RecvCtxt`, the first field of a
    // `#[repr(C)]` struct.
    // SAFETY: that `RecvCtxt` outlives the completion (invariant of `RecvRing`).
    let c = unsafe { &*wc.__bindgen_anon_1.wr_cqe.cast::<RecvCtxt>() };
    // SAFETY: the connection outlives its ring's completions.
    let conn = unsafe { &*c.conn };
    if wc.status != bindings::IB_WC_SUCCESS {
        conn.receive_failed(wc.status);
        return;
    }
    // SAFETY: the device is done with the buffer; we own it until the index
    // is taken from the ready queue.
    unsafe {
        *c.len.get() = wc.byte_len;
        bindings::svcrdma_rs_dma_sync_for_cpu(
            c.dev,
            c.dma,
            RECV_SIZE as usize,
            bindings::DMA_FROM_DEVICE,
        );
    }
    conn.received(c.index);
}
