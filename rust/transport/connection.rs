// SPDX-License-Identifier: GPL-2.0

//! A connected transport: its RDMA resources, CM and QP events, teardown.
//!
//! Built by [`super::accept`] when an nfsd thread accepts a connection
//! request; from then on sunrpc's reference count owns it. Teardown order
//! matters: [`Connection::free`] drains the QP first (every posted request
//! completes, flushed, and Replies in flight give their contexts back),
//! then the fields drop, [`Resources`] in its field order: the QP is
//! destroyed, then the MRs it used, then the rest of the endpoint (receive
//! buffers, CQs, PD, and the CM id last: `rdma::endpoint`), so no event
//! handler or completion ever sees a half-freed connection.

use kernel::{
    new_spinlock,
    prelude::*,
    sync::{
        atomic::{
            ordering::{Acquire, Full, Relaxed, Release},
            Atomic,
        },
        barrier::smp_mb,
        Arc, SetOnce, SpinLock,
    },
};

use super::{
    ctxt::{CallCtxt, CtxtPool},
    fifo::Fifo,
    frmr::MrFree,
    registry::{ConnAttrs, ConnView, Registry},
    sink::Sink,
    sq_slots::SendQueue,
    stats::{count, ConnStats, ConnStatsView},
};
use crate::{
    anchor::{impl_anchored, Anchor},
    log::pr_warn_ratelimited,
    proto::inline::RECV_BATCH,
    rdma::{
        cm::{CmEvent, CmEventKind, CmHandler, CmIdRef},
        dma::DmaDev,
        mr::MrLease,
        owned::{Orphan, SendOrder},
        qp::{QpEvent, QpEventHandler},
        recv::RecvSlot,
        wc_status,
        wr::Tally,
        Pd,
    },
    sunrpc::{impl_has_svc_xprt, Flag, SvcXprt},
    sysfs::Dir,
};

/// A connection's RDMA objects, its receive buffers among them.
pub(crate) type Endpoint = crate::rdma::endpoint::Endpoint<Connection>;

/// The RDMA objects of a connection. The QP goes first, whatever the field
/// order (`Drop`): then no work request uses the MRs. The MRs go before the
/// endpoint, whose PD they are on.
pub(crate) struct Resources {
    /// Where RDMA Reads land (the FRMR pool's MRs under FRMR).
    pub(crate) sink: Sink,
    /// The CM id, PD, CQs, QP and receive buffers.
    pub(crate) ep: Endpoint,
    /// Send SGEs per work request the QP allows.
    pub(crate) send_sge: u32,
}

impl Resources {
    /// The protection domain.
    pub(crate) fn pd(&self) -> &Pd {
        self.ep.pd()
    }
}

impl Drop for Resources {
    fn drop(&mut self) {
        self.ep.destroy();
    }
}

