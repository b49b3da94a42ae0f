// SPDX-License-Identifier: GPL-2.0

//! RDMA Read and Write under the connection's memory model.
//!
//! *Reads* pull a Call's Read chunks from the client into nfsd's argument
//! pages. The sink is the only memory the client's adapter writes into,
//! so the memory model decides how it is exposed:
//! - FRMR: each sink piece is registered in an MR from the connection's
//!   pool under a fresh key (REG_MR), read into, and invalidated — by the
//!   Read itself on iWARP devices with Read With Invalidate, otherwise by a
//!   fenced LOCAL_INV at the end of the same chain — before the MR returns
//!   to the pool.
//! - DMA MR: the sink is addressed with the PD's local key (IB, RoCE), or,
//!   where policy allowed a remote-write DMA MR (iWARP), with its rkey.
//!
//! *Writes* push Reply data (Write chunk payloads, the Reply chunk) from
//! nfsd's reply pages: the adapter only reads local memory, so the PD's
//! local key serves every model.

use kernel::{prelude::*, sync::atomic::ordering::Acquire};

use super::{
    ctxt::CallCtxt,
    live::Live,
    sink::{frmr_piece, Sink, MAX_SGE},
};
use crate::{
    log::{pr_info_ratelimited, pr_warn_ratelimited},
    pages::MappedPages,
    proto::{
        layout::ArgShape,
        rpcrdma::chunk::{ReadList, Segment},
    },
    rdma::{
        dma::{Dir, Run},
        wc_status,
        wr::{Chain, Sge},
    },
};

/// Takes the `n` FRMR pool entries a Call's Reads need into `ctxt`, all at
/// once, so a thread never waits for MRs while holding some: with `wait`,
/// in turn with other threads; without, only if they are free now.
pub(super) fn take_mrs(live: Live<'_>, ctxt: &mut CallCtxt, n: usize, wait: bool) -> Result {
    if n == 0 {
        return Ok(());
    }
    live.mrs_take(n, ctxt.args.mrs_mut()?, wait)
}

/// Gives back the FRMR pool entries `ctxt` took for Reads it never built
/// (none is registered).
pub(super) fn give_back_mrs(live: Live<'_>, ctxt: &mut CallCtxt) {
    if ctxt.args.mrs().is_empty() {
        return;
    }
    if let Ok(held) = ctxt.args.mrs_mut() {
        live.mrs_give(held);
    }
}

