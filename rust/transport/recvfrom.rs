// SPDX-License-Identifier: GPL-2.0

//! `xpo_recvfrom`: turning a received RPC-over-RDMA message into a request
//! for nfsd.
//!
//! Connection establishment is complete; the RPC-over-RDMA data path (header
//! decoding, chunks, replies) is the next stage of this transport. Until it
//! exists, a received message is counted, logged (rate-limited) and its
//! buffer reposted: the client sees no reply and retransmits, and nothing
//! is leaked.

use kernel::prelude::*;

use super::connection::Connection;
use crate::{bindings, log::pr_warn_ratelimited};

/// Handles one received message on `conn` for the nfsd thread `rqstp`.
/// Returns the request's length (0: nothing for nfsd).
pub(super) fn recvfrom(conn: &Connection, _rqstp: *mut bindings::svc_rqst) -> c_int {
    let next = conn.next_received();
    // Let other threads receive on this transport while we work.
    conn.xprt().received();
    let (Some(index), Some(res)) = (next, conn.res()) else {
        return 0;
    };
    // SAFETY: `index` came from the ready queue and is reposted below.
    let len = unsafe { res.recv.message(index) }.map_or(0, |m| m.len());
    pr_warn_ratelimited!(
        "connection {}: dropping a {}-byte message: the RPC-over-RDMA data path is not implemented yet\n",
        conn.id,
        len
    );
    if res.recv.post(&res.qp, index).is_err() {
        conn.xprt().deferred_close();
    }
    0
}
