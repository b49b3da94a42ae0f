// SPDX-License-Identifier: GPL-2.0

//! A received Call's plan: its transport header decoded and checked, where
//! its bytes go in nfsd's argument buffer, and what its RDMA Reads cost.
//!
//! Pure: [`plan`] copies, posts and answers nothing, so the nfsd thread in
//! `xpo_recvfrom` and a receive completion (`super::recvfrom`) plan a Call
//! the same way. The C transport does this in `svc_rdma_xdr_decode_req()`
//! and the `pcl_*` functions.

use kernel::prelude::*;

use crate::{
    proto::{
        budget::{Budget, Cost},
        layout::{call_layout, split_floor, ArgShape, Place, ReadChunkRef, Split},
        rpcrdma::{
            chunk::ReadList,
            header::{decode, DecodeError, Header, Limits, Proc},
        },
    },
    sunrpc::{self, PAGE_SIZE},
};

/// Write chunks per Call we handle (more is answered with ERR_CHUNK).
pub(crate) const MAX_WRITE_CHUNKS: usize = 4;

/// Read chunks per Call we handle (more is answered with ERR_CHUNK).
pub(crate) const MAX_READ_CHUNKS: usize = 8;

/// What we accept in a Call's transport header: no more chunks than a
/// context holds.
pub(crate) const LIMITS: Limits = Limits {
    max_read_segments: 64,
    max_write_chunks: MAX_WRITE_CHUNKS as u32,
    max_segments_per_chunk: 64,
    // A maximal payload (`RPCSVC_MAXPAYLOAD`) plus room for the RPC
    // message around it in a Reply chunk.
    max_chunk_bytes: sunrpc::MAX_PAYLOAD + 64 * 1024,
};

/// The Read list's discriminator in an RPC-over-RDMA version 1 header:
/// after the XID, version, credits and procedure words (RFC 8166 §4.2).
const READ_LIST_AT: usize = 16;

/// Whether the message in `msg` has a Read list (its first discriminator
/// is 1): the only messages a receive completion plans.
pub(super) fn has_read_list(msg: &[u8]) -> bool {
    msg.get(READ_LIST_AT..READ_LIST_AT + 4) == Some(&[0, 0, 0, 1][..])
}

/// Steps of a Call's assembly, at most ([`call_layout`]).
pub(super) const MAX_STEPS: usize = 3 * MAX_READ_CHUNKS + 1;

/// Storage for a Call's assembly steps ([`plan`] fills it; the caller
/// keeps it, so the steps outlive the receive buffer the plan reads).
pub(crate) type Steps = [Place; MAX_STEPS];

/// An empty [`Steps`].
pub(crate) const NO_STEPS: Steps = [Place::Zero { dst: 0, len: 0 }; MAX_STEPS];

/// A Call's transport header, decoded and checked against the connection,
/// and where its bytes go in the argument buffer ([`plan`]: the first
/// `nsteps` of the caller's [`Steps`]).
pub(super) struct Plan<'m> {
    /// The header, over the received message.
    pub(super) header: Header<'m>,
    /// The RPC message's inline bytes (after the transport header).
    body: &'m [u8],
    /// Steps of the assembly, in the caller's storage.
    pub(super) nsteps: usize,
    /// Where the Call's bytes lie once assembled.
    pub(super) shape: ArgShape,
    /// Read chunks the Call has.
    pub(super) nchunks: usize,
    /// What its RDMA Reads take of the connection's MRs and send queue.
    pub(super) cost: Cost,
    /// Per Read chunk the steps place, in their order: which entries of
    /// the Read list are its segments, and where it goes in the argument
    /// buffer ([`Plan::read_chunks`]).
    work: [ChunkWork; MAX_READ_CHUNKS],
    nwork: usize,
}

/// One Read chunk of a Call: its segments, entries `first..first + n` of
/// the Read list, and its destination offset in the argument buffer.
/// (Indices, not views, keep a [`Plan`] small: it is returned and read in
/// place, never copied whole.)
#[derive(Clone, Copy, Default)]
struct ChunkWork {
    first: u16,
    n: u16,
    dst: u32,
}

/// Per Read chunk of a Call, in the order its assembly places them: the
/// chunk's segments and its destination offset in the argument buffer.
pub(super) type ReadWork<'m> = [Option<(ReadList<'m>, usize)>; MAX_READ_CHUNKS];

