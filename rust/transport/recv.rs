// SPDX-License-Identifier: GPL-2.0

//! A connection's receive queue: received buffers and finished Reads on
//! their way to nfsd.
//!
//! Each connection has one buffer per credit (plus backchannel), each of our
//! inline receive size, DMA-mapped once at accept and reposted after use
//! (`rdma::recv`). The receive CQ's notification wakes an nfsd thread
//! ([`RecvQueue::notified`]), which polls the CQ in `xpo_recvfrom`
//! ([`RecvQueue::poll`]): each completion queues its buffer's slot here,
//! and the thread takes the first one itself ([`RecvQueue::next`]); it
//! gives the buffer back once it has copied what it needs
//! ([`RecvQueue::release`]), to be posted again in a batch. The C
//! transport polls in a work item, which then wakes an nfsd thread: two
//! dispatches per message where this takes one.
//!
//! A Call whose RDMA Reads a receive completion started
//! (`super::recvfrom`) waits here too once they are done
//! ([`RecvQueue::read_done`]), for the next thread to pick it up.

use kernel::{
    new_spinlock,
    prelude::*,
    sync::{
        atomic::{
            ordering::{Acquire, Full, Relaxed, Release},
            Atomic,
        },
        barrier::smp_mb,
        SpinLock,
    },
};

use super::ctxt::CallCtxt;
use crate::{
    fifo::Fifo,
    proto::inline::RECV_BATCH,
    rdma::{
        endpoint::{Endpoint, EndpointOwner},
        recv::RecvSlot,
    },
    sunrpc::{Flag, SvcXprt},
};

/// What an nfsd thread in `xpo_recvfrom` takes ([`RecvQueue::next`]).
pub(crate) enum Work {
    /// A Call whose RDMA Reads completed.
    ReadsDone(KBox<CallCtxt>),
    /// A received buffer.
    Received(RecvSlot),
}

/// Buffers to post again together ([`RecvQueue::release`]).
pub(crate) type RecvBatch = [Option<RecvSlot>; RECV_BATCH as usize];

/// The receive side of a connection, between its receive CQ and nfsd.
#[pin_data]
pub(crate) struct RecvQueue {
    /// Received buffers waiting for `xpo_recvfrom`, and whether the
    /// connection is established; see [`Ready`].
    #[pin]
    ready: SpinLock<Ready>,
    /// Received buffers nfsd is done with, waiting to be posted again in
    /// a batch ([`RecvQueue::release`]).
    #[pin]
    released: SpinLock<Released>,
    /// Teardown has begun: completions and events must not touch sunrpc.
    dying: Atomic<bool>,
    /// nfsd threads in `xpo_recvfrom` on this connection (see
    /// [`RecvQueue::enter`]).
    in_recv: Atomic<u32>,
    /// Receive buffers posted whose receive has not completed (for the
    /// `recv_starved` counter only; see [`RecvQueue::posting`]).
    posted: Atomic<i64>,
    /// [`Ready::established`], for reading without the lock
    /// ([`RecvQueue::directly`]).
    established: Atomic<bool>,
    /// The receive CQ notified completions that no nfsd thread has polled
    /// yet ([`RecvQueue::notified`]); `XPT_DATA` stays set meanwhile.
    pending: Atomic<bool>,
    /// An nfsd thread is polling the receive CQ ([`RecvQueue::poll`]).
    polling: Atomic<bool>,
    /// Bytes of nfsd's argument buffers, 0 until an nfsd thread received
    /// on the connection ([`RecvQueue::learn_arg_capacity`]).
    arg_capacity: Atomic<u32>,
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
    /// pools are made ([`RecvQueue::reserve_reads`]).
    reads: Fifo<KBox<CallCtxt>>,
    /// The CM reported the connection established.
    established: bool,
}

impl Ready {
    /// Whether anything waits for `xpo_recvfrom`.
    fn has_work(&self) -> bool {
        !self.queue.is_empty() || !self.reads.is_empty()
    }
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

/// An nfsd thread receiving on a connection ([`RecvQueue::enter`]).
pub(crate) struct InRecv<'a> {
    queue: &'a RecvQueue,
    xprt: &'a SvcXprt,
}

impl Drop for InRecv<'_> {
    fn drop(&mut self) {
        self.queue.in_recv.fetch_sub(1, Full);
        // The connection may have refused threads at the bound (or at an
        // older one: the thread count can change): with this one gone,
        // sunrpc looks again. It holds the transport while we are in
        // `xpo_recvfrom`, and does nothing unless `XPT_DATA` is set.
        self.xprt.enqueue();
    }
}

