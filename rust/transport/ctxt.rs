// SPDX-License-Identifier: GPL-2.0

//! The per-RPC context: what a Call leaves for its Reply.
//!
//! `xpo_recvfrom` takes a context from the connection's pool, keeps a copy
//! of the Call's transport header in it (the Reply echoes its Write list
//! and Reply chunk) and hangs it on the request (`rq_xprt_ctxt`);
//! `xpo_result_payload` notes where each Write chunk's payload lies;
//! `xpo_sendto` uses it, with its mapped send buffer and work-request
//! storage. A context whose Reply went out belongs to that Reply's
//! completions (`sq::post_reply`), which give it back, with the Reply's
//! pages, once the device is done; so does one that carries the RDMA_ERROR
//! answering a refused Call from `xpo_recvfrom`; otherwise
//! `xpo_release_ctxt` gives it back. Steady state allocates nothing: a
//! pool has one context per credit, and grows (to a bound) only for a
//! client that sends more Calls than it was granted.

use kernel::{
    new_spinlock,
    prelude::*,
    sync::{atomic::Atomic, SpinLock},
};

use super::call::{Steps, MAX_WRITE_CHUNKS, NO_STEPS};
use crate::{
    pages::MappedPages,
    proto::{
        inline::{RECV_SIZE, SEND_SIZE},
        layout::{ArgShape, Payload},
        rpcrdma::header::{Header, Shape},
    },
    rdma::{
        dma::{Dir, DmaDev, MappedBuf},
        owned::{Cqe, ERR},
        wr::{Chain, Sge},
    },
    sunrpc::Rqst,
};

/// An nfsd request on one of our connections: its context is a [`CallCtxt`].
pub(crate) type Rq<'a> = Rqst<'a, CallCtxt>;

/// A context's chain of a Reply (or RDMA_ERROR): its [`Cqe`] id.
pub(crate) const REPLY: u64 = 0;
/// A context's chain of a Call's RDMA Reads: its [`Cqe`] id.
pub(crate) const READS: u64 = 1;

/// A Call's transport header, kept for its Reply: a copy of its bytes and
/// where its parts lie in them, decoded and validated once, when the Call
/// arrived ([`CallHeader::keep`]).
///
/// # Invariants
///
/// `shape` is `None` or the shape of a header decoded from bytes that
/// began with `bytes`.
/// `writes` is the kept header's number of Write chunks (0 if none is
/// kept), and the first `writes.min(MAX_WRITE_CHUNKS)` entries of
/// `write_totals` their sizes.
#[derive(Default)]
pub(crate) struct CallHeader {
    bytes: KVec<u8>,
    shape: Option<Shape>,
    writes: usize,
    write_totals: [u32; MAX_WRITE_CHUNKS],
}

impl CallHeader {
    /// No header, with room for one of `n` bytes.
    fn with_capacity(n: usize) -> Result<Self> {
        Ok(Self {
            bytes: KVec::with_capacity(n, GFP_KERNEL)?,
            shape: None,
            writes: 0,
            write_totals: [0; MAX_WRITE_CHUNKS],
        })
    }

    /// Keeps `header`, which was decoded from `msg`: copies its bytes.
    pub(crate) fn keep(&mut self, msg: &[u8], header: &Header<'_>) -> Result {
        self.clear();
        let bytes = msg.get(..header.hdr_len).ok_or(EINVAL)?;
        self.bytes.extend_from_slice(bytes, GFP_KERNEL)?;
        // INVARIANT: the shape of a header decoded from `msg`, whose first
        // `hdr_len` bytes these are.
        self.shape = Some(header.shape());
        // INVARIANT: its Write chunks' count and sizes.
        self.writes = header.writes.len();
        for (t, c) in self.write_totals.iter_mut().zip(header.writes.iter()) {
            *t = c.total();
        }
        Ok(())
    }

