// SPDX-License-Identifier: GPL-2.0

//! A connected transport: its RDMA resources, CM and QP events, teardown.
//!
//! Built by [`super::accept`] when an nfsd thread accepts a connection
//! request; from then on sunrpc's reference count owns it. Teardown order
//! matters: [`Connection::free`] drains the QP first (every posted request
//! completes, flushed, and Replies in flight give their contexts back),
//! then the fields drop, [`Resources`] in its field order: the QP is
//! destroyed, then the buffers and MRs it used, the CQs and the PD, and the
//! CM id last, so no event handler or completion ever sees a half-freed
//! connection.

use kernel::{
    new_condvar, new_spinlock,
    prelude::*,
    sync::{
        atomic::{ordering::Relaxed, Atomic},
        Arc, CondVar, SetOnce, SpinLock,
    },
};

use super::{
    ctxt::CallCtxt,
    frmr::FrmrPool,
    recv::RecvRing,
    registry::{ConnAttrs, ConnView, Registry},
};
use crate::{
    bindings,
    log::pr_warn_ratelimited,
    rdma::{
        cm::{CmEvent, CmId, CmIdRef},
        qp::Qp,
        Cq, Pd,
    },
    sunrpc::{Flag, SvcXprt},
    sysfs::Dir,
};

/// The RDMA objects of a connection, in teardown order. Some are only held
/// here for the QP's sake (`_`-named) until the data path uses them.
pub(crate) struct Resources {
    pub(crate) qp: Qp,
    pub(crate) recv: RecvRing,
    pub(crate) frmrs: Option<FrmrPool>,
    pub(crate) _send_cq: Cq,
    pub(crate) _recv_cq: Cq,
    pub(crate) pd: Pd,
    pub(crate) cm_id: CmId,
    /// Send SGEs per work request the QP allows.
    pub(crate) send_sge: u32,
    /// SGEs per RDMA Read the device allows.
    pub(crate) read_sge: u32,
}

/// The send queue's free slots.
struct SendQueue {
    avail: u32,
    total: u32,
    closed: bool,
}

/// The pool of per-RPC contexts.
struct CtxtPool {
    free: KVec<KBox<CallCtxt>>,
    /// Contexts in existence (free or in use).
    total: usize,
}

/// A connected transport.
#[repr(C)]
#[pin_data]
pub(crate) struct Connection {
    /// sunrpc's part (first: shared layout with [`super::Listener`]).
    xprt: SvcXprt,
    /// Per-RPC contexts (before `res`: they unmap buffers on the device).
    #[pin]
    ctxts: SpinLock<CtxtPool>,
    /// Free send-queue slots.
    #[pin]
    sq: SpinLock<SendQueue>,
    /// FRMR pool entries not in use.
    #[pin]
    mr_free: SpinLock<KVec<u16>>,
    /// Waiters for send-queue slots or MRs.
    #[pin]
    room: CondVar,
    /// Set once accept has built them.
    res: SetOnce<Resources>,
    /// Indices of received buffers waiting for `xpo_recvfrom`, oldest
    /// first. Capacity for every buffer is reserved up front, so the
    /// completion path never allocates.
    #[pin]
    ready: SpinLock<KVec<u16>>,
    /// The connection is established (receives may be handed to nfsd).
    established: Atomic<bool>,
    /// Teardown has begun: completions and events must not touch sunrpc.
    dying: Atomic<bool>,
    /// `/sys/kernel/svcrdma_rs/connections/<id>/`.
    sysfs: SetOnce<Dir<ConnView>>,
    /// What sysfs and logs say about the connection.
    pub(crate) info: ConnAttrs,
    pub(crate) id: u64,
    registry: Arc<Registry>,
}

impl Connection {
    /// A connection not yet known to sunrpc; `recv_buffers` sizes its ready
    /// queue.
    pub(crate) fn new(
        registry: Arc<Registry>,
        info: ConnAttrs,
        recv_buffers: usize,
    ) -> impl PinInit<Self, Error> {
        let id = registry.next_conn_id();
        try_pin_init!(Self {
            xprt: SvcXprt::uninit(),
            ctxts <- new_spinlock!(CtxtPool {
                free: KVec::new(),
                total: 0,
            }),
            sq <- new_spinlock!(SendQueue {
                avail: 0,
                total: 0,
                closed: false,
            }),
            mr_free <- new_spinlock!(KVec::new()),
            room <- new_condvar!(),
            res: SetOnce::new(),
            ready <- new_spinlock!(KVec::with_capacity(recv_buffers, GFP_KERNEL)?),
            established: Atomic::new(false),
            dying: Atomic::new(false),
            sysfs: SetOnce::new(),
            info,
            id,
            registry,
        })
    }

