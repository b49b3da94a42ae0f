// SPDX-License-Identifier: GPL-2.0

//! A connected transport: its RDMA resources, CM and QP events, teardown.
//!
//! Built by [`super::accept`] when an nfsd thread accepts a connection
//! request; from then on sunrpc's reference count owns it. Teardown order
//! matters and is the field order of [`Resources`]: the QP is drained (every
//! posted request completes, flushed) and destroyed first, then the buffers
//! and MRs it used, the CQs and the PD, and the CM id last, so no event
//! handler or completion ever sees a half-freed connection.

use kernel::{
    new_spinlock,
    prelude::*,
    sync::{
        atomic::{ordering::Relaxed, Atomic},
        Arc, SetOnce, SpinLock,
    },
};

use super::{
    frmr::FrmrPool,
    recv::RecvRing,
    registry::{ConnAttrs, Registry},
};
use crate::{
    bindings,
    log::pr_warn_ratelimited,
    rdma::{
        cm::{CmEvent, CmId, CmIdRef},
        qp::Qp,
        Cq, Pd,
    },
    sunrpc::{Flag, SvcXprt},
    sysfs::Dir,
};

/// The RDMA objects of a connection, in teardown order. Some are only held
/// here for the QP's sake (`_`-named) until the data path uses them.
pub(crate) struct Resources {
    pub(crate) qp: Qp,
    pub(crate) recv: RecvRing,
    pub(crate) _frmrs: Option<FrmrPool>,
    pub(crate) _send_cq: Cq,
    pub(crate) _recv_cq: Cq,
    pub(crate) _pd: Pd,
    pub(crate) cm_id: CmId,
}

/// A connected transport.
#[repr(C)]
#[pin_data(PinnedDrop)]
pub(crate) struct Connection {
    /// sunrpc's part (first: shared layout with [`super::Listener`]).
    xprt: SvcXprt,
    /// Set once accept has built them.
    res: SetOnce<Resources>,
    /// Indices of received buffers waiting for `xpo_recvfrom`, oldest
    /// first. Capacity for every buffer is reserved up front, so the
    /// completion path never allocates.
    #[pin]
    ready: SpinLock<KVec<u16>>,
    /// The connection is established (receives may be handed to nfsd).
    established: Atomic<bool>,
    /// Teardown has begun: completions and events must not touch sunrpc.
    dying: Atomic<bool>,
    /// `/sys/kernel/svcrdma_rs/connections/<id>/`.
    sysfs: SetOnce<Dir<ConnAttrs>>,
    /// What sysfs and logs say about the connection.
    pub(crate) info: ConnAttrs,
    pub(crate) id: u64,
    registry: Arc<Registry>,
}

impl Connection {
    /// A connection not yet known to sunrpc; `recv_buffers` sizes its ready
    /// queue.
    pub(crate) fn new(
        registry: Arc<Registry>,
        info: ConnAttrs,
        recv_buffers: usize,
    ) -> impl PinInit<Self, Error> {
        let id = registry.next_conn_id();
        try_pin_init!(Self {
            xprt: SvcXprt::uninit(),
            res: SetOnce::new(),
            ready <- new_spinlock!(KVec::with_capacity(recv_buffers, GFP_KERNEL)?),
            established: Atomic::new(false),
            dying: Atomic::new(false),
            sysfs: SetOnce::new(),
            info,
            id,
            registry,
        })
    }

    /// sunrpc's part.
    pub(crate) fn xprt(&self) -> &SvcXprt {
        &self.xprt
    }

    /// The resources, once accept has built them.
    pub(crate) fn res(&self) -> Option<&Resources> {
        self.res.as_ref()
    }

    /// Installs the resources (once).
    pub(crate) fn set_res(&self, res: Resources) -> bool {
        self.res.populate(res)
    }

    /// Creates the connection's sysfs directory.
    pub(crate) fn publish(&self, attrs: ConnAttrs) -> Result {
        let dir = self.registry.add_connection(self.id, attrs)?;
        self.sysfs.populate(dir);
        Ok(())
    }

    /// A receive completed: queue it for nfsd.
    pub(crate) fn received(&self, index: u16) {
        let queued = self.ready.lock().push_within_capacity(index).is_ok();
        if !queued {
            // Cannot happen: one slot per buffer. Treat as fatal, safely.
            self.fatal();
            return;
        }
        self.xprt.set_flag(Flag::Data);
        if self.established.load(Relaxed) && !self.dying.load(Relaxed) {
            self.xprt.enqueue();
        }
    }

    /// A receive failed. A flush means the QP is going down (we asked);
    /// anything else is an error on the connection: close it.
    pub(crate) fn receive_failed(&self, status: u32) {
        if status != bindings::IB_WC_WR_FLUSH_ERR {
            pr_warn_ratelimited!(
                "connection {}: receive failed with status {}, closing\n",
                self.id,
                status
            );
            self.fatal();
        }
    }

