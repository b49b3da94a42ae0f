// SPDX-License-Identifier: GPL-2.0

//! Pages lent to the device: one RPC's pages held together with every DMA
//! mapping made of them ([`MappedPages`]), so that no mapping outlives the
//! memory it maps.
//!
//! The glue between the two layers below it: the pages come from sunrpc's
//! requests ([`HeldPages`]), the mappings from the RDMA wrappers.
//!
//! Pages come in first (taken from the nfsd request), mappings are made
//! only of pages the value holds, and the pages leave (put, or given to a
//! request) only once nothing maps them. Under FRMR the mappings live in
//! MR table entries, named by the leases the value holds.

use kernel::prelude::*;

use crate::{
    rdma::{
        dma::{Dir, DmaDev, DmaMaps, Run},
        mr::{MrLease, MrMapped, MrTable},
        Pd,
    },
    sunrpc::{HeldPages, Rqst, Span, PAGE_SIZE},
};

/// One RPC's pages (a Call's Read sink or a Reply's Write source) with the
/// mappings of them: DMA mappings, and the FRMR leases whose entries map
/// them.
///
/// # Invariants
///
/// Every mapping in `maps`, and every mapped lease in `mrs`, maps memory
/// of pages held in `pages`. The pages leave `pages` only while neither
/// exists; if a mapped lease leaves `mrs` by any other way than
/// [`MrTable::unmap`] or [`MrTable::retire`], the pages are leaked first.
pub(crate) struct MappedPages {
    maps: DmaMaps,
    mrs: KVec<MrLease>,
    pages: HeldPages,
    /// Pages a request gave up for ours ([`MappedPages::install_args`]),
    /// kept (never mapped) for the next sink ([`MappedPages::alloc_args`]):
    /// a Call read from its receive completion takes no page from the
    /// allocator, and the thread's pages none from it either.
    spare: HeldPages,
}

/// Pages a [`MappedPages`] keeps spare at most: a small Call's sink (a
/// 4 KiB WRITE's takes two); larger ones allocate.
const SPARE_PAGES: usize = 2;

impl MappedPages {
    /// Nothing held, for mappings on `dev` (which the value counts).
    pub(crate) fn new(dev: &DmaDev) -> Result<Self> {
        let mut spare = HeldPages::new();
        spare.reserve_room(SPARE_PAGES)?;
        Ok(Self {
            maps: DmaMaps::new(dev)?,
            mrs: KVec::new(),
            pages: HeldPages::new(),
            spare,
        })
    }

    fn mr_mapped(&self) -> bool {
        self.mrs.iter().any(MrLease::is_mapped)
    }

    /// Whether anything maps the pages.
    pub(crate) fn is_mapped(&self) -> bool {
        !self.maps.is_empty() || self.mr_mapped()
    }

    /// Fails unless nothing maps the pages (they may leave then).
    fn idle(&self) -> Result {
        if self.is_mapped() {
            return Err(EBUSY);
        }
        Ok(())
    }

    /// How many pages the value holds.
    pub(crate) fn pages(&self) -> usize {
        self.pages.len()
    }

    /// Undoes the DMA mappings (not the MRs'): the device must be done
    /// with them.
    pub(crate) fn unmap(&mut self) {
        self.maps.unmap_all();
    }

    /// Undoes the DMA mappings and puts the pages; the pages are leaked
    /// instead if a lease still maps them (its entry keeps them mapped).
    pub(crate) fn clear(&mut self) {
        self.unmap();
        if self.mr_mapped() {
            self.pages.leak();
        } else {
            self.pages.clear();
        }
    }

    /// Moves the first `n` argument pages of `rq` in
    /// ([`Rqst::take_arg_pages`]); the value must hold none.
    pub(crate) fn take_args<C>(&mut self, rq: &mut Rqst<'_, C>, n: usize) -> Result {
        if !self.pages.is_empty() {
            return Err(EBUSY);
        }
        rq.take_arg_pages(n, &mut self.pages)
    }

    /// Allocates `n` pages for a Call's argument buffer
    /// ([`HeldPages::alloc`]), the spare ones first; the value must hold
    /// none.
    pub(crate) fn alloc_args(&mut self, n: usize, flags: kernel::alloc::Flags) -> Result {
        self.pages.alloc(n, &mut self.spare, flags)
    }

