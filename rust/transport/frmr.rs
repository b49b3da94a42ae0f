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
//! out in turn) as their leases (`rdma::mr::MrLease`): an entry's MR and
//! scatterlist belong to whoever holds its lease.

use kernel::prelude::*;

use super::fair::FairPool;
use crate::{
    rdma::{
        dma::DmaDev,
        mr::{MrLease, MrTable},
    },
    sunrpc::{MAX_PAYLOAD, PAGE_SIZE},
};

/// Pages of the largest RPC payload nfsd moves, plus one for a payload that
/// does not start on a page boundary.
const MAX_PAYLOAD_PAGES: u32 = MAX_PAYLOAD / PAGE_SIZE as u32 + 1;
/// MRs per credit.
const MRS_PER_CREDIT: u32 = 2;

/// The leases of a connection's FRMR entries not in use, handed out in
/// turn (see [`FairPool`]).
pub(crate) type MrFree = FairPool<KVec<MrLease>>;

impl MrFree {
    /// No entries until [`MrFree::fill`].
    pub(crate) fn empty() -> impl PinInit<Self> {
        Self::new(KVec::new())
    }

    /// Makes room for `count` entries (at accept, before any use).
    pub(crate) fn reserve(&self, count: usize) -> Result {
        let ids = KVec::with_capacity(count, GFP_KERNEL)?;
        self.with(|free| *free = ids);
        Ok(())
    }

    /// Makes every entry of `pool` free (once, after [`MrFree::reserve`]
    /// for them; nothing is allocated).
    pub(crate) fn fill(&self, pool: &FrmrPool) -> Result {
        self.with(|free| pool.table.issue(free))
    }

    /// Moves `n` free entries into `out` (which has room for them), waiting
    /// in turn while others hold them (`on_wait` runs first when it must
    /// wait); fails with `ENOTCONN` once the pool is closed or `closing()`.
    /// The caller checks that the pool has `n`.
    pub(crate) fn take(
        &self,
        n: usize,
        out: &mut KVec<MrLease>,
        closing: impl Fn() -> bool,
        on_wait: impl FnOnce(),
    ) -> Result {
        self.acquire(closing, on_wait, |free| {
            if free.len() < n {
                return None;
            }
            for _ in 0..n {
                // `out` has room (reserved by the caller) and `free` has
                // `n`: a lease is never dropped here.
                if let Some(l) = free.pop() {
                    kernel::warn_on!(out.push_within_capacity(l).is_err());
                }
            }
            Some(())
        })
    }

    /// Moves `n` free entries into `out` (which has room for them) if they
    /// are free now and nobody waits for entries; never sleeps.
    pub(crate) fn try_take(
        &self,
        n: usize,
        out: &mut KVec<MrLease>,
        closing: impl Fn() -> bool,
    ) -> bool {
        self.try_acquire(closing, |free| {
            if free.len() < n {
                return None;
            }
            for _ in 0..n {
                // `out` has room (reserved by the caller) and `free` has
                // `n`: a lease is never dropped here.
                if let Some(l) = free.pop() {
                    kernel::warn_on!(out.push_within_capacity(l).is_err());
                }
            }
            Some(())
        })
        .is_some()
    }

    /// Returns the entries in `held`.
    pub(crate) fn give(&self, held: &mut KVec<MrLease>) {
        self.release(|free| {
            while let Some(l) = held.pop() {
                // Capacity for every entry was reserved by `reserve`: a
                // lease is never dropped here.
                kernel::warn_on!(free.push_within_capacity(l).is_err());
            }
        });
    }
}

/// A connection's MRs.
pub(crate) struct FrmrPool {
    pub(crate) table: MrTable,
}

impl FrmrPool {
    /// A pool of entries for `credits` concurrent RPCs, each MR mapping up
    /// to `min(max_payload, device limit)` pages, within the device's MR
    /// count, their pages mapped on `dev`. Allocates only the table: MRs
    /// come with first use (`MrTable::map`).
    pub(crate) fn new(
        dev: DmaDev,
        credits: u32,
        max_fast_reg_page_list_len: u32,
        max_mr: u32,
    ) -> Result<Self> {
        let pages_per_mr = MAX_PAYLOAD_PAGES.min(max_fast_reg_page_list_len);
        let count = credits.saturating_mul(MRS_PER_CREDIT).min(max_mr).max(1);
        Ok(Self {
            table: MrTable::new(dev, count, pages_per_mr)?,
        })
    }

    /// How many MRs the pool holds.
    pub(crate) fn len(&self) -> usize {
        self.table.len()
    }

    /// Entries whose MR was ever allocated.
    pub(crate) fn allocated(&self) -> u32 {
        self.table.allocated()
    }

    /// Entries retired after a failed Read.
    pub(crate) fn retired(&self) -> u32 {
        self.table.retired()
    }

    /// Pages one MR maps at most.
    pub(crate) fn pages_per_mr(&self) -> u32 {
        self.table.pages_per_mr()
    }
}
