// SPDX-License-Identifier: GPL-2.0

//! The per-connection pool of fast-registration MRs (the FRMR model).
//!
//! Sized at accept from the device's limits: each MR maps up to one
//! maximal RPC payload (or the device's page-list limit, if smaller), and
//! there may be enough for every credit to have two sinks registered at
//! once. Only the table is allocated at accept (a few dozen bytes per
//! entry): an entry's MR and scatterlist (up to 40 KiB for a 4 MiB
//! payload) are allocated the first time a Call uses the entry, by the
//! nfsd thread holding it, and kept until the connection is freed. The
//! free list hands out the most recently returned entry first, so a
//! connection holds as many MRs as it ever had Reads in flight at once,
//! not its bound; a client that never authenticates or never sends a Read
//! chunk costs none.
//!
//! An RDMA Read sink is registered for exactly one Read: a fresh key
//! (`ib_update_fast_reg_key`), REG_MR, the Read, then invalidation (Read
//! With Invalidate on iWARP when the device has it, LOCAL_INV otherwise).
//! The entry goes back to the pool only after the invalidation completed,
//! so no key stays valid after its RPC. After a failed chain the entry is
//! retired instead ([`FrmrPool::retire`]): its MR deregistered, never used
//! again.
//!
//! Which entries are free is kept by the connection ([`MrFree`], handed
//! out in turn); an entry's scatterlist belongs to whoever took the entry.

use core::cell::UnsafeCell;

use kernel::{
    prelude::*,
    sync::atomic::{ordering::Relaxed, Atomic},
};

use super::fair::FairPool;
use crate::{
    bindings,
    rdma::{mr::Mr, Pd},
    sunrpc::PAGE_SIZE,
};

/// Pages of the largest RPC payload nfsd moves, plus one for a payload that
/// does not start on a page boundary.
const MAX_PAYLOAD_PAGES: u32 = bindings::RPCSVC_MAXPAYLOAD / PAGE_SIZE as u32 + 1;
/// MRs per credit.
const MRS_PER_CREDIT: u32 = 2;

/// The indices of a connection's FRMR entries not in use, handed out in
/// turn (see [`FairPool`]).
pub(crate) type MrFree = FairPool<KVec<u16>>;

impl MrFree {
    /// No entries until [`MrFree::fill`].
    pub(crate) fn empty() -> impl PinInit<Self> {
        Self::new(KVec::new())
    }

    /// Makes entries `0..count` free (at accept, before any use).
    pub(crate) fn fill(&self, count: usize) -> Result {
        let mut ids = KVec::with_capacity(count, GFP_KERNEL)?;
        for i in 0..count {
            ids.push(u16::try_from(i).map_err(|_| EINVAL)?, GFP_KERNEL)?;
        }
        self.with(|free| *free = ids);
        Ok(())
    }

    /// Moves `n` free entries into `out` (which has room for them), waiting
    /// in turn while others hold them; fails with `ENOTCONN` once the pool
    /// is closed or `closing()`. The caller checks that the pool has `n`.
    pub(crate) fn take(&self, n: usize, out: &mut KVec<u16>, closing: impl Fn() -> bool) -> Result {
        self.acquire(
            closing,
            || {},
            |free| {
                if free.len() < n {
                    return None;
                }
                for _ in 0..n {
                    // `out` has room (reserved by the caller); `free` has `n`.
                    let _ = free.pop().map(|i| out.push_within_capacity(i));
                }
                Some(())
            },
        )
    }

    /// Returns the entries in `held`.
    pub(crate) fn give(&self, held: &mut KVec<u16>) {
        self.release(|free| {
            while let Some(i) = held.pop() {
                // Capacity for every entry was reserved by `fill`.
                let _ = free.push_within_capacity(i);
            }
        });
    }
}

/// One MR and the scatterlist it is mapped from (both empty until the
/// entry's first use).
pub(crate) struct FrmrEntry {
    /// `None` before the first use and once retired.
    mr: UnsafeCell<Option<Mr>>,
    /// Set by [`FrmrPool::retire`]: the entry is never used again.
    retired: UnsafeCell<bool>,
    sgl: UnsafeCell<KVec<bindings::scatterlist>>,
    /// Entries of `sgl` DMA-mapped (0: none).
    mapped: UnsafeCell<i32>,
}

