// SPDX-License-Identifier: GPL-2.0

//! Posting work-request chains on a connection's send queue.
//!
//! Every data-path operation (RDMA Reads for a Call, RDMA Writes and the
//! Send of a Reply, invalidations) is one chain posted by the nfsd thread
//! working on that RPC. Only its last request is signaled: send-queue
//! requests complete in order, so that one completion, whether it succeeds,
//! fails or is flushed when the QP goes down, tells when the device is done
//! with the memory the whole chain refers to (a 1 MiB READ's Reply: one
//! completion, not 33). The unsignaled requests complete only when they
//! fail or are flushed, to a handler that notes their status
//! (`request_failed`). Nothing the device may still touch is ever
//! released early: when a post fails partway, a signaled marker follows
//! the posted requests on the QP, by then in the error state.
//!
//! No nfsd thread waits for its chains. A Reply, or the RDMA_ERROR
//! answering a refused Call ([`post_reply`]), takes its context along:
//! the send buffer, the DMA mappings and the Reply's pages taken from nfsd
//! go with the chain, and the last completion returns the context to the
//! pool. A Call's RDMA Reads ([`post_reads`]) take its context and its
//! argument pages along too; their last completion queues the Call for
//! the next `xpo_recvfrom` ([`super::rw::reads_finished`]). Either way the
//! nfsd thread moves on at once.
//!
//! The send queue has a fixed number of slots
//! ([`super::sq_slots::SendQueue`]). A chain reserves its slots before
//! posting (waiting in turn while other RPCs hold them) and gives them
//! back with its last completion.

use kernel::{
    prelude::*,
    sync::atomic::{
        ordering::{Acquire, Full, Relaxed},
        Atomic,
    },
};

use super::{
    connection::Connection,
    ctxt::{CallCtxt, READS, REPLY},
};
use crate::{
    log::pr_warn_ratelimited,
    rdma::{
        owned::{impl_chain_owner, ChainOwner, Completion, PostError},
        wc_status,
    },
};

/// Notes a failed completion of `conn` (`status`, the device's
/// `vendor_err`) in `first` (the first one wins), counted and traced, with
/// a line unless it is a flush (the QP went down on purpose).
fn note_status(conn: &Connection, first: &Atomic<u32>, status: u32, vendor_err: u32) {
    if status == wc_status::SUCCESS {
        return;
    }
    let _ = first.cmpxchg(0, status, Full);
    if status != wc_status::FLUSHED {
        super::stats::count(&conn.stats.c.completion_errors, 1);
        crate::trace::wc_err(conn.id, status, vendor_err);
        pr_warn_ratelimited!(
            "connection {}: work request failed with status {}, closing\n",
            conn.id,
            status
        );
    }
}

impl_chain_owner!(CallCtxt {
    owner: Connection,
    errors: err_cqe => request_failed,
    REPLY => reply_cqe => reply_completed,
    READS => read_cqe => reads_completed,
});

/// An unsignaled request of a context's chain failed or was flushed. A
/// failure closes the connection at once: a short Reply posted without a
/// completion of its own (`SendOrder`) has nothing after it that would,
/// until some later chain completes, which an idle connection never posts.
fn request_failed(conn: &Connection, ctxt: &CallCtxt, status: u32, vendor_err: u32) {
    note_status(conn, &ctxt.status, status, vendor_err);
    if status != wc_status::SUCCESS && status != wc_status::FLUSHED {
        conn.close();
    }
}

/// The last request of a Reply's chain completed: the device is done with
/// the Reply's memory, and the context goes back to the pool.
fn reply_completed(
    conn: &Connection,
    ctxt: KBox<CallCtxt>,
    status: u32,
    vendor_err: u32,
    done: Completion,
) {
    reply_done(conn, ctxt, status, vendor_err);
    unsignaled_done(conn, &done);
}

