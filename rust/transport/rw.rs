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

use super::{connection::Connection, ctxt::CallCtxt, sq::post_and_wait};
use crate::{
    bindings,
    proto::{
        memreg::Model,
        rpcrdma::chunk::{ReadList, Segment},
    },
    rdma::{dma::DmaMaps, wr::Chain},
    sunrpc::{Piece, Rqst, PAGE_SIZE},
};

/// SGEs of one work request, at most.
const MAX_SGE: usize = 8;

/// Bytes of the next FRMR piece of a sink at `at` with `left` bytes to go:
/// one MR maps whole pages after the first one's offset.
fn frmr_piece(at: usize, left: usize, max_bytes: usize) -> usize {
    left.min(max_bytes - at % PAGE_SIZE)
}

/// Reads `chunk` (one Read chunk's segments, in order) from the client
/// into the argument buffer at `dst`, adding the work to `ctxt`'s chain
/// (FRMR registrations and Reads). Under FRMR, the MRs must have been taken
/// into `ctxt.mrs` already; `next_mr` is the first one not used yet.
fn build_reads(
    conn: &Connection,
    rq: &Rqst<'_>,
    ctxt: &mut CallCtxt,
    chunk: ReadList<'_>,
    mut dst: usize,
    next_mr: &mut usize,
) -> Result {
    let res = conn.res().ok_or(ENOTCONN)?;
    let dev = res.cm_id.device().ok_or(ENODEV)?.as_ptr();
    match conn.info.model {
        Model::Frmr {
            sink_remote_write,
            read_with_inv,
            ..
        } => {
            let pool = res.frmrs.as_ref().ok_or(EINVAL)?;
            let max_bytes = pool.pages_per_mr() as usize * PAGE_SIZE;
            let mut access = bindings::IB_ACCESS_LOCAL_WRITE;
            if sink_remote_write {
                access |= bindings::IB_ACCESS_REMOTE_WRITE;
            }
            for seg in chunk.iter() {
                let mut done = 0usize;
                let len = seg.length as usize;
                while done < len {
                    let at = dst + done;
                    let n = frmr_piece(at, len - done, max_bytes);
                    let index = *ctxt.mrs.get(*next_mr).ok_or(EINVAL)?;
                    *next_mr += 1;
                    let pages = rq.arg_range(at, n)?;
                    // SAFETY: we hold the entry; the argument pages stay
                    // allocated for the RPC, past the Reads' completion.
                    let mr = unsafe { pool.map(dev, index, pages, n) }?;
                    // SAFETY: the MR is ours and not registered.
                    let key = unsafe { bindings::svcrdma_rs_mr_refresh_key(mr) };
                    ctxt.chain.reg_mr(mr, key, access)?;
                    // SAFETY: `mr` is live; `map` set its iova and keys.
                    let (iova, lkey) = unsafe { ((*mr).iova, (*mr).lkey) };
                    let sge = bindings::ib_sge {
                        addr: iova,
                        length: n as u32,
                        lkey,
                    };
                    let inv = read_with_inv.then_some(lkey);
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
        }
        Model::DmaMr { .. } | Model::DmaMrRemoteWrite => {
            let key = match conn.info.model {
                // SAFETY: the PD is live; the field is set at allocation
                // (policy asked for the global rkey for this model only).
                Model::DmaMrRemoteWrite => unsafe { (*res.pd.as_ptr()).unsafe_global_rkey },
                _ => res.pd.local_dma_lkey(),
            };
            let max_sge = (res.read_sge as usize).clamp(1, MAX_SGE);
            let CallCtxt { chain, maps, .. } = ctxt;
            for seg in chunk.iter() {
                let mut sges = [bindings::ib_sge::default(); MAX_SGE];
                let mut count = 0usize;
                let mut wr_start = 0u64;
                let mut wr_len = 0u64;
                let mut placed = 0usize;
                for (page, off, len) in rq.arg_range(dst, seg.length as usize)? {
                    placed += len;
                    // SAFETY: argument pages stay allocated for the RPC.
                    let addr = unsafe { maps.map_page(page, off, len, bindings::DMA_FROM_DEVICE) }?;
                    if let Some(s) = sges.get_mut(count) {
                        *s = bindings::ib_sge {
                            addr,
                            length: len as u32,
                            lkey: key,
                        };
                    }
                    count += 1;
                    wr_len += len as u64;
                    if count == max_sge {
                        chain.read(
                            seg.offset.wrapping_add(wr_start),
                            seg.handle,
                            &sges[..count],
                            None,
                        )?;
                        wr_start += wr_len;
                        wr_len = 0;
                        count = 0;
                    }
                }
                if placed != seg.length as usize {
                    return Err(EMSGSIZE);
                }
                if count > 0 {
                    chain.read(
                        seg.offset.wrapping_add(wr_start),
                        seg.handle,
                        &sges[..count],
                        None,
                    )?;
                }
                dst += seg.length as usize;
            }
        }
    }
    Ok(())
}

/// Pulls every Read chunk of a Call into the argument buffer: `chunks`
/// gives, per chunk, its segments and destination offset.
pub(super) fn read_chunks(
    conn: &Connection,
    rq: &Rqst<'_>,
    ctxt: &mut CallCtxt,
    chunks: &[Option<(ReadList<'_>, usize)>],
) -> Result {
    ctxt.chain.clear();
    let res = conn.res().ok_or(ENOTCONN)?;
    if let Some(pool) = res.frmrs.as_ref() {
        // Every MR the Call needs, taken at once: a thread never waits for
        // MRs while holding some.
        let max_bytes = pool.pages_per_mr() as usize * PAGE_SIZE;
        let mut need = 0usize;
        for &(chunk, mut dst) in chunks.iter().flatten() {
            for seg in chunk.iter() {
                let (mut done, len) = (0usize, seg.length as usize);
                while done < len {
                    done += frmr_piece(dst + done, len - done, max_bytes);
                    need += 1;
                }
                dst += len;
            }
        }
        conn.mrs_take(need, &mut ctxt.mrs)?;
    }
    let mut next_mr = 0usize;
    for &(chunk, dst) in chunks.iter().flatten() {
        build_reads(conn, rq, ctxt, chunk, dst, &mut next_mr)?;
    }
    add_invalidations(conn, ctxt)?;
    let read = post_and_wait(conn, &mut ctxt.chain);
    // The sink pages must be unmapped (and so synced for the CPU) before
    // nfsd reads them; the FRMR sinks are unmapped by `release_mrs`.
    ctxt.maps.unmap_all();
    read?;
    release_mrs(conn, ctxt);
    Ok(())
}

/// Ends the chain with the invalidation of every MR the Reads registered,
/// unless the Reads invalidate them themselves (Read With Invalidate): one
/// wait covers registration, Reads and invalidation.
fn add_invalidations(conn: &Connection, ctxt: &mut CallCtxt) -> Result {
    let Some(pool) = conn.res().and_then(|r| r.frmrs.as_ref()) else {
        return Ok(());
    };
    // Mutant skip_local_inv: the Reads' MRs are never invalidated.
    if cfg!(svcrdma_mutant = "skip_local_inv") {
        return Ok(());
    }
    if let Model::Frmr {
        read_with_inv: true,
        ..
    } = conn.info.model
    {
        return Ok(());
    }
    for &i in ctxt.mrs.iter() {
        if let Some(mr) = pool.mr(i) {
            // SAFETY: a live MR we hold.
            let key = unsafe { (*mr).lkey };
            ctxt.chain.local_inv(key)?;
        }
    }
    Ok(())
}

/// Unmaps the MRs of a Call whose chain (Reads and invalidations)
/// completed and returns them to the pool. After a failed chain they stay
/// with the context instead: they may still be registered, and the
/// connection is closing (`Connection::ctxt_put` deals with them).
fn release_mrs(conn: &Connection, ctxt: &mut CallCtxt) {
    let Some(res) = conn.res() else {
        return;
    };
    let Some(pool) = res.frmrs.as_ref() else {
        return;
    };
    if let Some(dev) = res.cm_id.device() {
        for &i in ctxt.mrs.iter() {
            // SAFETY: we hold entry `i`; its Read and invalidation completed.
            unsafe { pool.unmap(dev.as_ptr(), i) };
        }
    }
    conn.mrs_give(&mut ctxt.mrs);
}

/// Accumulates RDMA Writes of local bytes into a chunk's segments.
struct ChunkWriter<'c, I: Iterator<Item = Segment>> {
    chain: &'c mut Chain,
    segs: I,
    /// The current segment and the bytes of it already filled.
    seg: Option<(Segment, u32)>,
    sges: [bindings::ib_sge; MAX_SGE],
    count: usize,
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
            sges: [bindings::ib_sge::default(); MAX_SGE],
            count: 0,
            max_sge: max_sge.clamp(1, MAX_SGE),
            wr_start: 0,
            lkey,
            written: 0,
        }
    }

    /// Ends the pending work request.
    fn flush(&mut self) -> Result {
        if self.count == 0 {
            return Ok(());
        }
        let Some((seg, filled)) = self.seg else {
            return Err(EINVAL);
        };
        self.chain.write(
            seg.offset.wrapping_add(u64::from(self.wr_start)),
            seg.handle,
            &self.sges[..self.count],
        )?;
        self.count = 0;
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
            if self.count == self.max_sge {
                self.flush()?;
            }
            self.sges[self.count] = bindings::ib_sge {
                addr,
                length: n,
                lkey: self.lkey,
            };
            self.count += 1;
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
/// segments are `segs`. Returns the bytes written.
pub(super) fn build_writes(
    conn: &Connection,
    rq: &Rqst<'_>,
    chain: &mut Chain,
    maps: &mut DmaMaps,
    segs: impl Iterator<Item = Segment>,
    ranges: impl Iterator<Item = (u32, u32)>,
) -> Result<u32> {
    let res = conn.res().ok_or(ENOTCONN)?;
    let mut w = ChunkWriter::new(chain, segs, res.send_sge as usize, res.pd.local_dma_lkey());
    for (start, end) in ranges {
        rq.res_pieces(start as usize, end as usize, |piece| {
            // The context takes the Reply's pages before the chain is posted
            // (`sendto::build_reply`) and keeps them until it completes.
            // SAFETY: so the Reply's memory outlives the mapping.
            let addr = unsafe {
                match piece {
                    Piece::Virt(p, l) => maps.map_virt(p, l, bindings::DMA_TO_DEVICE),
                    Piece::Page(page, off, l) => {
                        maps.map_page(page, off, l, bindings::DMA_TO_DEVICE)
                    }
                }
            }?;
            w.add(addr, piece.len() as u32)
        })?;
    }
    w.finish()
}