/// A connected transport.
///
/// Its CM id and QP deliver their events to it ([`CmHandler`],
/// [`QpEventHandler`]), each holding a count on `anchor` until
/// [`Connection::free`] silences the id and destroys the QP (the QP's count
/// also covers the completions, which come with the connection); its drop
/// waits for the counts (which, after `free`, it never has to).
#[repr(C)]
#[pin_data(PinnedDrop)]
pub(crate) struct Connection {
    /// sunrpc's part (first: shared layout with [`super::Listener`]).
    xprt: SvcXprt,
    /// Per-RPC contexts (each keeps the device it maps on).
    #[pin]
    ctxts: CtxtPool,
    /// Set once accept has built them.
    res: SetOnce<Resources>,
    /// Free send-queue slots (closed with the connection). After `res`:
    /// alive while a QP event or completion may still come.
    #[pin]
    sq: SendQueue,
    /// FRMR pool entries not in use (closed with the connection).
    #[pin]
    mr_free: MrFree,
    /// The order of the chains posted on the send queue, and the contexts
    /// of Replies posted without a completion of their own.
    #[pin]
    order: SendOrder<CallCtxt>,
    /// Received buffers waiting for `xpo_recvfrom`, and whether the
    /// connection is established; see [`Ready`].
    #[pin]
    ready: SpinLock<Ready>,
    /// Received buffers nfsd is done with, waiting to be posted again in
    /// a batch ([`Connection::recv_released`]).
    #[pin]
    released: SpinLock<Released>,
    /// Teardown has begun: completions and events must not touch sunrpc.
    dying: Atomic<bool>,
    /// Contexts of chains posted in part with no completion to return them
    /// ([`PostError::Leaked`](crate::rdma::owned::PostError)): freed by
    /// [`Connection::free`] once the QP is destroyed.
    #[pin]
    orphans: SpinLock<KVec<Orphan<CallCtxt>>>,
    /// nfsd threads in `xpo_recvfrom` on this connection (see
    /// [`Connection::enter_recv`]).
    in_recv: Atomic<u32>,
    /// Receive buffers posted whose receive has not completed (for the
    /// `recv_starved` counter only; see [`Connection::receives_posting`]).
    recv_posted: Atomic<i64>,
    /// [`Ready::established`], for reading without the lock
    /// ([`Connection::receives_directly`]).
    established_now: Atomic<bool>,
    /// The receive CQ notified completions that no nfsd thread has polled
    /// yet ([`Connection::receives_ready`]); `XPT_DATA` stays set meanwhile.
    recv_pending: Atomic<bool>,
    /// An nfsd thread is polling the receive CQ
    /// ([`Connection::poll_receives`]).
    recv_polling: Atomic<bool>,
    /// Bytes of nfsd's argument buffers, 0 until an nfsd thread received
    /// on the connection ([`Connection::learn_arg_capacity`]).
    arg_capacity: Atomic<u32>,
    /// `/sys/kernel/svcrdma_rs/connections/<id>/`.
    /// (and its `stats/`, first: dropped before its parent).
    sysfs: SetOnce<(Dir<ConnStatsView>, Dir<ConnView>)>,
    /// What the connection has done ([`super::stats`]).
    pub(crate) stats: Arc<ConnStats>,
    /// What sysfs and logs say about the connection.
    pub(crate) info: ConnAttrs,
    pub(crate) id: u64,
    registry: Arc<Registry>,
    /// Counts the CM id and the QP that deliver events to the connection.
    anchor: Anchor,
}

impl_anchored! {
    impl Anchored for Connection { self.anchor }
}

impl_has_svc_xprt!(Connection { xprt });

/// What an nfsd thread in `xpo_recvfrom` takes ([`Connection::next_work`]).
pub(crate) enum Work {
    /// A Call whose RDMA Reads completed.
    ReadsDone(KBox<CallCtxt>),
    /// A received buffer.
    Received(RecvSlot),
}

/// An nfsd thread receiving on a connection ([`Connection::enter_recv`]).
pub(crate) struct InRecv<'a>(&'a Connection);

impl Drop for InRecv<'_> {
    fn drop(&mut self) {
        let c = self.0;
        c.in_recv.fetch_sub(1, Full);
        // The connection may have refused threads at the bound (or at an
        // older one: the thread count can change): with this one gone,
        // sunrpc looks again. It holds the transport while we are in
        // `xpo_recvfrom`, and does nothing unless `XPT_DATA` is set.
        c.xprt.enqueue();
    }
}

/// The receive side's hand-over to nfsd.
///
/// A receive may complete before the CM reports the connection
/// established (the peer sends its first Call at once: on soft-RoCE about
/// one new connection in four), and then it waits here until the event.
/// The queue, the flag and `XPT_DATA` change only under one lock, so
/// whichever of the completion and the event comes second sees what the
/// first did and enqueues the transport. (With the flag a relaxed atomic
/// beside the queue, the event's store and the completion's `XPT_DATA` could
/// each miss the other, a store-load reordering that x86 allows, and the
/// Call would wait for the client's next message.)
struct Ready {
    /// Received buffers, oldest first. Capacity for every buffer is
    /// reserved up front, so the completion path never allocates.
    queue: Fifo<RecvSlot>,
    /// Calls whose RDMA Reads completed, oldest first, waiting for a thread
    /// to pick them up. Capacity for every context is reserved when the
    /// pools are made ([`Connection::init_pools`]).
    reads: Fifo<KBox<CallCtxt>>,
    /// The CM reported the connection established.
    established: bool,
}

/// Receive buffers given back, posted again `batch` at a time: the
/// connection has `batch - 1` buffers beyond what its credits and the
/// backchannel need (`proto::inline::Depths`), so those waiting here never
/// leave a Call the client may send without a posted buffer.
struct Released {
    /// Fewer than `batch` at rest; capacity for [`RECV_BATCH`] reserved up
    /// front.
    slots: KVec<RecvSlot>,
    /// At most [`RECV_BATCH`].
    batch: usize,
}

/// Buffers to post again together ([`Connection::recv_released`]).
pub(crate) type RecvBatch = [Option<RecvSlot>; RECV_BATCH as usize];

