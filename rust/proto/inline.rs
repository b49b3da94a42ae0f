// SPDX-License-Identifier: GPL-2.0

//! Inline thresholds, credits and queue depths of a connection.
//!
//! RFC 8166: a message that fits the receiver's inline threshold travels in
//! one RDMA Send; the default threshold is 1024 bytes, and RFC 8797 lets
//! each peer advertise larger ones at connection time. The server grants the
//! client *credits*: how many calls it may have outstanding, each needing one
//! posted receive buffer.

use super::cm_private::{CmPrivate, DEFAULT_INLINE};

/// Our receive buffer size: the largest call a client may send inline. We
/// advertise it as our Receive Size (RFC 8797).
pub const RECV_SIZE: u32 = 4096;
/// The largest reply we send inline, before the client's limit applies. We
/// advertise it as our Send Size.
pub const SEND_SIZE: u32 = 4096;
/// Credits granted per connection: the C svcrdma's default since 6.x
/// (`RPCRDMA_MAX_REQUESTS`, 128 in 7.3), so that a client is never held
/// to fewer Calls in flight than under the transport we replace.
pub const CREDITS: u32 = 128;
/// Receive buffers kept for NFSv4.1 backchannel replies.
pub const BC_CREDITS: u32 = 2;
/// Work requests the send queue needs per RPC, at most: the reply's Send
/// plus, per chunk segment, a registration, an RDMA operation and an
/// invalidation. Requests beyond the queue's room wait for it.
pub const SEND_WR_PER_RPC: u32 = 16;
/// Receive buffers given back by nfsd are posted again this many at a
/// time, in one call (the C svcrdma posts in batches too). So that the
/// client's credits are always covered, a connection has `batch - 1`
/// buffers more than credits and backchannel need: at most that many wait
/// unposted. Sixteen: a receive post (a doorbell on hardware) per 16 Calls.
pub const RECV_BATCH: u32 = 16;

/// Queue sizes of one connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Depths {
    /// Credits granted to the client.
    pub credits: u32,
    /// Receive buffers (credits plus backchannel plus `recv_batch - 1`).
    pub recv_buffers: u32,
    /// Receive buffers posted again together; 1 on a device too small to
    /// spare the extra buffers without granting fewer credits.
    pub recv_batch: u32,
    /// Receive queue work requests (one more, for the drain on teardown).
    pub recv_wr: u32,
    /// Send queue work requests (one more, for the drain on teardown).
    pub send_wr: u32,
}

impl Depths {
    /// Sizes that fit a device allowing `max_qp_wr` work requests per queue
    /// and `max_cqe` completions per CQ; `None` if even one credit does not.
    pub fn for_device(max_qp_wr: u32, max_cqe: u32) -> Option<Self> {
        let limit = max_qp_wr.min(max_cqe);
        // Each queue also needs one slot for the drain request.
        let room = limit.checked_sub(1)?;
        let spare = room.checked_sub(BC_CREDITS)?;
        let credits = CREDITS.min(spare);
        if credits == 0 {
            return None;
        }
        // Batching never costs a credit: only what is left over pays for it.
        let recv_batch = (spare - credits + 1).min(RECV_BATCH);
        let recv_buffers = credits + BC_CREDITS + recv_batch - 1;
        let send = credits.saturating_mul(SEND_WR_PER_RPC).min(room);
        Some(Self {
            credits,
            recv_buffers,
            recv_batch,
            recv_wr: recv_buffers + 1,
            send_wr: fill_slots(send + 1),
        })
    }

    /// How the send queue of a QP that allows `qp_send_wr` requests (we
    /// asked for [`Depths::send_wr`]) is shared. A chain holds a slot per
    /// request until its last completion: the queue, less the one request
    /// the drain at teardown needs, is what chains hold. Room for
    /// `unsignaled_max` chains of `unsignaled_wrs` requests posted without
    /// a completion of their own is set apart first, where the queue is
    /// large enough to spare it (a quarter at most): those wait for a later
    /// chain's completion, so they must never hold slots another chain
    /// waits for.
    pub fn send_split(
        &self,
        qp_send_wr: u32,
        unsignaled_max: u32,
        unsignaled_wrs: u32,
    ) -> SendSplit {
        let queue = qp_send_wr.min(self.send_wr).saturating_sub(1);
        let room = unsignaled_max.saturating_mul(unsignaled_wrs);
        let unsignaled = if queue >= room.saturating_mul(4) {
            unsignaled_max
        } else {
            0
        };
        SendSplit {
            slots: queue.saturating_sub(unsignaled.saturating_mul(unsignaled_wrs)),
            unsignaled,
        }
    }

    /// Per-RPC contexts: the Calls in progress and the Replies in flight,
    /// which hold theirs until their Send completes. A client within its
    /// credits has at most `credits` of both together, but its credit
    /// comes back with a Reply, so its next Call may arrive before that
    /// Reply's completion is handled: a wide margin (8 per credit), so a
    /// slow completion worker never costs a well-behaved client a Call.
    /// Only a quarter of the credits' worth is made at first: an idle
    /// connection costs little, and the pool grows on use.
    pub fn contexts(&self) -> Contexts {
        Contexts {
            initial: self.credits.div_ceil(4),
            max: self.credits.saturating_mul(8),
        }
    }
}

/// `want` work requests, or a few fewer where that keeps a queue from
/// doubling. rxe keeps one slot more than asked and siw none, and both (like
/// many RNICs) round the slots up to a power of two: a queue of `2^k - 1`
/// requests fills `2^k` slots on both, where `2^k + 1` would take twice the
/// memory. Never below one Reply's worst case: a smaller queue keeps `want`.
fn fill_slots(want: u32) -> u32 {
    let fit = match want.checked_add(1).and_then(u32::checked_next_power_of_two) {
        Some(slots) if slots == want + 1 => want,
        Some(slots) => slots / 2 - 1,
        None => want,
    };
    if fit > SEND_WR_PER_RPC {
        fit
    } else {
        want
    }
}

/// How a connection's send queue is shared ([`Depths::send_split`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendSplit {
    /// Slots the chains with a completion of their own hold.
    pub slots: u32,
    /// Chains that may wait without a completion of their own, in room
    /// apart from `slots`.
    pub unsignaled: u32,
}

/// How many per-RPC contexts a connection has ([`Depths::contexts`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Contexts {
    /// Made at accept.
    pub initial: u32,
    /// At most ever.
    pub max: u32,
}

/// The message this server sends in its connection accept.
pub fn server_private(remote_invalidate: bool) -> CmPrivate {
    CmPrivate {
        remote_invalidate,
        send_size: SEND_SIZE,
        recv_size: RECV_SIZE,
    }
}

/// The largest reply that may go inline to this client: its advertised
/// receive size, and never more than we send inline at all.
pub fn max_inline_reply(client: &CmPrivate) -> u32 {
    client
        .recv_size
        .min(SEND_SIZE)
        .max(DEFAULT_INLINE.min(SEND_SIZE))
}