    /// Copies `src` into the held pages (as one buffer) at `offset`; fails
    /// while anything maps the pages (the device may be using them).
    pub(crate) fn write_args(&mut self, offset: usize, src: &[u8]) -> Result {
        self.idle()?;
        self.pages.write(offset, src)
    }

    /// Zeroes `len` bytes of the held pages (as one buffer) at `offset`;
    /// fails while anything maps the pages.
    pub(crate) fn zero_args(&mut self, offset: usize, len: usize) -> Result {
        self.idle()?;
        self.pages.zero(offset, len)
    }

    /// Gives the argument pages back to `rq`, which they were taken from
    /// and which did not use them ([`Rqst::give_back_arg_pages`]); fails if
    /// they are still mapped.
    pub(crate) fn give_back_args<C>(&mut self, rq: &mut Rqst<'_, C>) -> Result {
        self.idle()?;
        rq.give_back_arg_pages(&mut self.pages);
        Ok(())
    }

    /// Installs the pages as `rq`'s argument buffer
    /// ([`Rqst::install_arg_pages`]); fails if they are still mapped.
    pub(crate) fn install_args<C>(&mut self, rq: &mut Rqst<'_, C>) -> Result {
        self.idle()?;
        rq.install_arg_pages(&mut self.pages, &mut self.spare)
    }

    /// Moves the Reply's pages of `rq` in ([`Rqst::take_reply_pages`]);
    /// the value must hold none.
    pub(crate) fn take_reply<C>(&mut self, rq: &mut Rqst<'_, C>) -> Result {
        if !self.pages.is_empty() {
            return Err(EBUSY);
        }
        rq.take_reply_pages(&mut self.pages)
    }

    /// Gives the Reply's pages back to `rq`, which they were taken from
    /// ([`Rqst::give_back_reply_pages`]); fails if they are still mapped.
    pub(crate) fn give_back_reply<C>(&mut self, rq: &mut Rqst<'_, C>) -> Result {
        self.idle()?;
        rq.give_back_reply_pages(&mut self.pages);
        Ok(())
    }

    /// Calls `f` on the bytes of each contiguous piece of `[start, end)` of
    /// the Reply whose pages the value holds.
    pub(crate) fn reply_bytes(
        &self,
        start: usize,
        end: usize,
        f: impl FnMut(&[u8]) -> Result,
    ) -> Result {
        self.pages.reply_bytes(start, end, f)
    }