impl Ready {
    /// Whether anything waits for `xpo_recvfrom`.
    fn has_work(&self) -> bool {
        !self.queue.is_empty() || !self.reads.is_empty()
    }
}

impl Connection {
    /// A connection not yet known to sunrpc; `recv_buffers` sizes its ready
    /// queue, and released buffers are posted `recv_batch` at a time.
    pub(crate) fn new(
        registry: Arc<Registry>,
        info: ConnAttrs,
        recv_buffers: usize,
        recv_batch: usize,
    ) -> impl PinInit<Self, Error> {
        let id = registry.next_conn_id();
        try_pin_init!(Self {
            xprt: SvcXprt::uninit(),
            ctxts <- CtxtPool::new(),
            res: SetOnce::new(),
            sq <- SendQueue::empty(),
            mr_free <- MrFree::empty(),
            order <- SendOrder::new(),
            ready <- new_spinlock!(Ready {
                queue: Fifo::with_capacity(recv_buffers)?,
                reads: Fifo::new(),
                established: false,
            }),
            released <- new_spinlock!(Released {
                slots: KVec::with_capacity(RECV_BATCH as usize, GFP_KERNEL)?,
                batch: recv_batch.clamp(1, RECV_BATCH as usize),
            }),
            dying: Atomic::new(false),
            orphans <- new_spinlock!(KVec::new()),
            in_recv: Atomic::new(0),
            recv_posted: Atomic::new(0),
            established_now: Atomic::new(false),
            recv_pending: Atomic::new(false),
            recv_polling: Atomic::new(false),
            arg_capacity: Atomic::new(0),
            sysfs: SetOnce::new(),
            stats: Arc::new(ConnStats::new(info.device), GFP_KERNEL)?,
            info,
            id,
            registry,
            anchor: Anchor::new(),
        })
    }

    /// Takes back a received buffer whose message is no longer needed.
    /// Once a batch of them is waiting (or at once, should the list ever
    /// be full), `post` posts them again, in one call.
    ///
    /// `post` runs under the list's lock: a batch taken out of the list is
    /// posted before any other buffer can be released. Otherwise, while
    /// one thread held a batch unposted, others could release and answer
    /// more Calls, and the unposted buffers of answered Calls could
    /// outnumber the `batch - 1` spares ([`Released`]): a client within
    /// its credits would find no posted buffer. Posting a receive does not
    /// sleep.
    pub(crate) fn recv_released(
        &self,
        slot: RecvSlot,
        post: impl FnOnce(RecvBatch) -> Result,
    ) -> Result {
        let mut batch: RecvBatch = Default::default();
        let mut r = self.released.lock();
        match r.slots.push_within_capacity(slot) {
            Ok(()) if r.slots.len() < r.batch => return Ok(()),
            Ok(()) => {
                for b in batch.iter_mut() {
                    *b = r.slots.pop();
                }
            }
            Err(full) => batch[0] = Some(full.0),
        }
        self.receives_posting(batch.iter().flatten().count());
        post(batch)
    }

    /// `n` receive buffers are about to be posted (counted before the post,
    /// so their completions never find the count short). Only the
    /// `recv_starved` counter reads it: a receive that completes with none
    /// left posted is one after which the client's next Send would find no
    /// buffer, whether the others wait for nfsd, are being handled, or wait
    /// in a batch to be posted again.
    pub(crate) fn receives_posting(&self, n: usize) {
        if !cfg!(svcrdma_rs_no_stats) {
            self.recv_posted.fetch_add(n as i64, Relaxed);
        }
    }

    /// sunrpc's part.
    pub(crate) fn xprt(&self) -> &SvcXprt {
        &self.xprt
    }

    /// The resources, once accept has built them.
    pub(crate) fn res(&self) -> Option<&Resources> {
        self.res.as_ref()
    }

    /// Installs the resources (once). Their FRMR entries become free
    /// first: no thread takes any before the resources are there. (That
    /// cannot fail, room was made by `init_pools`; if it did, the
    /// connection would close.)
    pub(crate) fn set_res(&self, res: Resources) -> bool {
        // Mutant eager_mr_pool (issue 22 item 2 undone): every MR of the
        // pool allocated at accept, before any RPC (here, where the MRs
        // belong to the resources, which drop them before the PD).
        #[cfg(svcrdma_mutant = "eager_mr_pool")]
        let (res, eager) = {
            let mut res = res;
            let r = match &mut res.sink {
                Sink::Frmr { pool, .. } => pool.table.allocate_all(res.ep.pd()),
                Sink::Dma { .. } => Ok(()),
            };
            (res, r)
        };
        let filled = res.sink.pool().map_or(Ok(()), |p| self.mr_free.fill(p));
        #[cfg(svcrdma_mutant = "eager_mr_pool")]
        let filled = filled.and(eager);
        let set = self.res.populate(res);
        if filled.is_err() {
            self.close();
        }
        set
    }

