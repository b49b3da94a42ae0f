// SPDX-License-Identifier: GPL-2.0

//! Memory regions for fast registration (`IB_MR_TYPE_MEM_REG`), and a
//! table of them handed out as leases ([`MrTable`], [`MrLease`]).

use core::{cell::UnsafeCell, ptr::NonNull};

use kernel::{
    prelude::*,
    sync::atomic::{ordering::Relaxed, Atomic},
};

use super::{
    dma::{Dir, DmaDev},
    wr::Chain,
    Pd,
};
use crate::bindings::{self, IB_MR_TYPE_MEM_REG};

/// A fast-registration MR, deregistered when dropped.
///
/// # Invariants
///
/// `ptr` is a live MR from `ib_alloc_mr()`, owned by this value; its PD
/// outlives it (owners drop MRs before the PD).
pub(crate) struct Mr {
    ptr: NonNull<bindings::ib_mr>,
}

// SAFETY: MRs are not tied to a thread.
unsafe impl Send for Mr {}
// SAFETY: `&Mr` only reads immutable fields.
unsafe impl Sync for Mr {}

impl Mr {
    /// Allocates an MR able to map `max_pages` pages at once.
    pub(crate) fn new(pd: &Pd, max_pages: u32) -> Result<Self> {
        // SAFETY: the PD is live.
        let ptr = unsafe { bindings::ib_alloc_mr(pd.as_ptr(), IB_MR_TYPE_MEM_REG, max_pages) };
        let ptr = kernel::error::from_err_ptr(ptr)?;
        // INVARIANT: allocated above, now owned.
        NonNull::new(ptr).map(|ptr| Self { ptr }).ok_or(ENOMEM)
    }

    /// The C object.
    pub(crate) fn as_ptr(&self) -> *mut bindings::ib_mr {
        self.ptr.as_ptr()
    }

    /// Deregisters the MR now; gives it back if the device refused.
    ///
    /// # Safety
    ///
    /// No work request that uses the MR may be outstanding, and none may be
    /// posted any more (as for the drop at teardown).
    pub(crate) unsafe fn deregister(self) -> core::result::Result<(), Self> {
        // SAFETY: live and ours (invariant); idle (function contract).
        let rc = unsafe { bindings::svcrdma_rs_ib_dereg_mr(self.as_ptr()) };
        if rc != 0 {
            // `ib_dereg_mr` keeps the MR when the driver fails.
            return Err(self);
        }
        // Freed by the call above: no second deregistration on drop.
        core::mem::forget(self);
        Ok(())
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        // SAFETY: live and ours (invariant); no work request uses it (the
        // QP was drained and destroyed first).
        let _ = unsafe { bindings::svcrdma_rs_ib_dereg_mr(self.as_ptr()) };
    }
}

/// The right to use one entry of an [`MrTable`]: its MR and scatterlist.
///
/// # Invariants
///
/// Made only by [`MrTable::issue`], once per entry of the table with id
/// `table`: holding the lease is the only way to use entry `index`.
/// `mapped` is set while the entry's scatterlist maps pages
/// ([`MrTable::map`] until [`MrTable::unmap`] or [`MrTable::retire`]).
pub(crate) struct MrLease {
    table: u64,
    index: u16,
    mapped: bool,
}

impl MrLease {
    /// Whether the entry maps pages, which must then stay allocated.
    pub(crate) fn is_mapped(&self) -> bool {
        self.mapped
    }
}

/// Ids of tables, never reused.
static NEXT_TABLE: Atomic<u64> = Atomic::new(1);

/// One entry of an [`MrTable`], used only by the holder of its
/// [`MrLease`] ([`MrTable::state`]).
struct Entry(UnsafeCell<EntryState>);