    /// The size of the kept header's Write chunk `k`, `None` if it has no
    /// such chunk; fails if no header is kept, or (`E2BIG`) for a chunk
    /// past the first [`MAX_WRITE_CHUNKS`] (the decoder's limit refuses
    /// such Calls).
    pub(crate) fn write_chunk_total(&self, k: usize) -> Result<Option<u32>> {
        if self.shape.is_none() {
            return Err(EINVAL);
        }
        if k >= self.writes {
            return Ok(None);
        }
        self.write_totals.get(k).copied().map(Some).ok_or(E2BIG)
    }

    /// The kept header; fails if none is kept.
    pub(crate) fn get(&self) -> Result<Header<'_>> {
        self.shape.and_then(|s| s.header(&self.bytes)).ok_or(EINVAL)
    }

    /// Forgets the header (storage kept).
    pub(crate) fn clear(&mut self) {
        self.shape = None;
        self.bytes.clear();
        self.writes = 0;
    }
}

/// One RPC's transport state.
pub(crate) struct CallCtxt {
    /// The Call's transport header, kept for the Reply.
    pub(crate) hdr: CallHeader,
    /// Per Write chunk of the Call, by index: the payload nfsd placed in it.
    pub(crate) payloads: [Payload; MAX_WRITE_CHUNKS],
    /// Write chunks handed out to `xpo_result_payload` so far.
    pub(crate) next_write: usize,
    /// The Reply's transport header and inline part (`SEND_SIZE` bytes,
    /// mapped for the device to read).
    pub(crate) send_buf: MappedBuf,
    /// Work requests being built.
    pub(crate) chain: Chain,
    /// The Call's pages while its RDMA Reads are in flight and until an
    /// nfsd thread picks the Call up (`sq::post_reads`), with the Reads'
    /// mappings of them and the FRMR pool entries this RPC holds.
    pub(crate) args: MappedPages,
    /// The Reply's pages, taken from nfsd while its Writes are in flight,
    /// with the Writes' mappings of them.
    pub(crate) reply: MappedPages,
    /// Where the Call's bytes lie in its pages once its Reads complete.
    pub(crate) call_shape: ArgShape,
    /// Storage for the steps of the Call's assembly
    /// (`call::plan`), kept with the context so that no receive
    /// initializes a fresh array.
    pub(crate) steps: Steps,
    /// Completion of a Reply's chain (`sq::post_reply`).
    pub(crate) reply_cqe: Cqe<CallCtxt, REPLY>,
    /// Completion of the Call's Read chain (`sq::post_reads`).
    pub(crate) read_cqe: Cqe<CallCtxt, READS>,
    /// Completion of a chain's unsignaled requests, which come only when
    /// they fail or are flushed.
    pub(crate) err_cqe: Cqe<CallCtxt, ERR>,
    /// Send-queue slots the posted chain holds until its last completion.
    pub(crate) sq_held: u32,
    /// The first failed completion's status (0: none).
    pub(crate) status: Atomic<u32>,
}

const NO_PAYLOAD: Payload = Payload {
    position: 0,
    len: 0,
};

impl CallCtxt {
    /// A context whose send buffer and RPC mappings are on `dev`. Its
    /// chains' completions come with the connection they were posted on
    /// (`sq`), so it keeps no reference to its connection.
    pub(crate) fn new(dev: &DmaDev) -> Result<KBox<Self>> {
        let hdr = CallHeader::with_capacity(RECV_SIZE as usize)?;
        let send_buf = MappedBuf::new(dev, SEND_SIZE as usize, Dir::ToDevice)?;
        let ctxt = Self {
            hdr,
            payloads: [NO_PAYLOAD; MAX_WRITE_CHUNKS],
            next_write: 0,
            send_buf,
            chain: Chain::new(),
            args: MappedPages::new(dev)?,
            reply: MappedPages::new(dev)?,
            call_shape: ArgShape::Stream { len: 0 },
            steps: NO_STEPS,
            reply_cqe: Cqe::for_chains(),
            read_cqe: Cqe::for_chains(),
            err_cqe: Cqe::for_errors(),
            sq_held: 0,
            status: Atomic::new(0),
        };
        // If the box cannot be allocated, `ctxt` drops and unmaps.
        Ok(KBox::new(ctxt, GFP_KERNEL)?)
    }

