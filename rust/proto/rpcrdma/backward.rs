// SPDX-License-Identifier: GPL-2.0

//! The backward direction (RFC 8167): RPC Calls from the server to the
//! client, and their Replies, on the client's own connection (the NFSv4.1
//! backchannel).
//!
//! A backward Call goes inline: an `RDMA_MSG` transport header with empty
//! chunk lists, then the RPC Call, in one Send. We never offer the client
//! chunks for its Reply, so a backward Reply is an `RDMA_MSG` with empty
//! chunk lists too, and the RPC message after its header says REPLY
//! (RFC 5531: the word after the XID is the message direction, 0 for a
//! Call, 1 for a Reply). Telling a Reply from a forward Call needs only
//! that word: both directions use the same transport header (RFC 8167
//! section 4.1), and the Reply's XID is the one of our Call.
//!
//! Built into the kernel module unless its backchannel is switched off
//! (`SVCRDMA_RS_BACKCHANNEL=n`); always in the host crate.

use super::header::{Header, Proc, RDMA_MSG, VERSION};
use super::xdr::Writer;
use super::EncodeError;

/// Bytes of a backward Call's transport header: XID, version, credits,
/// `RDMA_MSG`, and three empty lists.
pub const CALL_HEADER_LEN: usize = 28;

/// The RPC message direction of a Reply (RFC 5531 `msg_type`).
pub const RPC_REPLY: u32 = 1;

/// Encodes the transport header of a backward Call into `out` and returns
/// [`CALL_HEADER_LEN`].
///
/// - `xid`: the RPC Call's XID (host order), repeated in the header as for
///   any RPC-over-RDMA message (RFC 8166 section 4.2.1);
/// - `credits`: the backward Calls we may have outstanding, which is what
///   the header's credit field asks of the client in this direction (RFC
///   8167 section 4.3).
pub fn encode_call_header(out: &mut [u8], xid: u32, credits: u32) -> Result<usize, EncodeError> {
    let mut w = Writer::new(out);
    w.put_u32(xid)?;
    w.put_u32(VERSION)?;
    w.put_u32(credits)?;
    w.put_u32(RDMA_MSG)?;
    // Read list, Write list, Reply chunk: all empty.
    w.put_u32(0)?;
    w.put_u32(0)?;
    w.put_u32(0)?;
    Ok(w.len())
}

/// Whether a received message whose header decoded as `header`, with
/// `body` after that header, is a backward Reply: `RDMA_MSG`, no chunks,
/// and an RPC message whose direction word says REPLY.
///
/// Anything else (a Call, a message with chunks, a body too short for a
/// direction word) is not, and goes the forward way.
pub fn is_reply(header: &Header<'_>, body: &[u8]) -> bool {
    header.proc_ == Proc::Msg
        && header.reads.is_empty()
        && header.writes.is_empty()
        && header.reply.is_none()
        && body.get(4..8) == Some(&RPC_REPLY.to_be_bytes()[..])
}

/// The credits a backward Reply grants us, as a count of backward Calls
/// we may have outstanding: the header's value within `1..=max` (0 would
/// stop the backchannel for good; more than `max` we never use).
pub fn granted_calls(header: &Header<'_>, max: u32) -> u32 {
    header.credits.clamp(1, max.max(1))
}
