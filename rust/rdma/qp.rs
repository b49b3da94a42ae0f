// SPDX-License-Identifier: GPL-2.0

//! Reliable-connected queue pairs, created on a CM id (`rdma_create_qp()`).

use kernel::{
    error::to_result,
    prelude::*,
    sync::atomic::{
        ordering::{Acquire, Relaxed, Release},
        Atomic,
    },
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

/// The QP of a CM id; drained and destroyed by [`Qp::destroy`] or when
/// dropped.
///
/// # Invariants
///
/// `id` is a live CM id whose QP was created by [`Qp::new`]; the QP lives
/// until `destroyed` is set (by [`Qp::destroy`] only), and the id outlives
/// this value (owners drop the QP first).
pub(crate) struct Qp {
    id: *mut bindings::rdma_cm_id,
    qp: *mut bindings::ib_qp,
    /// Drained already (by the owner, before `Drop`).
    drained: Atomic<bool>,
    /// Destroyed already ([`Qp::destroy`]).
    destroyed: Atomic<bool>,
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
                drained: Atomic::new(false),
                destroyed: Atomic::new(false),
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
        if self.destroyed.load(Acquire) {
            return;
        }
        // SAFETY: the QP is live (invariant: not destroyed; the owner does
        // not destroy it while other calls run).
        let _ = unsafe { bindings::svcrdma_rs_qp_to_error(self.qp) };
    }

    /// Moves the QP to the error state and waits until every posted work
    /// request has completed (flushed), so no completion refers to its
    /// owner afterwards. Sleeps; must not run on the QP's own completion
    /// path. Done once: later calls (by the owner, after the first has
    /// returned) do nothing.
    pub(crate) fn drain(&self) {
        if self.drained.xchg(true, Relaxed) {
            return;
        }
        // SAFETY: the QP is live (invariant).
        unsafe { bindings::ib_drain_qp(self.qp) };
    }

    /// Drains the QP ([`Qp::drain`]) and destroys it: once this returns, no
    /// completion of its work requests and no QP event runs or starts.
    /// Sleeps. Done once; the owner must post nothing after it.
    pub(crate) fn destroy(&self) {
        self.drain();
        if self.destroyed.xchg(true, Release) {
            return;
        }
        // SAFETY: the id is live (invariant) and its QP is ours, destroyed
        // once (the flag above).
        unsafe { bindings::rdma_destroy_qp(self.id) };
    }
}

impl Drop for Qp {
    fn drop(&mut self) {
        self.destroy();
    }
}