/// One MR and the scatterlist it is mapped from (both empty until the
/// entry's first use).
struct EntryState {
    /// `None` before the first use and once retired.
    mr: Option<Mr>,
    /// Set by [`MrTable::retire`]: the entry is never used again.
    retired: bool,
    sgl: KVec<bindings::scatterlist>,
    /// Entries of `sgl` DMA-mapped on the table's device (`None`: none).
    mapped: Option<i32>,
    /// The entry holds a reference on each mapped page (a retired entry
    /// whose MR could not be deregistered keeps its mapping).
    pinned: bool,
}

impl EntryState {
    /// The entry's MR, allocated (on `pd`, for `pages_per_mr` pages, counted
    /// in `allocated`) with its scatterlist on the first use.
    fn mr(
        &mut self,
        pd: &Pd,
        pages_per_mr: u32,
        allocated: &Atomic<u32>,
    ) -> Result<*mut bindings::ib_mr> {
        if let Some(mr) = &self.mr {
            return Ok(mr.as_ptr());
        }
        // The scatterlist first: if the MR cannot be had, the next use
        // tries again with it in place.
        let n = pages_per_mr as usize;
        if self.sgl.len() < n {
            self.sgl.resize(n, Default::default(), GFP_KERNEL)?;
        }
        let mr = self.mr.insert(Mr::new(pd, pages_per_mr)?).as_ptr();
        allocated.fetch_add(1, Relaxed);
        Ok(mr)
    }

    /// DMA-maps `pages` (`len` bytes in all) on `dev` through the entry's
    /// scatterlist, for the device to write; returns how many scatterlist
    /// entries the mapping took.
    ///
    /// # Safety
    ///
    /// The pages must stay allocated until [`EntryState::unmap`].
    unsafe fn map_pages(
        &mut self,
        dev: &DmaDev,
        pages: impl Iterator<Item = (*mut bindings::page, usize, usize)> + Clone,
        len: usize,
    ) -> Result<i32> {
        let (count, bytes) = pages
            .clone()
            .fold((0usize, 0usize), |(c, b), p| (c + 1, b + p.2));
        if count == 0 || count > self.sgl.len() || bytes != len || self.mapped.is_some() {
            return Err(EINVAL);
        }
        let n = count as u32;
        let sgl = &mut self.sgl;
        // SAFETY: `sgl` has at least `n` entries.
        unsafe { bindings::sg_init_table(sgl.as_mut_ptr(), n) };
        for (sg, (page, off, l)) in sgl.iter_mut().zip(pages) {
            // SAFETY: an initialized scatterlist entry; the page is live.
            unsafe { bindings::svcrdma_rs_sg_set_page(sg, page, l as u32, off as u32) };
        }
        let dir = Dir::FromDevice.raw();
        // SAFETY: `n` initialized entries of live pages on a live device.
        let got = unsafe {
            bindings::svcrdma_rs_ib_dma_map_sg(dev.as_ptr(), sgl.as_mut_ptr(), n as i32, dir)
        };
        if got <= 0 {
            return Err(EIO);
        }
        self.mapped = Some(n as i32);
        Ok(got)
    }

    /// Undoes the DMA mapping of the entry's pages, if any, on `dev` (the
    /// table's).
    fn unmap(&mut self, dev: &DmaDev) {
        if let Some(n) = self.mapped.take() {
            // SAFETY: mapped by `MrTable::map` with this count and direction
            // on `dev` (the table's), which is live (`DmaDev` invariant).
            unsafe {
                bindings::svcrdma_rs_ib_dma_unmap_sg(
                    dev.as_ptr(),
                    self.sgl.as_mut_ptr(),
                    n,
                    Dir::FromDevice.raw(),
                )
            };
        }
    }
}

