// SPDX-License-Identifier: GPL-2.0

//! Chains of send-queue work requests (RDMA Read and Write, fast
//! registration, invalidation, Send), built in reusable storage and posted
//! as one list.

use kernel::prelude::*;

use super::dma::{ensure_room, push_in_room, Pieces};
use crate::bindings;

/// Scatter/gather entries per work request the data path uses at most
/// (the device may allow fewer: siw 6, mlx5 30, rxe 32). An RDMA Write or
/// Read of a chunk takes one work request per this many pages, and each
/// asks the peer for an acknowledgement: a 1 MiB chunk in 8 requests of 32
/// pages, not 32 of 8.
pub(crate) const MAX_WR_SGE: usize = 32;

/// One scatter/gather element of a work request: `length` bytes at bus
/// address `addr`, under local key `lkey`.
#[derive(Clone, Copy, Default)]
pub(crate) struct Sge {
    pub(crate) addr: u64,
    pub(crate) length: u32,
    pub(crate) lkey: u32,
}

impl From<Sge> for bindings::ib_sge {
    fn from(s: Sge) -> Self {
        bindings::ib_sge {
            addr: s.addr,
            length: s.length,
            lkey: s.lkey,
        }
    }
}

/// An RDMA Read or Write request (`opcode`) of `remote_addr` under `rkey`,
/// invalidating `invalidate` (Read With Invalidate) when not 0.
fn rdma_wr(
    opcode: bindings::ib_wr_opcode,
    remote_addr: u64,
    rkey: u32,
    invalidate: u32,
) -> bindings::ib_rdma_wr {
    let mut wr = bindings::ib_rdma_wr {
        remote_addr,
        rkey,
        ..Default::default()
    };
    wr.wr.opcode = opcode;
    wr.wr.ex.invalidate_rkey = invalidate;
    wr
}

/// One work request of any kind the data path posts.
enum Wr {
    Rdma(bindings::ib_rdma_wr),
    Reg(bindings::ib_reg_wr),
    Plain(bindings::ib_send_wr),
}

impl Wr {
    fn base_ref(&self) -> &bindings::ib_send_wr {
        match self {
            Wr::Rdma(w) => &w.wr,
            Wr::Reg(w) => &w.wr,
            Wr::Plain(w) => w,
        }
    }

    fn base(&mut self) -> &mut bindings::ib_send_wr {
        match self {
            Wr::Rdma(w) => &mut w.wr,
            Wr::Reg(w) => &mut w.wr,
            Wr::Plain(w) => w,
        }
    }
}

/// The address range of a chain's requests ([`Chain::requests`]).
#[derive(Clone, Copy)]
pub(crate) struct Requests {
    start: usize,
    len: usize,
}

impl Requests {
    /// The position in the chain of the request `wr` points into, if any
    /// (for a failed post's "bad" request). Only addresses are compared.
    pub(crate) fn position(&self, wr: *const bindings::ib_send_wr) -> Option<usize> {
        let size = core::mem::size_of::<Wr>();
        let at = (wr as usize).checked_sub(self.start)?;
        let i = at / size;
        (i < self.len).then_some(i)
    }
}

/// What a chain holds, by kind (for the connection's counters).
#[derive(Clone, Copy, Default)]
pub(crate) struct Tally {
    pub(crate) reads: u64,
    pub(crate) read_bytes: u64,
    pub(crate) writes: u64,
    pub(crate) write_bytes: u64,
    pub(crate) sends: u64,
    pub(crate) send_bytes: u64,
    pub(crate) regs: u64,
    /// Local invalidations, by LOCAL_INV or by Read With Invalidate.
    pub(crate) local_invs: u64,
    /// Send With Invalidate.
    pub(crate) remote_invs: u64,
}

/// A chain under construction. Its storage is kept between uses, so a
/// connection's steady state allocates nothing.
pub(crate) struct Chain {
    wrs: KVec<Wr>,
    sges: KVec<bindings::ib_sge>,
    /// Per work request: index of its first SGE and how many.
    spans: KVec<(usize, usize)>,
    /// What the requests so far hold, counted as each is added.
    tally: Tally,
}

// SAFETY: the chain is plain data; the raw pointers it holds (MRs, links)
// are only dereferenced by the device after posting.
unsafe impl Send for Chain {}
// SAFETY: as above.
unsafe impl Sync for Chain {}

impl Chain {
    /// An empty chain.
    pub(crate) const fn new() -> Self {
        Self {
            wrs: KVec::new(),
            sges: KVec::new(),
            spans: KVec::new(),
            tally: Tally {
                reads: 0,
                read_bytes: 0,
                writes: 0,
                write_bytes: 0,
                sends: 0,
                send_bytes: 0,
                regs: 0,
                local_invs: 0,
                remote_invs: 0,
            },
        }
    }

    /// Forgets every request (storage kept).
    pub(crate) fn clear(&mut self) {
        self.wrs.clear();
        self.sges.clear();
        self.spans.clear();
        self.tally = Tally::default();
    }