    /// sunrpc's part.
    pub(crate) fn xprt(&self) -> &SvcXprt {
        &self.xprt
    }

    /// The resources, once accept has built them.
    pub(crate) fn res(&self) -> Option<&Resources> {
        self.res.as_ref()
    }

    /// Installs the resources (once).
    pub(crate) fn set_res(&self, res: Resources) -> bool {
        self.res.populate(res)
    }

    /// Creates the connection's sysfs directory.
    pub(crate) fn publish(&self, attrs: ConnAttrs) -> Result {
        let dir = self.registry.add_connection(self.id, attrs)?;
        self.sysfs.populate(dir);
        Ok(())
    }

    /// A backchannel is bound to the connection: sysfs shows it.
    #[cfg(svcrdma_rs_backchannel)]
    pub(crate) fn backchannel_bound(&self) {
        if let Some(dir) = self.sysfs.as_ref() {
            dir.data().set_backchannel();
        }
    }

    /// A receive completed: queue it for nfsd.
    pub(crate) fn received(&self, index: u16) {
        let queued = self.ready.lock().push_within_capacity(index).is_ok();
        if !queued {
            // Cannot happen: one slot per buffer. Treat as fatal, safely.
            self.fatal();
            return;
        }
        self.xprt.set_flag(Flag::Data);
        if self.established.load(Relaxed) && !self.dying.load(Relaxed) {
            self.xprt.enqueue();
        }
    }

    /// A receive failed. A flush means the QP is going down (we asked);
    /// anything else is an error on the connection: close it.
    pub(crate) fn receive_failed(&self, status: u32) {
        if status != bindings::IB_WC_WR_FLUSH_ERR {
            pr_warn_ratelimited!(
                "connection {}: receive failed with status {}, closing\n",
                self.id,
                status
            );
            self.fatal();
        }
    }

    /// Closes the connection from any context (once per connection).
    fn fatal(&self) {
        if !self.dying.load(Relaxed) {
            self.xprt.deferred_close();
        }
    }

    /// Closes the connection and wakes threads waiting for its resources.
    /// The QP goes to the error state at once: the client can no longer
    /// touch our memory, and every posted request completes (flushed), so
    /// no thread waits on a peer that may never answer.
    pub(crate) fn close(&self) {
        self.stop();
        self.fatal();
    }

    /// The data-path half of [`Connection::close`], without asking sunrpc
    /// to close (for `xpo_detach`, which sunrpc calls while closing).
    fn stop(&self) {
        if let Some(r) = self.res() {
            r.qp.to_error();
        }
        self.sq.lock().closed = true;
        // A thread between its check and its sleep holds one of the locks
        // the waits use: taking both orders the wake-up after its sleep.
        drop(self.mr_free.lock());
        self.room.notify_all();
    }

    /// Drops every pooled context (on a failed accept, while the device is
    /// still held).
    pub(crate) fn clear_pools(&self) {
        let free = core::mem::take(&mut self.ctxts.lock().free);
        drop(free);
    }

    /// Sets up the data path's pools once accept has built the resources:
    /// `sq_slots` send-queue slots, `ctxts` contexts (at most `max_ctxts`
    /// ever), and the FRMR pool's entries if any.
    pub(crate) fn init_pools(
        &self,
        dev: &crate::rdma::Device<'_>,
        sq_slots: u32,
        ctxts: usize,
        max_ctxts: usize,
        mrs: usize,
    ) -> Result {
        {
            let mut sq = self.sq.lock();
            sq.avail = sq_slots;
            sq.total = sq_slots;
        }
        let mut free = KVec::with_capacity(max_ctxts, GFP_KERNEL)?;
        for _ in 0..ctxts {
            // Pooled contexts drop before `res` (field order), whose CM id
            // holds the device; posted ones come back first (`free` drains).
            // SAFETY: so the device and the connection outlive the contexts.
            let c = unsafe { CallCtxt::new(dev, self) }?;
            free.push(c, GFP_KERNEL)?;
        }
        {
            let mut pool = self.ctxts.lock();
            pool.total = free.len();
            pool.free = free;
        }
        let mut ids = KVec::with_capacity(mrs, GFP_KERNEL)?;
        for i in 0..mrs {
            ids.push(u16::try_from(i).map_err(|_| EINVAL)?, GFP_KERNEL)?;
        }
        *self.mr_free.lock() = ids;
        Ok(())
    }

