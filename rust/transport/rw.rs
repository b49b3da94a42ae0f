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

use kernel::prelude::*;

use kernel::sync::atomic::ordering::Acquire;

use super::{
    connection::Connection,
    ctxt::{CallCtxt, Rq},
    frmr::FrmrPool,
    sink::{frmr_piece, Sink, MAX_SGE},
};
use crate::{
    log::{pr_info_ratelimited, pr_warn_ratelimited},
    proto::{
        budget::Budget,
        layout::ArgShape,
        rpcrdma::chunk::{ReadList, Segment},
    },
    rdma::{
        dma::Dir,
        mapped::MappedPages,
        wc_status,
        wr::{Chain, Sge},
        Pd,
    },
    sunrpc::PAGE_SIZE,
};

/// What one RPC can have of `conn`'s send queue and MR pool, and how its
/// Read sinks are cut (`None` before accept built the resources).
pub(super) fn budget(conn: &Connection) -> Option<Budget> {
    Some(conn.res()?.sink.budget(conn.sq_slots()))
}

/// Reads `chunk` (one Read chunk's segments, in order) from the client
/// into the argument buffer at `dst`, adding the work to `ctxt`'s chain
/// (FRMR registrations and Reads). The Call's pages must have been taken
/// into `ctxt.args` already, and under FRMR the MRs too; `next_mr` is the
/// first one not used yet.
fn build_reads(
    conn: &Connection,
    ctxt: &mut CallCtxt,
    chunk: ReadList<'_>,
    dst: usize,
    next_mr: &mut usize,
) -> Result {
    let res = conn.res().ok_or(ENOTCONN)?;
    match &res.sink {
        Sink::Frmr {
            pool,
            remote_write,
            read_with_inv,
        } => {
            let frmr = Frmr {
                pool,
                remote_write: *remote_write,
                read_with_inv: *read_with_inv,
            };
            frmr_reads(conn, res.pd(), frmr, ctxt, chunk, dst, next_mr)
        }
        &Sink::Dma { key, max_sge } => dma_reads(ctxt, chunk, dst, key, max_sge),
    }
}

/// The FRMR sink of a connection ([`Sink::Frmr`]).
#[derive(Clone, Copy)]
struct Frmr<'a> {
    pool: &'a FrmrPool,
    remote_write: bool,
    read_with_inv: bool,
}