    /// Closes the connection from any context (once per connection).
    fn fatal(&self) {
        if !self.dying.load(Relaxed) {
            self.xprt.deferred_close();
        }
    }

    /// Takes the oldest received buffer for `xpo_recvfrom`, clearing
    /// `XPT_DATA` when none is left.
    pub(crate) fn next_received(&self) -> Option<u16> {
        let mut q = self.ready.lock();
        let next = if q.is_empty() { None } else { q.remove(0).ok() };
        if q.is_empty() {
            self.xprt.clear_flag(Flag::Data);
        }
        next
    }

    /// The connection behind a pointer sunrpc passed to one of our ops.
    ///
    /// # Safety
    ///
    /// `ptr` must be the `xprt` of a live `Connection` (one of ours without
    /// `XPT_LISTENER`), alive for `'a`.
    pub(crate) unsafe fn from_svc_xprt<'a>(ptr: *mut bindings::svc_xprt) -> &'a Self {
        // SAFETY: `xprt` is the first field of a `#[repr(C)]` struct.
        unsafe { &*ptr.cast::<Self>() }
    }

    /// Frees a connection sunrpc has released (its `xpo_free`), or one whose
    /// accept failed.
    ///
    /// # Safety
    ///
    /// `ptr` must be the `xprt` of a `Connection` leaked from a pinned
    /// `KBox`, with no reference left.
    pub(crate) unsafe fn free(ptr: *mut bindings::svc_xprt) {
        // SAFETY: as in `from_svc_xprt`; nothing refers to it any more.
        drop(unsafe { Pin::new_unchecked(KBox::from_raw(ptr.cast::<Self>())) });
    }

    /// `xpo_detach`: start disconnecting.
    pub(crate) fn detach(&self) {
        if let Some(r) = self.res.as_ref() {
            r.cm_id.disconnect();
        }
    }
}

#[pinned_drop]
impl PinnedDrop for Connection {
    fn drop(self: Pin<&mut Self>) {
        // Runs before the fields drop: completions flushed by the QP drain
        // and late CM events must leave sunrpc alone from here on.
        self.dying.store(true, Relaxed);
    }
}

/// CM events on an accepted connection.
///
/// # Safety
///
/// Called by the RDMA CM only, for an id whose context is its live
/// `Connection` (set by accept; the id is destroyed before the connection
/// is freed).
pub(crate) unsafe extern "C" fn conn_handler(
    id: *mut bindings::rdma_cm_id,
    event: *mut bindings::rdma_cm_event,
) -> c_int {
    // SAFETY: the CM passes a live id and event for the call's duration.
    let (id, event) = unsafe { (CmIdRef::from_raw(id), CmEvent::from_raw(event)) };
    // SAFETY: the context is the live connection (function contract).
    let conn = unsafe { &*id.context().cast::<Connection>() };
    match event.kind() {
        bindings::RDMA_CM_EVENT_ESTABLISHED => {
            conn.established.store(true, Relaxed);
            // Receives that arrived before the handshake finished.
            if !conn.dying.load(Relaxed) {
                conn.xprt.enqueue();
            }
        }
        bindings::RDMA_CM_EVENT_DISCONNECTED
        | bindings::RDMA_CM_EVENT_DEVICE_REMOVAL
        | bindings::RDMA_CM_EVENT_CONNECT_ERROR
        | bindings::RDMA_CM_EVENT_UNREACHABLE
        | bindings::RDMA_CM_EVENT_REJECTED
        | bindings::RDMA_CM_EVENT_ADDR_CHANGE => conn.fatal(),
        _ => {}
    }
    0
}

/// Asynchronous QP events.
///
/// # Safety
///
/// Called by the device only, with the context given at QP creation: the
/// live `Connection` (the QP is destroyed before it is freed).
pub(crate) unsafe extern "C" fn qp_event(event: *mut bindings::ib_event, context: *mut c_void) {
    // SAFETY: the context is the live connection (function contract).
    let conn = unsafe { &*context.cast::<Connection>() };
    // SAFETY: the device passes a valid event for the call's duration.
    let kind = unsafe { (*event).event };
    match kind {
        bindings::IB_EVENT_PATH_MIG
        | bindings::IB_EVENT_COMM_EST
        | bindings::IB_EVENT_SQ_DRAINED
        | bindings::IB_EVENT_QP_LAST_WQE_REACHED => {}
        _ => {
            pr_warn_ratelimited!("connection {}: QP event {}, closing\n", conn.id, kind);
            conn.fatal();
        }
    }
}
