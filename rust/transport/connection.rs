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
    sync::{Arc, SetOnce, SpinLock},
};

use super::{
    ctxt::{CallCtxt, CtxtPool},
    frmr::MrFree,
    recv::RecvQueue,
    registry::{ConnAttrs, ConnView, Registry},
    sink::Sink,
    sq_slots::SendQueue,
    stats::{count, ConnStats, ConnStatsView},
};
use crate::{
    anchor::{impl_anchored, Anchor},
    log::pr_warn_ratelimited,
    rdma::{
        cm::{CmEvent, CmEventKind, CmHandler, CmIdRef},
        dma::DmaDev,
        mr::MrLease,
        owned::{Orphan, SendOrder},
        qp::{QpEvent, QpEventHandler},
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
            anchor: Anchor::new(),
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

    /// A receive failed. A flush means the QP is going down (we asked);
    /// anything else is an error on the connection: close it.
    pub(crate) fn receive_failed(&self, status: u32) {
        if status != wc_status::FLUSHED {
            pr_warn_ratelimited!(
                "connection {}: receive failed with status {}, closing\n",
                self.id,
                status
            );
            self.close_deferred();
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
        if let Some(r) = self.res() {
            r.ep.to_error();
        }
        self.close_deferred();
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
            && self.recv.room_for_a_thread(self.xprt.server_threads())
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
        self.recv.reserve_reads(max_ctxts)?;
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
        if let Err(ctxt) = self.recv.read_done(&self.xprt, ctxt) {
            self.close_deferred();
            self.ctxt_put(ctxt);
        }
    }

    /// Frees a connection sunrpc has released (its `xpo_free`), or one whose
    /// accept failed.
    ///
    /// sunrpc's references are gone, but completions and late CM events may
    /// still hold shared references: they are stopped and drained before
    /// the connection drops.
    pub(crate) fn free(conn: Pin<KBox<Self>>) {
        // Completions flushed by the drain must leave sunrpc alone.
        conn.recv.stop();
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
        let mut reads = conn.recv.take_reads();
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

    /// `xpo_detach`, which sunrpc calls while closing the connection:
    /// the QP goes to the error state, waits for slots or MRs fail, and
    /// the disconnect starts. The counterpart of C's svc_rdma_detach().
    pub(crate) fn detach(&self) {
        if let Some(r) = self.res() {
            r.ep.to_error();
        }
        self.sq.close();
        self.mr_free.close();
        if let Some(r) = self.res() {
            r.ep.id().disconnect();
        }
    }
}

/// CM events on an accepted connection ([`Connection::free`] silences the
/// id before the connection goes).
impl CmHandler for Connection {
    fn event(self: Pin<&Self>, _id: CmIdRef<'_>, event: &CmEvent<'_>) {
        match event.kind() {
            CmEventKind::Established => self.recv.established(&self.xprt),
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
        self.close_deferred();
    }
}