    /// Creates the connection's sysfs directory.
    pub(crate) fn publish(&self, attrs: ConnAttrs) -> Result {
        self.registry.stats_started(&self.stats)?;
        let dirs = self.registry.add_connection(self.id, attrs, &self.stats)?;
        self.sysfs.populate(dirs);
        Ok(())
    }

    /// A backchannel is bound to the connection: sysfs shows it.
    #[cfg(svcrdma_rs_backchannel)]
    pub(crate) fn backchannel_bound(&self) {
        // Mutant no_bc_flag: sysfs never shows the backchannel bound.
        if cfg!(svcrdma_mutant = "no_bc_flag") {
            return;
        }
        if let Some((_, dir)) = self.sysfs.as_ref() {
            dir.data().set_backchannel();
        }
    }

    /// The FRMR pool allocated or retired entries: sysfs shows the counts.
    pub(crate) fn frmr_changed(&self) {
        let Some(pool) = self.res().and_then(|r| r.sink.pool()) else {
            return;
        };
        if let Some((_, dir)) = self.sysfs.as_ref() {
            dir.data().set_frmr(pool.allocated(), pool.retired());
        }
    }

    /// Counts a chain about to be posted.
    pub(crate) fn count_posted(&self, t: &Tally) {
        let c = &self.stats.c;
        count(&c.wr_read, t.reads);
        // Mutant stats_no_read_bytes: RDMA Read bytes are not counted.
        if !cfg!(svcrdma_mutant = "stats_no_read_bytes") {
            count(&c.bytes_read, t.read_bytes);
        }
        count(&c.wr_write, t.writes);
        count(&c.bytes_written, t.write_bytes);
        count(&c.wr_send, t.sends);
        count(&c.bytes_sent_inline, t.send_bytes);
        count(&c.mr_reg, t.regs);
        count(&c.mr_inv_local, t.local_invs);
        count(&c.mr_inv_remote, t.remote_invs);
    }

    /// A receive completed (successfully): one buffer fewer is posted.
    pub(crate) fn receive_completed(&self) {
        // This was the last posted buffer: none is left for the client.
        if !cfg!(svcrdma_rs_no_stats) && self.recv_posted.fetch_sub(1, Relaxed) <= 1 {
            count(&self.stats.c.recv_starved, 1);
        }
    }

    /// Whether a receive completion may start on its Call's work itself
    /// (`super::recv`): the connection is established, and neither
    /// sunrpc nor we are closing it.
    pub(crate) fn receives_directly(&self) -> bool {
        self.established_now.load(Relaxed) && !self.dying.load(Relaxed) && !self.closing()
    }

    /// Notes the size of nfsd's argument buffers (the same for every
    /// thread of the service: `rq_maxpages` pages less one), as an nfsd
    /// thread in `xpo_recvfrom` sees it.
    pub(crate) fn learn_arg_capacity(&self, bytes: u32) {
        if self.arg_capacity.load(Relaxed) != bytes {
            self.arg_capacity.store(bytes, Relaxed);
        }
    }

    /// The size of nfsd's argument buffers, once an nfsd thread received
    /// on the connection.
    pub(crate) fn arg_capacity(&self) -> Option<u32> {
        Some(self.arg_capacity.load(Relaxed)).filter(|&b| b != 0)
    }

    /// The receive CQ has completions (any context): an nfsd thread polls
    /// it ([`Connection::poll_receives`]) once the connection is
    /// established and until it is being freed; before and after, its work
    /// item does (`false`).
    ///
    /// The C transport, and this one before, handled every receive in a
    /// work item, which then woke an nfsd thread: two dispatches per Call.
    /// Here the thread that takes the Call handles its completion.
    pub(crate) fn receives_ready(&self) -> bool {
        if self.dying.load(Relaxed) || !self.established_now.load(Relaxed) {
            return false;
        }
        // Before `XPT_DATA`: a thread that clears it looks at this after
        // (`next_work`), each across a full barrier.
        self.recv_pending.store(true, Relaxed);
        smp_mb(Full);
        self.xprt.set_flag(Flag::Data);
        // `XPT_DATA` before the look at `XPT_BUSY` in `svc_xprt_enqueue`
        // (which a thread clears before it looks at `XPT_DATA`,
        // `svc_xprt_received`): one of the two sees the other.
        smp_mb(Full);
        // Mutant lost_recv_notify: the notification wakes no thread.
        if !cfg!(svcrdma_mutant = "lost_recv_notify") {
            self.xprt.enqueue();
        }
        true
    }