    /// Work requests in the chain.
    pub(crate) fn len(&self) -> usize {
        self.wrs.len()
    }

    /// The chain's requests and bytes by kind.
    pub(crate) fn tally(&self) -> &Tally {
        &self.tally
    }

    /// Counts a request of `opcode` with `bytes` in its SGEs.
    fn count(&mut self, opcode: bindings::ib_wr_opcode, bytes: u64) {
        let t = &mut self.tally;
        match opcode {
            bindings::IB_WR_RDMA_READ | bindings::IB_WR_RDMA_READ_WITH_INV => {
                t.reads += 1;
                t.read_bytes += bytes;
                if opcode == bindings::IB_WR_RDMA_READ_WITH_INV {
                    t.local_invs += 1;
                }
            }
            bindings::IB_WR_RDMA_WRITE => {
                t.writes += 1;
                t.write_bytes += bytes;
            }
            bindings::IB_WR_SEND | bindings::IB_WR_SEND_WITH_INV => {
                t.sends += 1;
                t.send_bytes += bytes;
                if opcode == bindings::IB_WR_SEND_WITH_INV {
                    t.remote_invs += 1;
                }
            }
            bindings::IB_WR_REG_MR => t.regs += 1,
            bindings::IB_WR_LOCAL_INV => t.local_invs += 1,
            // A chain is built of the requests above only.
            _ => {
                kernel::warn_on!(true);
            }
        }
    }

    /// Where the SGEs not yet given to a request start.
    fn pending_from(&self) -> usize {
        self.spans.last().map_or(0, |&(first, count)| first + count)
    }

    /// SGEs added ([`Chain::add_sge`]) for the next request, not yet given
    /// to one.
    pub(crate) fn pending_sges(&self) -> usize {
        self.sges.len() - self.pending_from()
    }

    /// Adds an SGE for the next request ([`Chain::write_pending`],
    /// [`Chain::read_pending`]), which takes every one added since the
    /// request before it.
    pub(crate) fn add_sge(&mut self, s: Sge) -> Result {
        self.sges.push(s.into(), GFP_KERNEL)?;
        Ok(())
    }

    /// Adds the next of `pieces` as SGEs with `lkey` for the next request
    /// (as [`Chain::add_sge`] does), at most `max` of them and `budget`
    /// bytes. Returns how many and their bytes.
    pub(crate) fn add_pieces(
        &mut self,
        pieces: &mut Pieces<'_>,
        max: usize,
        budget: u64,
        lkey: u32,
    ) -> Result<(usize, u64)> {
        ensure_room(&mut self.sges, max)?;
        let room = self.sges.spare_capacity_mut();
        let k = max.min(room.len());
        let (n, bytes) = pieces.take_into(room.get_mut(..k).unwrap_or_default(), budget, lkey);
        // SAFETY: `take_into` wrote the first `n` entries past the length.
        unsafe { self.sges.inc_len(n) };
        Ok((n, bytes))
    }

    /// Appends `wr` with the pending SGEs as its list, which hold `bytes`
    /// (their lengths' sum: the caller added them).
    fn push_pending(&mut self, wr: Wr, bytes: u64) -> Result {
        ensure_room(&mut self.wrs, 1)?;
        ensure_room(&mut self.spans, 1)?;
        let first = self.pending_from();
        push_in_room(&mut self.spans, (first, self.sges.len() - first))?;
        let opcode = wr.base_ref().opcode;
        push_in_room(&mut self.wrs, wr)?;
        self.count(opcode, bytes);
        Ok(())
    }

    fn push(&mut self, wr: Wr, sges: &[Sge]) -> Result {
        if self.pending_sges() != 0 {
            return Err(EINVAL);
        }
        self.sges.reserve(sges.len(), GFP_KERNEL)?;
        let mut bytes = 0u64;
        for s in sges {
            self.sges
                .push_within_capacity((*s).into())
                .map_err(|_| ENOMEM)?;
            bytes += u64::from(s.length);
        }
        self.push_pending(wr, bytes)
    }

    /// An RDMA Write of the pending SGEs ([`Chain::add_sge`]), which hold
    /// `bytes`, to `remote_addr` under `rkey`.
    pub(crate) fn write_pending(&mut self, remote_addr: u64, rkey: u32, bytes: u64) -> Result {
        let wr = Wr::Rdma(rdma_wr(bindings::IB_WR_RDMA_WRITE, remote_addr, rkey, 0));
        self.push_pending(wr, bytes)
    }

    /// An RDMA Read from `remote_addr` under `rkey` into the pending SGEs
    /// ([`Chain::add_sge`]), which hold `bytes`.
    pub(crate) fn read_pending(&mut self, remote_addr: u64, rkey: u32, bytes: u64) -> Result {
        let wr = Wr::Rdma(rdma_wr(bindings::IB_WR_RDMA_READ, remote_addr, rkey, 0));
        self.push_pending(wr, bytes)
    }

