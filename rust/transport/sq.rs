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
//! ([`unsignaled_done`]). Nothing the device may still touch is ever
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
//! The send queue has a fixed number of slots ([`SendQueue`]). A chain
//! reserves its slots before posting (waiting in turn while other RPCs
//! hold them) and gives them back with its last completion.

use core::cell::UnsafeCell;

use kernel::{
    prelude::*,
    sync::atomic::{
        ordering::{Acquire, Full, Relaxed},
        Atomic,
    },
};

use super::{connection::Connection, ctxt::CallCtxt, fair::FairPool};
use crate::{bindings, log::pr_warn_ratelimited, rdma::wr::Chain};

/// A connection's send-queue slots: the free ones and how many exist.
pub(crate) struct Slots {
    avail: u32,
    total: u32,
}

/// The send-queue slots, handed out in turn (see [`FairPool`]).
pub(crate) type SendQueue = FairPool<Slots>;

impl SendQueue {
    /// No slots until [`SendQueue::set_size`].
    pub(crate) fn empty() -> impl PinInit<Self> {
        Self::new(Slots { avail: 0, total: 0 })
    }

    /// Sets the number of slots (at accept, before any use).
    pub(crate) fn set_size(&self, slots: u32) {
        self.with(|s| {
            s.avail = slots;
            s.total = slots;
        });
    }

    /// How many slots exist (the most one chain can hold).
    pub(crate) fn total(&self) -> u32 {
        self.with(|s| s.total)
    }

    /// Takes `n` slots, waiting in turn while others hold them; fails with
    /// `EMSGSIZE` if the queue can never hold `n`, with `ENOTCONN` once the
    /// queue is closed or `closing()`.
    pub(crate) fn reserve(
        &self,
        n: u32,
        closing: impl Fn() -> bool,
        on_wait: impl FnOnce(),
    ) -> Result {
        if n > self.with(|s| s.total) {
            return Err(EMSGSIZE);
        }
        self.acquire(closing, on_wait, |s| {
            let left = s.avail.checked_sub(n)?;
            s.avail = left;
            Some(())
        })
    }

    /// Gives back `n` slots.
    pub(crate) fn give_back(&self, n: u32) {
        self.release(|s| s.avail = s.avail.saturating_add(n).min(s.total));
    }
}

/// After posting `chain` failed with `rc` (`bad`: the first request not
/// posted, if the provider named one): closes the connection (the QP goes
/// to the error state, which flushes the posted ones). Returns how many
/// were posted.
fn post_failed(
    conn: &Connection,
    chain: &mut Chain,
    bad: *const bindings::ib_send_wr,
    rc: c_int,
) -> usize {
    let n = chain.len();
    // Without `bad` (siw queues the whole chain and then fails to start
    // sending), or with one not in the chain, all are taken as posted.
    let posted = if bad.is_null() {
        n
    } else {
        chain.position(bad).unwrap_or(n)
    };
    crate::trace::post_err(conn.id, u32::try_from(n).unwrap_or(u32::MAX), rc);
    pr_warn_ratelimited!(
        "connection {}: posting {} work requests failed: error {}, closing\n",
        conn.id,
        n,
        rc
    );
    conn.close();
    posted
}

/// Notes a failed completion of `conn` in `status` (the first one wins),
/// with a line unless it is a flush (the QP went down on purpose).
fn note_status(conn: &Connection, status: &Atomic<u32>, wc: &bindings::ib_wc) {
    if wc.status == bindings::IB_WC_SUCCESS {
        return;
    }
    let _ = status.cmpxchg(0, wc.status, Full);
    if wc.status != bindings::IB_WC_WR_FLUSH_ERR {
        super::stats::count(&conn.stats.c.completion_errors, 1);
        crate::trace::wc_err(conn.id, wc.status, wc.vendor_err);
        pr_warn_ratelimited!(
            "connection {}: work request failed with status {}, closing\n",
            conn.id,
            wc.status
        );
    }
}

/// What a chain posted with its context is for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Owned {
    /// A Reply (or RDMA_ERROR): its last completion returns the context.
    Reply,
    /// A Call's RDMA Reads: its last completion queues the Call.
    Reads,
}

/// Posts the Reply chain built in `ctxt` (its Writes and Send) and returns
/// without waiting. The context goes with the chain: its last completion
/// returns it to `conn`'s pool, releasing the mappings and the Reply pages
/// it holds. The context is returned on every failure too; a failed post
/// also closes the connection (the caller closes it on the others).
pub(crate) fn post_reply(conn: &Connection, ctxt: KBox<CallCtxt>) -> Result {
    post_owned(conn, ctxt, Owned::Reply)
}

