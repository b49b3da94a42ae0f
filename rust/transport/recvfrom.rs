// SPDX-License-Identifier: GPL-2.0

//! `xpo_recvfrom`: turning a received RPC-over-RDMA message into a Call
//! for nfsd.
//!
//! The transport header is decoded and validated (`proto::rpcrdma`); a bad
//! one is answered with RDMA_ERROR (ERR_VERS, ERR_CHUNK) or, for a peer's
//! RDMA_ERROR, closes the connection. A good one is assembled into nfsd's
//! argument pages (`proto::layout`): the inline part copied (so the receive
//! buffer is reposted at once), each Read chunk pulled by RDMA Read, and
//! roundups zeroed. Most Calls become one stream, the way a stream transport
//! leaves a record; a Call with one data item (an NFS WRITE's payload) gets
//! the item on pages of its own from their first byte, as nfsd's direct I/O
//! needs, the inline bytes around it in the first page. The context that
//! carries the header to the Reply hangs on the request.
//!
//! A Call with Read chunks (an NFS WRITE's data, a long Call) is started
//! by its receive completion instead, when everything it needs is at hand
//! ([`reads_at_once`]): its RDMA Reads are posted right away, into pages
//! of its own, and the Call waits for them in the connection's queue of
//! finished Reads (`super::recv`), not in an nfsd thread, which is woken
//! only once they are done, to pick the whole Call up. The C transport
//! wakes a thread for the Call, which posts the Reads and goes back to
//! sleep, and another one once they complete.

use kernel::prelude::*;

use super::{
    call::{has_read_list, plan, Fill, Plan, Unplanned, LIMITS},
    connection::Connection,
    ctxt::{CallCtxt, Rq},
    recv::Work,
    rw, sendto,
    sq::{post_reads, post_reads_reserved, post_reply},
    stats::count,
};
use crate::{
    log::pr_warn_ratelimited,
    proto::inline::RECV_SIZE,
    proto::{
        budget::answer_when_busy,
        layout::ArgShape,
        rpcrdma::header::{ChunkError, DecodeError},
    },
    rdma::recv::{RecvHandler, RecvSlot},
};

impl RecvHandler for Connection {
    const BUF_SIZE: u32 = RECV_SIZE;

    fn receives_ready(&self) -> bool {
        self.recv.notified(self.xprt())
    }

    fn received(&self, slot: RecvSlot) {
        if self.recv.completed() {
            count(&self.stats.c.recv_starved, 1);
        }
        if let Some(slot) = reads_at_once(self, slot) {
            if self.recv.push(self.xprt(), slot).is_err() {
                self.close_deferred();
            }
        }
    }

    fn receive_failed(&self, status: u32) {
        Connection::receive_failed(self, status);
    }
}

/// Starts the Call of `slot` from its receive completion if it is a valid
/// Call with Read chunks and what its Reads need is at hand now: a
/// context, pages for its argument buffer (without sleeping), and the
/// send-queue slots and FRMR entries the Reads take, with nobody waiting
/// for either. Then its inline part is copied into those pages, the buffer
/// reposted, and the Reads posted; their completion queues the Call for
/// nfsd (`rw::reads_finished`). Otherwise, or for any other message, the
/// slot comes back untouched, for nfsd to handle as always (it answers
/// what this does not take, and waits where this may not).
fn reads_at_once(conn: &Connection, slot: RecvSlot) -> Option<RecvSlot> {
    if !conn.recv.directly(conn.xprt()) {
        return Some(slot);
    }
    let (Some(res), Some(capacity)) = (conn.res(), conn.recv.arg_capacity()) else {
        return Some(slot);
    };
    let Some(msg) = res.ep.message(&slot) else {
        return Some(slot);
    };
    if !has_read_list(msg) {
        return Some(slot);
    }
    let Some(mut ctxt) = conn.ctxt_get(false) else {
        return Some(slot);
    };
    // Read in place, never moved (it is large).
    let Some(budget) = rw::budget(conn) else {
        conn.ctxt_put(ctxt);
        return Some(slot);
    };
    let planned = plan(&budget, msg, capacity, &mut ctxt.steps);
    let plan = match &planned {
        Ok(plan) if plan.nchunks > 0 => plan,
        _ => {
            conn.ctxt_put(ctxt);
            return Some(slot);
        }
    };
    // Nothing here may sleep: a completion handler does not wait for
    // memory, slots or MRs (nfsd threads do).
    let nowait = GFP_NOWAIT | __GFP_NOWARN;
    let pages = plan.pages();
    let Ok(wrs) = u32::try_from(plan.cost.wrs) else {
        conn.ctxt_put(ctxt);
        return Some(slot);
    };
    if ctxt.args.alloc_args(pages, nowait).is_err() || ctxt.hdr.keep(msg, &plan.header).is_err() {
        conn.ctxt_put(ctxt);
        return Some(slot);
    }
    if !conn.sq_try_reserve(wrs) {
        conn.ctxt_put(ctxt);
        return Some(slot);
    }
    let mrs = plan.cost.mrs;
    let took_mrs = mrs == 0
        || ctxt
            .args
            .mrs_mut()
            .is_ok_and(|out| out.reserve(mrs, nowait).is_ok() && conn.mrs_try_take(mrs, out));
    if !took_mrs {
        conn.sq_release(wrs);
        conn.ctxt_put(ctxt);
        return Some(slot);
    }
    // The Call is this completion's from here on: what fails now closes
    // the connection, as it would in an nfsd thread.
    let c = &mut *ctxt;
    let assembled = plan.assemble(&c.steps, |at, fill| match fill {
        Fill::Bytes(b) => c.args.write_args(at, b),
        Fill::Zeros(n) => c.args.zero_args(at, n),
    });
    count(&conn.stats.c.bytes_recv_inline, msg.len() as u64);
    // The Reads are built from the segments in the received message, then
    // the buffer goes back.
    let prepared = assembled.and_then(|()| prepare(conn, &mut ctxt, plan, mrs));
    repost(conn, slot);
    if let Err(e) = prepared {
        rw::prepare_failed(conn, e);
        conn.sq_release(wrs);
        if !ctxt.args.mrs().is_empty() {
            // Taken but not registered (the chain was never built): they
            // go back as they came.
            if let Ok(held) = ctxt.args.mrs_mut() {
                conn.mrs_give(held);
            }
        }
        conn.ctxt_put(ctxt);
        return None;
    }
    // A failed post closes the connection and hands the context to
    // `rw::reads_finished` (`post_reads_reserved`).
    let _ = post_reads_reserved(conn, ctxt, wrs);
    None
}