    /// Receive completions one `ib_poll_cq` call takes.
    const RECV_POLL_BATCH: i32 = 16;
    /// Receive completions one nfsd thread takes in full batches per
    /// [`Connection::poll_receives`]: a burst up to this size costs one
    /// thread's wake-up, not one per batch, and no thread drains an
    /// unbounded stream before any of its Calls starts. (A short batch
    /// followed by completions that came in as the CQ was re-armed is
    /// polled on top; those are bounded by the credits granted.)
    const RECV_POLL_BUDGET: i32 = 4 * Self::RECV_POLL_BATCH;

    /// Handles the receive completions the CQ notified
    /// ([`Connection::receives_ready`]), up to [`Self::RECV_POLL_BUDGET`]
    /// of them in full batches, in the calling nfsd thread,
    /// unless another thread is at it; re-arms the CQ once it is empty.
    /// With more left, `recv_pending` stays set (and with it `XPT_DATA`,
    /// `next_work`), so the next thread sunrpc sends polls on while this
    /// one works on the first Call.
    pub(crate) fn poll_receives(&self) {
        if !self.recv_pending.load(Acquire) || self.recv_polling.xchg(true, Acquire) {
            return;
        }
        let Some(res) = self.res() else {
            self.recv_polling.store(false, Release);
            return;
        };
        let mut budget = Self::RECV_POLL_BUDGET;
        loop {
            self.recv_pending.store(false, Relaxed);
            if res.ep.poll_receives(Self::RECV_POLL_BATCH) == Self::RECV_POLL_BATCH {
                budget -= Self::RECV_POLL_BATCH;
                if budget > 0 {
                    continue;
                }
                // Maybe more: the next thread's turn (unarmed meanwhile).
                self.recv_pending.store(true, Relaxed);
                break;
            }
            // Completions that came in after the last poll are reported
            // here (and none notifies): poll again.
            if !res.ep.arm_receives() {
                break;
            }
        }
        self.recv_polling.store(false, Release);
    }

    /// A receive completed: queue it for nfsd.
    pub(crate) fn received(&self, slot: RecvSlot) {
        let established = {
            let mut r = self.ready.lock();
            if r.queue.push_within_capacity(slot).is_err() {
                drop(r);
                // Cannot happen: one slot per buffer. Treat as fatal, safely.
                self.fatal();
                return;
            }
            self.xprt.set_flag(Flag::Data);
            r.established
        };
        // A thread polling in `xpo_recvfrom` takes the queue's head itself,
        // and `svc_xprt_received` calls in another thread for the rest.
        if established && !self.dying.load(Relaxed) && !self.recv_polling.load(Relaxed) {
            self.xprt.enqueue();
        }
    }

    /// The CM reported the connection established: from now on receives
    /// go to nfsd as they complete, and those that completed before are
    /// handed over here.
    fn established(&self) {
        {
            let mut r = self.ready.lock();
            r.established = true;
            self.established_now.store(true, Relaxed);
            // Mutant lost_first_call: receives that completed before the
            // event stay queued, unannounced, until the next one.
            if cfg!(svcrdma_mutant = "lost_first_call") {
                return;
            }
            if r.has_work() || self.recv_pending.load(Acquire) {
                self.xprt.set_flag(Flag::Data);
            }
        }
        if !self.dying.load(Relaxed) {
            self.xprt.enqueue();
        }
    }

    /// A receive failed. A flush means the QP is going down (we asked);
    /// anything else is an error on the connection: close it.
    pub(crate) fn receive_failed(&self, status: u32) {
        if status != wc_status::FLUSHED {
            pr_warn_ratelimited!(
                "connection {}: receive failed with status {}, closing\n",
                self.id,
                status
            );
            self.fatal();
        }
    }

    /// Closes the connection from any context (QP events may come in
    /// interrupt context): asks sunrpc to close it (once per connection)
    /// and sends every thread waiting for send-queue slots or MRs away, as
    /// every later such wait; nothing will serve them on this connection,
    /// and sunrpc needs a free thread to run `xpo_detach`.
    fn fatal(&self) {
        if !self.dying.load(Relaxed) {
            self.xprt.deferred_close();
        }
        self.close_pools();
    }