    /// Forgets the previous RPC.
    pub(crate) fn reset(&mut self) {
        self.hdr.clear();
        self.payloads = [NO_PAYLOAD; MAX_WRITE_CHUNKS];
        self.next_write = 0;
        self.chain.clear();
        self.put_pages();
        self.call_shape = ArgShape::Stream { len: 0 };
    }

    /// Undoes the mappings of the Reply and Call pages the context holds
    /// and gives the pages back (the device is done with them).
    fn put_pages(&mut self) {
        self.reply.clear();
        self.args.clear();
    }

    /// Appends to the chain the Send of the send buffer's first `len`
    /// bytes (with the PD's local DMA lkey `lkey`), made visible to the
    /// device first; it invalidates `invalidate` at the peer if given.
    pub(crate) fn send_inline(&mut self, lkey: u32, len: usize, invalidate: Option<u32>) -> Result {
        let len = len.min(SEND_SIZE as usize);
        self.send_buf.sync_for_device(len);
        let sge = Sge {
            addr: self.send_buf.addr(),
            // At most `SEND_SIZE`, a `u32`.
            length: len as u32,
            lkey,
        };
        self.chain.send(&[sge], invalidate)
    }
}

impl Drop for CallCtxt {
    fn drop(&mut self) {
        self.put_pages();
        // The send buffer unmaps as it drops: no work request uses it, as a
        // posted chain holds its context until its last completion (one
        // posted in part, until the teardown reclaims it: `Orphan`).
    }
}

/// A connection's per-RPC contexts: those not in use, kept for the next
/// RPC, and a bound on how many exist.
#[pin_data]
pub(crate) struct CtxtPool {
    #[pin]
    inner: SpinLock<PoolInner>,
}

struct PoolInner {
    /// Contexts not in use; its capacity is the bound.
    free: KVec<KBox<CallCtxt>>,
    /// Contexts in existence (free or in use).
    total: usize,
}

impl CtxtPool {
    /// No context, and none may be made until [`CtxtPool::fill`].
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            inner <- new_spinlock!(PoolInner {
                free: KVec::new(),
                total: 0,
            }),
        })
    }

    /// Makes `n` contexts on `dev` and bounds the pool at `max` (at
    /// accept, before any use).
    pub(crate) fn fill(&self, dev: &DmaDev, n: usize, max: usize) -> Result {
        let mut free = KVec::with_capacity(max, GFP_KERNEL)?;
        for _ in 0..n {
            free.push(CallCtxt::new(dev)?, GFP_KERNEL)?;
        }
        let mut pool = self.inner.lock();
        pool.total = free.len();
        pool.free = free;
        Ok(())
    }

    /// A context for a new RPC: a free one (reset when it came back), or
    /// one `make` makes
    /// while the pool is below its bound. Only `for_answer` (the RDMA_ERROR
    /// answering a Call over the bound) may take the last context of the
    /// bound.
    pub(crate) fn get(
        &self,
        for_answer: bool,
        make: impl FnOnce() -> Result<KBox<CallCtxt>>,
    ) -> Option<KBox<CallCtxt>> {
        {
            let mut pool = self.inner.lock();
            let bound = pool.free.capacity();
            let limit = if for_answer {
                bound
            } else {
                bound.saturating_sub(1)
            };
            let in_use = pool.total.saturating_sub(pool.free.len());
            if in_use >= limit {
                return None;
            }
            // Contexts come back reset (`Connection::ctxt_put`).
            if let Some(c) = pool.free.pop() {
                return Some(c);
            }
            pool.total += 1;
        }
        match make() {
            Ok(c) => Some(c),
            Err(_) => {
                self.inner.lock().total -= 1;
                None
            }
        }
    }

    /// Takes back `c`, already reset; frees it if the pool is full.
    pub(crate) fn put(&self, c: KBox<CallCtxt>) {
        let mut pool = self.inner.lock();
        // Room for the bound was reserved by `fill`.
        if let Err(c) = pool.free.push_within_capacity(c) {
            pool.total -= 1;
            drop(pool);
            drop(c);
        }
    }
}