/// A connection's MRs.
pub(crate) struct FrmrPool {
    entries: KVec<FrmrEntry>,
    pages_per_mr: u32,
    /// Entries whose MR was allocated (retired ones included).
    allocated: Atomic<u32>,
    /// Entries retired.
    retired: Atomic<u32>,
}

// SAFETY: an entry is used by one thread at a time: the one that took it
// from the connection's free list.
unsafe impl Send for FrmrPool {}
// SAFETY: as above.
unsafe impl Sync for FrmrPool {}

impl FrmrPool {
    /// A pool of entries for `credits` concurrent RPCs, each MR mapping up
    /// to `min(max_payload, device limit)` pages, within the device's MR
    /// count. Allocates only the table: MRs come with first use
    /// ([`FrmrPool::map`]).
    pub(crate) fn new(credits: u32, max_fast_reg_page_list_len: u32, max_mr: u32) -> Result<Self> {
        let pages_per_mr = MAX_PAYLOAD_PAGES.min(max_fast_reg_page_list_len);
        if pages_per_mr == 0 {
            return Err(EINVAL);
        }
        let count = credits.saturating_mul(MRS_PER_CREDIT).min(max_mr).max(1);
        let mut entries = KVec::with_capacity(count as usize, GFP_KERNEL)?;
        for _ in 0..count {
            entries.push(
                FrmrEntry {
                    mr: UnsafeCell::new(None),
                    retired: UnsafeCell::new(false),
                    sgl: UnsafeCell::new(KVec::new()),
                    mapped: UnsafeCell::new(0),
                },
                GFP_KERNEL,
            )?;
        }
        Ok(Self {
            entries,
            pages_per_mr,
            allocated: Atomic::new(0),
            retired: Atomic::new(0),
        })
    }

    /// How many MRs the pool holds.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Entries whose MR was ever allocated.
    pub(crate) fn allocated(&self) -> u32 {
        self.allocated.load(Relaxed)
    }

    /// Entries retired after a failed Read.
    pub(crate) fn retired(&self) -> u32 {
        self.retired.load(Relaxed)
    }

    /// Pages one MR maps at most.
    pub(crate) fn pages_per_mr(&self) -> u32 {
        self.pages_per_mr
    }

    /// Maps `pages` (each `(page, offset, len)`, contiguous in the sink:
    /// only the first may start inside its page, only the last may end
    /// inside it) into entry `index` for the device to write; they must
    /// add up to `len` bytes. Returns the MR, whose `iova` then addresses
    /// the first byte. The entry's MR (on `pd`) and scatterlist are
    /// allocated on its first use.
    ///
    /// # Safety
    ///
    /// The caller must hold entry `index` (taken from the free list), and
    /// the pages must stay allocated until [`FrmrPool::unmap`]. `pd` must
    /// be the connection's, which outlives the pool.
    pub(crate) unsafe fn map(
        &self,
        pd: &Pd,
        dev: *mut bindings::ib_device,
        index: u16,
        pages: impl Iterator<Item = (*mut bindings::page, usize, usize)> + Clone,
        len: usize,
    ) -> Result<*mut bindings::ib_mr> {
        let e = self.entries.get(usize::from(index)).ok_or(EINVAL)?;
        // SAFETY: the caller holds the entry: nobody else touches it.
        let (sgl, mapped, slot, retired) = unsafe {
            (
                &mut *e.sgl.get(),
                &mut *e.mapped.get(),
                &mut *e.mr.get(),
                *e.retired.get(),
            )
        };
        // A retired entry is never used again.
        if retired {
            return Err(EINVAL);
        }
        let mr = match slot {
            Some(mr) => mr.as_ptr(),
            None => {
                // First use. The scatterlist first: if the MR cannot be
                // had, the next use tries again with it in place.
                let n = self.pages_per_mr as usize;
                if sgl.len() < n {
                    sgl.resize(n, Default::default(), GFP_KERNEL)?;
                }
                let mr = slot.insert(Mr::new(pd, self.pages_per_mr)?).as_ptr();
                self.allocated.fetch_add(1, Relaxed);
                mr
            }
        };
        let (count, bytes) = pages
            .clone()
            .fold((0usize, 0usize), |(c, b), p| (c + 1, b + p.2));
        if count == 0 || count > sgl.len() || bytes != len || *mapped != 0 {
            return Err(EINVAL);
        }
        let n = count as u32;
        // SAFETY: `sgl` has at least `n` entries.
        unsafe { bindings::sg_init_table(sgl.as_mut_ptr(), n) };
        for (sg, (page, off, l)) in sgl.iter_mut().zip(pages) {
            // SAFETY: an initialized scatterlist entry; the page is live.
            unsafe { bindings::svcrdma_rs_sg_set_page(sg, page, l as u32, off as u32) };
        }
        // SAFETY: `n` initialized entries of live pages on a live device.
        let got = unsafe {
            bindings::svcrdma_rs_dma_map_sg(
                dev,
                sgl.as_mut_ptr(),
                n as i32,
                bindings::DMA_FROM_DEVICE,
            )
        };
        if got <= 0 {
            return Err(EIO);
        }
        *mapped = n as i32;
        // SAFETY: the MR is ours (held entry) and not registered (it was
        // invalidated before its return to the pool); `got` mapped entries.
        let done = unsafe {
            bindings::ib_map_mr_sg(
                mr,
                sgl.as_mut_ptr(),
                got,
                core::ptr::null_mut(),
                PAGE_SIZE as u32,
            )
        };
        if done != got {
            // SAFETY: we hold the entry and mapped it just above.
            unsafe { self.unmap(dev, index) };
            return Err(EIO);
        }
        Ok(mr)
    }

