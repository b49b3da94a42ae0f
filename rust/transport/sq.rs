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
    live::Live,
    rw::reads_finished,
};
use crate::{
    log::pr_warn_ratelimited,
    rdma::{
        owned::{impl_chain_owner, ChainOwner, Completion, PostError, Unsignaled},
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

/// An unsignaled request of a context's chain failed or was flushed (C
/// signals every Send and has no counterpart). A
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
/// the Reply's memory, and the context goes back to the pool. The
/// counterpart of C's svc_rdma_wc_send().
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
/// [`reads_finished`]. The counterpart of C's svc_rdma_wc_read_done().
fn reads_completed(
    conn: &Connection,
    mut ctxt: KBox<CallCtxt>,
    status: u32,
    vendor_err: u32,
    done: Completion,
) {
    note_status(conn, &ctxt.status, status, vendor_err);
    conn.sq_release(core::mem::take(&mut ctxt.sq_held));
    match conn.live() {
        Some(live) => reads_finished(live, ctxt),
        // Cannot happen: the chain was posted on the resources.
        None => {
            kernel::warn_on!(true);
            conn.close();
            conn.ctxt_put(ctxt);
        }
    }
    unsignaled_done(conn, &done);
}

/// How a chain's send-queue slots are had.
#[derive(Clone, Copy)]
pub(crate) enum Slots {
    /// Taken by the post, waiting in turn while other chains hold them.
    Wait,
    /// This many were taken already ([`Connection::sq_try_reserve`]): the
    /// post does not wait (a receive completion posts), and they are the
    /// chain's from here on, given back by its completion, or by the post
    /// if it does not go out.
    Held(u32),
}

/// What became of a chain's context when it was posted.
#[derive(Clone, Copy)]
pub(crate) enum Posted {
    /// The chain went out, or had nothing to post: its completion, or the
    /// post itself, has the context.
    Ok,
    /// The chain did not go out whole (why: the error). The context went
    /// back to the pool (or, for Reads, to [`reads_finished`]), or waits
    /// for a completion or the teardown; the connection is closing.
    Refused(Error),
}

/// Posts the Reply chain built in `ctxt` (its Writes and Send) and returns
/// without waiting. The context goes with the chain: its completion
/// returns it to the connection's pool, releasing the mappings and the
/// Reply pages it holds. A Reply that is refused closes the connection,
/// unless it was closing already (then the caller closes it). The
/// counterpart of C's svc_rdma_post_send() and svc_rdma_send_reply_msg().
pub(crate) fn post_reply(live: Live<'_>, ctxt: KBox<CallCtxt>) -> Posted {
    post::<REPLY>(live, ctxt, Slots::Wait)
}

/// Posts the Read chain built in `ctxt` for its Call and returns without
/// waiting. The context (with the Call's argument pages) goes with the
/// chain; its completion hands it to [`reads_finished`], also when posting
/// fails (which closes the connection), or when nothing could be posted.
/// The counterpart of C's svc_rdma_post_chunk_ctxt() for Reads.
pub(crate) fn post_reads(live: Live<'_>, ctxt: KBox<CallCtxt>, slots: Slots) -> Posted {
    post::<READS>(live, ctxt, slots)
}

/// The context's chain did not go out at all (`status` 0: there was
/// nothing to post): it ends here.
fn not_posted<const ID: u64>(live: Live<'_>, ctxt: KBox<CallCtxt>, status: u32) {
    ctxt.status.store(status, Relaxed);
    if ID == READS {
        reads_finished(live, ctxt);
    } else {
        live.ctxt_put(ctxt);
    }
}

/// A chain that does not go out ([`Posted::Refused`] for `e`): the slots
/// taken for it that it will not hold go back, and the context ends here.
fn refused<const ID: u64>(live: Live<'_>, ctxt: KBox<CallCtxt>, slots: Slots, e: Error) -> Posted {
    if let Slots::Held(r) = slots {
        live.sq_release(r);
    }
    not_posted::<ID>(live, ctxt, NOT_POSTED);
    Posted::Refused(e)
}

/// Any status but success: the chain failed.
const NOT_POSTED: u32 = wc_status::GENERAL_ERR;

/// Work requests a Reply's chain may have and go unsignaled: an inline
/// Reply's Send, or a Write chunk's one RDMA Write and the Send (a 4 KiB
/// READ's Reply). Longer chains hold more memory; they stay signaled.
pub(crate) const UNSIGNALED_WRS: u32 = 2;

/// Pages of nfsd's Reply an unsignaled Reply may hold (its head and one
/// page of data: a 4 KiB READ's): a connection that goes idle keeps its
/// last unsignaled Replies until it closes or posts again, so they must be
/// small.
const UNSIGNALED_PAGES: usize = 2;

/// Posts `ctxt`'s chain of kind `ID`, its send-queue slots had as `slots`
/// say.
fn post<const ID: u64>(live: Live<'_>, ctxt: KBox<CallCtxt>, slots: Slots) -> Posted
where
    CallCtxt: ChainOwner<ID>,
{
    let Ok(n) = u32::try_from(ctxt.chain.len()) else {
        return refused::<ID>(live, ctxt, slots, EMSGSIZE);
    };
    if n == 0 {
        if let Slots::Held(r) = slots {
            live.sq_release(r);
        }
        not_posted::<ID>(live, ctxt, 0);
        return Posted::Ok;
    }
    match take_slots::<ID>(live, &ctxt, n, slots) {
        Ok(room) => submit::<ID>(live, ctxt, n, room),
        // Slots held but short of the chain's: it cannot go out without
        // waiting, which the caller may not.
        Err(e) if matches!(slots, Slots::Held(_)) => {
            let posted = refused::<ID>(live, ctxt, slots, e);
            live.close();
            posted
        }
        Err(e) => refused::<ID>(live, ctxt, slots, e),
    }
}

/// Has the `n` send-queue slots of the chain of `ctxt`, as `slots` say;
/// a short Reply (inline, or one Write and the Send) needs none: it gets
/// room of the send queue set apart for chains without a completion of
/// their own (`SendOrder`), whatever the other slots hold, and its context
/// waits until a later chain's completion. Returns that room, if taken.
fn take_slots<'a, const ID: u64>(
    live: Live<'a>,
    ctxt: &CallCtxt,
    n: u32,
    slots: Slots,
) -> Result<Option<Unsignaled<'a, CallCtxt>>> {
    let room = if ID == REPLY
        && matches!(slots, Slots::Wait)
        && n <= UNSIGNALED_WRS
        && ctxt.reply.pages() <= UNSIGNALED_PAGES
    {
        live.conn.order().reserve_unsignaled()
    } else {
        None
    };
    match slots {
        Slots::Wait if room.is_some() => {}
        Slots::Wait => live.sq_reserve(n)?,
        Slots::Held(r) if r < n => return Err(EMSGSIZE),
        Slots::Held(r) => live.sq_release(r - n),
    }
    Ok(room)
}

/// Posts the chain of `ctxt`, `n` requests whose slots (or `room`) it has.
fn submit<const ID: u64>(
    live: Live<'_>,
    mut ctxt: KBox<CallCtxt>,
    n: u32,
    room: Option<Unsignaled<'_, CallCtxt>>,
) -> Posted
where
    CallCtxt: ChainOwner<ID>,
{
    // The counters-off build (make bench's rs_nostats) does not even tally.
    if !cfg!(svcrdma_rs_no_stats) {
        live.stats.count_posted(ctxt.chain.tally());
    }
    // The slots go back with the chain's completion (those set apart for
    // unsignaled chains with its owner's leaving the order).
    ctxt.sq_held = if room.is_some() { 0 } else { n };
    ctxt.status.store(0, Relaxed);
    let failed = |e: Error| {
        crate::trace::post_err(live.id, n, e.to_errno());
        pr_warn_ratelimited!(
            "connection {}: posting {} work requests failed: error {}, closing\n",
            live.id,
            n,
            e.to_errno()
        );
        Posted::Refused(e)
    };
    // A debug build's `debug_fail_post`: the device's refusal, without it.
    let posted = if crate::params::take_post_failure() {
        Err(PostError::Unposted(ctxt, ENOMEM))
    } else {
        live.conn
            .order()
            .post::<ID>(&live.res.ep, ctxt, |c| &mut c.chain, || live.close(), room)
    };
    match posted {
        Ok(()) => Posted::Ok,
        Err(PostError::Unposted(mut ctxt, e)) => {
            live.sq_release(core::mem::take(&mut ctxt.sq_held));
            live.close();
            not_posted::<ID>(live, ctxt, NOT_POSTED);
            failed(e)
        }
        // The chain's (or the marker's) completion takes the context, and
        // its slots, once the QP in the error state has flushed them.
        Err(PostError::Fenced(e)) => failed(e),
        Err(PostError::Leaked(orphan, e)) => {
            pr_warn_ratelimited!(
                "connection {}: cannot fence a failed post; its context waits for the teardown\n",
                live.id
            );
            live.orphaned(orphan);
            failed(e)
        }
    }
}
