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
    live::Live,
    recv::Work,
    rw, sendto,
    sq::{post_reads, post_reply, Slots},
    stats::count,
};
use crate::{
    log::pr_warn_ratelimited,
    proto::{
        budget::answer_when_busy,
        inline::RECV_SIZE,
        layout::ArgShape,
        rpcrdma::header::{ChunkError, DecodeError},
    },
    rdma::recv::{RecvHandler, RecvSlot},
};

/// Receive completions, from the receive CQ (`rdma::recv`).
impl RecvHandler for Connection {
    const BUF_SIZE: u32 = RECV_SIZE;

    fn receives_ready(&self) -> bool {
        self.recv.notified(self.xprt())
    }

    /// The counterpart of C's svc_rdma_wc_receive().
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
        self.receive_failed(status);
    }
}

/// `xpo_recvfrom`: handles one received message on `conn` for the nfsd
/// thread's request `rq`, or picks up a Call whose Reads completed.
/// Returns the Call's length (0: nothing for nfsd). The counterpart of C's
/// svc_rdma_recvfrom().
pub(super) fn recvfrom(conn: &Connection, rq: &mut Rq<'_>) -> usize {
    rq.reset_reply_pages();
    // Counted before other threads are let in (`RecvQueue::room_for_a_thread`).
    let _in_recv = conn.recv.enter(conn.xprt());
    let live = conn.live();
    // The receive completions this thread was woken for, if nobody else
    // handles them.
    if let Some(live) = live {
        conn.recv.poll(&live.res.ep);
    }
    let next = conn.recv.next(conn.xprt());
    // Let other threads receive on this transport while we work.
    conn.xprt().received();
    match next {
        None => 0,
        Some(Work::ReadsDone(ctxt)) => finish_reads(conn, rq, ctxt),
        Some(Work::Received(slot)) => live.map_or(0, |live| take_call(live, rq, slot)),
    }
}

/// Makes the Call of the message of `slot` for the nfsd thread's request
/// `rq` ([`receive`]); the buffer is given back before the Call goes to
/// nfsd, or its Reads or an answer are posted. Returns the Call's length
/// (0: none for nfsd now).
fn take_call(live: Live<'_>, rq: &mut Rq<'_>, slot: RecvSlot) -> usize {
    let Some(mut ctxt) = live.ctxt_get(false) else {
        answer_busy(live, slot);
        return 0;
    };
    let Some(msg) = live.res.ep.message(&slot) else {
        repost(live, slot);
        live.ctxt_put(ctxt);
        return 0;
    };
    let got = receive(live, &mut Origin::Thread(rq), &mut ctxt, msg);
    repost(live, slot);
    match got {
        Ok(Next::Call(shape)) => match finish_call(&live, rq, shape) {
            Ok(len) => hand_over(&live, rq, ctxt, len),
            Err(_) => {
                live.ctxt_put(ctxt);
                0
            }
        },
        // The context goes with the Reads, with the Call's pages; their
        // last completion queues the Call, and the next thread in here
        // picks it up (`finish_reads`). A refused post closes the
        // connection.
        Ok(Next::Reads(_)) => {
            post_reads(live, ctxt, Slots::Wait);
            0
        }
        // The context goes with the answer, as with a Reply: its completion
        // gives it back, and this thread takes the next message at once. A
        // refused post closes the connection, a failed completion too (its
        // status).
        Err(NoCall::Answer) => {
            post_reply(live, ctxt);
            0
        }
        Err(e) => {
            e.close(live);
            live.ctxt_put(ctxt);
            0
        }
    }
}

