// SPDX-License-Identifier: GPL-2.0

//! Whether one RPC fits its connection's fixed resources.
//!
//! A connection has a fixed number of send-queue slots and, under FRMR, a
//! fixed pool of MRs. An RPC that needs more of either than exist could
//! never be served: waiting would never end, and closing the connection
//! only makes the client reconnect and send the same RPC again. So the
//! need is computed from the header before anything is taken, and a Call
//! over the limits is answered with `ERR_CHUNK` (RFC 8166 section 4.5:
//! the responder cannot process the chunks the requester provided).
//!
//! The computation here is the one the data path builds by: the kernel's
//! Read chain is cut into pieces by [`frmr_piece`] (FRMR) or into work
//! requests of at most `max_sge` pages (DMA MR), so the count is exact,
//! not an estimate.

use super::rpcrdma::header::{decode, ChunkError, DecodeError, Limits};

/// How Read sinks are addressed on the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadSink {
    /// One MR per piece of at most `pages_per_mr` pages: each piece costs
    /// a registration and a Read, and a local invalidation unless the Read
    /// invalidates (`local_inv: false`, iWARP's Read With Invalidate).
    Frmr {
        /// Pages one MR maps (at least 1).
        pages_per_mr: usize,
        /// Whether each MR needs its own LOCAL_INV work request.
        local_inv: bool,
    },
    /// A DMA MR: one Read per `max_sge` pages of a segment, no MR.
    Sge {
        /// SGEs per RDMA Read (at least 1).
        max_sge: usize,
    },
}

/// What a connection has for one RPC, at most.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// The page size of the argument pages.
    pub page_size: usize,
    /// How Read sinks are registered.
    pub sink: ReadSink,
    /// MRs in the connection's pool (0 without FRMR).
    pub mrs: usize,
    /// Send-queue slots a chain can hold.
    pub sq_slots: usize,
}

/// What one RPC's chain needs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cost {
    /// MRs taken at once.
    pub mrs: usize,
    /// Work requests posted as one chain.
    pub wrs: usize,
}

/// Why an RPC does not fit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OverLimit {
    /// More MRs than the pool holds.
    Mrs {
        /// Needed.
        need: usize,
        /// In the pool.
        have: usize,
    },
    /// More work requests than the send queue holds.
    SendQueue {
        /// Needed.
        need: usize,
        /// Slots.
        have: usize,
    },
    /// The budget itself is unusable (a zero page size, MR size or SGE
    /// count): nothing fits.
    Unusable,
}

impl OverLimit {
    /// A short description for a log line.
    pub fn as_str(&self) -> &'static str {
        match self {
            OverLimit::Mrs { .. } => "needs more memory regions than the connection has",
            OverLimit::SendQueue { .. } => "needs more work requests than the send queue holds",
            OverLimit::Unusable => "no resources for chunks",
        }
    }

    /// What was needed and what the connection has, for a log line.
    pub fn counts(&self) -> (usize, usize) {
        match *self {
            OverLimit::Mrs { need, have } | OverLimit::SendQueue { need, have } => (need, have),
            OverLimit::Unusable => (0, 0),
        }
    }
}

/// Bytes of the next FRMR piece of a sink at byte `at` of the argument
/// buffer with `left` bytes to go, for MRs of `mr_bytes` (whole pages of
/// `page_size`): an MR maps whole pages after the first one's offset.
/// Never 0 while `left` is not 0, whatever the arguments.
pub fn frmr_piece(at: usize, left: usize, mr_bytes: usize, page_size: usize) -> usize {
    let in_page = at.checked_rem(page_size).unwrap_or(0);
    left.min(mr_bytes.saturating_sub(in_page).max(1))
}

impl Budget {
    /// What reading segments of lengths `lens` into the argument buffer
    /// costs, the first landing at byte `dst` and each next one right after
    /// the one before (one Read chunk). Add the costs of a Call's chunks
    /// with [`Cost::plus`].
    pub fn read_cost(&self, mut dst: usize, lens: impl IntoIterator<Item = usize>) -> Cost {
        let mut cost = Cost::default();
        let page = self.page_size.max(1);
        for len in lens {
            match self.sink {
                ReadSink::Frmr {
                    pages_per_mr,
                    local_inv,
                } => {
                    let mr_bytes = pages_per_mr.max(1).saturating_mul(page);
                    let per_mr = if local_inv { 3 } else { 2 };
                    let mut done = 0usize;
                    while done < len {
                        let at = dst.saturating_add(done);
                        done = done.saturating_add(frmr_piece(at, len - done, mr_bytes, page));
                        cost.mrs = cost.mrs.saturating_add(1);
                        cost.wrs = cost.wrs.saturating_add(per_mr);
                    }
                }
                ReadSink::Sge { max_sge } => {
                    if len > 0 {
                        let pages = (dst % page).saturating_add(len).div_ceil(page);
                        let reads = pages.div_ceil(max_sge.max(1));
                        cost.wrs = cost.wrs.saturating_add(reads);
                    }
                }
            }
            dst = dst.saturating_add(len);
        }
        cost
    }

    /// Whether a chain costing `cost` can ever be served.
    pub fn check(&self, cost: Cost) -> Result<(), OverLimit> {
        let usable = self.page_size != 0
            && match self.sink {
                ReadSink::Frmr { pages_per_mr, .. } => pages_per_mr != 0,
                ReadSink::Sge { max_sge } => max_sge != 0,
            };
        if !usable && cost != Cost::default() {
            return Err(OverLimit::Unusable);
        }
        if cost.mrs > self.mrs {
            return Err(OverLimit::Mrs {
                need: cost.mrs,
                have: self.mrs,
            });
        }
        if cost.wrs > self.sq_slots {
            return Err(OverLimit::SendQueue {
                need: cost.wrs,
                have: self.sq_slots,
            });
        }
        Ok(())
    }
}

impl Cost {
    /// Both costs together (saturating: an absurd sum does not fit).
    pub fn plus(self, other: Cost) -> Cost {
        Cost {
            mrs: self.mrs.saturating_add(other.mrs),
            wrs: self.wrs.saturating_add(other.wrs),
        }
    }
}

/// What to answer a message that arrived while every context of its
/// connection was in use (the client has far more Calls in flight than its
/// credits allow): the error its header earns anyway, or `ERR_CHUNK`
/// ([`ChunkError::OverResources`]) for a well-formed Call. `None`: nothing
/// to send (too short for an XID, the peer's own `RDMA_ERROR`, or, with a
/// backchannel, a backward Reply, which is not a Call).
pub fn answer_when_busy(msg: &[u8], limits: &Limits) -> Option<DecodeError> {
    match decode(msg, limits) {
        Ok(h) => {
            #[cfg(svcrdma_rs_backchannel)]
            {
                let body = msg.get(h.hdr_len..).unwrap_or(&[]);
                if super::rpcrdma::backward::is_reply(&h, body) {
                    return None;
                }
            }
            Some(DecodeError::Chunk {
                xid: h.xid,
                reason: ChunkError::OverResources,
            })
        }
        Err(DecodeError::TooShort) | Err(DecodeError::PeerError { .. }) => None,
        Err(e) => Some(e),
    }
}
