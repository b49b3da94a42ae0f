// SPDX-License-Identifier: GPL-2.0

//! Where a connection's RDMA Reads land: the memory model, held once.
//!
//! Under FRMR each Read sink is registered in an MR of the connection's
//! pool ([`super::frmr`]); under a DMA MR it is addressed with one key.
//! The model decided at accept (`proto::memreg`) picks the variant, and
//! everything the data path needs of it lives in that variant, so no Read
//! finds the model and the pool disagreeing. The C transport leaves this
//! to the kernel's `rdma_rw` API (`rdma_rw_ctx_init()`).

use kernel::prelude::*;

use super::frmr::FrmrPool;
use crate::{
    proto::{
        budget::{self, Budget, ReadSink},
        memreg::Model,
        rpcrdma::chunk::ReadList,
    },
    rdma::Pd,
    sunrpc::PAGE_SIZE,
};

/// SGEs of one work request, at most.
pub(super) const MAX_SGE: usize = crate::rdma::wr::MAX_WR_SGE;

/// How a connection's RDMA Read sinks are exposed to the client's adapter.
pub(crate) enum Sink {
    /// Each sink piece is registered in an MR of `pool` for one Read.
    Frmr {
        pool: FrmrPool,
        /// The sinks need remote write (iWARP).
        remote_write: bool,
        /// The Read invalidates its MR (iWARP's Read With Invalidate);
        /// otherwise a LOCAL_INV ends the chain.
        read_with_inv: bool,
    },
    /// Sinks are addressed with the PD's `key`, `max_sge` SGEs per Read.
    Dma { key: u32, max_sge: usize },
}

impl Sink {
    /// The sink `model` asks for, with `pool` under FRMR (and only then),
    /// on `pd`; `read_sge` is SGEs per RDMA Read the device and the QP
    /// allow.
    pub(crate) fn new(
        model: Model,
        pool: Option<FrmrPool>,
        pd: &Pd,
        read_sge: u32,
    ) -> Result<Self> {
        let max_sge = (read_sge as usize).clamp(1, MAX_SGE);
        match (model, pool) {
            (
                Model::Frmr {
                    sink_remote_write,
                    read_with_inv,
                    ..
                },
                Some(pool),
            ) => Ok(Sink::Frmr {
                pool,
                remote_write: sink_remote_write,
                read_with_inv,
            }),
            // Policy asked for the global rkey for this model only; a
            // remote-write sink is one page per Read.
            (Model::DmaMrRemoteWrite, None) => Ok(Sink::Dma {
                key: pd.global_rkey(),
                max_sge: 1,
            }),
            (Model::DmaMr { .. }, None) => Ok(Sink::Dma {
                key: pd.local_dma_lkey(),
                max_sge,
            }),
            _ => Err(EINVAL),
        }
    }

    /// The FRMR pool, under FRMR.
    pub(crate) fn pool(&self) -> Option<&FrmrPool> {
        match self {
            Sink::Frmr { pool, .. } => Some(pool),
            Sink::Dma { .. } => None,
        }
    }

    /// MRs in the pool (0 without FRMR).
    pub(crate) fn mrs(&self) -> usize {
        self.pool().map_or(0, |p| p.len())
    }

    /// What one RPC can have of a connection with `sq_slots` send-queue
    /// slots and this sink, and how its Read sinks are cut.
    pub(crate) fn budget(&self, sq_slots: u32) -> Budget {
        let sink = match self {
            Sink::Frmr {
                pool,
                read_with_inv,
                ..
            } => ReadSink::Frmr {
                pages_per_mr: pool.pages_per_mr() as usize,
                local_inv: !read_with_inv,
            },
            Sink::Dma { max_sge, .. } => ReadSink::Sge { max_sge: *max_sge },
        };
        Budget {
            page_size: PAGE_SIZE,
            sink,
            mrs: self.mrs(),
            sq_slots: sq_slots as usize,
        }
    }

    /// FRMR pool entries the Read chunks `chunks` need (0 without FRMR):
    /// one per sink piece.
    pub(crate) fn mrs_needed(&self, chunks: &[Option<(ReadList<'_>, usize)>]) -> usize {
        let Sink::Frmr { pool, .. } = self else {
            return 0;
        };
        let mut need = 0usize;
        for &(chunk, mut dst) in chunks.iter().flatten() {
            for seg in chunk.iter() {
                let (mut done, len) = (0usize, seg.length as usize);
                while done < len {
                    done += frmr_piece(pool, dst + done, len - done);
                    need += 1;
                }
                dst += len;
            }
        }
        need
    }
}

/// Bytes of the next piece of a sink at `at` with `left` bytes to go, in
/// an MR of `pool` (the cut the [`Budget`]'s costs are computed by).
pub(super) fn frmr_piece(pool: &FrmrPool, at: usize, left: usize) -> usize {
    let max_bytes = pool.pages_per_mr() as usize * PAGE_SIZE;
    budget::frmr_piece(at, left, max_bytes, PAGE_SIZE)
}
