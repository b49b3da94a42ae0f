// SPDX-License-Identifier: GPL-2.0

//! A connection with its resources: the view each data-path entry point
//! takes once ([`Connection::live`]), so that nothing below it checks
//! whether accept built them.

use core::ops::Deref;

use kernel::prelude::*;

use super::{
    connection::{Connection, Resources},
    ctxt::CallCtxt,
    stats::count,
};
use crate::{proto::budget::Budget, rdma::mr::MrLease};

/// A connection whose resources accept has built: what each data-path
/// entry point works on, taken once ([`Connection::live`]).
#[derive(Clone, Copy)]
pub(crate) struct Live<'a> {
    pub(crate) conn: &'a Connection,
    pub(crate) res: &'a Resources,
}

impl Deref for Live<'_> {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        self.conn
    }
}

impl Connection {
    /// The connection with its resources, once accept has built them.
    pub(crate) fn live(&self) -> Option<Live<'_>> {
        self.res.as_ref().map(|res| Live { conn: self, res })
    }
}

impl Live<'_> {
    /// Send-queue slots in all (the most one chain can hold).
    pub(crate) fn sq_slots(&self) -> u32 {
        self.res.sq_slots
    }

    /// Takes `n` send-queue slots, waiting in turn while others hold them;
    /// fails once the connection is closing.
    pub(crate) fn sq_reserve(&self, n: u32) -> Result {
        // More than exist: refused without queueing.
        if n > self.sq_slots() {
            return Err(EMSGSIZE);
        }
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

    /// What one RPC can have of the connection's send queue and MR pool,
    /// and how its Read sinks are cut.
    pub(crate) fn budget(&self) -> Budget {
        self.res.sink.budget(self.sq_slots())
    }

    /// A context for a new RPC: from the pool, or a new one while the pool
    /// is below its bound. Calls leave the last context of the bound to
    /// `for_answer` (the RDMA_ERROR answering a Call over the bound), so a
    /// client that sends more Calls than it may have in flight is told,
    /// not left waiting for a Reply that never comes. The counterpart of
    /// C's svc_rdma_recv_ctxt_get() and svc_rdma_send_ctxt_get().
    pub(crate) fn ctxt_get(&self, for_answer: bool) -> Option<KBox<CallCtxt>> {
        self.ctxts
            .get(for_answer, || CallCtxt::new(self.res.ep.dma_dev()))
    }

    /// Takes `n` FRMR pool entries into `out`: with `wait`, waiting in turn
    /// while others hold them (failing once the connection is closing);
    /// without, only if they are free now and nobody waits for entries
    /// (never sleeping).
    pub(crate) fn mrs_take(&self, n: usize, out: &mut KVec<MrLease>, wait: bool) -> Result {
        if !wait {
            out.reserve(n, GFP_NOWAIT | __GFP_NOWARN)?;
            return match self.mr_free.try_take(n, out, || self.closing()) {
                true => Ok(()),
                false => Err(EAGAIN),
            };
        }
        out.reserve(n, GFP_KERNEL)?;
        if n > self.res.sink.mrs() {
            return Err(EMSGSIZE);
        }
        self.mr_free.take(
            n,
            out,
            || self.closing(),
            || count(&self.stats.c.mr_waits, 1),
        )
    }

    /// The FRMR pool allocated or retired entries: sysfs shows the counts.
    pub(crate) fn frmr_changed(&self) {
        let Some(pool) = self.res.sink.pool() else {
            return;
        };
        if let Some((_, dir)) = self.sysfs.as_ref() {
            dir.data().set_frmr(pool.allocated(), pool.retired());
        }
    }

    /// Returns the FRMR pool entries in `held`.
    pub(crate) fn mrs_give(&self, held: &mut KVec<MrLease>) {
        self.mr_free.give(held);
    }
}