impl<'m> Plan<'m> {
    /// The Call's Read chunks with their destinations ([`ReadWork`]).
    pub(super) fn read_chunks(&self) -> ReadWork<'m> {
        let mut out: ReadWork<'m> = [None; MAX_READ_CHUNKS];
        for (slot, w) in out.iter_mut().zip(&self.work[..self.nwork]) {
            *slot = self
                .header
                .reads
                .sub(usize::from(w.first), usize::from(w.n))
                .map(|segs| (segs, w.dst as usize));
        }
        out
    }

    /// Pages the assembled Call spans.
    pub(super) fn pages(&self) -> usize {
        (self.shape.extent(PAGE_SIZE as u32) as usize).div_ceil(PAGE_SIZE)
    }
}

/// Why a received message has no [`Plan`].
pub(super) enum Unplanned<'m> {
    /// The transport header did not decode (or was the peer's RDMA_ERROR).
    Decode(DecodeError),
    /// A backward-direction Reply for the backchannel: its header and RPC
    /// message.
    #[cfg(svcrdma_rs_backchannel)]
    BackwardReply(Header<'m>, &'m [u8]),
    /// Without the backchannel no variant borrows the message: this one,
    /// which cannot be made, keeps the lifetime the same in both builds.
    #[cfg(not(svcrdma_rs_backchannel))]
    #[allow(dead_code)]
    Never(
        core::convert::Infallible,
        core::marker::PhantomData<&'m [u8]>,
    ),
    /// The Call's chunks cannot be placed in the argument buffer, or need
    /// more of the connection than it has: `(needed, there)` of what ran
    /// out, or `(0, 0)`.
    Reject {
        xid: u32,
        why: &'static str,
        counts: (usize, usize),
    },
}

/// Why a Call's chunks are refused: what for, and `(needed, there)` of
/// what ran out, or `(0, 0)`.
type Refusal = (&'static str, (usize, usize));

/// Decodes and checks the received message `msg` for an argument buffer
/// of `capacity` bytes on a connection with the budget `budget()` gives
/// (asked only for a Call with Read chunks), and lays the Call out in it,
/// its steps in `steps`. Pure: nothing is copied, posted or answered.
// The large error (a decoded header) lives on the stack once per message
// and is consumed by the caller at once; boxing it would allocate per
// backward Reply.
#[allow(clippy::result_large_err)]
pub(super) fn plan<'m>(
    budget: impl FnOnce() -> Budget,
    msg: &'m [u8],
    capacity: u32,
    steps: &mut Steps,
) -> core::result::Result<Plan<'m>, Unplanned<'m>> {
    let header = decode(msg, &LIMITS).map_err(Unplanned::Decode)?;
    let xid = header.xid;
    let hdr_len = header.hdr_len.min(msg.len());
    let body = if header.proc_ == Proc::NoMsg {
        &[][..]
    } else {
        msg.get(hdr_len..).unwrap_or(&[])
    };
    // A backward Reply goes to the backchannel's waiting Call, not to nfsd.
    #[cfg(svcrdma_rs_backchannel)]
    if crate::proto::rpcrdma::backward::is_reply(&header, body) {
        return Err(Unplanned::BackwardReply(header, body));
    }
    let reject = |(why, counts): Refusal| Unplanned::Reject { xid, why, counts };
    let mut chunks = ReadChunks::NONE;
    chunks.parse(&header).map_err(reject)?;
    // A data item gets pages of its own, past the RPC header, except in a
    // NULL Call (`split_floor`).
    let split = split_floor(body).map(|min_position| Split {
        page_size: PAGE_SIZE as u32,
        min_position,
    });
    let layout = call_layout(
        u32::try_from(body.len()).unwrap_or(u32::MAX),
        &chunks.refs[..chunks.n],
        capacity,
        split,
        steps,
    )
    .map_err(|e| reject((e.as_str(), (0, 0))))?;
    let nsteps = layout.steps;
    let mut work = [ChunkWork::default(); MAX_READ_CHUNKS];
    let nwork = chunks.work(&steps[..nsteps], &mut work);
    // A Call whose Reads need more MRs or send-queue slots than the
    // connection has could never be served: it is answered, not waited on.
    let cost = match nwork {
        0 => Cost::default(),
        n => read_cost(&budget(), &header, work.get(..n).unwrap_or(&[])).map_err(reject)?,
    };
    Ok(Plan {
        header,
        body,
        nsteps,
        shape: layout.shape,
        nchunks: chunks.n,
        cost,
        work,
        nwork,
    })
}