/// A table of fast-registration MRs, each mapping up to `pages_per_mr`
/// pages for the device to write (RDMA Read sinks). Only the table is
/// allocated up front: an entry's MR and scatterlist come with its first
/// use, by the lease holder, and stay until the table drops (or the entry
/// is retired).
///
/// The MRs are registered, used and invalidated by work requests of the
/// lease holder's own chains: the holder of a lease owns every chain that
/// uses its MR (it builds it with [`MrMapped::register`]), and a posted
/// chain's owner is out of everyone's hands until its last completion. So
/// whoever holds a lease, no work request that uses its MR is outstanding.
///
/// # Invariants
///
/// `id` is this table's alone; each entry has at most one lease. Every
/// entry's pages are mapped on `dev`.
pub(crate) struct MrTable {
    id: u64,
    entries: KVec<Entry>,
    pages_per_mr: u32,
    /// The leases were issued.
    issued: Atomic<bool>,
    /// Entries whose MR was allocated (retired ones included).
    allocated: Atomic<u32>,
    /// Entries retired.
    retired: Atomic<u32>,
    /// The device the entries' pages are mapped on; last, so its count is
    /// held while the entries' MRs are freed.
    dev: DmaDev,
}

// SAFETY: an entry is used only by the holder of its lease (unique), on
// whichever thread holds it; the counters are atomics.
unsafe impl Send for MrTable {}
// SAFETY: as above.
unsafe impl Sync for MrTable {}

/// An entry's MR mapped over a sink by [`MrTable::map`], under a fresh key.
pub(crate) struct MrMapped {
    mr: *mut bindings::ib_mr,
    /// The key the registration installs (the MR's refreshed rkey).
    pub(crate) key: u32,
    /// The address of the sink's first byte in the MR.
    pub(crate) iova: u64,
    /// The local key the Reads into the MR use.
    pub(crate) lkey: u32,
}

impl MrMapped {
    /// Appends to `chain` (the lease holder's) the fast registration of the
    /// MR for local write, and for remote write too if `remote_write`.
    pub(crate) fn register(&self, chain: &mut Chain, remote_write: bool) -> Result {
        let mut access = bindings::IB_ACCESS_LOCAL_WRITE;
        if remote_write {
            access |= bindings::IB_ACCESS_REMOTE_WRITE;
        }
        chain.reg_mr(self.mr, self.key, access)
    }
}

impl MrTable {
    /// A table of `count` entries, each mapping up to `pages_per_mr` pages
    /// on `dev`.
    pub(crate) fn new(dev: DmaDev, count: u32, pages_per_mr: u32) -> Result<Self> {
        if pages_per_mr == 0 || count > u32::from(u16::MAX) + 1 {
            return Err(EINVAL);
        }
        let mut entries = KVec::with_capacity(count as usize, GFP_KERNEL)?;
        for _ in 0..count {
            entries.push(
                Entry(UnsafeCell::new(EntryState {
                    mr: None,
                    retired: false,
                    sgl: KVec::new(),
                    mapped: None,
                    pinned: false,
                })),
                GFP_KERNEL,
            )?;
        }
        // INVARIANT: a fresh id; no lease issued yet.
        Ok(Self {
            id: NEXT_TABLE.fetch_add(1, Relaxed),
            dev,
            entries,
            pages_per_mr,
            issued: Atomic::new(false),
            allocated: Atomic::new(0),
            retired: Atomic::new(0),
        })
    }

    /// Entries in the table.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Pages one MR maps at most.
    pub(crate) fn pages_per_mr(&self) -> u32 {
        self.pages_per_mr
    }

    /// Entries whose MR was ever allocated.
    pub(crate) fn allocated(&self) -> u32 {
        self.allocated.load(Relaxed)
    }

    /// Entries retired.
    pub(crate) fn retired(&self) -> u32 {
        self.retired.load(Relaxed)
    }

