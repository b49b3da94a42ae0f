// SPDX-License-Identifier: GPL-2.0

//! Reliable-connected queue pairs, created on a CM id (`rdma_create_qp()`).

use kernel::{
    error::to_result,
    prelude::*,
    sync::atomic::{
        ordering::{Acquire, Full, Release},
        Atomic,
    },
    time::{delay::fsleep, Delta},
};

use super::{cm::CmId, Cq, Pd};
use crate::bindings;

/// Sizes of a queue pair.
pub(crate) struct QpCaps {
    /// Send work requests.
    pub(crate) send_wr: u32,
    /// Receive work requests.
    pub(crate) recv_wr: u32,
    /// Scatter/gather entries per send.
    pub(crate) send_sge: u32,
    /// Scatter/gather entries per receive.
    pub(crate) recv_sge: u32,
}

/// [`Qp`]'s life: live, being drained, waiting for [`Qp::to_error`] calls
/// to leave, destroyed.
const LIVE: u32 = 0;
const DRAINING: u32 = 1;
const CLOSING: u32 = 2;
const DESTROYED: u32 = 3;

/// The QP of a CM id; drained and destroyed by [`Qp::destroy`] or when
/// dropped.
///
/// # Invariants
///
/// `id` is a live CM id whose QP was created by [`Qp::new`], and outlives
/// this value (owners drop the QP first). The QP lives while `state` is
/// below `DESTROYED`, and while `users` counts a [`Qp::to_error`] that
/// saw it below `CLOSING`.
pub(crate) struct Qp {
    id: *mut bindings::rdma_cm_id,
    qp: *mut bindings::ib_qp,
    state: Atomic<u32>,
    /// [`Qp::to_error`] calls under way.
    users: Atomic<u32>,
}

// SAFETY: posting work requests is thread-safe in the verbs API.
unsafe impl Send for Qp {}
// SAFETY: as above.
unsafe impl Sync for Qp {}

impl Qp {
    /// Creates an RC QP on `id` with completions on `send_cq`/`recv_cq`.
    /// Asynchronous QP events go to `event_handler` with `context`.
    ///
    /// # Safety
    ///
    /// `id` must outlive the returned `Qp`, as must `context` (for
    /// `event_handler`) and the CQs and PD.
    pub(crate) unsafe fn new(
        id: &CmId,
        pd: &Pd,
        send_cq: &Cq,
        recv_cq: &Cq,
        caps: &QpCaps,
        event_handler: unsafe extern "C" fn(*mut bindings::ib_event, *mut c_void),
        context: *mut c_void,
    ) -> Result<(Self, QpCaps)> {
        let mut attr = bindings::ib_qp_init_attr {
            event_handler: Some(event_handler),
            qp_context: context,
            send_cq: send_cq.as_ptr(),
            recv_cq: recv_cq.as_ptr(),
            cap: bindings::ib_qp_cap {
                max_send_wr: caps.send_wr,
                max_recv_wr: caps.recv_wr,
                max_send_sge: caps.send_sge,
                max_recv_sge: caps.recv_sge,
                ..Default::default()
            },
            sq_sig_type: bindings::IB_SIGNAL_REQ_WR,
            qp_type: bindings::IB_QPT_RC,
            ..Default::default()
        };
        // SAFETY: the id, PD and CQs are live; `attr` is initialized.
        to_result(unsafe { bindings::rdma_create_qp(id.as_ptr(), pd.as_ptr(), &mut attr) })?;
        // The device may round the capacities up.
        let got = QpCaps {
            send_wr: attr.cap.max_send_wr,
            recv_wr: attr.cap.max_recv_wr,
            send_sge: attr.cap.max_send_sge,
            recv_sge: attr.cap.max_recv_sge,
        };
        // SAFETY: `rdma_create_qp()` set the id's `qp`.
        let qp = unsafe { (*id.as_ptr()).qp };
        // INVARIANT: created on `id`, which the caller keeps alive.
        Ok((
            Self {
                id: id.as_ptr(),
                qp,
                state: Atomic::new(LIVE),
                users: Atomic::new(0),
            },
            got,
        ))
    }

    /// The C object.
    pub(crate) fn as_ptr(&self) -> *mut bindings::ib_qp {
        self.qp
    }

    /// Moves the QP to the error state at once: the peer can no longer
    /// reach our memory through it, and every posted request completes
    /// (flushed). Safe to repeat.
    pub(crate) fn to_error(&self) {
        // Counted before the state is read, and `destroy` sets the state
        // before it reads the count (fully ordered read-modify-writes, the
        // reads as adds of 0): either this call sees `CLOSING`, or
        // `destroy` waits for it.
        self.users.fetch_add(1, Full);
        if self.state.fetch_add(0, Full) < CLOSING {
            // SAFETY: the QP lives while we are counted (invariant).
            let _ = unsafe { bindings::svcrdma_rs_qp_to_error(self.qp) };
        }
        self.users.fetch_sub(1, Full);
    }

    /// Moves the QP to the error state, waits until every posted work
    /// request has completed (flushed), and destroys it: once this returns,
    /// in whichever thread, no completion of its work requests and no QP
    /// event runs or starts, and nothing refers to its owner through it.
    /// Sleeps; must not run on the QP's own completion path. The first call
    /// does the work; the others wait for it. The owner must post nothing
    /// after it.
    pub(crate) fn destroy(&self) {
        if self.state.cmpxchg(LIVE, DRAINING, Full).is_err() {
            while self.state.load(Acquire) != DESTROYED {
                fsleep(Delta::from_millis(1));
            }
            return;
        }
        // SAFETY: the QP is live (state `DRAINING`, set by us only).
        unsafe { bindings::ib_drain_qp(self.qp) };
        self.state.xchg(CLOSING, Full);
        while self.users.fetch_add(0, Full) != 0 {
            fsleep(Delta::from_millis(1));
        }
        // SAFETY: the id is live (invariant) and its QP is ours; no
        // `to_error` uses it (none counted, and new ones see `CLOSING`).
        unsafe { bindings::rdma_destroy_qp(self.id) };
        self.state.store(DESTROYED, Release);
    }
}

impl Drop for Qp {
    fn drop(&mut self) {
        self.destroy();
    }
}