/// Posts the Read chain built in `ctxt` for its Call and returns without
/// waiting. The context (with the Call's argument pages) goes with the
/// chain; its last completion hands it to [`super::rw::reads_finished`],
/// also when posting fails (which closes the connection), or when nothing
/// could be posted.
pub(crate) fn post_reads(conn: &Connection, ctxt: KBox<CallCtxt>) -> Result {
    post_owned(conn, ctxt, Owned::Reads)
}

/// The context's chain did not go out at all: it ends here.
fn not_posted(conn: &Connection, ctxt: KBox<CallCtxt>, kind: Owned, status: u32) {
    match kind {
        Owned::Reply => conn.ctxt_put(ctxt),
        Owned::Reads => {
            ctxt.status.store(status, Relaxed);
            super::rw::reads_finished(conn, ctxt);
        }
    }
}

fn post_owned(conn: &Connection, mut ctxt: KBox<CallCtxt>, kind: Owned) -> Result {
    // Any status but success: the Reads failed.
    const NOT_POSTED: u32 = bindings::IB_WC_GENERAL_ERR;
    let Some(res) = conn.res() else {
        not_posted(conn, ctxt, kind, NOT_POSTED);
        return Err(ENOTCONN);
    };
    let n = ctxt.chain.len();
    let (Ok(n), Ok(count)) = (u32::try_from(n), i32::try_from(n)) else {
        not_posted(conn, ctxt, kind, NOT_POSTED);
        return Err(EMSGSIZE);
    };
    if count == 0 {
        not_posted(conn, ctxt, kind, 0);
        return Ok(());
    }
    if let Err(e) = conn.sq_reserve(n) {
        not_posted(conn, ctxt, kind, NOT_POSTED);
        return Err(e);
    }
    // Only the last request is signaled (`Chain::link`): its completion,
    // and this thread's hold, so the context outlives the post call
    // whatever completes meanwhile. The slots go back with the last count.
    conn.count_posted(&ctxt.chain.tally());
    ctxt.remaining.store(2, Relaxed);
    ctxt.sq_held = n;
    ctxt.status.store(0, Relaxed);
    let cqe = match kind {
        Owned::Reply => ctxt.cqe.get(),
        Owned::Reads => ctxt.read_cqe.get(),
    };
    let err_cqe = ctxt.err_cqe.get();
    let head = ctxt.chain.link(cqe, err_cqe);
    let raw = KBox::into_raw(ctxt);
    let mut bad: *const bindings::ib_send_wr = core::ptr::null();
    // The context, holding the linked chain and the mappings, stays alive
    // until the last count (ours included) is accounted for.
    // SAFETY: so every request and its memory outlive the post and the device.
    let rc = unsafe { bindings::svcrdma_rs_post_send_chain(res.qp.as_ptr(), head, &mut bad) };
    let mut release = 1;
    if rc != 0 {
        // Our hold keeps the context alive; completions never touch its
        // chain or `sq_held`.
        // SAFETY: so this is the only reference to them.
        let (chain, held) = unsafe { (&mut (*raw).chain, &mut (*raw).sq_held) };
        let posted = post_failed(conn, chain, bad, rc);
        // Not all went out: the Call's Reads failed.
        // SAFETY: our hold keeps the context alive; only its atomics are
        // shared with the completions.
        let _ = unsafe { &(*raw).status }.cmpxchg(0, NOT_POSTED, Full);
        if posted == 0 {
            // Nothing went out: no completion will come.
            conn.sq_release(*held);
            *held = 0;
            release += 1;
        } else if posted < n as usize {
            // The posted ones are unsignaled: a signaled marker behind
            // them (in the slot of the first one not posted) completes
            // once they are flushed. The rest of the slots go back now.
            let unposted = n - posted as u32;
            conn.sq_release(unposted - 1);
            *held -= unposted - 1;
            chain.clear();
            let marked = chain.flush_marker().is_ok() && {
                let head = chain.link(cqe, err_cqe);
                let mut bad: *const bindings::ib_send_wr = core::ptr::null();
                // SAFETY: as the first post; the QP is in the error state, so
                // the marker is flushed once the posted requests are.
                unsafe {
                    bindings::svcrdma_rs_post_send_chain(res.qp.as_ptr(), head, &mut bad) == 0
                }
            };
            if !marked {
                // Nothing tells when the device is done with the posted
                // requests' memory: the context is never freed (a leak, not
                // a use after free); the connection is closing.
                pr_warn_ratelimited!(
                    "connection {}: cannot fence a failed post; its context is leaked\n",
                    conn.id
                );
                return Err(Error::from_errno(rc));
            }
        }
    }
    // SAFETY: `raw` came from `KBox::into_raw` above; `release` is our hold
    // (plus the signaled request when none was posted), all counted in
    // `remaining`.
    unsafe { owned_completed(conn, raw, release, kind) };
    if rc != 0 {
        return Err(Error::from_errno(rc));
    }
    Ok(())
}