    /// Closes the connection and wakes threads waiting for its resources.
    /// The QP goes to the error state at once: the client can no longer
    /// touch our memory, and every posted request completes (flushed), so
    /// no thread waits on a peer that may never answer. Process context.
    pub(crate) fn close(&self) {
        self.stop();
        self.fatal();
    }

    /// The data-path half of [`Connection::close`], without asking sunrpc
    /// to close (for `xpo_detach`, which sunrpc calls while closing).
    fn stop(&self) {
        if let Some(r) = self.res() {
            r.ep.to_error();
        }
        self.close_pools();
    }

    /// Fails every wait for send-queue slots or MRs, now and later.
    fn close_pools(&self) {
        self.sq.close();
        self.mr_free.close();
    }

    /// Whether the connection can take more work without parking the
    /// thread (`xpo_has_wspace`): not while threads wait in line for its
    /// send-queue slots or MRs, nor while [`Connection::recv_cap`] threads
    /// are already receiving on it.
    pub(crate) fn has_wspace(&self) -> bool {
        // Mutant park_threads (issue 22 item 1 undone): always room, no
        // bound on receiving threads, whoever waits for slots or MRs.
        if cfg!(svcrdma_mutant = "park_threads") {
            return true;
        }
        !self.sq.waiting()
            && !self.mr_free.waiting()
            && self.in_recv.load(Relaxed) < self.recv_cap()
    }

    /// How many nfsd threads may be in `xpo_recvfrom` on this connection at
    /// once: all but a quarter of the service's (at least one left over).
    ///
    /// RDMA Reads no longer hold a thread (they complete asynchronously),
    /// but a receiving thread still sleeps when the connection is out of
    /// send-queue slots or MRs, which a peer that stopped answering holds
    /// until the QP gives up (~17 s on RoCE with our ACK timeout). Without a
    /// bound, sunrpc keeps handing this connection its threads (it releases
    /// `XPT_BUSY` early in each receive) until every thread sleeps there and
    /// every other client waits too. The bound is exact: sunrpc dispatches
    /// one thread at a time to a transport, and each counts itself
    /// ([`Connection::enter_recv`]) before it lets the next one in.
    fn recv_cap(&self) -> u32 {
        let threads = self.xprt.server_threads();
        let spare = (threads / 4).max(1);
        threads.saturating_sub(spare).max(1)
    }