    /// Takes `n` send-queue slots, waiting while others hold them.
    pub(crate) fn sq_reserve(&self, n: u32) -> Result {
        let mut sq = self.sq.lock();
        if n > sq.total {
            return Err(EMSGSIZE);
        }
        loop {
            if sq.closed {
                return Err(ENOTCONN);
            }
            if sq.avail >= n {
                sq.avail -= n;
                return Ok(());
            }
            self.room.wait(&mut sq);
        }
    }

    /// Gives back `n` send-queue slots.
    pub(crate) fn sq_release(&self, n: u32) {
        {
            let mut sq = self.sq.lock();
            sq.avail = (sq.avail + n).min(sq.total);
        }
        self.room.notify_all();
    }

    /// Takes `n` FRMR pool entries into `out`, waiting while others hold
    /// them.
    pub(crate) fn mrs_take(&self, n: usize, out: &mut KVec<u16>) -> Result {
        out.reserve(n, GFP_KERNEL)?;
        let total = self
            .res()
            .and_then(|r| r.frmrs.as_ref())
            .map_or(0, |f| f.len());
        if n > total {
            return Err(EMSGSIZE);
        }
        let mut free = self.mr_free.lock();
        loop {
            if self.sq.lock().closed {
                return Err(ENOTCONN);
            }
            if free.len() >= n {
                for _ in 0..n {
                    if let Some(i) = free.pop() {
                        out.push_within_capacity(i).map_err(|_| ENOMEM)?;
                    }
                }
                return Ok(());
            }
            self.room.wait(&mut free);
        }
    }

    /// Returns the FRMR pool entries in `held`.
    pub(crate) fn mrs_give(&self, held: &mut KVec<u16>) {
        {
            let mut free = self.mr_free.lock();
            while let Some(i) = held.pop() {
                // Capacity for every entry was reserved at creation.
                let _ = free.push_within_capacity(i);
            }
        }
        self.room.notify_all();
    }

    /// A context for a new RPC: from the pool, or a new one while the pool
    /// is below its bound.
    pub(crate) fn ctxt_get(&self) -> Option<KBox<CallCtxt>> {
        {
            let mut pool = self.ctxts.lock();
            if let Some(mut c) = pool.free.pop() {
                c.reset();
                return Some(c);
            }
            if pool.total >= pool.free.capacity() {
                return None;
            }
            pool.total += 1;
        }
        let dev = self.res().and_then(|r| r.cm_id.device());
        // SAFETY: as in `init_pools`.
        let made = dev.map(|d| unsafe { CallCtxt::new(&d, self) });
        match made {
            Some(Ok(c)) => Some(c),
            _ => {
                self.ctxts.lock().total -= 1;
                None
            }
        }
    }

    /// Gives a context back.
    pub(crate) fn ctxt_put(&self, mut c: KBox<CallCtxt>) {
        c.reset();
        if !c.mrs.is_empty() {
            // Its RPC failed before invalidating them: they may still be
            // registered for the client to write. The QP goes down first,
            // then they are unmapped and returned.
            self.close();
        }
        if let Some(r) = self.res() {
            if let Some(f) = r.frmrs.as_ref() {
                let dev = r.cm_id.device().map(|d| d.as_ptr());
                for &i in c.mrs.iter() {
                    if let Some(dev) = dev {
                        // SAFETY: the context holds entry `i`.
                        unsafe { f.unmap(dev, i) };
                    }
                }
            }
        }
        if !c.mrs.is_empty() {
            self.mrs_give(&mut c.mrs);
        }
        let mut pool = self.ctxts.lock();
        // Capacity for the bound was reserved at creation.
        if let Err(c) = pool.free.push_within_capacity(c) {
            pool.total -= 1;
            drop(pool);
            drop(c);
        }
    }

    /// Takes the oldest received buffer for `xpo_recvfrom`, clearing
    /// `XPT_DATA` when none is left.
    pub(crate) fn next_received(&self) -> Option<u16> {
        let mut q = self.ready.lock();
        let next = if q.is_empty() { None } else { q.remove(0).ok() };
        if q.is_empty() {
            self.xprt.clear_flag(Flag::Data);
        }
        next
    }