    /// Maps each span of `[start, end)` of the Reply whose pages the value
    /// holds (head, a run of the page list, tail), for the device to read,
    /// and calls `f` with its mapping, in order.
    pub(crate) fn map_reply(
        &mut self,
        start: usize,
        end: usize,
        mut f: impl FnMut(Run<'_>) -> Result,
    ) -> Result {
        let Self { maps, pages, .. } = self;
        pages.reply_spans(start, end, |span| {
            // Every span lies in memory of pages `pages` holds
            // (`HeldPages::reply_spans`: pages of the list, or the head or
            // tail, which lie in the Reply's pages); the mapping goes into
            // `maps`, undone before those pages leave (invariant).
            // INVARIANT: a mapping of held memory, recorded in `maps`.
            match span {
                Span::Virt(p, l) => {
                    // SAFETY: so the memory stays allocated until the
                    // unmapping.
                    let addr = unsafe { maps.map_virt(p, l, Dir::ToDevice) }?;
                    f(Run::one(&addr, l)?)
                }
                Span::Pages(run, off, l) => {
                    // SAFETY: as above.
                    f(unsafe { maps.map_pages(run, off, l, Dir::ToDevice) }?)
                }
            }
        })
    }

    /// The pieces `(page index, offset in page, bytes)` of `[offset, offset
    /// + len)` of `held` pages taken as one buffer.
    fn pieces(
        held: usize,
        offset: usize,
        len: usize,
    ) -> Result<impl Iterator<Item = (usize, usize, usize)> + Clone> {
        let end = offset.checked_add(len).ok_or(EINVAL)?;
        if end > held.saturating_mul(PAGE_SIZE) {
            return Err(EMSGSIZE);
        }
        let mut at = offset;
        Ok(core::iter::from_fn(move || {
            if at >= end {
                return None;
            }
            let (i, off) = (at / PAGE_SIZE, at % PAGE_SIZE);
            let n = (PAGE_SIZE - off).min(end - at);
            at += n;
            Some((i, off, n))
        }))
    }

    /// Maps bytes `[offset, offset + len)` of the held pages (as one
    /// buffer) for `dir`, as one run, and calls `f` with the mapping.
    pub(crate) fn map_range(
        &mut self,
        offset: usize,
        len: usize,
        dir: Dir,
        f: impl FnOnce(Run<'_>) -> Result,
    ) -> Result {
        let end = offset.checked_add(len).ok_or(EINVAL)?;
        if len == 0 || end > self.pages.len().saturating_mul(PAGE_SIZE) {
            return Err(EMSGSIZE);
        }
        let first = offset / PAGE_SIZE;
        let run = self
            .pages
            .run(first, end.div_ceil(PAGE_SIZE) - first)
            .ok_or(EINVAL)?;
        // Pages `pages` holds; the mapping goes into `maps`, undone before
        // they leave (invariant).
        // SAFETY: so the pages stay allocated until the unmapping.
        let run = unsafe { self.maps.map_pages(run, offset % PAGE_SIZE, len, dir) }?;
        // INVARIANT: a mapping of held pages, recorded in `maps`.
        f(run)
    }

    /// The FRMR leases the value holds.
    pub(crate) fn mrs(&self) -> &[MrLease] {
        &self.mrs
    }

    /// The leases, to take more in or give them back; fails while one of
    /// them maps pages.
    pub(crate) fn mrs_mut(&mut self) -> Result<&mut KVec<MrLease>> {
        if self.mr_mapped() {
            return Err(EBUSY);
        }
        Ok(&mut self.mrs)
    }

    /// Maps bytes `[offset, offset + len)` of the held pages (as one
    /// buffer) into the MR of the `k`th lease, on `table` (entries' MRs on
    /// `pd`, mapped on the table's device), for the device to write
    /// ([`MrTable::map`]).
    pub(crate) fn map_mr(
        &mut self,
        table: &MrTable,
        pd: &Pd,
        k: usize,
        offset: usize,
        len: usize,
    ) -> Result<MrMapped> {
        let Self { mrs, pages, .. } = self;
        let pages = &*pages;
        // Within the held pages (checked by `pieces`), so every index has a
        // page; a piece without one would fail the mapping (short).
        let pieces = Self::pieces(pages.len(), offset, len)?;
        if kernel::warn_on!(pieces.clone().any(|(i, _, _)| pages.page(i).is_none())) {
            return Err(EINVAL);
        }
        let sink = pieces.filter_map(move |(i, off, n)| Some((pages.page(i)?, off, n)));
        let lease = mrs.get_mut(k).ok_or(EINVAL)?;
        // INVARIANT: the lease, if mapped by this, maps held pages.
        // Every page is one `pages` holds, and stays there while the lease,
        // held in `mrs`, is mapped (invariant).
        // SAFETY: so the pages stay allocated while the lease is mapped.
        unsafe { table.map(pd, lease, sink, len) }
    }

    /// Undoes the MR mappings of every lease on `table` (the device must be
    /// done with them: the chain that used them completed).
    pub(crate) fn unmap_mrs(&mut self, table: &MrTable) {
        for lease in self.mrs.iter_mut() {
            table.unmap(lease);
        }
    }

    /// Retires every lease on `table` ([`MrTable::retire`]); returns how
    /// many, and how many of those keep their MR (the device refused to
    /// deregister it).
    pub(crate) fn retire_mrs(&mut self, table: &MrTable) -> (usize, usize) {
        let count = self.mrs.len();
        let mut kept = 0usize;
        while let Some(lease) = self.mrs.pop() {
            // INVARIANT: the entry unmaps, or keeps references of its own.
            if table.retire(lease).is_err() {
                kept += 1;
            }
        }
        (count, kept)
    }

    /// Drops every lease without giving it back: their entries stay out of
    /// use, and mapped if they were, so the pages are leaked first then.
    pub(crate) fn drop_mrs(&mut self) {
        if self.mr_mapped() {
            // INVARIANT: nothing is put while an entry may map it.
            self.pages.leak();
        }
        self.mrs.clear();
    }
}

impl Drop for MappedPages {
    fn drop(&mut self) {
        // The mappings go before the pages: `clear` unmaps first, and
        // leaks the pages an entry still maps. The leases drop with the
        // value (their entries stay as they are).
        self.clear();
    }
}