/// Starts the Call of `slot` from its receive completion if it is a valid
/// Call with Read chunks and what its Reads need is at hand now (see
/// [`Origin::Completion`]). Then its inline part is copied into pages of
/// its own, the buffer reposted, and the Reads posted; their completion
/// queues the Call for nfsd (`rw::reads_finished`). Otherwise, or for any
/// other message, the slot comes back untouched, for nfsd to handle as
/// always (it answers what this does not take, and waits where this may
/// not).
fn reads_at_once(conn: &Connection, slot: RecvSlot) -> Option<RecvSlot> {
    if !conn.recv.directly(conn.xprt()) {
        return Some(slot);
    }
    let (Some(live), Some(capacity)) = (conn.live(), conn.recv.arg_capacity()) else {
        return Some(slot);
    };
    let Some(msg) = live.res.ep.message(&slot) else {
        return Some(slot);
    };
    if !has_read_list(msg) {
        return Some(slot);
    }
    let Some(mut ctxt) = live.ctxt_get(false) else {
        return Some(slot);
    };
    let got = receive(live, &mut Origin::Completion(capacity), &mut ctxt, msg);
    if let Err(NoCall::Later) = got {
        live.ctxt_put(ctxt);
        return Some(slot);
    }
    // The Reads are built from the segments in the received message, then
    // the buffer goes back.
    repost(live, slot);
    match got {
        // A refused post closes the connection and hands the context to
        // `rw::reads_finished`.
        Ok(Next::Reads(Some(wrs))) => {
            post_reads(live, ctxt, Slots::Held(wrs));
        }
        Err(e) => {
            e.close(live);
            live.ctxt_put(ctxt);
        }
        // Cannot happen: from a completion, a Call has Reads (with their
        // slots) or is left to a thread.
        Ok(_) => {
            kernel::warn_on!(true);
            live.ctxt_put(ctxt);
        }
    }
    None
}

/// Where a Call is made ([`receive`]), and so what it may wait for.
enum Origin<'r, 'a> {
    /// An nfsd thread in `xpo_recvfrom`: the Call goes into its request's
    /// argument pages, and it may wait for MRs (and its Reads' post for
    /// send-queue slots).
    Thread(&'r mut Rq<'a>),
    /// The message's receive completion, nfsd's argument buffers being of
    /// this many bytes. Nothing may sleep there: a completion handler does
    /// not wait for memory, slots or MRs (nfsd threads do). Only a Call
    /// with Read chunks is taken, into pages allocated for it, and only if
    /// the send-queue slots and MRs its Reads take are free now, with
    /// nobody waiting for them; anything else is left to a thread.
    Completion(u32),
}

/// What a received message gave.
enum Next {
    /// A Call, assembled in the request's pages as this says.
    Call(ArgShape),
    /// A Call whose Read chain is built in the context, to post (with the
    /// send-queue slots taken for it, from a completion).
    Reads(Option<u32>),
}

/// Why a received message gave no Call.
enum NoCall {
    /// The context holds an RDMA_ERROR answer to post (`sendto::build_error`).
    Answer,
    /// Nothing to send back: dropped, handled, or the connection is closing.
    Dropped,
    /// The client sent RDMA_ERROR: the connection closes.
    Close,
    /// The Call's Reads could not be made ready: the connection closes.
    Failed(Error),
    /// Left to an nfsd thread (from a completion only).
    Later,
}

/// Why a Call's Reads are not ready ([`ready_reads`]).
enum NotReady {
    /// What they need is not at hand now (from a completion only).
    Later,
    /// They cannot be built: the connection closes.
    Failed(Error),
}

impl From<NotReady> for NoCall {
    fn from(n: NotReady) -> Self {
        match n {
            NotReady::Later => NoCall::Later,
            NotReady::Failed(e) => NoCall::Failed(e),
        }
    }
}

impl NoCall {
    /// Closes the connection if this says to, once the message's buffer
    /// went back.
    fn close(self, live: Live<'_>) {
        match self {
            NoCall::Close => live.close(),
            NoCall::Failed(e) => rw::prepare_failed(live, e),
            NoCall::Answer | NoCall::Dropped | NoCall::Later => {}
        }
    }
}

impl Origin<'_, '_> {
    /// What a message this origin cannot go on with becomes: a thread
    /// drops it, a completion leaves it to a thread.
    fn gives_up(&self) -> NoCall {
        match self {
            Origin::Thread(_) => NoCall::Dropped,
            Origin::Completion(_) => NoCall::Later,
        }
    }
}