    /// The connection behind a pointer sunrpc passed to one of our ops.
    ///
    /// # Safety
    ///
    /// `ptr` must be the `xprt` of a live `Connection` (one of ours without
    /// `XPT_LISTENER`), alive for `'a`.
    pub(crate) unsafe fn from_svc_xprt<'a>(ptr: *mut bindings::svc_xprt) -> &'a Self {
        // SAFETY: `xprt` is the first field of a `#[repr(C)]` struct.
        unsafe { &*ptr.cast::<Self>() }
    }

    /// Frees a connection sunrpc has released (its `xpo_free`), or one whose
    /// accept failed.
    ///
    /// # Safety
    ///
    /// `ptr` must be the `xprt` of a `Connection` leaked from a pinned
    /// `KBox`, with no reference left.
    pub(crate) unsafe fn free(ptr: *mut bindings::svc_xprt) {
        {
            // SAFETY: as in `from_svc_xprt`; only completions still refer
            // to it, through shared references too.
            let conn = unsafe { &*ptr.cast::<Self>() };
            // Completions flushed by the drain and late CM events must
            // leave sunrpc alone from here on.
            conn.dying.store(true, Relaxed);
            // Replies posted without waiting hold contexts that their last
            // completion returns to the pool: drain while the pool and the
            // send-queue accounting exist, before anything is dropped.
            if let Some(r) = conn.res() {
                r.qp.drain();
            }
        }
        // SAFETY: as in `from_svc_xprt`; after the drain nothing refers to
        // it any more.
        drop(unsafe { Pin::new_unchecked(KBox::from_raw(ptr.cast::<Self>())) });
    }

    /// `xpo_detach`: start disconnecting.
    pub(crate) fn detach(&self) {
        self.stop();
        if let Some(r) = self.res.as_ref() {
            r.cm_id.disconnect();
        }
    }
}

/// CM events on an accepted connection.
///
/// # Safety
///
/// Called by the RDMA CM only, for an id whose context is its live
/// `Connection` (set by accept; the id is destroyed before the connection
/// is freed).
pub(crate) unsafe extern "C" fn conn_handler(
    id: *mut bindings::rdma_cm_id,
    event: *mut bindings::rdma_cm_event,
) -> c_int {
    // SAFETY: the CM passes a live id and event for the call's duration.
    let (id, event) = unsafe { (CmIdRef::from_raw(id), CmEvent::from_raw(event)) };
    // SAFETY: the context is the live connection (function contract).
    let conn = unsafe { &*id.context().cast::<Connection>() };
    match event.kind() {
        bindings::RDMA_CM_EVENT_ESTABLISHED => {
            conn.established.store(true, Relaxed);
            // Receives that arrived before the handshake finished.
            if !conn.dying.load(Relaxed) {
                conn.xprt.enqueue();
            }
        }
        bindings::RDMA_CM_EVENT_DISCONNECTED
        | bindings::RDMA_CM_EVENT_DEVICE_REMOVAL
        | bindings::RDMA_CM_EVENT_CONNECT_ERROR
        | bindings::RDMA_CM_EVENT_UNREACHABLE
        | bindings::RDMA_CM_EVENT_REJECTED
        | bindings::RDMA_CM_EVENT_ADDR_CHANGE => conn.fatal(),
        _ => {}
    }
    0
}

/// Asynchronous QP events.
///
/// # Safety
///
/// Called by the device only, with the context given at QP creation: the
/// live `Connection` (the QP is destroyed before it is freed).
pub(crate) unsafe extern "C" fn qp_event(event: *mut bindings::ib_event, context: *mut c_void) {
    // SAFETY: the context is the live connection (function contract).
    let conn = unsafe { &*context.cast::<Connection>() };
    // SAFETY: the device passes a valid event for the call's duration.
    let kind = unsafe { (*event).event };
    match kind {
        bindings::IB_EVENT_PATH_MIG
        | bindings::IB_EVENT_COMM_EST
        | bindings::IB_EVENT_SQ_DRAINED
        | bindings::IB_EVENT_QP_LAST_WQE_REACHED => {}
        _ => {
            pr_warn_ratelimited!("connection {}: QP event {}, closing\n", conn.id, kind);
            conn.fatal();
        }
    }
}