    /// Counts the calling nfsd thread as receiving on this connection until
    /// the returned guard is dropped (at the end of `xpo_recvfrom`).
    pub(crate) fn enter_recv(&self) -> InRecv<'_> {
        self.in_recv.fetch_add(1, Full);
        InRecv(self)
    }

    /// Whether sunrpc is closing the connection.
    fn closing(&self) -> bool {
        self.xprt.test_flag(Flag::Close)
    }

    /// Sets up the data path's pools once accept has built the resources:
    /// `sq_slots` send-queue slots, room for `unsignaled` Replies without a
    /// completion of their own (apart from those slots), `ctxts` contexts
    /// (at most `max_ctxts` ever), and the FRMR pool's entries if any.
    pub(crate) fn init_pools(
        &self,
        dev: &DmaDev,
        sq_slots: u32,
        unsignaled: usize,
        ctxts: usize,
        max_ctxts: usize,
        mrs: usize,
    ) -> Result {
        self.sq.set_size(sq_slots);
        self.order.set_capacity(unsignaled);
        // Room for every context in the queue of finished Reads, so the
        // completion path never allocates.
        let reads = Fifo::with_capacity(max_ctxts)?;
        self.ready.lock().reads = reads;
        self.ctxts.fill(dev, ctxts, max_ctxts)?;
        self.mr_free.reserve(mrs)
    }

    /// The send queue's order ([`SendOrder`]).
    pub(crate) fn order(&self) -> &SendOrder<CallCtxt> {
        &self.order
    }

    /// Send-queue slots in all (the most one chain can hold).
    pub(crate) fn sq_slots(&self) -> u32 {
        self.sq.total()
    }

    /// Takes `n` send-queue slots, waiting in turn while others hold them;
    /// fails once the connection is closing.
    pub(crate) fn sq_reserve(&self, n: u32) -> Result {
        self.sq.reserve(
            n,
            || self.closing(),
            || {
                count(&self.stats.c.sq_waits, 1);
                crate::trace::sq_wait(self.id, n);
            },
        )
    }

    /// Takes `n` send-queue slots if they are free now and nobody waits
    /// for slots; never sleeps.
    pub(crate) fn sq_try_reserve(&self, n: u32) -> bool {
        self.sq.try_reserve(n, || self.closing())
    }

    /// Gives back `n` send-queue slots.
    pub(crate) fn sq_release(&self, n: u32) {
        self.sq.give_back(n);
    }

    /// Takes `n` FRMR pool entries into `out`, waiting in turn while others
    /// hold them; fails once the connection is closing.
    pub(crate) fn mrs_take(&self, n: usize, out: &mut KVec<MrLease>) -> Result {
        out.reserve(n, GFP_KERNEL)?;
        let total = self.res().map_or(0, |r| r.sink.mrs());
        if n > total {
            return Err(EMSGSIZE);
        }
        self.mr_free.take(
            n,
            out,
            || self.closing(),
            || count(&self.stats.c.mr_waits, 1),
        )
    }

    /// Takes `n` FRMR pool entries into `out` if they are free now and
    /// nobody waits for entries; never sleeps (nor allocates: `out` must
    /// have room).
    pub(crate) fn mrs_try_take(&self, n: usize, out: &mut KVec<MrLease>) -> bool {
        out.capacity() - out.len() >= n && self.mr_free.try_take(n, out, || self.closing())
    }

    /// Returns the FRMR pool entries in `held`.
    pub(crate) fn mrs_give(&self, held: &mut KVec<MrLease>) {
        self.mr_free.give(held);
    }

    /// A context for a new RPC: from the pool, or a new one while the pool
    /// is below its bound. Calls leave the last context of the bound to
    /// `for_answer` (the RDMA_ERROR answering a Call over the bound), so a
    /// client that sends more Calls than it may have in flight is told,
    /// not left waiting for a Reply that never comes.
    pub(crate) fn ctxt_get(&self, for_answer: bool) -> Option<KBox<CallCtxt>> {
        self.ctxts.get(for_answer, || {
            self.res()
                .ok_or(ENOTCONN)
                .and_then(|r| CallCtxt::new(r.ep.dma_dev()))
        })
    }

    /// Gives a context back.
    pub(crate) fn ctxt_put(&self, mut c: KBox<CallCtxt>) {
        c.reset();
        if !c.args.mrs().is_empty() {
            // Cannot happen: a Call's Read chain releases or retires every
            // MR it takes (`rw::reads_finished`). Were one still held, it might be registered, and
            // this may run in completion context, where it cannot be
            // deregistered: the connection closes and the entries stay out
            // of the pool, mapped, until the pool drops after the QP (the
            // Call's pages they map are leaked, never put).
            self.close();
            c.args.drop_mrs();
        }
        self.ctxts.put(c);
    }

    /// A Call's RDMA Reads completed ([`super::rw::reads_finished`]): it
    /// waits for a thread to pick it up.
    pub(crate) fn read_done(&self, ctxt: KBox<CallCtxt>) {
        let established = {
            let mut r = self.ready.lock();
            if let Err(ctxt) = r.reads.push_within_capacity(ctxt) {
                drop(r);
                // Cannot happen: room for every context. Treat as fatal.
                self.fatal();
                self.ctxt_put(ctxt);
                return;
            }
            self.xprt.set_flag(Flag::Data);
            r.established
        };
        if established && !self.dying.load(Relaxed) {
            self.xprt.enqueue();
        }
    }

    /// What `xpo_recvfrom` takes next: the oldest Call whose Reads
    /// completed, else the oldest received buffer; clears `XPT_DATA` when
    /// nothing is left.
    pub(crate) fn next_work(&self) -> Option<Work> {
        let mut r = self.ready.lock();
        let next = match r.reads.pop_front() {
            Some(ctxt) => Some(Work::ReadsDone(ctxt)),
            None => r.queue.pop_front().map(Work::Received),
        };
        if !r.has_work() {
            self.xprt.clear_flag(Flag::Data);
            // A notification between our look at the queue and the clear
            // set it first (`receives_ready`): keep it.
            smp_mb(Full);
            if self.recv_pending.load(Relaxed) {
                self.xprt.set_flag(Flag::Data);
            }
        }
        next
    }

    /// Frees a connection sunrpc has released (its `xpo_free`), or one whose
    /// accept failed.
    ///
    /// sunrpc's references are gone, but completions and late CM events may
    /// still hold shared references: they are stopped and drained before
    /// the connection drops.
    pub(crate) fn free(conn: Pin<KBox<Self>>) {
        // Completions flushed by the drain must leave sunrpc alone.
        conn.dying.store(true, Relaxed);
        if let Some(r) = conn.res() {
            // No nfsd thread polls the receive CQ any more: its work item
            // does, the drain's completion included (and whatever a
            // notification left unpolled).
            r.ep.defer_receives();
            // No CM event reaches the connection from here on (this waits
            // for a running handler).
            r.ep.id().silence();
            // Replies posted without waiting hold contexts that their last
            // completion returns to the pool: drain while the pool and the
            // send-queue accounting exist, before anything is dropped. Then
            // no completion or QP event runs any more.
            r.ep.destroy();
            // Replies posted without a completion of their own that no later
            // completion covered: the device is done with them too.
            conn.order.reclaim_all(&r.ep, |ctxt| {
                conn.sq_release(ctxt.sq_held);
                conn.ctxt_put(ctxt)
            });
            // The device is done with the orphans' memory: back to the pool
            // (their device counts with them).
            let orphans = core::mem::take(&mut *conn.orphans.lock());
            for o in orphans {
                match r.ep.reclaim(o) {
                    Ok(ctxt) => conn.ctxt_put(ctxt),
                    Err(_) => {
                        pr_warn_ratelimited!("connection {}: a context stays leaked\n", conn.id)
                    }
                }
            }
        }
        // Calls whose Reads finished and that no thread picked up: their
        // contexts (and argument pages) go back while the pool exists.
        let mut reads = core::mem::replace(&mut conn.ready.lock().reads, Fifo::new());
        while let Some(ctxt) = reads.pop_front() {
            conn.ctxt_put(ctxt);
        }
        // Its counts go to its device's totals.
        conn.registry.stats_ended(&conn.stats);
        // Nothing else refers to it now.
        drop(conn);
    }

    /// Keeps a context whose chain was posted in part until [`Self::free`]
    /// can reclaim it; if there is no room, it stays leaked.
    pub(crate) fn orphaned(&self, o: Orphan<CallCtxt>) {
        if self.orphans.lock().push(o, GFP_ATOMIC).is_err() {
            pr_warn_ratelimited!(
                "connection {}: a context is leaked (out of memory)\n",
                self.id
            );
        }
    }

    /// `xpo_detach`: start disconnecting.
    pub(crate) fn detach(&self) {
        self.stop();
        if let Some(r) = self.res.as_ref() {
            r.ep.id().disconnect();
        }
    }
}

