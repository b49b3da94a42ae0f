// SPDX-License-Identifier: GPL-2.0

//! Events on an accepted connection: its CM id's and its QP's.

use kernel::prelude::*;

use super::connection::Connection;
use crate::{
    log::pr_warn_ratelimited,
    rdma::{
        cm::{CmEvent, CmEventKind, CmHandler, CmIdRef},
        qp::{QpEvent, QpEventHandler},
        wc_status,
    },
};

/// CM events on an accepted connection ([`Connection::free`] silences the
/// id before the connection goes).
impl CmHandler for Connection {
    /// The counterpart of C's svc_rdma_cma_handler().
    fn event(self: Pin<&Self>, _id: CmIdRef<'_>, event: &CmEvent<'_>) {
        match event.kind() {
            CmEventKind::Established => self.recv.established(self.xprt()),
            kind @ (CmEventKind::Disconnected
            | CmEventKind::DeviceRemoval
            | CmEventKind::ConnectError
            | CmEventKind::Unreachable
            | CmEventKind::Rejected
            | CmEventKind::AddrChange) => {
                // A peer's disconnect is the ordinary end, and so is a
                // device's removal here: a listener bound to the device logs
                // it once (nfsd's usual wildcard listener is not told, and
                // the connections on the device mostly see their clients'
                // disconnects first). Any other event ends the connection
                // for a reason an admin should see.
                if !matches!(kind, CmEventKind::Disconnected | CmEventKind::DeviceRemoval) {
                    pr_warn_ratelimited!(
                        "connection {}: CM event {} (status {}), closing\n",
                        self.id,
                        kind.name(),
                        event.status()
                    );
                }
                // The QP goes to the error state too: RDMA Reads posted to a
                // peer that is gone would otherwise hold their nfsd threads
                // until the retries run out (tens of seconds), with no thread
                // left to detach the connection.
                crate::trace::cm_event(self.id, event.raw());
                self.close();
            }
            _ => {}
        }
    }
}

/// Asynchronous QP events (the QP is destroyed before the connection goes).
impl QpEventHandler for Connection {
    /// The counterpart of C's qp_event_handler().
    fn qp_event(self: Pin<&Self>, event: QpEvent) {
        if event.is_informational() {
            return;
        }
        let kind = event.raw();
        pr_warn_ratelimited!("connection {}: QP event {}, closing\n", self.id, kind);
        crate::trace::qp_err(self.id, kind);
        self.close_deferred();
    }
}

impl Connection {
    /// A receive failed. A flush means the QP is going down (we asked);
    /// anything else is an error on the connection: close it.
    pub(crate) fn receive_failed(&self, status: u32) {
        if status != wc_status::FLUSHED {
            pr_warn_ratelimited!(
                "connection {}: receive failed with status {}, closing\n",
                self.id,
                status
            );
            self.close_deferred();
        }
    }
}
