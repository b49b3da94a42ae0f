// SPDX-License-Identifier: GPL-2.0

//! Encoding the transport headers the server sends: replies and error
//! reports.
//!
//! A reply header echoes the call's XID, carries our credit grant, an empty
//! Read list, and the call's Write list and Reply chunk with each segment's
//! length set to the bytes actually written into it (RFC 8166 sections
//! 3.4.6, 4.3.2 and 4.3.3): the requester learns the length of each result
//! from the returned lengths. The chunks go back with the same segments
//! (handles, offsets, count) in the same order. Bytes written into a chunk
//! fill its segments in order, each up to its length; a segment the data
//! did not reach goes back with length zero, and so does every segment of
//! a Write chunk that was not used at all.

use super::chunk::{Chunk, SEGMENT_LEN};
use super::header::{
    DecodeError, Header, Proc, ERR_CHUNK, ERR_VERS, FIXED_HEADER, RDMA_ERROR, VERSION,
};
use super::xdr::{Full, Writer};

/// Bytes of an `ERR_VERS` report: fixed part, error code, low, high.
pub const ERR_VERS_LEN: usize = 28;
/// Bytes of an `ERR_CHUNK` report: fixed part and error code.
pub const ERR_CHUNK_LEN: usize = 20;

/// Why a header could not be encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EncodeError {
    /// The output buffer is too small (see [`reply_len`]).
    NoRoom,
    /// [`encode_reply`] was asked for [`Proc::Error`]; errors have their own
    /// encoders.
    NotAReply,
    /// An `RDMA_NOMSG` reply was asked for without Reply chunk bytes: the
    /// RPC reply would be nowhere.
    NoMsgWithoutReplyChunk,
    /// Bytes were given for a Reply chunk the call did not provide.
    NoReplyChunk,
    /// More Write chunk byte counts than the call has Write chunks.
    TooManyWriteCounts,
    /// More bytes for Write chunk `index` than it can hold. The reply
    /// cannot be sent; RFC 8166 section 4.5.3 has the responder report
    /// `ERR_CHUNK` instead.
    WriteChunkOverrun {
        /// Index of the chunk in the call's Write list.
        index: usize,
    },
    /// More bytes for the Reply chunk than it can hold (report `ERR_CHUNK`,
    /// as for [`EncodeError::WriteChunkOverrun`]).
    ReplyChunkOverrun,
}

impl EncodeError {
    /// A short description for a log line.
    pub fn as_str(&self) -> &'static str {
        match self {
            EncodeError::NoRoom => "header buffer too small",
            EncodeError::NotAReply => "RDMA_ERROR is not a reply",
            EncodeError::NoMsgWithoutReplyChunk => "RDMA_NOMSG reply without reply chunk",
            EncodeError::NoReplyChunk => "call has no reply chunk",
            EncodeError::TooManyWriteCounts => "more write counts than write chunks",
            EncodeError::WriteChunkOverrun { .. } => "write chunk overrun",
            EncodeError::ReplyChunkOverrun => "reply chunk overrun",
        }
    }
}

impl From<Full> for EncodeError {
    fn from(_: Full) -> Self {
        EncodeError::NoRoom
    }
}

/// Bytes of a chunk's encoding after its discriminator: count, segments.
fn chunk_len(c: &Chunk<'_>) -> Option<usize> {
    c.count().checked_mul(SEGMENT_LEN)?.checked_add(4)
}

/// Length of the reply header [`encode_reply`] writes for `call`, with the
/// Reply chunk echoed (`reply_chunk`) or not. `None` if `reply_chunk` is
/// set but the call has no Reply chunk.
pub fn reply_len(call: &Header<'_>, reply_chunk: bool) -> Option<usize> {
    // Fixed part, empty Read list, Write list terminator.
    let mut len = FIXED_HEADER.checked_add(8)?;
    for c in call.writes.iter() {
        len = len.checked_add(4)?.checked_add(chunk_len(&c)?)?;
    }
    len = len.checked_add(4)?;
    if reply_chunk {
        len = len.checked_add(chunk_len(&call.reply?)?)?;
    }
    Some(len)
}

/// Writes a chunk with `bytes` spread over its segments, in order.
fn put_chunk(w: &mut Writer<'_>, c: &Chunk<'_>, bytes: u32) -> Result<(), EncodeError> {
    w.put_u32(1)?;
    w.put_u32(u32::try_from(c.count()).map_err(|_| EncodeError::NoRoom)?)?;
    let mut left = bytes;
    for s in c.segments() {
        let used = s.length.min(left);
        left = left.saturating_sub(used);
        w.put_u32(s.handle)?;
        w.put_u32(used)?;
        w.put_u64(s.offset)?;
    }
    Ok(())
}

