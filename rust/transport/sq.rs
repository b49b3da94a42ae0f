// SPDX-License-Identifier: GPL-2.0

//! Posting work-request chains on a connection's send queue and waiting for
//! them.
//!
//! Every data-path operation (RDMA Reads for a Call, RDMA Writes and the
//! Send of a Reply, invalidations) is one chain posted by the nfsd thread
//! working on that RPC, which then sleeps until every request of the chain
//! has completed. Every request is signaled, so each produces exactly one
//! completion, whether it succeeds, fails or is flushed when the QP goes
//! down: the count of completions tells when the device is done with the
//! memory the chain refers to. Nothing the device may still touch is ever
//! released early.
//!
//! The send queue has a fixed number of slots. A chain reserves its slots
//! before posting (waiting while other RPCs hold them); each completion
//! gives one back.

use core::cell::UnsafeCell;

use kernel::{
    prelude::*,
    sync::{
        atomic::{
            ordering::{Acquire, Full},
            Atomic,
        },
        Completion,
    },
};

use super::connection::Connection;
use crate::{bindings, log::pr_warn_ratelimited, rdma::wr::Chain};

/// One posted chain, alive on the poster's stack until all its requests
/// complete.
#[pin_data]
struct Op {
    cqe: UnsafeCell<bindings::ib_cqe>,
    conn: *const Connection,
    /// Completions still to come.
    remaining: Atomic<i32>,
    /// The first failure's status (0: none).
    status: Atomic<u32>,
    #[pin]
    done: Completion,
}

impl Op {
    fn new(conn: *const Connection, count: i32) -> impl PinInit<Self> {
        pin_init!(Self {
            cqe: UnsafeCell::new(bindings::ib_cqe { done: Some(op_done) }),
            conn,
            remaining: Atomic::new(count),
            status: Atomic::new(0),
            done <- Completion::new(),
        })
    }

    /// Accounts for `n` completions (real or, for requests never posted,
    /// virtual); the last one wakes the poster. `self` must not be used by
    /// the caller afterwards.
    fn complete(&self, n: i32) {
        if self.remaining.fetch_sub(n, Full) == n {
            self.done.complete_all();
        }
    }
}

/// A request of a chain completed.
///
/// # Safety
///
/// Called by the send CQ only, for a request posted by [`post_and_wait`]
/// (whose `Op` stays alive until its last completion).
unsafe extern "C" fn op_done(_cq: *mut bindings::ib_cq, wc: *mut bindings::ib_wc) {
    // SAFETY: the CQ passes a valid completion for the call's duration.
    let wc = unsafe { &*wc };
    // SAFETY: our requests carry the `cqe` of their live `Op`.
    let op = unsafe {
        &*kernel::container_of!(
            wc.__bindgen_anon_1
                .wr_cqe
                .cast::<UnsafeCell<bindings::ib_cqe>>(),
            Op,
            cqe
        )
    };
    // SAFETY: the poster holds a reference on the connection while waiting.
    let conn = unsafe { &*op.conn };
    if wc.status != bindings::IB_WC_SUCCESS {
        let _ = op.status.cmpxchg(0, wc.status, Full);
        if wc.status != bindings::IB_WC_WR_FLUSH_ERR {
            pr_warn_ratelimited!(
                "connection {}: work request failed with status {}, closing\n",
                conn.id,
                wc.status
            );
        }
    }
    conn.sq_release(1);
    // Last use of `op`: the poster may return once the count reaches zero.
    op.complete(1);
}

/// Posts `chain` on `conn` and sleeps until every request has completed.
/// Fails if the connection is closing, if posting failed, or if any request
/// did not succeed (the connection is then closed).
pub(crate) fn post_and_wait(conn: &Connection, chain: &mut Chain) -> Result {
    if chain.is_empty() {
        return Ok(());
    }
    let res = conn.res().ok_or(ENOTCONN)?;
    let n = u32::try_from(chain.len()).map_err(|_| EMSGSIZE)?;
    let count = i32::try_from(n).map_err(|_| EMSGSIZE)?;
    conn.sq_reserve(n)?;
    pin_init::stack_pin_init!(let op = Op::new(conn, count));
    let head = chain.link(op.cqe.get());
    let mut bad: *const bindings::ib_send_wr = core::ptr::null();
    // SAFETY: the chain is fully linked and stays put until this returns; every request's memory is mapped for the device and stays so until the wait below; `op` outlives every completion (we wait for all).
    let rc = unsafe { bindings::svcrdma_rs_post_send_chain(res.qp.as_ptr(), head, &mut bad) };
    if rc != 0 {
        // Requests from `bad` on were not posted: they will never complete.
        // A provider that names no request posted none; one that names a
        // request not in the chain is not trusted: wait for all of them
        // (the QP is moved to error below, so they complete).
        let posted = if bad.is_null() {
            0
        } else {
            chain.position(bad).unwrap_or(n as usize)
        };
        let unposted = n - posted as u32;
        conn.sq_release(unposted);
        pr_warn_ratelimited!(
            "connection {}: posting {} work requests failed: error {}, closing\n",
            conn.id,
            n,
            rc
        );
        conn.close();
        op.complete(unposted as i32);
    }
    op.done.wait_for_completion();
    let status = op.status.load(Acquire);
    if rc != 0 {
        return Err(Error::from_errno(rc));
    }
    if status != 0 {
        conn.close();
        return Err(EIO);
    }
    Ok(())
}