/// CM events on an accepted connection ([`Connection::free`] silences the
/// id before the connection goes).
impl CmHandler for Connection {
    fn event(self: Pin<&Self>, _id: CmIdRef<'_>, event: &CmEvent<'_>) {
        match event.kind() {
            CmEventKind::Established => self.established(),
            kind @ (CmEventKind::Disconnected
            | CmEventKind::DeviceRemoval
            | CmEventKind::ConnectError
            | CmEventKind::Unreachable
            | CmEventKind::Rejected
            | CmEventKind::AddrChange) => {
                // A peer's disconnect is the ordinary end, and so is a
                // device's removal here: a listener bound to the device logs
                // it once (nfsd's usual wildcard listener is not told, and
                // the connections on the device mostly see their clients'
                // disconnects first). Any other event ends the connection
                // for a reason an admin should see.
                if !matches!(kind, CmEventKind::Disconnected | CmEventKind::DeviceRemoval) {
                    pr_warn_ratelimited!(
                        "connection {}: CM event {} (status {}), closing\n",
                        self.id,
                        kind.name(),
                        event.status()
                    );
                }
                // The QP goes to the error state too: RDMA Reads posted to a
                // peer that is gone would otherwise hold their nfsd threads
                // until the retries run out (tens of seconds), with no thread
                // left to detach the connection.
                crate::trace::cm_event(self.id, event.raw());
                self.close();
            }
            _ => {}
        }
    }
}

/// Asynchronous QP events (the QP is destroyed before the connection goes).
impl QpEventHandler for Connection {
    fn qp_event(self: Pin<&Self>, event: QpEvent) {
        if event.is_informational() {
            return;
        }
        let kind = event.raw();
        pr_warn_ratelimited!("connection {}: QP event {}, closing\n", self.id, kind);
        crate::trace::qp_err(self.id, kind);
        self.fatal();
    }
}