/// The device is done with a Reply's chain (`status` its last request's,
/// or 0 for a chain posted unsignaled).
fn reply_done(conn: &Connection, mut ctxt: KBox<CallCtxt>, status: u32, vendor_err: u32) {
    note_status(conn, &ctxt.status, status, vendor_err);
    conn.sq_release(core::mem::take(&mut ctxt.sq_held));
    let first = ctxt.status.load(Acquire);
    // A flush means the connection is already going down.
    if first != 0 && first != wc_status::FLUSHED {
        conn.close();
    }
    conn.ctxt_put(ctxt);
}

/// Every unsignaled Reply posted before the chain `done` completed is done
/// too: each one's own failure, if any, was noted by its requests'
/// handler (`request_failed`), which ran before.
fn unsignaled_done(conn: &Connection, done: &Completion) {
    conn.order()
        .completed_through(done, |ctxt| reply_done(conn, ctxt, 0, 0));
}

/// The last request of a Call's Read chain completed: on to
/// [`super::rw::reads_finished`].
fn reads_completed(
    conn: &Connection,
    mut ctxt: KBox<CallCtxt>,
    status: u32,
    vendor_err: u32,
    done: Completion,
) {
    note_status(conn, &ctxt.status, status, vendor_err);
    conn.sq_release(core::mem::take(&mut ctxt.sq_held));
    super::rw::reads_finished(conn, ctxt);
    unsignaled_done(conn, &done);
}

/// Posts the Reply chain built in `ctxt` (its Writes and Send) and returns
/// without waiting. The context goes with the chain: its completion
/// returns it to `conn`'s pool, releasing the mappings and the Reply pages
/// it holds. The context is returned on every failure too; a failed post
/// also closes the connection (the caller closes it on the others).
pub(crate) fn post_reply(conn: &Connection, ctxt: KBox<CallCtxt>) -> Result {
    post::<REPLY>(conn, ctxt, None)
}

/// Posts the Read chain built in `ctxt` for its Call and returns without
/// waiting. The context (with the Call's argument pages) goes with the
/// chain; its completion hands it to [`super::rw::reads_finished`], also
/// when posting fails (which closes the connection), or when nothing could
/// be posted.
pub(crate) fn post_reads(conn: &Connection, ctxt: KBox<CallCtxt>) -> Result {
    post::<READS>(conn, ctxt, None)
}

/// [`post_reads`] for a chain whose `slots` send-queue slots were taken
/// already ([`Connection::sq_try_reserve`]): nothing waits (a receive
/// completion posts it). The slots are the chain's from here on, given
/// back by its completion, or here if it is not posted; a chain longer
/// than its slots is not posted (the connection closes).
pub(crate) fn post_reads_reserved(conn: &Connection, ctxt: KBox<CallCtxt>, slots: u32) -> Result {
    post::<READS>(conn, ctxt, Some(slots))
}

/// The context's chain did not go out at all (`status` 0: there was
/// nothing to post): it ends here.
fn not_posted<const ID: u64>(conn: &Connection, ctxt: KBox<CallCtxt>, status: u32) {
    ctxt.status.store(status, Relaxed);
    if ID == READS {
        super::rw::reads_finished(conn, ctxt);
    } else {
        conn.ctxt_put(ctxt);
    }
}

/// Work requests a Reply's chain may have and go unsignaled: an inline
/// Reply's Send, or a Write chunk's one RDMA Write and the Send (a 4 KiB
/// READ's Reply). Longer chains hold more memory; they stay signaled.
pub(crate) const UNSIGNALED_WRS: u32 = 2;

/// Pages of nfsd's Reply an unsignaled Reply may hold (its head and one
/// page of data: a 4 KiB READ's): a connection that goes idle keeps its
/// last unsignaled Replies until it closes or posts again, so they must be
/// small.
const UNSIGNALED_PAGES: usize = 2;