/// Builds the Read chain of the Call `plan` describes in `ctxt` (its
/// header kept, its inline part in its pages, `mrs` FRMR entries held).
fn prepare(conn: &Connection, ctxt: &mut CallCtxt, plan: &Plan<'_>, mrs: usize) -> Result {
    let chunks = plan.read_chunks();
    if rw::mrs_needed(conn, &chunks) != mrs {
        // The budget's count and the chain's differ: cannot happen.
        return Err(EINVAL);
    }
    rw::prepare_reads_held(conn, ctxt, &chunks, plan.shape)
}

/// Handles one received message on `conn` for the nfsd thread's request
/// `rq`. Returns the Call's length (0: nothing for nfsd).
pub(super) fn recvfrom(conn: &Connection, rq: &mut Rq<'_>) -> usize {
    rq.reset_reply_pages();
    // Counted before other threads are let in (`Connection::recv_cap`).
    let _in_recv = conn.recv.enter(conn.xprt());
    // The receive completions this thread was woken for, if nobody else
    // handles them.
    if let Some(res) = conn.res() {
        conn.recv.poll(&res.ep);
    }
    let next = conn.recv.next(conn.xprt());
    // Let other threads receive on this transport while we work.
    conn.xprt().received();
    let slot = match next {
        None => return 0,
        Some(Work::ReadsDone(ctxt)) => return finish_reads(conn, rq, ctxt),
        Some(Work::Received(slot)) => slot,
    };
    if conn.res().is_none() {
        return 0;
    }
    let Some(mut ctxt) = conn.ctxt_get(false) else {
        answer_busy(conn, slot);
        return 0;
    };
    let got = receive(conn, rq, &mut ctxt, slot);
    match got {
        Ok(Next::Call(len)) => {
            count(&conn.stats.c.calls, 1);
            // The request holds it until `xpo_release_ctxt`, or the Reply.
            rq.set_ctxt(ctxt);
            len
        }
        // The context goes with the Reads, with the Call's pages; their
        // last completion queues the Call, and the next thread in here
        // picks it up (`finish_reads`). A failed post closes the
        // connection (`post_reads`).
        Ok(Next::Reads) => {
            let _ = post_reads(conn, ctxt);
            0
        }
        // The context goes with the answer, as with a Reply: its completion
        // gives it back, and this thread takes the next message at once. A
        // failed post closes the connection (`post_reply`), a failed
        // completion too (its status).
        Err(NoCall::Answer) => {
            let _ = post_reply(conn, ctxt);
            0
        }
        Err(NoCall::Dropped) => {
            conn.ctxt_put(ctxt);
            0
        }
    }
}