/// Decodes the received message `msg` and makes its Call in `ctxt`: the
/// one place a Call is assembled, for an nfsd thread or from the
/// message's receive completion (`origin`). A bad header is answered (the
/// answer built in `ctxt`) by a thread, left to one by a completion. The
/// caller gives the buffer back (unless [`NoCall::Later`]), then posts or
/// closes as the result says. The counterpart of C's
/// svc_rdma_xdr_decode_req() with svc_rdma_build_arg_xdr() and
/// svc_rdma_process_read_list().
fn receive(
    live: Live<'_>,
    origin: &mut Origin<'_, '_>,
    ctxt: &mut CallCtxt,
    msg: &[u8],
) -> core::result::Result<Next, NoCall> {
    let capacity = match origin {
        Origin::Thread(rq) => {
            count(&live.stats.c.bytes_recv_inline, msg.len() as u64);
            let capacity = u32::try_from(rq.arg_capacity()).unwrap_or(u32::MAX);
            live.recv.learn_arg_capacity(capacity);
            capacity
        }
        Origin::Completion(capacity) => *capacity,
    };
    // Read in place, never moved (it is large).
    let planned = plan(|| live.budget(), msg, capacity, &mut ctxt.steps);
    let plan = match (&planned, &*origin) {
        (Ok(p), Origin::Completion(_)) if p.nchunks == 0 => return Err(NoCall::Later),
        (Ok(p), _) => p,
        (Err(_), Origin::Completion(_)) => return Err(NoCall::Later),
        (Err(u), Origin::Thread(_)) => return Err(unplanned(live, ctxt, u)),
    };
    // Keep the header for the Reply.
    if ctxt.hdr.keep(msg, &plan.header).is_err() {
        return Err(origin.gives_up());
    }
    match origin {
        // The inline part goes into the request's pages (the buffer can
        // go back then); without Read chunks that is the whole Call.
        Origin::Thread(rq) => {
            let assembled = plan.assemble(&ctxt.steps, |at, fill| match fill {
                Fill::Bytes(b) => rq.arg_write(at, b),
                Fill::Zeros(n) => rq.arg_zero(at, n),
            });
            if assembled.is_err() {
                return Err(NoCall::Dropped);
            }
            if plan.nchunks == 0 {
                return Ok(Next::Call(plan.shape));
            }
        }
        Origin::Completion(_) => {}
    }
    // The Reads are built from the segments in the received message (each
    // request takes what it needs of them).
    ready_reads(live, origin, ctxt, plan, msg.len())
        .map(Next::Reads)
        .map_err(NoCall::from)
}

/// Makes ready the RDMA Reads of the Call `plan` lays out, whose header
/// `ctxt` keeps (its message `inline` bytes): the Call's argument pages go
/// into the context, with the MRs its Reads take, and its Read chain is
/// built. A thread's request gives the pages, the inline part in them
/// already, and the thread waits for MRs if it must. From a completion
/// the pages are allocated and the inline part copied into them, and the
/// send-queue slots the chain takes are taken too (returned). On failure
/// the context holds no MRs that are not retired, and no pages of the
/// request.
fn ready_reads(
    live: Live<'_>,
    origin: &mut Origin<'_, '_>,
    ctxt: &mut CallCtxt,
    plan: &Plan<'_>,
    inline: usize,
) -> core::result::Result<Option<u32>, NotReady> {
    let Origin::Thread(rq) = origin else {
        return ready_reads_now(live, ctxt, plan, inline);
    };
    let chunks = plan.read_chunks();
    // The pages the Reads fill go with the context, before anything maps
    // them; the Call is picked up, in them, by whichever thread comes next.
    ctxt.args
        .take_args(rq, plan.pages())
        .map_err(NotReady::Failed)?;
    let need = live.res.sink.mrs_needed(&chunks);
    let built = rw::take_mrs(live, ctxt, need, true)
        .and_then(|()| rw::build_read_chain(live, ctxt, &chunks, plan.shape));
    if let Err(e) = built {
        // Not read into: they go back where they were taken from (left
        // with the context if an MR still maps them, which cannot be).
        let _ = ctxt.args.give_back_args(rq);
        return Err(NotReady::Failed(e));
    }
    Ok(None)
}