    /// An RDMA Read from `remote_addr` under `rkey` into `sges`; with
    /// `invalidate`, also invalidates that local key once the data is in
    /// (iWARP's Read With Invalidate).
    pub(crate) fn read(
        &mut self,
        remote_addr: u64,
        rkey: u32,
        sges: &[Sge],
        invalidate: Option<u32>,
    ) -> Result {
        match invalidate {
            Some(key) => self.rdma(
                bindings::IB_WR_RDMA_READ_WITH_INV,
                remote_addr,
                rkey,
                sges,
                key,
            ),
            None => self.rdma(bindings::IB_WR_RDMA_READ, remote_addr, rkey, sges, 0),
        }
    }

    fn rdma(
        &mut self,
        opcode: bindings::ib_wr_opcode,
        remote_addr: u64,
        rkey: u32,
        sges: &[Sge],
        invalidate: u32,
    ) -> Result {
        self.push(
            Wr::Rdma(rdma_wr(opcode, remote_addr, rkey, invalidate)),
            sges,
        )
    }

    /// A fast registration of `mr` (already mapped) under `key` with
    /// `access` rights.
    pub(crate) fn reg_mr(&mut self, mr: *mut bindings::ib_mr, key: u32, access: u32) -> Result {
        let mut wr = bindings::ib_reg_wr {
            mr,
            key,
            access: access as i32,
            ..Default::default()
        };
        wr.wr.opcode = bindings::IB_WR_REG_MR;
        self.push(Wr::Reg(wr), &[])
    }

    /// A local invalidation of `key`, fenced: it starts only once every
    /// RDMA Read posted before it on the send queue is complete (IBA
    /// 10.8.3.3), so it can follow the Reads whose sink it covers in the
    /// same chain.
    pub(crate) fn local_inv(&mut self, key: u32) -> Result {
        let mut wr = bindings::ib_send_wr {
            opcode: bindings::IB_WR_LOCAL_INV,
            send_flags: bindings::IB_SEND_FENCE,
            ..Default::default()
        };
        wr.ex.invalidate_rkey = key;
        self.push(Wr::Plain(wr), &[])
    }

    /// A Send of `sges`; with `invalidate`, a Send With Invalidate of that
    /// remote key.
    pub(crate) fn send(&mut self, sges: &[Sge], invalidate: Option<u32>) -> Result {
        let mut wr = bindings::ib_send_wr::default();
        match invalidate {
            Some(key) => {
                wr.opcode = bindings::IB_WR_SEND_WITH_INV;
                wr.ex.invalidate_rkey = key;
            }
            None => wr.opcode = bindings::IB_WR_SEND,
        }
        self.push(Wr::Plain(wr), sges)
    }

    /// A zero-length RDMA Write, posted signaled after requests that were
    /// not (a failed post left them without their signaled last one) on a
    /// QP in the error state: its flush completion comes after theirs, as
    /// `ib_drain_sq` relies on. Nothing is written: the QP executes nothing
    /// any more.
    pub(crate) fn flush_marker(&mut self) -> Result {
        self.rdma(bindings::IB_WR_RDMA_WRITE, 0, 0, &[], 0)
    }

    /// Links the chain for posting: only the last request signaled,
    /// completing to `cqe` (send queue requests complete in order, so its
    /// completion says the device is done with the whole chain). The others
    /// carry `err_cqe`: they complete only if they fail or are flushed
    /// (devices differ on the latter), always before the last one. Without
    /// `signaled`, the last one is linked as the others are: the chain
    /// completes only when it fails or is flushed, and otherwise when a
    /// signaled request posted after it completes. Returns the chain's
    /// head (null if empty). The chain must not change until the post call
    /// returns.
    pub(crate) fn link(
        &mut self,
        cqe: *mut bindings::ib_cqe,
        err_cqe: *mut bindings::ib_cqe,
        signaled: bool,
    ) -> *mut bindings::ib_send_wr {
        let sges = self.sges.as_mut_ptr();
        let mut next: *mut bindings::ib_send_wr = core::ptr::null_mut();
        for (wr, &(first, count)) in self.wrs.iter_mut().zip(self.spans.iter()).rev() {
            let last = next.is_null() && signaled;
            let b = wr.base();
            b.next = next;
            if last {
                b.__bindgen_anon_1.wr_cqe = cqe;
                b.send_flags |= bindings::IB_SEND_SIGNALED;
            } else {
                b.__bindgen_anon_1.wr_cqe = err_cqe;
                b.send_flags &= !bindings::IB_SEND_SIGNALED;
            }
            b.num_sge = count as i32;
            b.sg_list = if count == 0 {
                core::ptr::null_mut()
            } else {
                // SAFETY: `first..first + count` is inside `sges` (pushed
                // together with the request).
                unsafe { sges.add(first) }
            };
            next = b;
        }
        next
    }

    /// Where the chain's requests are, to tell later (without reading the
    /// chain, which may be gone by then) which of them a pointer names.
    pub(crate) fn requests(&self) -> Requests {
        Requests {
            start: self.wrs.as_ptr() as usize,
            len: self.wrs.len(),
        }
    }
}
