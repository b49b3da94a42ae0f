// SPDX-License-Identifier: GPL-2.0

//! Receive buffers: posted ahead, completed by the device, handed to nfsd.
//!
//! Each connection has one buffer per credit (plus backchannel), each of our
//! inline receive size, DMA-mapped once at accept and reposted after use
//! (`rdma::recv`). The receive CQ's notification wakes an nfsd thread
//! (`Connection::receives_ready`), which polls the CQ in `xpo_recvfrom`:
//! each completion queues its buffer's slot on the connection, and the
//! thread takes the first one itself; it reposts the buffer once it has
//! copied what it needs. (The C transport polls in a work item, which then
//! wakes an nfsd thread: two dispatches per message where this takes one.)
//!
//! A Call with Read chunks (an NFS WRITE's data, a long Call) is started
//! by its completion instead, when everything it needs is at hand
//! ([`reads_at_once`]): its RDMA Reads are posted right away, into pages
//! of its own, and the Call waits for them in the connection's queue of
//! finished Reads, not in an nfsd thread, which is woken only once they
//! are done, to pick the whole Call up. The C transport wakes a thread for
//! the Call, which posts the Reads and goes back to sleep, and another one
//! once they complete.

use kernel::prelude::*;

use super::{
    call::{has_read_list, plan, Fill, Plan},
    connection::Connection,
    ctxt::CallCtxt,
    recvfrom::repost,
    rw,
    sq::post_reads_reserved,
    stats::count,
};
use crate::{
    proto::inline::RECV_SIZE,
    rdma::recv::{RecvHandler, RecvSlot},
};

impl RecvHandler for Connection {
    const BUF_SIZE: u32 = RECV_SIZE;

    fn receives_ready(&self) -> bool {
        Connection::receives_ready(self)
    }

    fn received(&self, slot: RecvSlot) {
        self.receive_completed();
        if let Some(slot) = reads_at_once(self, slot) {
            Connection::received(self, slot);
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
    if !conn.receives_directly() {
        return Some(slot);
    }
    let (Some(res), Some(capacity)) = (conn.res(), conn.arg_capacity()) else {
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