    /// Moves the lease of every entry into `out`, which must have room for
    /// them (nothing is allocated); once per table, and all or nothing.
    pub(crate) fn issue(&self, out: &mut KVec<MrLease>) -> Result {
        if out.capacity() - out.len() < self.entries.len() || self.issued.xchg(true, Relaxed) {
            return Err(EINVAL);
        }
        for i in 0..self.entries.len() {
            // INVARIANT: the one lease of entry `i` (the flag above).
            let lease = MrLease {
                table: self.id,
                index: u16::try_from(i).map_err(|_| EINVAL)?,
                mapped: false,
            };
            out.push_within_capacity(lease).map_err(|_| ENOMEM)?;
        }
        Ok(())
    }

    /// The entry `lease` gives the use of (`None`: another table's).
    fn entry(&self, lease: &MrLease) -> Option<&Entry> {
        if lease.table != self.id {
            return None;
        }
        self.entries.get(usize::from(lease.index))
    }

    /// The state of `lease`'s entry, for as long as the lease is borrowed
    /// mutably (`None`: another table's).
    fn state<'a>(&'a self, lease: &'a mut MrLease) -> Option<&'a mut EntryState> {
        let e = self.entry(lease)?;
        // SAFETY: the lease is the only way to the entry (invariant), and it
        // is borrowed mutably for `'a`: nobody else touches the entry.
        Some(unsafe { &mut *e.0.get() })
    }

    /// The state of `lease`'s entry, read while the lease is borrowed.
    fn state_ref<'a>(&'a self, lease: &'a MrLease) -> Option<&'a EntryState> {
        let e = self.entry(lease)?;
        // SAFETY: as for `state`: only the lease holder changes the entry,
        // and the lease is borrowed for `'a`.
        Some(unsafe { &*e.0.get() })
    }

    /// Maps `pages` (each `(page, offset, len)`, contiguous in the sink:
    /// only the first may start inside its page, only the last may end
    /// inside it; `len` bytes in all) on the table's device into the MR of
    /// `lease`'s entry, for the device to write, and gives the MR a fresh
    /// key. The entry's MR (on `pd`) and scatterlist are allocated on its
    /// first use.
    ///
    /// # Safety
    ///
    /// The pages must stay allocated while the lease is mapped
    /// ([`MrLease::is_mapped`]): until [`MrTable::unmap`] or
    /// [`MrTable::retire`] (which takes references of its own on the pages
    /// when it cannot undo the mapping).
    pub(crate) unsafe fn map(
        &self,
        pd: &Pd,
        lease: &mut MrLease,
        pages: impl Iterator<Item = (*mut bindings::page, usize, usize)> + Clone,
        len: usize,
    ) -> Result<MrMapped> {
        let dev = &self.dev;
        let st = self.state(lease).ok_or(EINVAL)?;
        // A retired entry is never used again.
        if st.retired {
            return Err(EINVAL);
        }
        let mr = st.mr(pd, self.pages_per_mr, &self.allocated)?;
        // SAFETY: the pages stay allocated while the entry maps them (the
        // function's safety requirement).
        let got = unsafe { st.map_pages(dev, pages, len) }?;
        // The MR is not registered: a leased entry's MR was invalidated
        // before its lease went back to the free list.
        // SAFETY: the MR is ours (leased entry); `got` mapped entries.
        let done = unsafe {
            bindings::ib_map_mr_sg(
                mr,
                st.sgl.as_mut_ptr(),
                got,
                core::ptr::null_mut(),
                kernel::page::PAGE_SIZE as u32,
            )
        };
        if done != got {
            st.unmap(dev);
            return Err(EIO);
        }
        // SAFETY: a live MR that no work request uses (the table's rule).
        let key = unsafe { bindings::svcrdma_rs_mr_refresh_key(mr) };
        // SAFETY: a live MR: `ib_map_mr_sg` set its iova, the key refresh
        // its lkey.
        let (iova, lkey) = unsafe { ((*mr).iova, (*mr).lkey) };
        lease.mapped = true;
        Ok(MrMapped {
            mr,
            key,
            iova,
            lkey,
        })
    }