/// Accounts for `n` completions of the chain posted with context `raw`;
/// the last one returns the context to `conn`'s pool (a Reply) or queues
/// its Call (Reads).
///
/// # Safety
///
/// `raw` must be a context given to [`post_owned`] for `kind` whose
/// `remaining` counts at least `n` completions not yet accounted for.
unsafe fn owned_completed(conn: &Connection, raw: *mut CallCtxt, n: i32, kind: Owned) {
    // SAFETY: live until the count reaches zero (function contract); only
    // the counter is borrowed.
    let remaining = unsafe { &(*raw).remaining };
    if remaining.fetch_sub(n, Full) != n {
        return;
    }
    // SAFETY: the last completion: nothing else refers to the context any
    // more, and it came from `KBox::into_raw` in `post_owned`.
    let mut ctxt = unsafe { KBox::from_raw(raw) };
    // The device is done with every request of the chain.
    conn.sq_release(core::mem::take(&mut ctxt.sq_held));
    if kind == Owned::Reads {
        super::rw::reads_finished(conn, ctxt);
        return;
    }
    let status = ctxt.status.load(Acquire);
    // A flush means the connection is already going down.
    if status != 0 && status != bindings::IB_WC_WR_FLUSH_ERR {
        conn.close();
    }
    conn.ctxt_put(ctxt);
}

/// A request of a Reply chain completed.
///
/// # Safety
///
/// Called by the send CQ only, for a request posted by [`post_reply`],
/// whose context lives until its last completion.
pub(crate) unsafe extern "C" fn reply_done(_cq: *mut bindings::ib_cq, wc: *mut bindings::ib_wc) {
    // SAFETY: the CQ passes a valid completion for the call's duration.
    let wc = unsafe { &*wc };
    // SAFETY: Reply requests carry the `cqe` of their live context.
    let raw = unsafe {
        kernel::container_of!(
            wc.__bindgen_anon_1
                .wr_cqe
                .cast::<UnsafeCell<bindings::ib_cqe>>(),
            CallCtxt,
            cqe
        )
    };
    // A context's connection outlives it: a connection drains its QP before
    // it is freed.
    // SAFETY: the context is live (this completion is not counted yet).
    let conn = unsafe { &*(*raw).conn };
    // SAFETY: as above; only the status field is borrowed.
    note_status(conn, unsafe { &(*raw).status }, wc);
    // SAFETY: this completion is one `remaining` counts.
    unsafe { owned_completed(conn, raw, 1, Owned::Reply) };
}

/// A request of a Call's Read chain completed.
///
/// # Safety
///
/// Called by the send CQ only, for a request posted by [`post_reads`],
/// whose context lives until its last completion.
pub(crate) unsafe extern "C" fn read_done(_cq: *mut bindings::ib_cq, wc: *mut bindings::ib_wc) {
    // SAFETY: the CQ passes a valid completion for the call's duration.
    let wc = unsafe { &*wc };
    // SAFETY: Read requests carry the `read_cqe` of their live context.
    let raw = unsafe {
        kernel::container_of!(
            wc.__bindgen_anon_1
                .wr_cqe
                .cast::<UnsafeCell<bindings::ib_cqe>>(),
            CallCtxt,
            read_cqe
        )
    };
    // SAFETY: the context is live (this completion is not counted yet); a
    // context's connection outlives it (as in `reply_done`).
    let conn = unsafe { &*(*raw).conn };
    // SAFETY: as above; only the status field is borrowed.
    note_status(conn, unsafe { &(*raw).status }, wc);
    // SAFETY: this completion is one `remaining` counts.
    unsafe { owned_completed(conn, raw, 1, Owned::Reads) };
}

/// An unsignaled request of a chain failed or was flushed: only its status
/// is noted (the chain's last, signaled request completes after it).
///
/// # Safety
///
/// Called by the send CQ only, for a request posted by [`post_owned`]
/// before the chain's signaled last one, whose context lives until that
/// one's completion (requests complete in order).
pub(crate) unsafe extern "C" fn unsignaled_done(
    _cq: *mut bindings::ib_cq,
    wc: *mut bindings::ib_wc,
) {
    // SAFETY: the CQ passes a valid completion for the call's duration.
    let wc = unsafe { &*wc };
    // SAFETY: unsignaled requests carry the `err_cqe` of their live context.
    let raw = unsafe {
        kernel::container_of!(
            wc.__bindgen_anon_1
                .wr_cqe
                .cast::<UnsafeCell<bindings::ib_cqe>>(),
            CallCtxt,
            err_cqe
        )
    };
    // SAFETY: the context is live (its chain's last completion is still to
    // come); a context's connection outlives it.
    let conn = unsafe { &*(*raw).conn };
    // SAFETY: as above; only the status field is borrowed.
    note_status(conn, unsafe { &(*raw).status }, wc);
}