/// Writes the fixed part of a header.
fn put_fixed(w: &mut Writer<'_>, xid: u32, credits: u32, proc_: u32) -> Result<(), EncodeError> {
    w.put_u32(xid)?;
    w.put_u32(VERSION)?;
    w.put_u32(credits)?;
    w.put_u32(proc_)?;
    Ok(())
}

/// Encodes the transport header of the reply to `call` into `out` and
/// returns its length.
///
/// - `credits`: our grant.
/// - `proc_`: [`Proc::Msg`] (the RPC reply follows the header in the same
///   Send) or [`Proc::NoMsg`] (the RPC reply went into the Reply chunk).
/// - `written[i]`: bytes written into the call's Write chunk `i`; chunks
///   past the end of `written` were not used (zero bytes). Every chunk of
///   the call is returned.
/// - `reply_written`: `Some(n)` to return the call's Reply chunk with `n`
///   bytes used (required for [`Proc::NoMsg`]); `None` to mark the Reply
///   chunk absent.
///
/// The XID is the call's. Nothing is checked about `out` before the
/// arguments: an argument error is reported even if `out` is too small.
pub fn encode_reply(
    out: &mut [u8],
    credits: u32,
    proc_: Proc,
    call: &Header<'_>,
    written: &[u32],
    reply_written: Option<u32>,
) -> Result<usize, EncodeError> {
    match (proc_, reply_written) {
        (Proc::Error, _) => return Err(EncodeError::NotAReply),
        (Proc::NoMsg, None) => return Err(EncodeError::NoMsgWithoutReplyChunk),
        _ => {}
    }
    if written.len() > call.writes.len() {
        return Err(EncodeError::TooManyWriteCounts);
    }
    for (index, (c, n)) in call.writes.iter().zip(written).enumerate() {
        if *n > c.total() {
            return Err(EncodeError::WriteChunkOverrun { index });
        }
    }
    let reply = match reply_written {
        None => None,
        Some(n) => {
            let c = call.reply.ok_or(EncodeError::NoReplyChunk)?;
            if n > c.total() {
                return Err(EncodeError::ReplyChunkOverrun);
            }
            Some((c, n))
        }
    };

    let mut w = Writer::new(out);
    put_fixed(&mut w, call.xid, credits, proc_.wire())?;
    w.put_u32(0)?; // Read list: empty.
    for (i, c) in call.writes.iter().enumerate() {
        put_chunk(&mut w, &c, written.get(i).copied().unwrap_or(0))?;
    }
    w.put_u32(0)?; // Write list: end.
    match reply {
        Some((c, n)) => put_chunk(&mut w, &c, n)?,
        None => w.put_u32(0)?,
    }
    Ok(w.len())
}

/// Encodes an `ERR_VERS` report (RFC 8166 section 4.5.1): we support
/// versions `low` to `high` inclusive. Returns [`ERR_VERS_LEN`].
pub fn encode_error_vers(
    out: &mut [u8],
    xid: u32,
    credits: u32,
    low: u32,
    high: u32,
) -> Result<usize, EncodeError> {
    let mut w = Writer::new(out);
    put_fixed(&mut w, xid, credits, RDMA_ERROR)?;
    w.put_u32(ERR_VERS)?;
    w.put_u32(low)?;
    w.put_u32(high)?;
    Ok(w.len())
}

/// Encodes an `ERR_CHUNK` report (RFC 8166 sections 4.5.2 and 4.5.3).
/// Returns [`ERR_CHUNK_LEN`].
pub fn encode_error_chunk(out: &mut [u8], xid: u32, credits: u32) -> Result<usize, EncodeError> {
    let mut w = Writer::new(out);
    put_fixed(&mut w, xid, credits, RDMA_ERROR)?;
    w.put_u32(ERR_CHUNK)?;
    Ok(w.len())
}

/// Encodes the report a [`DecodeError`] calls for: `ERR_VERS` (offering
/// version 1 only) or `ERR_CHUNK`, with its length; `Ok(None)` when the
/// message gets no answer ([`DecodeError::TooShort`],
/// [`DecodeError::PeerError`]).
pub fn encode_error_for(
    out: &mut [u8],
    err: &DecodeError,
    credits: u32,
) -> Result<Option<usize>, EncodeError> {
    match err.answer() {
        None => Ok(None),
        Some((xid, ERR_VERS)) => encode_error_vers(out, xid, credits, VERSION, VERSION).map(Some),
        Some((xid, _)) => encode_error_chunk(out, xid, credits).map(Some),
    }
}