/// A Call's Read chunks as the layout takes them, and which Read list
/// entries are each one's segments (parsed once, here).
struct ReadChunks {
    refs: [ReadChunkRef; MAX_READ_CHUNKS],
    entries: [(u16, u16); MAX_READ_CHUNKS],
    n: usize,
}

impl ReadChunks {
    /// No chunks.
    const NONE: Self = Self {
        refs: [ReadChunkRef {
            position: 0,
            length: 0,
        }; MAX_READ_CHUNKS],
        entries: [(0, 0); MAX_READ_CHUNKS],
        n: 0,
    };

    /// Takes the Read chunks of `header` (filled in place: the value is
    /// large, and a Call without chunks should not pay for moving it).
    fn parse(&mut self, header: &Header<'_>) -> core::result::Result<(), Refusal> {
        let mut seen = 0usize;
        for c in header.reads.chunks() {
            let (Some(slot), Some(at)) = (self.refs.get_mut(self.n), self.entries.get_mut(self.n))
            else {
                return Err(("too many read chunks", (0, 0)));
            };
            *slot = ReadChunkRef {
                position: c.position,
                length: c.total,
            };
            // Within the decoder's limit of Read segments (`LIMITS`).
            let (Ok(first), Ok(n)) = (u16::try_from(seen), u16::try_from(c.segments.len())) else {
                return Err(("too many read segments", (0, 0)));
            };
            *at = (first, n);
            seen += c.segments.len();
            self.n += 1;
        }
        Ok(())
    }

    /// Puts into `work`, per chunk `steps` place, in their order, its
    /// segments and destination; returns how many.
    fn work(&self, steps: &[Place], work: &mut [ChunkWork; MAX_READ_CHUNKS]) -> usize {
        let mut nwork = 0usize;
        if self.n == 0 {
            return nwork;
        }
        for step in steps {
            if let Place::Chunk { chunk, dst, .. } = *step {
                if let (Some(&(first, n)), Some(w)) = (self.entries.get(chunk), work.get_mut(nwork))
                {
                    *w = ChunkWork { first, n, dst };
                    nwork += 1;
                }
            }
        }
        nwork
    }
}

/// What the Reads of `work` (chunks of `header`) cost on a connection
/// with `budget`; refused if that is more than it has.
fn read_cost(
    budget: &Budget,
    header: &Header<'_>,
    work: &[ChunkWork],
) -> core::result::Result<Cost, Refusal> {
    let mut cost = Cost::default();
    for w in work {
        let segs = header
            .reads
            .sub(usize::from(w.first), usize::from(w.n))
            .ok_or(("read chunk outside the read list", (0, 0)))?;
        let lens = segs.iter().map(|s| s.length as usize);
        cost = cost.plus(budget.read_cost(w.dst as usize, lens));
    }
    budget
        .check(cost)
        .map_err(|over| (over.as_str(), over.counts()))?;
    Ok(cost)
}

/// One piece of a Call's assembly ([`Plan::assemble`]).
pub(super) enum Fill<'a> {
    /// Inline bytes to copy.
    Bytes(&'a [u8]),
    /// This many zero bytes (an XDR roundup).
    Zeros(usize),
}

impl Plan<'_> {
    /// Puts the Call's inline bytes and roundups where the plan's `steps`
    /// say: `put(offset, fill)` into the argument buffer, in order.
    pub(super) fn assemble(
        &self,
        steps: &[Place],
        mut put: impl FnMut(usize, Fill<'_>) -> Result,
    ) -> Result {
        for step in steps.iter().take(self.nsteps) {
            match *step {
                Place::Inline { src, dst, len } => {
                    let (s, l) = (src as usize, len as usize);
                    put(
                        dst as usize,
                        Fill::Bytes(self.body.get(s..s + l).ok_or(EINVAL)?),
                    )?;
                }
                Place::Zero { dst, len } => put(dst as usize, Fill::Zeros(len as usize))?,
                Place::Chunk { .. } => {}
            }
        }
        Ok(())
    }
}
