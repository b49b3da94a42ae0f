// SPDX-License-Identifier: GPL-2.0

//! The per-connection pool of fast-registration MRs (the FRMR model).
//!
//! Sized once, at accept, from the device's limits: each MR maps up to one
//! maximal RPC payload (or the device's page-list limit, if smaller), and
//! there are enough for every credit to have a Read chunk and a Write or
//! Reply chunk registered at once.

use kernel::prelude::*;

use crate::{
    bindings,
    rdma::{mr::Mr, Pd},
};

/// Pages of the largest RPC payload nfsd moves (`RPCSVC_MAXPAGES`), plus one
/// for a payload that does not start on a page boundary.
const MAX_PAYLOAD_PAGES: u32 = bindings::RPCSVC_MAXPAYLOAD / 4096 + 1;
/// MRs per credit: a Read chunk and a Write or Reply chunk in flight.
const MRS_PER_CREDIT: u32 = 2;

/// A connection's MRs.
pub(crate) struct FrmrPool {
    mrs: KVec<Mr>,
}

impl FrmrPool {
    /// Allocates MRs for `credits` concurrent RPCs, each mapping up to
    /// `min(max_payload, device limit)` pages, within the device's MR count.
    pub(crate) fn new(
        pd: &Pd,
        credits: u32,
        max_fast_reg_page_list_len: u32,
        max_mr: u32,
    ) -> Result<Self> {
        let pages_per_mr = MAX_PAYLOAD_PAGES.min(max_fast_reg_page_list_len);
        if pages_per_mr == 0 {
            return Err(EINVAL);
        }
        let count = credits.saturating_mul(MRS_PER_CREDIT).min(max_mr).max(1);
        let mut mrs = KVec::with_capacity(count as usize, GFP_KERNEL)?;
        for _ in 0..count {
            mrs.push(Mr::new(pd, pages_per_mr)?, GFP_KERNEL)?;
        }
        Ok(Self { mrs })
    }

    /// How many MRs the pool holds.
    pub(crate) fn len(&self) -> usize {
        self.mrs.len()
    }
}