impl RecvQueue {
    /// An empty queue for `recv_buffers` buffers, given back `recv_batch`
    /// at a time.
    pub(crate) fn new(recv_buffers: usize, recv_batch: usize) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
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
            in_recv: Atomic::new(0),
            posted: Atomic::new(0),
            established: Atomic::new(false),
            pending: Atomic::new(false),
            polling: Atomic::new(false),
            arg_capacity: Atomic::new(0),
        })
    }

    /// Makes room for `max_ctxts` Calls whose Reads finished (when the
    /// pools are made), so the completion path never allocates.
    pub(crate) fn reserve_reads(&self, max_ctxts: usize) -> Result {
        let reads = Fifo::with_capacity(max_ctxts)?;
        self.ready.lock().reads = reads;
        Ok(())
    }

    /// Teardown has begun: from now on nothing here touches sunrpc.
    pub(crate) fn stop(&self) {
        self.dying.store(true, Relaxed);
    }

    /// Whether teardown has begun.
    pub(crate) fn dying(&self) -> bool {
        self.dying.load(Relaxed)
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
    pub(crate) fn release(&self, slot: RecvSlot, post: impl FnOnce(RecvBatch) -> Result) -> Result {
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
        self.posting(batch.iter().flatten().count());
        post(batch)
    }

    /// `n` receive buffers are about to be posted (counted before the post,
    /// so their completions never find the count short). Only the
    /// `recv_starved` counter reads it: a receive that completes with none
    /// left posted is one after which the client's next Send would find no
    /// buffer, whether the others wait for nfsd, are being handled, or wait
    /// in a batch to be posted again.
    pub(crate) fn posting(&self, n: usize) {
        if !cfg!(svcrdma_rs_no_stats) {
            self.posted.fetch_add(n as i64, Relaxed);
        }
    }

    /// A receive completed (successfully): one buffer fewer is posted.
    /// Returns whether it was the last posted one (none is left for the
    /// client: `recv_starved`).
    pub(crate) fn completed(&self) -> bool {
        !cfg!(svcrdma_rs_no_stats) && self.posted.fetch_sub(1, Relaxed) <= 1
    }

    /// Whether a receive completion may start on its Call's work itself
    /// (`super::recvfrom`): the connection is established, and neither
    /// sunrpc (on `xprt`) nor we are closing it.
    pub(crate) fn directly(&self, xprt: &SvcXprt) -> bool {
        self.established.load(Relaxed) && !self.dying() && !xprt.test_flag(Flag::Close)
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
    /// it ([`RecvQueue::poll`]) once the connection is established and
    /// until it is being freed, and this wakes one on `xprt`; before and
    /// after, the CQ's work item does (`false`).
    ///
    /// The C transport handles every receive in a work item, which then
    /// wakes an nfsd thread: two dispatches per Call. Here the thread that
    /// takes the Call handles its completion.
    pub(crate) fn notified(&self, xprt: &SvcXprt) -> bool {
        if self.dying() || !self.established.load(Relaxed) {
            return false;
        }
        // Before `XPT_DATA`: a thread that clears it looks at this after
        // (`next`), each across a full barrier.
        self.pending.store(true, Relaxed);
        smp_mb(Full);
        xprt.set_flag(Flag::Data);
        // `XPT_DATA` before the look at `XPT_BUSY` in `svc_xprt_enqueue`
        // (which a thread clears before it looks at `XPT_DATA`,
        // `svc_xprt_received`): one of the two sees the other.
        smp_mb(Full);
        xprt.enqueue();
        true
    }

    /// Receive completions one `ib_poll_cq` call takes.
    const POLL_BATCH: i32 = 16;
    /// Receive completions one nfsd thread takes in full batches per
    /// [`RecvQueue::poll`]: a burst up to this size costs one thread's
    /// wake-up, not one per batch, and no thread drains an unbounded stream
    /// before any of its Calls starts. (A short batch followed by
    /// completions that came in as the CQ was re-armed is polled on top;
    /// those are bounded by the credits granted.)
    const POLL_BUDGET: i32 = 4 * Self::POLL_BATCH;

    /// Handles the receive completions the CQ of `ep` notified
    /// ([`RecvQueue::notified`]), up to [`Self::POLL_BUDGET`] of them in
    /// full batches, in the calling nfsd thread, unless another thread is
    /// at it; re-arms the CQ once it is empty. With more left, `pending`
    /// stays set (and with it `XPT_DATA`, [`RecvQueue::next`]), so the next
    /// thread sunrpc sends polls on while this one works on the first Call.
    pub(crate) fn poll<H: EndpointOwner>(&self, ep: &Endpoint<H>) {
        if !self.pending.load(Acquire) || self.polling.xchg(true, Acquire) {
            return;
        }
        let mut budget = Self::POLL_BUDGET;
        loop {
            self.pending.store(false, Relaxed);
            if ep.poll_receives(Self::POLL_BATCH) == Self::POLL_BATCH {
                budget -= Self::POLL_BATCH;
                if budget > 0 {
                    continue;
                }
                // Maybe more: the next thread's turn (unarmed meanwhile).
                self.pending.store(true, Relaxed);
                break;
            }
            // Completions that came in after the last poll are reported
            // here (and none notifies): poll again.
            if !ep.arm_receives() {
                break;
            }
        }
        self.polling.store(false, Release);
    }

    /// A receive completed: queues it for nfsd on `xprt`. Fails only if
    /// there is no room, which cannot happen (one place per buffer).
    pub(crate) fn push(&self, xprt: &SvcXprt, slot: RecvSlot) -> Result {
        let established = {
            let mut r = self.ready.lock();
            if kernel::warn_on!(r.queue.push_within_capacity(slot).is_err()) {
                return Err(ENOSPC);
            }
            xprt.set_flag(Flag::Data);
            r.established
        };
        // A thread polling in `xpo_recvfrom` takes the queue's head itself,
        // and `svc_xprt_received` calls in another thread for the rest.
        if established && !self.dying() && !self.polling.load(Relaxed) {
            xprt.enqueue();
        }
        Ok(())
    }

    /// A Call's RDMA Reads completed: it waits for a thread on `xprt` to
    /// pick it up. Gives the context back only if there is no room, which
    /// cannot happen (room for every context).
    pub(crate) fn read_done(
        &self,
        xprt: &SvcXprt,
        ctxt: KBox<CallCtxt>,
    ) -> core::result::Result<(), KBox<CallCtxt>> {
        let established = {
            let mut r = self.ready.lock();
            if let Err(ctxt) = r.reads.push_within_capacity(ctxt) {
                kernel::warn_on!(true);
                return Err(ctxt);
            }
            xprt.set_flag(Flag::Data);
            r.established
        };
        if established && !self.dying() {
            xprt.enqueue();
        }
        Ok(())
    }

    /// The CM reported the connection established: from now on receives
    /// go to nfsd as they complete, and those that completed before are
    /// handed over here, on `xprt`.
    pub(crate) fn established(&self, xprt: &SvcXprt) {
        {
            let mut r = self.ready.lock();
            r.established = true;
            self.established.store(true, Relaxed);
            if r.has_work() || self.pending.load(Acquire) {
                xprt.set_flag(Flag::Data);
            }
        }
        if !self.dying() {
            xprt.enqueue();
        }
    }

    /// Counts the calling nfsd thread as receiving on `xprt` until the
    /// returned guard is dropped (at the end of `xpo_recvfrom`).
    pub(crate) fn enter<'a>(&'a self, xprt: &'a SvcXprt) -> InRecv<'a> {
        self.in_recv.fetch_add(1, Full);
        InRecv { queue: self, xprt }
    }

    /// Whether one more nfsd thread may receive on the connection of
    /// `xprt`: all but a quarter of its service's threads may be in
    /// `xpo_recvfrom` on it at once (at least one left over).
    ///
    /// RDMA Reads hold no thread (they complete asynchronously), but a
    /// receiving thread still sleeps when the connection is out of
    /// send-queue slots or MRs, which a peer that stopped answering holds
    /// until the QP gives up (~17 s on RoCE with our ACK timeout). Without a
    /// bound, sunrpc keeps handing this connection its threads (it releases
    /// `XPT_BUSY` early in each receive) until every thread sleeps there and
    /// every other client waits too. The bound is exact: sunrpc dispatches
    /// one thread at a time to a transport, and each counts itself
    /// ([`RecvQueue::enter`]) before it lets the next one in.
    pub(crate) fn room_for_a_thread(&self, xprt: &SvcXprt) -> bool {
        let in_recv = self.in_recv.load(Relaxed);
        let threads = xprt.server_threads();
        let spare = (threads / 4).max(1);
        in_recv < threads.saturating_sub(spare).max(1)
    }

    /// What `xpo_recvfrom` takes next: the oldest Call whose Reads
    /// completed, else the oldest received buffer; clears `XPT_DATA` on
    /// `xprt` when nothing is left.
    pub(crate) fn next(&self, xprt: &SvcXprt) -> Option<Work> {
        let mut r = self.ready.lock();
        let next = match r.reads.pop_front() {
            Some(ctxt) => Some(Work::ReadsDone(ctxt)),
            None => r.queue.pop_front().map(Work::Received),
        };
        if !r.has_work() {
            xprt.clear_flag(Flag::Data);
            // A notification between our look at the queue and the clear
            // set it first (`notified`): keep it.
            smp_mb(Full);
            if self.pending.load(Relaxed) {
                xprt.set_flag(Flag::Data);
            }
        }
        next
    }

    /// Calls whose Reads finished and that no thread picked up (at
    /// teardown).
    pub(crate) fn take_reads(&self) -> Fifo<KBox<CallCtxt>> {
        core::mem::replace(&mut self.ready.lock().reads, Fifo::new())
    }
}