/// [`build_reads`] under FRMR: each sink piece registered in the next MR
/// `ctxt` holds, on `pd`, and read into.
fn frmr_reads(
    conn: &Connection,
    pd: &Pd,
    frmr: Frmr<'_>,
    ctxt: &mut CallCtxt,
    chunk: ReadList<'_>,
    mut dst: usize,
    next_mr: &mut usize,
) -> Result {
    let table = &frmr.pool.table;
    let mut allocated = table.allocated();
    for seg in chunk.iter() {
        let mut done = 0usize;
        let len = seg.length as usize;
        while done < len {
            let at = dst + done;
            let n = frmr_piece(frmr.pool, at, len - done);
            let k = *next_mr;
            *next_mr += 1;
            let mapped = ctxt.args.map_mr(table, pd, k, at, n);
            if table.allocated() != allocated {
                allocated = table.allocated();
                conn.frmr_changed();
            }
            let mapped = mapped?;
            mapped.register(&mut ctxt.chain, frmr.remote_write)?;
            let sge = Sge {
                addr: mapped.iova,
                length: n as u32,
                lkey: mapped.lkey,
            };
            let inv = frmr.read_with_inv.then_some(mapped.lkey);
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

/// [`build_reads`] under a DMA MR: the sink's pages mapped and addressed
/// with `key`, `max_sge` of them per Read.
fn dma_reads(
    ctxt: &mut CallCtxt,
    chunk: ReadList<'_>,
    mut dst: usize,
    key: u32,
    max_sge: usize,
) -> Result {
    let CallCtxt { chain, args, .. } = ctxt;
    for seg in chunk.iter() {
        // Where the pending request starts in the segment, and its bytes
        // so far; its SGEs go straight into the chain.
        let mut wr_start = 0u64;
        let mut wr_len = 0u64;
        let mut placed = 0usize;
        args.map_range(dst, seg.length as usize, Dir::FromDevice, |addr, len| {
            placed += len;
            chain.add_sge(Sge {
                addr,
                length: len as u32,
                lkey: key,
            })?;
            wr_len += len as u64;
            if chain.pending_sges() == max_sge {
                chain.read_pending(seg.offset.wrapping_add(wr_start), seg.handle)?;
                wr_start += wr_len;
                wr_len = 0;
            }
            Ok(())
        })?;
        if placed != seg.length as usize {
            return Err(EMSGSIZE);
        }
        if chain.pending_sges() > 0 {
            chain.read_pending(seg.offset.wrapping_add(wr_start), seg.handle)?;
        }
        dst += seg.length as usize;
    }
    Ok(())
}

/// Prepares the RDMA Reads of every Read chunk of a Call into its argument
/// buffer: `chunks` gives, per chunk, its segments and destination offset;
/// the Call lies in its pages as `shape` says once they are in. The caller checked
/// the Call against [`budget`]. On success `ctxt` holds the Read chain,
/// the MRs and mappings it uses, and the Call's argument pages, taken from
/// `rq` (for [`super::sq::post_reads`]); on failure the connection is
/// closing, the Call's MRs are retired ([`retire_mrs`]) and its pages go
/// back to `rq`.
pub(super) fn prepare_reads(
    conn: &Connection,
    rq: &mut Rq<'_>,
    ctxt: &mut CallCtxt,
    chunks: &[Option<(ReadList<'_>, usize)>],
    shape: ArgShape,
) -> Result {
    ctxt.chain.clear();
    // The pages the Reads fill go with the context, before anything maps
    // them; the Call is picked up, in them, by whichever thread comes next.
    let extent = shape.extent(PAGE_SIZE as u32) as usize;
    ctxt.args.take_args(rq, extent.div_ceil(PAGE_SIZE))?;
    if let Err(e) = build_chain(conn, ctxt, chunks) {
        ctxt.args.unmap();
        retire_mrs(conn, ctxt);
        // Not read into: they go back where they were taken from (left
        // with the context if an MR still maps them, which cannot be).
        let _ = ctxt.args.give_back_args(rq);
        return Err(e);
    }
    ctxt.call_shape = shape;
    // Mutant corrupt_read_sink: where the Read chunks' sinks start.
    #[cfg(svcrdma_mutant = "corrupt_read_sink")]
    {
        ctxt.nread = 0;
        for (slot, &(_, dst)) in ctxt.read_dst.iter_mut().zip(chunks.iter().flatten()) {
            *slot = dst;
            ctxt.nread += 1;
        }
    }
    Ok(())
}

/// The last completion of a Call's Read chain (or its failure to post):
/// the sink pages are unmapped (synced for the CPU) and the MRs go back to
/// the pool, here, so that MRs never wait for an nfsd thread; then the
/// Call waits for one ([`Connection::read_done`]). A failed chain retires
/// its MRs ([`retire_mrs`]) and closes the connection; the Call is dropped.
/// Runs in the CQ's work item (process context) or in the posting thread.
pub(super) fn reads_finished(conn: &Connection, mut ctxt: KBox<CallCtxt>) {
    ctxt.args.unmap();
    let status = ctxt.status.load(Acquire);
    if status == 0 {
        release_mrs(conn, &mut ctxt);
        conn.read_done(ctxt);
        return;
    }
    if status != wc_status::FLUSHED {
        pr_warn_ratelimited!(
            "connection {}: RDMA Read of a Call failed (status {}), closing\n",
            conn.id,
            status
        );
    }
    retire_mrs(conn, &mut ctxt);
    conn.close();
    conn.ctxt_put(ctxt);
}

/// A Call's Reads could not be built or posted (`e`): says so and closes
/// the connection; the caller gives back what it holds.
pub(super) fn prepare_failed(conn: &Connection, e: Error) {
    pr_warn_ratelimited!(
        "connection {}: RDMA Read of a Call failed: error {}, closing\n",
        conn.id,
        e.to_errno()
    );
    conn.close();
}

/// FRMR pool entries the Read chunks `chunks` need (0 without FRMR).
pub(super) fn mrs_needed(conn: &Connection, chunks: &[Option<(ReadList<'_>, usize)>]) -> usize {
    conn.res().map_or(0, |r| r.sink.mrs_needed(chunks))
}

/// Takes the Call's MRs (waiting in turn for them) and builds its Read
/// chain.
fn build_chain(
    conn: &Connection,
    ctxt: &mut CallCtxt,
    chunks: &[Option<(ReadList<'_>, usize)>],
) -> Result {
    // Every MR the Call needs, taken at once: a thread never waits for
    // MRs while holding some.
    let need = mrs_needed(conn, chunks);
    if need > 0 {
        conn.mrs_take(need, ctxt.args.mrs_mut()?)?;
    }
    build_reads_with(conn, ctxt, chunks)
}

/// Builds the Read chain of `chunks` with the MRs `ctxt` holds already
/// (as many as [`mrs_needed`] says, under FRMR).
fn build_reads_with(
    conn: &Connection,
    ctxt: &mut CallCtxt,
    chunks: &[Option<(ReadList<'_>, usize)>],
) -> Result {
    let mut next_mr = 0usize;
    for &(chunk, dst) in chunks.iter().flatten() {
        build_reads(conn, ctxt, chunk, dst, &mut next_mr)?;
    }
    add_invalidations(conn, ctxt)
}

/// Builds the Read chain of a Call whose sink pages `ctxt.args` holds and
/// whose MRs (under FRMR) it holds too, as [`prepare_reads`] does with the
/// pages of a request: for Reads posted from the Call's receive
/// completion (`super::recv`). On failure the Call's MRs are retired and
/// the mappings undone; the pages stay with the context.
pub(super) fn prepare_reads_held(
    conn: &Connection,
    ctxt: &mut CallCtxt,
    chunks: &[Option<(ReadList<'_>, usize)>],
    shape: ArgShape,
) -> Result {
    ctxt.chain.clear();
    if let Err(e) = build_reads_with(conn, ctxt, chunks) {
        ctxt.args.unmap();
        retire_mrs(conn, ctxt);
        return Err(e);
    }
    ctxt.call_shape = shape;
    #[cfg(svcrdma_mutant = "corrupt_read_sink")]
    {
        ctxt.nread = 0;
        for (slot, &(_, dst)) in ctxt.read_dst.iter_mut().zip(chunks.iter().flatten()) {
            *slot = dst;
            ctxt.nread += 1;
        }
    }
    Ok(())
}

/// Ends the chain with the invalidation of every MR the Reads registered,
/// unless the Reads invalidate them themselves (Read With Invalidate): one
/// wait covers registration, Reads and invalidation.
fn add_invalidations(conn: &Connection, ctxt: &mut CallCtxt) -> Result {
    let Some(Sink::Frmr {
        pool,
        read_with_inv: false,
        ..
    }) = conn.res().map(|r| &r.sink)
    else {
        return Ok(());
    };
    // Mutant skip_local_inv: the Reads' MRs are never invalidated.
    if cfg!(svcrdma_mutant = "skip_local_inv") {
        return Ok(());
    }
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
fn retire_mrs(conn: &Connection, ctxt: &mut CallCtxt) {
    if ctxt.args.mrs().is_empty() {
        return;
    }
    conn.close();
    // Mutant keep_failed_mrs (issue 22 item 4 undone): the MRs of a failed
    // chain go back to the pool unmapped but still registered.
    if cfg!(svcrdma_mutant = "keep_failed_mrs") {
        release_mrs(conn, ctxt);
        return;
    }
    let Some(pool) = conn.res().and_then(|r| r.sink.pool()) else {
        return;
    };
    // Not given back: retired entries are never used again. Nothing that
    // uses their MRs is in flight or will be posted (above).
    let (count, kept) = ctxt.args.retire_mrs(&pool.table);
    if kept > 0 {
        pr_warn_ratelimited!(
            "connection {}: could not deregister {} memory regions after a failed RDMA Read; they stay until the connection is freed\n",
            conn.id,
            kept
        );
    } else {
        pr_info_ratelimited!(
            "connection {}: the {} memory regions of a failed RDMA Read are deregistered\n",
            conn.id,
            count
        );
    }
    conn.frmr_changed();
}

/// Unmaps the MRs of a Call whose chain (Reads and invalidations)
/// completed and returns them to the pool. After a failed chain
/// [`retire_mrs`] takes them out of use instead.
fn release_mrs(conn: &Connection, ctxt: &mut CallCtxt) {
    let Some(pool) = conn.res().and_then(|r| r.sink.pool()) else {
        return;
    };
    // Their Reads and invalidations completed.
    ctxt.args.unmap_mrs(&pool.table);
    if let Ok(mrs) = ctxt.args.mrs_mut() {
        conn.mrs_give(mrs);
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
        self.chain.write_pending(
            seg.offset.wrapping_add(u64::from(self.wr_start)),
            seg.handle,
        )?;
        self.wr_start = filled;
        Ok(())
    }

    /// Adds `len` bytes mapped at `addr`.
    fn add(&mut self, mut addr: u64, mut len: u32) -> Result {
        while len > 0 {
            let (seg, filled) = match self.seg {
                Some((s, f)) if f < s.length => (s, f),
                _ => {
                    self.flush()?;
                    let s = self.segs.next().ok_or(EMSGSIZE)?;
                    self.seg = Some((s, 0));
                    self.wr_start = 0;
                    (s, 0)
                }
            };
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

    fn finish(mut self) -> Result<u32> {
        self.flush()?;
        Ok(self.written)
    }
}

/// Adds RDMA Writes of Reply bytes `ranges` (in order) into the chunk whose
/// segments are `segs`, from the Reply's pages, which `reply` holds (taken
/// by `sendto::build_reply`). Returns the bytes written.
pub(super) fn build_writes(
    conn: &Connection,
    chain: &mut Chain,
    reply: &mut MappedPages,
    segs: impl Iterator<Item = Segment>,
    ranges: impl Iterator<Item = (u32, u32)>,
) -> Result<u32> {
    let res = conn.res().ok_or(ENOTCONN)?;
    let mut w = ChunkWriter::new(
        chain,
        segs,
        res.send_sge as usize,
        res.pd().local_dma_lkey(),
    );
    for (start, end) in ranges {
        reply.map_reply(start as usize, end as usize, |addr, len| {
            w.add(addr, len as u32)
        })?;
    }
    w.finish()
}