    /// The local key of `lease`'s MR (`None` once retired, or never
    /// allocated).
    pub(crate) fn lkey(&self, lease: &MrLease) -> Option<u32> {
        let mr = self.state_ref(lease)?.mr.as_ref()?;
        // SAFETY: a live MR (`Mr` invariant).
        Some(unsafe { (*mr.as_ptr()).lkey })
    }

    /// Undoes [`MrTable::map`] for `lease`'s entry (the device must be
    /// done with the pages: the chain that read into them completed).
    pub(crate) fn unmap(&self, lease: &mut MrLease) {
        // Leases are used on their own table only.
        let Some(st) = self.state(lease) else {
            kernel::warn_on!(true);
            return;
        };
        st.unmap(&self.dev);
        lease.mapped = false;
    }

    /// Takes `lease`'s entry out of use for good, after a failed chain may
    /// have left its MR registered: deregisters the MR, then undoes the DMA
    /// mapping of its pages. If the device refuses to deregister, the entry
    /// keeps both until the table is dropped (the mapping must outlive any
    /// translation the device still holds), with a reference of its own on
    /// each mapped page (so the lease holder may put its pages), and
    /// `EBUSY` says so (`EINVAL`, with a warning: another table's lease).
    /// The lease is used up either way.
    pub(crate) fn retire(&self, mut lease: MrLease) -> Result {
        // Leases are used on their own table only.
        let Some(st) = self.state(&mut lease) else {
            kernel::warn_on!(true);
            return Err(EINVAL);
        };
        if !st.retired {
            self.retired.fetch_add(1, Relaxed);
        }
        st.retired = true;
        if let Some(mr) = st.mr.take() {
            // No work request that uses the MR is outstanding, or will be
            // posted: we hold the lease (the table's rule), and the entry is
            // retired.
            // SAFETY: so the MR is idle.
            if let Err(mr) = unsafe { mr.deregister() } {
                st.mr = Some(mr);
                if let (Some(n), false) = (st.mapped, st.pinned) {
                    for sg in st.sgl.iter_mut().take(n as usize) {
                        // A mapped entry's page, kept by the lease holder
                        // while the lease is mapped; the reference taken is
                        // the entry's, put in `drop`.
                        // SAFETY: so the page is live.
                        unsafe { bindings::svcrdma_rs_get_page(bindings::svcrdma_rs_sg_page(sg)) };
                    }
                    st.pinned = true;
                }
                return Err(EBUSY);
            }
        }
        // The device no longer translates through the MR (deregistered).
        st.unmap(&self.dev);
        Ok(())
    }
}

impl Drop for MrTable {
    fn drop(&mut self) {
        let dev = &self.dev;
        for e in self.entries.iter_mut() {
            let st = e.0.get_mut();
            if !st.pinned {
                continue;
            }
            // An entry whose deregistration failed: its MR goes first (the
            // QP that could use it is gone before the table, as for
            // `Mr::drop`), then its mapping, then the pages it kept.
            if let Some(mr) = st.mr.take() {
                // SAFETY: the QP that could use the MR is gone (above).
                if let Err(mr) = unsafe { mr.deregister() } {
                    // Refused twice: the device may still translate through
                    // the MR, so the MR, its mapping and its pages stay
                    // allocated for good. A leak, not a use after free.
                    core::mem::forget(mr);
                    crate::log::pr_err_ratelimited!(
                        "an MR could not be deregistered twice; its pages stay allocated\n"
                    );
                    st.pinned = false;
                    continue;
                }
            }
            let n = st.mapped.map_or(0, |n| n as usize);
            st.unmap(dev);
            for sg in st.sgl.iter_mut().take(n) {
                // SAFETY: the entry took a reference on each mapped page
                // (`retire`), given up here.
                unsafe { bindings::svcrdma_rs_put_page(bindings::svcrdma_rs_sg_page(sg)) };
            }
            st.pinned = false;
        }
    }
}