/// Answers the message of `slot`, which arrived while every context for Calls
/// was in use: the client has far more Calls in flight than its credits
/// allow. It gets `ERR_CHUNK` (`proto::budget::answer_when_busy`) from the
/// context kept for this, rather than silence that an NFSv4 client would
/// wait on until it reconnects. Only if that context is busy too (another
/// such answer is in flight) is the message dropped.
fn answer_busy(conn: &Connection, slot: RecvSlot) {
    let Some(res) = conn.res() else {
        return;
    };
    let err = res
        .ep
        .message(&slot)
        .and_then(|m| answer_when_busy(m, &LIMITS));
    repost(conn, slot);
    let Some(err) = err else {
        pr_warn_ratelimited!(
            "connection {}: more Calls in progress than contexts, dropping a message that gets no answer\n",
            conn.id
        );
        return;
    };
    let Some(mut ctxt) = conn.ctxt_get(true) else {
        pr_warn_ratelimited!(
            "connection {}: more Calls in progress than contexts, dropping one\n",
            conn.id
        );
        return;
    };
    pr_warn_ratelimited!(
        "connection {}: more Calls in progress than contexts, answered with RDMA_ERROR\n",
        conn.id
    );
    match sendto::build_error(conn, &mut ctxt, &err) {
        Ok(true) => {
            let _ = post_reply(conn, ctxt);
        }
        _ => conn.ctxt_put(ctxt),
    }
}

/// A Call whose RDMA Reads completed, picked up by this thread: its pages
/// go into `rq`, and the Call to nfsd. Returns its length (0: none).
fn finish_reads(conn: &Connection, rq: &mut Rq<'_>, mut ctxt: KBox<CallCtxt>) -> usize {
    if ctxt.args.install_args(rq).is_err() {
        conn.ctxt_put(ctxt);
        return 0;
    }
    // Mutant corrupt_read_sink: one byte of each Read chunk's sink flipped after the Read.
    #[cfg(svcrdma_mutant = "corrupt_read_sink")]
    for &dst in ctxt.read_dst.iter().take(ctxt.nread) {
        let _ = rq.arg_flip(dst);
    }
    match finish_call(conn, rq, ctxt.call_shape) {
        Ok(len) => {
            count(&conn.stats.c.calls, 1);
            rq.set_ctxt(ctxt);
            len
        }
        Err(_) => {
            conn.ctxt_put(ctxt);
            0
        }
    }
}

/// Declares the Call laid out in `rq`'s argument pages as `shape` says
/// assembled, after checking it is an RPC Call. Returns its length.
fn finish_call(
    conn: &Connection,
    rq: &mut Rq<'_>,
    shape: ArgShape,
) -> core::result::Result<usize, NoCall> {
    rq.set_arg_shape(shape)?;
    // RPC direction (word 1): 0 is a Call. A Reply would be for a
    // backchannel, which this transport offers only when built with it
    // (and then took it above).
    if rq.arg_head().get(4..8) != Some(&[0, 0, 0, 0][..]) {
        pr_warn_ratelimited!(
            "connection {}: dropping a message that is not an RPC Call\n",
            conn.id
        );
        return Err(NoCall::Dropped);
    }
    rq.complete_receive(conn.xprt());
    Ok(shape.len() as usize)
}

/// What a received message gave.
enum Next {
    /// A Call of this length, assembled.
    Call(usize),
    /// A Call whose RDMA Reads are prepared in the context, to post.
    Reads,
}

/// Why a received message gave nfsd no Call.
enum NoCall {
    /// The context holds an RDMA_ERROR answer to post (`sendto::build_error`).
    Answer,
    /// Nothing to send back: dropped, handled, or the connection is closing.
    Dropped,
}

impl From<Error> for NoCall {
    fn from(_: Error) -> Self {
        NoCall::Dropped
    }
}

/// Builds the RDMA_ERROR answering `err` in `ctxt`, if there is one.
fn answer(conn: &Connection, ctxt: &mut CallCtxt, err: &DecodeError) -> NoCall {
    match sendto::build_error(conn, ctxt, err) {
        Ok(true) => NoCall::Answer,
        _ => NoCall::Dropped,
    }
}

/// Gives the buffer of `slot` back (its message is no longer needed), to
/// be posted again with a batch of others; closes the connection if
/// posting fails.
pub(super) fn repost(conn: &Connection, slot: RecvSlot) {
    let Some(res) = conn.res() else {
        return;
    };
    if conn
        .recv
        .release(slot, |batch| res.ep.repost(batch.into_iter().flatten()))
        .is_err()
    {
        conn.close();
    }
}