    /// Undoes [`FrmrPool::map`] (the device must be done with the pages).
    ///
    /// # Safety
    ///
    /// The caller must hold entry `index`, on `dev`.
    pub(crate) unsafe fn unmap(&self, dev: *mut bindings::ib_device, index: u16) {
        let Some(e) = self.entries.get(usize::from(index)) else {
            return;
        };
        // SAFETY: the caller holds the entry.
        let (sgl, mapped) = unsafe { (&mut *e.sgl.get(), &mut *e.mapped.get()) };
        if *mapped > 0 {
            // SAFETY: mapped by `map` with this count and direction.
            unsafe {
                bindings::svcrdma_rs_dma_unmap_sg(
                    dev,
                    sgl.as_mut_ptr(),
                    *mapped,
                    bindings::DMA_FROM_DEVICE,
                )
            };
            *mapped = 0;
        }
    }

    /// The MR of entry `index` (`None` once retired).
    ///
    /// # Safety
    ///
    /// The caller must hold entry `index`.
    pub(crate) unsafe fn mr(&self, index: u16) -> Option<*mut bindings::ib_mr> {
        let e = self.entries.get(usize::from(index))?;
        // SAFETY: the caller holds the entry: only it changes the field.
        unsafe { &*e.mr.get() }.as_ref().map(|m| m.as_ptr())
    }

    /// Takes entry `index` out of use for good, after a failed chain may
    /// have left its MR registered: deregisters the MR, then undoes the
    /// DMA mapping of its pages (on `dev`, if the device is still known).
    /// If the device refuses to deregister, the entry keeps both until the
    /// pool is dropped (the mapping must outlive any translation the
    /// device still holds) and `EBUSY` says so. The caller never returns
    /// the entry to the free list.
    ///
    /// # Safety
    ///
    /// The caller must hold entry `index`, and no work request that uses
    /// its MR may be outstanding or be posted any more.
    pub(crate) unsafe fn retire(
        &self,
        dev: Option<*mut bindings::ib_device>,
        index: u16,
    ) -> Result {
        let Some(e) = self.entries.get(usize::from(index)) else {
            return Ok(());
        };
        // SAFETY: the caller holds the entry: nobody else touches it.
        let (slot, retired) = unsafe { (&mut *e.mr.get(), &mut *e.retired.get()) };
        if !*retired {
            self.retired.fetch_add(1, Relaxed);
        }
        *retired = true;
        if let Some(mr) = slot.take() {
            // SAFETY: idle and never posted again (function contract).
            if let Err(mr) = unsafe { mr.deregister() } {
                *slot = Some(mr);
                return Err(EBUSY);
            }
        }
        if let Some(dev) = dev {
            // SAFETY: we hold the entry; the device no longer translates
            // through its MR (deregistered above).
            unsafe { self.unmap(dev, index) };
        }
        Ok(())
    }
}
