// SPDX-License-Identifier: GPL-2.0

//! A connected transport: its RDMA resources, pools and teardown.
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
    sync::{Arc, SetOnce, SpinLock},
};

use super::{
    ctxt::{CallCtxt, CtxtPool},
    frmr::MrFree,
    recv::RecvQueue,
    registry::{ConnAttrs, ConnView, Registry},
    sink::Sink,
    sq_slots::SendQueue,
    stats::{ConnStats, ConnStatsView},
};
use crate::{
    anchor::{impl_anchored, Anchor},
    log::pr_warn_ratelimited,
    rdma::{
        dma::DmaDev,
        owned::{Orphan, SendOrder},
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
    /// Send-queue slots in all: the most one chain can hold.
    pub(crate) sq_slots: u32,
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
    pub(super) ctxts: CtxtPool,
    /// Set once accept has built them.
    pub(super) res: SetOnce<Resources>,
    /// Free send-queue slots (closed with the connection). After `res`:
    /// alive while a QP event or completion may still come.
    #[pin]
    pub(super) sq: SendQueue,
    /// FRMR pool entries not in use (closed with the connection).
    #[pin]
    pub(super) mr_free: MrFree,
    /// The order of the chains posted on the send queue, and the contexts
    /// of Replies posted without a completion of their own.
    #[pin]
    order: SendOrder<CallCtxt>,
    /// Received buffers and finished Reads on their way to nfsd.
    #[pin]
    pub(crate) recv: RecvQueue,
    /// Contexts of chains posted in part with no completion to return them
    /// ([`PostError::Leaked`](crate::rdma::owned::PostError)): freed by
    /// [`Connection::free`] once the QP is destroyed.
    #[pin]
    orphans: SpinLock<KVec<Orphan<CallCtxt>>>,
    /// `/sys/kernel/svcrdma_rs/connections/<id>/`.
    /// (and its `stats/`, first: dropped before its parent).
    pub(super) sysfs: SetOnce<(Dir<ConnStatsView>, Dir<ConnView>)>,
    /// What the connection has done ([`super::stats`]).
    pub(crate) stats: Arc<ConnStats>,
    /// What sysfs and logs say about the connection.
    pub(crate) info: ConnAttrs,
    pub(crate) id: u64,
    registry: Arc<Registry>,
    /// Counts the CM id and the QP that deliver events to the connection.
    #[pin]
    anchor: Anchor,
}

impl_anchored! {
    impl Anchored for Connection { self.anchor }
}

impl_has_svc_xprt!(Connection { xprt });

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
            recv <- RecvQueue::new(recv_buffers, recv_batch),
            orphans <- new_spinlock!(KVec::new()),
            sysfs: SetOnce::new(),
            stats: Arc::new(ConnStats::new(info.device), GFP_KERNEL)?,
            info,
            id,
            registry,
            anchor <- Anchor::new(),
        })
    }

    /// sunrpc's part.
    pub(crate) fn xprt(&self) -> &SvcXprt {
        &self.xprt
    }

    /// Installs the resources (once). Their FRMR entries become free
    /// first: no thread takes any before the resources are there. (That
    /// cannot fail, room was made by `init_pools`; if it did, the
    /// connection would close.)
    pub(crate) fn set_res(&self, res: Resources) -> bool {
        let filled = res.sink.pool().map_or(Ok(()), |p| self.mr_free.fill(p));
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
        if let Some((_, dir)) = self.sysfs.as_ref() {
            dir.data().set_backchannel();
        }
    }

    /// Closes the connection from any context (QP events may come in
    /// interrupt context): asks sunrpc to close it (once per connection)
    /// and sends every thread waiting for send-queue slots or MRs away, as
    /// every later such wait; nothing will serve them on this connection,
    /// and sunrpc needs a free thread to run `xpo_detach`. The counterpart
    /// of C's svc_rdma_xprt_deferred_close().
    pub(crate) fn close_deferred(&self) {
        if !self.recv.dying() {
            self.xprt.deferred_close();
        }
        self.sq.close();
        self.mr_free.close();
    }

    /// Closes the connection and wakes threads waiting for its resources.
    /// The QP goes to the error state at once: the client can no longer
    /// touch our memory, and every posted request completes (flushed), so
    /// no thread waits on a peer that may never answer. Process context.
    pub(crate) fn close(&self) {
        if let Some(r) = self.res.as_ref() {
            r.ep.to_error();
        }
        self.close_deferred();
    }

    /// `xpo_has_wspace`: whether the connection can take more work without
    /// parking the thread: not while threads wait in line for its
    /// send-queue slots or MRs, nor while as many threads as it lets in
    /// are receiving on it ([`RecvQueue::room_for_a_thread`]). The
    /// counterpart of C's svc_rdma_has_wspace().
    pub(crate) fn has_wspace(&self) -> bool {
        !self.sq.waiting() && !self.mr_free.waiting() && self.recv.room_for_a_thread(&self.xprt)
    }

    /// Whether sunrpc is closing the connection.
    pub(super) fn closing(&self) -> bool {
        self.xprt.test_flag(Flag::Close)
    }

    /// Sets up the data path's pools once accept has built the resources,
    /// contexts mapped on `dev`.
    pub(crate) fn init_pools(&self, dev: &DmaDev, sizes: &PoolSizes) -> Result {
        self.sq.set_size(sizes.sq_slots);
        self.order.set_capacity(sizes.unsignaled);
        self.recv.reserve_reads(sizes.max_ctxts)?;
        self.ctxts.fill(dev, sizes.ctxts, sizes.max_ctxts)?;
        self.mr_free.reserve(sizes.mrs)
    }

    /// The send queue's order ([`SendOrder`]).
    pub(crate) fn order(&self) -> &SendOrder<CallCtxt> {
        &self.order
    }

    /// Gives back `n` send-queue slots.
    pub(crate) fn sq_release(&self, n: u32) {
        self.sq.give_back(n);
    }

    /// Gives a context back.
    pub(crate) fn ctxt_put(&self, mut c: KBox<CallCtxt>) {
        c.reset();
        if kernel::warn_on!(!c.args.mrs().is_empty()) {
            // Cannot happen: a Call's Read chain releases or retires every
            // MR it takes (`rw::reads_finished`). Were one still held, it
            // might be registered, and this may run in completion context,
            // where it cannot be deregistered: the connection closes and the
            // entries stay out of the pool, mapped, until the pool drops
            // after the QP (the Call's pages they map are leaked, never put).
            self.close();
            c.args.drop_mrs();
        }
        self.ctxts.put(c);
    }

    /// A Call's RDMA Reads completed ([`super::rw::reads_finished`]): it
    /// waits for a thread to pick it up.
    pub(crate) fn read_done(&self, ctxt: KBox<CallCtxt>) {
        if let Err(ctxt) = self.recv.read_done(&self.xprt, ctxt) {
            self.close_deferred();
            self.ctxt_put(ctxt);
        }
    }

    /// Frees a connection sunrpc has released (its `xpo_free`), or one whose
    /// accept failed. The counterpart of C's svc_rdma_free().
    ///
    /// sunrpc's references are gone, but completions and late CM events may
    /// still hold shared references: they are stopped and drained before
    /// the connection drops.
    pub(crate) fn free(conn: Pin<KBox<Self>>) {
        // Completions flushed by the drain must leave sunrpc alone.
        conn.recv.stop();
        if let Some(res) = conn.res.as_ref() {
            conn.drain(res);
        }
        // Calls whose Reads finished and that no thread picked up: their
        // contexts (and argument pages) go back while the pool exists.
        let mut reads = conn.recv.take_reads();
        while let Some(ctxt) = reads.pop_front() {
            conn.ctxt_put(ctxt);
        }
        // Its counts go to its device's totals.
        conn.registry.stats_ended(&conn.stats);
        // Nothing else refers to it now.
        drop(conn);
    }

    /// Stops everything that may still use the connection (at `xpo_free`):
    /// receives, CM events, the QP (drained), and takes back the contexts
    /// of chains whose completions will never come.
    fn drain(&self, res: &Resources) {
        // No nfsd thread polls the receive CQ any more: its work item
        // does, the drain's completion included (and whatever a
        // notification left unpolled).
        res.ep.defer_receives();
        // No CM event reaches the connection from here on (this waits
        // for a running handler).
        res.ep.id().silence();
        // Replies posted without waiting hold contexts that their last
        // completion returns to the pool: drain while the pool and the
        // send-queue accounting exist, before anything is dropped. Then
        // no completion or QP event runs any more.
        res.ep.destroy();
        // Replies posted without a completion of their own that no later
        // completion covered: the device is done with them too.
        self.order.reclaim_all(&res.ep, |ctxt| {
            self.sq_release(ctxt.sq_held);
            self.ctxt_put(ctxt)
        });
        // The device is done with the orphans' memory: back to the pool
        // (their device counts with them).
        let orphans = core::mem::take(&mut *self.orphans.lock());
        for o in orphans {
            match o.reclaim(&res.ep) {
                Ok(ctxt) => self.ctxt_put(ctxt),
                Err(_) => {
                    pr_warn_ratelimited!("connection {}: a context stays leaked\n", self.id)
                }
            }
        }
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

    /// `xpo_detach`, which sunrpc calls while closing the connection:
    /// the QP goes to the error state, waits for slots or MRs fail, and
    /// the disconnect starts. The counterpart of C's svc_rdma_detach().
    pub(crate) fn detach(&self) {
        let res = self.res.as_ref();
        if let Some(r) = res {
            r.ep.to_error();
        }
        self.sq.close();
        self.mr_free.close();
        if let Some(r) = res {
            r.ep.id().disconnect();
        }
    }
}

/// What accept sizes a connection's data-path pools by
/// ([`Connection::init_pools`]).
pub(crate) struct PoolSizes {
    /// Send-queue slots chains hold.
    pub(crate) sq_slots: u32,
    /// Replies that may wait without a completion of their own, in room
    /// of the send queue apart from those slots.
    pub(crate) unsignaled: usize,
    /// Contexts made now, and at most ever.
    pub(crate) ctxts: usize,
    pub(crate) max_ctxts: usize,
    /// Entries of the FRMR pool (0 without FRMR).
    pub(crate) mrs: usize,
}