/// Decodes the message of `slot`, answers or assembles it. The buffer is
/// reposted before any RDMA Read. `Err` means no Call for nfsd.
fn receive(
    conn: &Connection,
    rq: &mut Rq<'_>,
    ctxt: &mut CallCtxt,
    slot: RecvSlot,
) -> core::result::Result<Next, NoCall> {
    let Some(res) = conn.res() else {
        // Not reposted, as before: the connection has no resources yet.
        return Err(NoCall::Dropped);
    };
    let Some(msg) = res.ep.message(&slot) else {
        repost(conn, slot);
        return Err(NoCall::Dropped);
    };
    count(&conn.stats.c.bytes_recv_inline, msg.len() as u64);
    let capacity = u32::try_from(rq.arg_capacity()).unwrap_or(u32::MAX);
    conn.recv.learn_arg_capacity(capacity);
    // Read in place, never moved (it is large).
    let Some(budget) = rw::budget(conn) else {
        repost(conn, slot);
        return Err(NoCall::Dropped);
    };
    let planned = plan(&budget, msg, capacity, &mut ctxt.steps);
    let plan = match &planned {
        Ok(p) => p,
        Err(Unplanned::Decode(e)) => {
            let e = *e;
            if let DecodeError::PeerError { .. } = e {
                pr_warn_ratelimited!(
                    "connection {}: the client sent RDMA_ERROR, closing\n",
                    conn.id
                );
                repost(conn, slot);
                conn.close();
                return Err(NoCall::Dropped);
            }
            // A message too short for an XID and a version gets no answer.
            let outcome = if e.xid().is_some() {
                "answered with RDMA_ERROR"
            } else {
                "dropped"
            };
            pr_warn_ratelimited!(
                "connection {}: bad transport header ({}), {}\n",
                conn.id,
                e.as_str(),
                outcome
            );
            crate::trace::decode_err(conn.id, e.xid().unwrap_or(0), e.as_str());
            repost(conn, slot);
            return Err(answer(conn, ctxt, &e));
        }
        #[cfg(svcrdma_rs_backchannel)]
        Err(Unplanned::BackwardReply(header, body)) => {
            super::backchannel::receive_reply(conn, header, body);
            repost(conn, slot);
            return Err(NoCall::Dropped);
        }
        #[cfg(not(svcrdma_rs_backchannel))]
        Err(Unplanned::Never(never, _)) => match *never {},
        &Err(Unplanned::Reject { xid, why, counts }) => {
            return reject(conn, ctxt, xid, why, counts, slot)
        }
    };

    // Keep the header for the Reply, copy the inline part, free the buffer.
    if ctxt.hdr.keep(msg, &plan.header).is_err() {
        repost(conn, slot);
        return Err(NoCall::Dropped);
    }
    let assembled = plan.assemble(&ctxt.steps, |at, fill| match fill {
        Fill::Bytes(b) => rq.arg_write(at, b),
        Fill::Zeros(n) => rq.arg_zero(at, n),
    });
    if assembled.is_err() {
        repost(conn, slot);
        return Err(NoCall::Dropped);
    }
    let shape = plan.shape;
    if plan.nchunks == 0 {
        repost(conn, slot);
        return finish_call(conn, rq, shape).map(Next::Call);
    }
    // The Reads are built from the segments in the received message (each
    // request takes what it needs of them), then the buffer goes back.
    let prepared = rw::prepare_reads(conn, rq, ctxt, &plan.read_chunks(), shape);
    repost(conn, slot);
    if let Err(e) = prepared {
        rw::prepare_failed(conn, e);
        return Err(NoCall::Dropped);
    }
    Ok(Next::Reads)
}

/// Answers a Call whose chunks cannot be placed, or need more than the
/// connection has, with ERR_CHUNK; `(need, have)` of what ran out, if
/// something did (`(0, 0)`: nothing to count).
fn reject(
    conn: &Connection,
    ctxt: &mut CallCtxt,
    xid: u32,
    why: &str,
    (need, have): (usize, usize),
    slot: RecvSlot,
) -> core::result::Result<Next, NoCall> {
    repost(conn, slot);
    // Mutant limit_closes (issue 22 item 5 undone): a Call over the
    // connection's resources closes it, unanswered.
    if cfg!(svcrdma_mutant = "limit_closes") && need != 0 {
        conn.close();
        return Err(NoCall::Dropped);
    }
    if need == 0 {
        pr_warn_ratelimited!(
            "connection {}: cannot serve the Call's read chunks ({}), answered with RDMA_ERROR\n",
            conn.id,
            why
        );
    } else {
        pr_warn_ratelimited!(
            "connection {}: cannot serve the Call's read chunks ({}: {} needed, {} there), answered with RDMA_ERROR\n",
            conn.id,
            why,
            need,
            have
        );
    }
    let e = DecodeError::Chunk {
        xid,
        reason: ChunkError::OverResources,
    };
    Err(answer(conn, ctxt, &e))
}