/// [`ready_reads`] from a receive completion: nothing waits, and what is
/// not at hand now leaves the Call to a thread ([`NotReady::Later`]).
fn ready_reads_now(
    live: Live<'_>,
    ctxt: &mut CallCtxt,
    plan: &Plan<'_>,
    inline: usize,
) -> core::result::Result<Option<u32>, NotReady> {
    let nowait = GFP_NOWAIT | __GFP_NOWARN;
    let wrs = u32::try_from(plan.cost.wrs).map_err(|_| NotReady::Later)?;
    if ctxt.args.alloc_args(plan.pages(), nowait).is_err() || !live.sq_try_reserve(wrs) {
        return Err(NotReady::Later);
    }
    let mrs = plan.cost.mrs;
    if rw::take_mrs(live, ctxt, mrs, false).is_err() {
        live.sq_release(wrs);
        return Err(NotReady::Later);
    }
    // The Call is this completion's from here on: what fails now closes
    // the connection, as it would in an nfsd thread.
    count(&live.stats.c.bytes_recv_inline, inline as u64);
    let c = &mut *ctxt;
    let assembled = plan.assemble(&c.steps, |at, fill| match fill {
        Fill::Bytes(b) => c.args.write_args(at, b),
        Fill::Zeros(n) => c.args.zero_args(at, n),
    });
    let chunks = plan.read_chunks();
    let built = assembled.and_then(|()| {
        if live.res.sink.mrs_needed(&chunks) != mrs {
            // The budget's count and the chain's differ: cannot happen.
            return Err(EINVAL);
        }
        rw::build_read_chain(live, ctxt, &chunks, plan.shape)
    });
    if let Err(e) = built {
        live.sq_release(wrs);
        // Taken but not registered (the chain was never built): they go
        // back as they came.
        rw::give_back_mrs(live, ctxt);
        return Err(NotReady::Failed(e));
    }
    Ok(Some(wrs))
}

/// Answers the message of `slot`, which arrived while every context for Calls
/// was in use: the client has far more Calls in flight than its credits
/// allow. It gets `ERR_CHUNK` (`proto::budget::answer_when_busy`) from the
/// context kept for this, rather than silence that an NFSv4 client would
/// wait on until it reconnects. Only if that context is busy too (another
/// such answer is in flight) is the message dropped.
fn answer_busy(live: Live<'_>, slot: RecvSlot) {
    let err = live
        .res
        .ep
        .message(&slot)
        .and_then(|m| answer_when_busy(m, &LIMITS));
    repost(live, slot);
    let Some(err) = err else {
        pr_warn_ratelimited!(
            "connection {}: more Calls in progress than contexts, dropping a message that gets no answer\n",
            live.id
        );
        return;
    };
    let Some(mut ctxt) = live.ctxt_get(true) else {
        pr_warn_ratelimited!(
            "connection {}: more Calls in progress than contexts, dropping one\n",
            live.id
        );
        return;
    };
    pr_warn_ratelimited!(
        "connection {}: more Calls in progress than contexts, answered with RDMA_ERROR\n",
        live.id
    );
    match sendto::build_error(live, &mut ctxt, &err) {
        Ok(true) => {
            post_reply(live, ctxt);
        }
        _ => live.ctxt_put(ctxt),
    }
}

/// A Call whose RDMA Reads completed, picked up by this thread: its pages
/// go into `rq`, and the Call to nfsd. Returns its length (0: none).
fn finish_reads(conn: &Connection, rq: &mut Rq<'_>, mut ctxt: KBox<CallCtxt>) -> usize {
    if ctxt.args.install_args(rq).is_err() {
        conn.ctxt_put(ctxt);
        return 0;
    }
    match finish_call(conn, rq, ctxt.call_shape) {
        Ok(len) => hand_over(conn, rq, ctxt, len),
        Err(_) => {
            conn.ctxt_put(ctxt);
            0
        }
    }
}

/// Hands nfsd the Call of `len` bytes in `rq`: the request holds its
/// context until `xpo_release_ctxt`, or the Reply.
fn hand_over(conn: &Connection, rq: &mut Rq<'_>, ctxt: KBox<CallCtxt>, len: usize) -> usize {
    count(&conn.stats.c.calls, 1);
    rq.set_ctxt(ctxt);
    len
}