/// Posts `ctxt`'s chain of kind `ID`, its send-queue slots taken first
/// (waiting in turn), or, with `reserved`, those already taken.
fn post<const ID: u64>(conn: &Connection, mut ctxt: KBox<CallCtxt>, reserved: Option<u32>) -> Result
where
    CallCtxt: ChainOwner<ID>,
{
    // Any status but success: the chain failed.
    const NOT_POSTED: u32 = wc_status::GENERAL_ERR;
    // Slots taken for the chain that it will not hold go back at once.
    let unreserve = |keep: u32| {
        if let Some(r) = reserved {
            conn.sq_release(r.saturating_sub(keep));
        }
    };
    let Some(res) = conn.res() else {
        unreserve(0);
        not_posted::<ID>(conn, ctxt, NOT_POSTED);
        return Err(ENOTCONN);
    };
    let Ok(n) = u32::try_from(ctxt.chain.len()) else {
        unreserve(0);
        not_posted::<ID>(conn, ctxt, NOT_POSTED);
        return Err(EMSGSIZE);
    };
    if n == 0 {
        unreserve(0);
        not_posted::<ID>(conn, ctxt, 0);
        return Ok(());
    }
    // A short Reply (inline, or one Write and the Send) needs no completion
    // of its own: its context waits until a later chain's completion, in
    // room of the send queue set apart for such chains (`SendOrder`),
    // whatever the other slots hold.
    let room = if ID == REPLY
        && reserved.is_none()
        && n <= UNSIGNALED_WRS
        && ctxt.reply.pages() <= UNSIGNALED_PAGES
    {
        conn.order().reserve_unsignaled()
    } else {
        None
    };
    match reserved {
        None if room.is_some() => {}
        None => {
            if let Err(e) = conn.sq_reserve(n) {
                not_posted::<ID>(conn, ctxt, NOT_POSTED);
                return Err(e);
            }
        }
        // More requests than slots taken: it cannot be posted without
        // waiting, which the caller may not.
        Some(r) if r < n => {
            unreserve(0);
            conn.close();
            not_posted::<ID>(conn, ctxt, NOT_POSTED);
            return Err(EMSGSIZE);
        }
        Some(_) => unreserve(n),
    }
    // The counters-off build (make bench's rs_nostats) does not even tally.
    if !cfg!(svcrdma_rs_no_stats) {
        conn.count_posted(ctxt.chain.tally());
    }
    // The slots go back with the chain's completion (those set apart for
    // unsignaled chains with its owner's leaving the order).
    ctxt.sq_held = if room.is_some() { 0 } else { n };
    ctxt.status.store(0, Relaxed);
    let failed = |e: Error| {
        crate::trace::post_err(conn.id, n, e.to_errno());
        pr_warn_ratelimited!(
            "connection {}: posting {} work requests failed: error {}, closing\n",
            conn.id,
            n,
            e.to_errno()
        );
        e
    };
    // A debug build's `debug_fail_post`: the device's refusal, without it.
    let posted = if crate::params::take_post_failure() {
        Err(PostError::Unposted(ctxt, ENOMEM))
    } else {
        conn.order()
            .post::<ID>(&res.ep, ctxt, |c| &mut c.chain, || conn.close(), room)
    };
    match posted {
        Ok(()) => Ok(()),
        Err(PostError::Unposted(mut ctxt, e)) => {
            conn.sq_release(core::mem::take(&mut ctxt.sq_held));
            conn.close();
            not_posted::<ID>(conn, ctxt, NOT_POSTED);
            Err(failed(e))
        }
        // The chain's (or the marker's) completion takes the context, and
        // its slots, once the QP in the error state has flushed them.
        Err(PostError::Fenced(e)) => Err(failed(e)),
        Err(PostError::Leaked(orphan, e)) => {
            pr_warn_ratelimited!(
                "connection {}: cannot fence a failed post; its context waits for the teardown\n",
                conn.id
            );
            conn.orphaned(orphan);
            Err(failed(e))
        }
    }
}