/// Builds in `ctxt` the RDMA Reads of every Read chunk of a Call into its
/// argument buffer: `chunks` gives, per chunk, its segments and
/// destination offset; the Call lies in its pages as `shape` says once
/// they are in. The Call's pages must be in `ctxt.args` already, and under
/// FRMR as many MRs as the sink says it needs (`Sink::mrs_needed`). The
/// chain ends with the invalidations the MRs need. On failure the
/// mappings are undone and the Call's MRs retired ([`retire_mrs`]); the
/// pages stay with the context. The counterpart of C's
/// svc_rdma_process_read_list() (the chain's part).
pub(super) fn build_read_chain(
    live: Live<'_>,
    ctxt: &mut CallCtxt,
    chunks: &[Option<(ReadList<'_>, usize)>],
    shape: ArgShape,
) -> Result {
    ctxt.chain.clear();
    let mut next_mr = 0usize;
    let built = chunks
        .iter()
        .flatten()
        .try_for_each(|&(chunk, dst)| match &live.res.sink {
            Sink::Frmr { .. } => frmr_reads(live, ctxt, chunk, dst, &mut next_mr),
            &Sink::Dma { key, max_sge } => dma_reads(ctxt, chunk, dst, key, max_sge),
        })
        .and_then(|()| add_invalidations(live, ctxt));
    if let Err(e) = built {
        ctxt.args.unmap();
        retire_mrs(live, ctxt);
        return Err(e);
    }
    ctxt.call_shape = shape;
    Ok(())
}

/// Reads `chunk` (one Read chunk's segments, in order) from the client
/// into the argument buffer at `dst` under FRMR: each sink piece is
/// registered in the next MR `ctxt` holds (`next_mr`), then read into.
fn frmr_reads(
    live: Live<'_>,
    ctxt: &mut CallCtxt,
    chunk: ReadList<'_>,
    mut dst: usize,
    next_mr: &mut usize,
) -> Result {
    let Sink::Frmr {
        pool,
        remote_write,
        read_with_inv,
    } = &live.res.sink
    else {
        return Err(EINVAL);
    };
    let mut allocated = pool.allocated();
    for seg in chunk.iter() {
        let mut done = 0usize;
        let len = seg.length as usize;
        while done < len {
            let at = dst + done;
            let n = frmr_piece(pool, at, len - done);
            let k = *next_mr;
            *next_mr += 1;
            let mapped = ctxt.args.map_mr(&pool.table, live.res.pd(), k, at, n);
            if pool.allocated() != allocated {
                allocated = pool.allocated();
                live.frmr_changed();
            }
            let mapped = mapped?;
            mapped.register(&mut ctxt.chain, *remote_write)?;
            let sge = Sge {
                addr: mapped.iova,
                length: n as u32,
                lkey: mapped.lkey,
            };
            let inv = read_with_inv.then_some(mapped.lkey);
            ctxt.chain.read(
                seg.offset.wrapping_add(done as u64),
                seg.handle,
                &[sge],
                inv,
            )?;
            done += n;
        }
        dst += len;
    }
    Ok(())
}

/// Reads `chunk` from the client into the argument buffer at `dst` under
/// a DMA MR: the sink's pages mapped and addressed with `key`, `max_sge`
/// of them per Read.
fn dma_reads(
    ctxt: &mut CallCtxt,
    chunk: ReadList<'_>,
    mut dst: usize,
    key: u32,
    max_sge: usize,
) -> Result {
    let CallCtxt { chain, args, .. } = ctxt;
    for seg in chunk.iter() {
        let len = seg.length as usize;
        if len == 0 {
            continue;
        }
        args.map_range(dst, len, Dir::FromDevice, |run| {
            let mut pieces = run.pieces();
            let mut wr_start = 0u64;
            // One Read per `max_sge` pieces, their SGEs straight into the
            // chain.
            loop {
                let (added, bytes) =
                    chain.add_pieces(&mut pieces, max_sge.max(1), u64::MAX, key)?;
                if added == 0 {
                    return Ok(());
                }
                chain.read_pending(seg.offset.wrapping_add(wr_start), seg.handle, bytes)?;
                wr_start += bytes;
            }
        })?;
        dst += len;
    }
    Ok(())
}

/// The last completion of a Call's Read chain (or its failure to post):
/// the sink pages are unmapped (synced for the CPU) and the MRs go back to
/// the pool, here, so that MRs never wait for an nfsd thread; then the
/// Call waits for one ([`super::recv::RecvQueue::read_done`]). A failed
/// chain retires its MRs ([`retire_mrs`]) and closes the connection; the
/// Call is dropped. Runs in the CQ's work item (process context) or in the
/// posting thread. The counterpart of C's svc_rdma_wc_read_done().
pub(super) fn reads_finished(live: Live<'_>, mut ctxt: KBox<CallCtxt>) {
    ctxt.args.unmap();
    let status = ctxt.status.load(Acquire);
    if status == 0 {
        release_mrs(live, &mut ctxt);
        live.read_done(ctxt);
        return;
    }
    if status != wc_status::FLUSHED {
        pr_warn_ratelimited!(
            "connection {}: RDMA Read of a Call failed (status {}), closing\n",
            live.id,
            status
        );
    }
    retire_mrs(live, &mut ctxt);
    live.close();
    live.ctxt_put(ctxt);
}

/// A Call's Reads could not be built or posted (`e`): says so and closes
/// the connection; the caller gives back what it holds.
pub(super) fn prepare_failed(live: Live<'_>, e: Error) {
    pr_warn_ratelimited!(
        "connection {}: RDMA Read of a Call failed: error {}, closing\n",
        live.id,
        e.to_errno()
    );
    live.close();
}

/// Ends the chain with the invalidation of every MR the Reads registered,
/// unless the Reads invalidate them themselves (Read With Invalidate): one
/// wait covers registration, Reads and invalidation.
fn add_invalidations(live: Live<'_>, ctxt: &mut CallCtxt) -> Result {
    let Sink::Frmr {
        pool,
        read_with_inv: false,
        ..
    } = &live.res.sink
    else {
        return Ok(());
    };
    for lease in ctxt.args.mrs() {
        if let Some(key) = pool.table.lkey(lease) {
            ctxt.chain.local_inv(key)?;
        }
    }
    Ok(())
}

/// After a failed Read chain: the Call's MRs may still be registered
/// (the REG_MR went out but the invalidation did not), and on iWARP with
/// remote write, while the pages they map are about to go back to nfsd.
///
/// INVARIANT (no registration outlives its request, `security.rst`): an
/// MR leaves this Call either invalidated by a completed chain
/// ([`release_mrs`]) or deregistered here, before its pages are unmapped
/// and before `xpo_recvfrom` returns them to nfsd. A waited LOCAL_INV is
/// no way out: every failed completion leaves an RC QP in the error state
/// (and we close the connection on any failure), where a posted LOCAL_INV
/// is flushed, not executed. `ib_dereg_mr` is what the verbs promise
/// about: once it returns, the MR's keys are invalid and the device no
/// longer translates through it. The QP goes to the error state first (it
/// is the only QP of the connection's PD, so nothing can reach the MR any
/// more even before that), and no work request that uses the MR is
/// outstanding: the chain's last completion has come (`reads_finished`),
/// flushed ones included, or posted nothing.
///
/// The entries never go back to the free list (quarantined); the
/// connection is closing, so no other Call misses them. If a device fails
/// the deregistration, the entry keeps its MR and its DMA mapping until
/// the connection is freed (the pages still go back to nfsd, but the entry
/// holds a reference of its own on each, so they are not freed while
/// mapped; then only the QP in error protects them, see `security.rst`).
fn retire_mrs(live: Live<'_>, ctxt: &mut CallCtxt) {
    if ctxt.args.mrs().is_empty() {
        return;
    }
    live.close();
    let Some(pool) = live.res.sink.pool() else {
        return;
    };
    // Not given back: retired entries are never used again. Nothing that
    // uses their MRs is in flight or will be posted (above).
    let (count, kept) = ctxt.args.retire_mrs(&pool.table);
    if kept > 0 {
        pr_warn_ratelimited!(
            "connection {}: could not deregister {} memory regions after a failed RDMA Read; they stay until the connection is freed\n",
            live.id,
            kept
        );
    } else {
        pr_info_ratelimited!(
            "connection {}: the {} memory regions of a failed RDMA Read are deregistered\n",
            live.id,
            count
        );
    }
    live.frmr_changed();
}

/// Unmaps the MRs of a Call whose chain (Reads and invalidations)
/// completed and returns them to the pool. After a failed chain
/// [`retire_mrs`] takes them out of use instead.
fn release_mrs(live: Live<'_>, ctxt: &mut CallCtxt) {
    let Some(pool) = live.res.sink.pool() else {
        return;
    };
    // Their Reads and invalidations completed.
    ctxt.args.unmap_mrs(&pool.table);
    if let Ok(mrs) = ctxt.args.mrs_mut() {
        live.mrs_give(mrs);
    }
}

/// Accumulates RDMA Writes of local bytes into a chunk's segments, the
/// pending request's SGEs straight in the chain.
struct ChunkWriter<'c, I: Iterator<Item = Segment>> {
    chain: &'c mut Chain,
    segs: I,
    /// The current segment and the bytes of it already filled.
    seg: Option<(Segment, u32)>,
    max_sge: usize,
    /// Where the pending work request starts in the current segment.
    wr_start: u32,
    lkey: u32,
    written: u32,
}

impl<'c, I: Iterator<Item = Segment>> ChunkWriter<'c, I> {
    fn new(chain: &'c mut Chain, segs: I, max_sge: usize, lkey: u32) -> Self {
        Self {
            chain,
            segs,
            seg: None,
            max_sge: max_sge.clamp(1, MAX_SGE),
            wr_start: 0,
            lkey,
            written: 0,
        }
    }

    /// Ends the pending work request.
    fn flush(&mut self) -> Result {
        if self.chain.pending_sges() == 0 {
            return Ok(());
        }
        let Some((seg, filled)) = self.seg else {
            return Err(EINVAL);
        };
        // The pending SGEs are the segment's bytes from `wr_start` on.
        self.chain.write_pending(
            seg.offset.wrapping_add(u64::from(self.wr_start)),
            seg.handle,
            u64::from(filled.saturating_sub(self.wr_start)),
        )?;
        self.wr_start = filled;
        Ok(())
    }

    /// The segment being filled and its bytes filled, the next one if that
    /// is full (the pending request ends with it).
    fn segment(&mut self) -> Result<(Segment, u32)> {
        match self.seg {
            Some((s, f)) if f < s.length => Ok((s, f)),
            _ => {
                self.flush()?;
                let s = self.segs.next().ok_or(EMSGSIZE)?;
                self.seg = Some((s, 0));
                self.wr_start = 0;
                Ok((s, 0))
            }
        }
    }

    /// Adds `len` bytes mapped at `addr`.
    fn add(&mut self, mut addr: u64, mut len: u32) -> Result {
        while len > 0 {
            let (seg, filled) = self.segment()?;
            let n = len.min(seg.length - filled);
            if self.chain.pending_sges() == self.max_sge {
                self.flush()?;
            }
            self.chain.add_sge(Sge {
                addr,
                length: n,
                lkey: self.lkey,
            })?;
            self.seg = Some((seg, filled + n));
            self.written += n;
            addr += u64::from(n);
            len -= n;
            if filled + n == seg.length {
                self.flush()?;
            }
        }
        Ok(())
    }

    /// Adds the pieces of `run`: those within the current segment go
    /// straight into the chain, as many at a time as the request and the
    /// segment take; one across a segment's end through
    /// [`ChunkWriter::add`], split.
    fn add_run(&mut self, run: Run<'_>) -> Result {
        let mut pieces = run.pieces();
        while let Some((addr, n)) = pieces.peek() {
            if n == 0 {
                pieces.next();
                continue;
            }
            let (s, filled) = self.segment()?;
            // A full request ends here (as `add` would end it), so that the
            // next one fills in place too.
            if self.chain.pending_sges() == self.max_sge {
                self.flush()?;
            }
            let room = s.length - filled;
            let pending = self.chain.pending_sges();
            let (added, bytes) = if n <= room {
                self.chain.add_pieces(
                    &mut pieces,
                    self.max_sge - pending,
                    u64::from(room),
                    self.lkey,
                )?
            } else {
                (0, 0)
            };
            if added == 0 {
                self.add(addr, n)?;
                pieces.next();
                continue;
            }
            // At most the segment's room, a `u32`.
            let bytes = bytes as u32;
            self.seg = Some((s, filled + bytes));
            self.written += bytes;
        }
        Ok(())
    }

    fn finish(mut self) -> Result<u32> {
        self.flush()?;
        Ok(self.written)
    }
}

/// Adds RDMA Writes of Reply bytes `ranges` (in order) into the chunk whose
/// segments are `segs`, from the Reply's pages, which `reply` holds (taken
/// by `sendto::build_reply`). Returns the bytes written.
/// The counterpart of C's svc_rdma_send_write_chunk() and
/// svc_rdma_send_reply_chunk() (the Writes' part).
pub(super) fn build_writes(
    live: Live<'_>,
    chain: &mut Chain,
    reply: &mut MappedPages,
    segs: impl Iterator<Item = Segment>,
    ranges: impl Iterator<Item = (u32, u32)>,
) -> Result<u32> {
    let mut w = ChunkWriter::new(
        chain,
        segs,
        live.res.send_sge as usize,
        live.res.pd().local_dma_lkey(),
    );
    for (start, end) in ranges {
        reply.map_reply(start as usize, end as usize, |run| w.add_run(run))?;
    }
    w.finish()
}