/// Declares the Call laid out in `rq`'s argument pages as `shape` says
/// assembled, after checking it is an RPC Call. Returns its length.
fn finish_call(conn: &Connection, rq: &mut Rq<'_>, shape: ArgShape) -> Result<usize> {
    rq.set_arg_shape(shape)?;
    // RPC direction (word 1): 0 is a Call. A Reply would be for a
    // backchannel, which this transport offers only when built with it
    // (and then took it above).
    if rq.arg_head().get(4..8) != Some(&[0, 0, 0, 0][..]) {
        pr_warn_ratelimited!(
            "connection {}: dropping a message that is not an RPC Call\n",
            conn.id
        );
        return Err(EINVAL);
    }
    rq.complete_receive(conn.xprt());
    Ok(shape.len() as usize)
}

/// Builds the RDMA_ERROR answering `err` in `ctxt`, if there is one.
fn answer(live: Live<'_>, ctxt: &mut CallCtxt, err: &DecodeError) -> NoCall {
    match sendto::build_error(live, ctxt, err) {
        Ok(true) => NoCall::Answer,
        _ => NoCall::Dropped,
    }
}

/// Gives the buffer of `slot` back (its message is no longer needed), to
/// be posted again with a batch of others; closes the connection if
/// posting fails. The counterpart of C's svc_rdma_recv_ctxt_put() with
/// svc_rdma_refresh_recvs().
fn repost(live: Live<'_>, slot: RecvSlot) {
    let ep = &live.res.ep;
    if live
        .recv
        .release(slot, |batch| ep.repost(batch.into_iter().flatten()))
        .is_err()
    {
        live.close();
    }
}

/// What a thread does with a message that has no [`Plan`] (`u`): a bad
/// header is answered (in `ctxt`), a peer's RDMA_ERROR closes the
/// connection, a backward Reply goes to the backchannel.
fn unplanned(live: Live<'_>, ctxt: &mut CallCtxt, u: &Unplanned<'_>) -> NoCall {
    match u {
        &Unplanned::Decode(e) => {
            if let DecodeError::PeerError { .. } = e {
                pr_warn_ratelimited!(
                    "connection {}: the client sent RDMA_ERROR, closing\n",
                    live.id
                );
                return NoCall::Close;
            }
            // A message too short for an XID and a version gets no answer.
            let outcome = if e.xid().is_some() {
                "answered with RDMA_ERROR"
            } else {
                "dropped"
            };
            pr_warn_ratelimited!(
                "connection {}: bad transport header ({}), {}\n",
                live.id,
                e.as_str(),
                outcome
            );
            crate::trace::decode_err(live.id, e.xid().unwrap_or(0), e.as_str());
            answer(live, ctxt, &e)
        }
        #[cfg(svcrdma_rs_backchannel)]
        Unplanned::BackwardReply(header, body) => {
            super::backchannel::receive_reply(&live, header, body);
            NoCall::Dropped
        }
        #[cfg(not(svcrdma_rs_backchannel))]
        Unplanned::Never(never, _) => match *never {},
        &Unplanned::Reject { xid, why, counts } => reject(live, ctxt, xid, why, counts),
    }
}

/// Answers a Call whose chunks cannot be placed, or need more than the
/// connection has, with ERR_CHUNK; `(need, have)` of what ran out, if
/// something did (`(0, 0)`: nothing to count).
fn reject(
    live: Live<'_>,
    ctxt: &mut CallCtxt,
    xid: u32,
    why: &str,
    (need, have): (usize, usize),
) -> NoCall {
    if need == 0 {
        pr_warn_ratelimited!(
            "connection {}: cannot serve the Call's read chunks ({}), answered with RDMA_ERROR\n",
            live.id,
            why
        );
    } else {
        pr_warn_ratelimited!(
            "connection {}: cannot serve the Call's read chunks ({}: {} needed, {} there), answered with RDMA_ERROR\n",
            live.id,
            why,
            need,
            have
        );
    }
    let e = DecodeError::Chunk {
        xid,
        reason: ChunkError::OverResources,
    };
    answer(live, ctxt, &e)
}
