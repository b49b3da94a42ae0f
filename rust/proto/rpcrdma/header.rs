// SPDX-License-Identifier: GPL-2.0

//! Decoding and validating the transport header of a received call.
//!
//! [`decode`] checks the whole header once, against the protocol and against
//! the server's [`Limits`], and returns a [`Header`] of views into the
//! receive buffer. The views re-read the validated bytes on demand, so
//! nothing is copied or allocated, and every count and total they report
//! was checked by [`decode`].
//!
//! # Rules
//!
//! What [`decode`] rejects, and why (section numbers are RFC 8166's):
//!
//! - Fewer than 8 bytes (no XID and version, the first two of the four
//!   fixed words of section 4.2): nothing can be answered, the message is
//!   dropped ([`DecodeError::TooShort`]).
//! - A version other than 1 (section 4.2.2): answered with `ERR_VERS`
//!   (section 4.5.1), whatever follows or is missing
//!   ([`DecodeError::Version`]).
//! - Version 1 cut short inside the fixed words: an XDR error, answered
//!   with `ERR_CHUNK` like the others below ([`ChunkError::Truncated`]).
//! - A received `RDMA_ERROR`: a requester never sends one, and an error is
//!   never answered with an error; the connection is closed
//!   ([`DecodeError::PeerError`]). (Replies the client sends on the
//!   backchannel are not calls and are not decoded here.)
//! - Everything else is an XDR error answered with `ERR_CHUNK` (section
//!   4.5.2, [`DecodeError::Chunk`]):
//!   - `RDMA_MSGP` and `RDMA_DONE`: no longer part of the protocol
//!     (section 4.6: requesters must not send them, a responder answers
//!     them with `ERR_CHUNK`); any procedure number RFC 8166 does not
//!     define likewise (section 4.5.2 names an invalid `rdma_proc` as an
//!     XDR error).
//!   - A list or optional-item discriminator other than 0 or 1 (XDR
//!     booleans, RFC 4506 section 4.4).
//!   - A header that ends before its lists do.
//!   - A Read segment position that is not a multiple of 4: positions are
//!     offsets into an XDR stream (section 3.4.5).
//!   - Read segment positions that decrease. Segments with the same
//!     position form one Read chunk (section 3.4.5); we require the list
//!     sorted by position (as every known requester sends it) so that a
//!     chunk is a run of consecutive entries. This is also how "at most one
//!     Position Zero Read chunk" is enforced: a second run at position zero
//!     would have to follow a non-zero position.
//!   - `RDMA_NOMSG` without a Position Zero Read chunk: the call's RPC
//!     message is not inline, so it must be in that chunk (section 3.5.3);
//!     section 4.5.2 names an `RDMA_NOMSG` with no chunks at all as an
//!     example of an XDR error.
//!   - `RDMA_MSG` with a Position Zero Read chunk: the RPC message is inline
//!     and starts at position zero, so nothing can be inserted there.
//!   - `RDMA_MSG` with no bytes after the header: there is no RPC message.
//!     (`RDMA_NOMSG` needs nothing after the header; extra bytes are
//!     ignored.)
//!   - A segment of length zero, and a Write or Reply chunk of zero
//!     segments. The RFC does not forbid them, but they describe no memory,
//!     no known requester sends them, and refusing them keeps zero-length
//!     RDMA operations out of the data path. This is our choice.
//!   - More Read segments than [`Limits::max_read_segments`], more Write
//!     chunks than [`Limits::max_write_chunks`], more segments in one chunk
//!     (Read, Write or Reply) than [`Limits::max_segments_per_chunk`], or a
//!     chunk whose segment lengths add up to more than
//!     [`Limits::max_chunk_bytes`] (or overflow 32 bits). The RFC leaves
//!     resource limits to the implementation; exceeding ours is reported
//!     like any other chunk error.
//!
//! Not checked here: whether a Read chunk's position lies inside the RPC
//! message (that needs the message's length after reassembly), and whether
//! the XID of the RPC message matches the header's.

use super::chunk::{read_entry, Chunk, ReadList, Segments, WriteList, READ_ENTRY_LEN, SEGMENT_LEN};
use super::xdr::Reader;

/// The only protocol version defined (RFC 8166 section 4.2.2).
pub const VERSION: u32 = 1;

/// Procedure: the RPC message follows the header inline.
pub const RDMA_MSG: u32 = 0;
/// Procedure: the RPC message is entirely in chunks.
pub const RDMA_NOMSG: u32 = 1;
/// Procedure: padded inline message (obsolete, RFC 8166 section 4.6).
pub const RDMA_MSGP: u32 = 2;
/// Procedure: Read-Read completion signal (obsolete, RFC 8166 section 4.6).
pub const RDMA_DONE: u32 = 3;
/// Procedure: a transport error report.
pub const RDMA_ERROR: u32 = 4;

/// Error code: unsupported protocol version.
pub const ERR_VERS: u32 = 1;
/// Error code: the header or its chunks could not be processed.
pub const ERR_CHUNK: u32 = 2;

/// Bytes of the fixed part of every header: XID, version, credits,
/// procedure.
pub const FIXED_HEADER: usize = 16;
/// Bytes of the smallest `RDMA_MSG`/`RDMA_NOMSG` header: the fixed part
/// and three empty lists.
pub const MIN_HEADER: usize = 28;

/// The procedure of a header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Proc {
    /// `RDMA_MSG`: the RPC message follows the header.
    Msg,
    /// `RDMA_NOMSG`: the RPC message is in chunks (a Position Zero Read
    /// chunk in a call, the Reply chunk in a reply).
    NoMsg,
    /// `RDMA_ERROR`. [`decode`] never returns it (a received error is
    /// [`DecodeError::PeerError`]); it exists so that every procedure we
    /// send has a name.
    Error,
}

impl Proc {
    /// The procedure's number on the wire.
    pub fn wire(self) -> u32 {
        match self {
            Proc::Msg => RDMA_MSG,
            Proc::NoMsg => RDMA_NOMSG,
            Proc::Error => RDMA_ERROR,
        }
    }
}

/// The server's resource limits, checked while decoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Read segments in the whole Read list, at most.
    pub max_read_segments: u32,
    /// Chunks in the Write list, at most.
    pub max_write_chunks: u32,
    /// Segments in one chunk (Read, Write or Reply), at most.
    pub max_segments_per_chunk: u32,
    /// Bytes in one chunk (the sum of its segment lengths), at most.
    pub max_chunk_bytes: u32,
}

/// Why a header was answered with `ERR_CHUNK`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChunkError {
    /// The header ends inside a list.
    Truncated,
    /// A list or optional-item discriminator is neither 0 nor 1.
    BadDiscriminator,
    /// `RDMA_MSGP` or `RDMA_DONE`, retired by RFC 8166.
    ObsoleteProc,
    /// A procedure number RFC 8166 does not define.
    UnknownProc,
    /// A Read segment position is not a multiple of 4.
    MisalignedPosition,
    /// A Read segment position is lower than the one before it.
    PositionOrder,
    /// `RDMA_NOMSG` without a Position Zero Read chunk.
    NoMsgWithoutPositionZero,
    /// `RDMA_MSG` with a Position Zero Read chunk.
    MsgWithPositionZero,
    /// `RDMA_MSG` with nothing after the header.
    EmptyBody,
    /// A segment of length zero.
    ZeroLengthSegment,
    /// A segment whose offset plus length does not fit 64 bits.
    OffsetOverflow,
    /// A Write or Reply chunk of zero segments.
    EmptyChunk,
    /// More Read segments than [`Limits::max_read_segments`].
    TooManyReadSegments,
    /// More Write chunks than [`Limits::max_write_chunks`].
    TooManyWriteChunks,
    /// More segments in one chunk than [`Limits::max_segments_per_chunk`].
    TooManySegments,
    /// A chunk longer than [`Limits::max_chunk_bytes`].
    ChunkTooLong,
    /// A well-formed Call that needs more of its connection than the
    /// connection has: more MRs or send-queue slots than exist
    /// ([`crate::budget`]), or a context while every one is in use.
    OverResources,
}

impl ChunkError {
    /// A short description for a log line.
    pub fn as_str(&self) -> &'static str {
        match self {
            ChunkError::Truncated => "header truncated",
            ChunkError::BadDiscriminator => "bad list discriminator",
            ChunkError::ObsoleteProc => "obsolete procedure (RDMA_MSGP/RDMA_DONE)",
            ChunkError::UnknownProc => "unknown procedure",
            ChunkError::MisalignedPosition => "read position not a multiple of 4",
            ChunkError::PositionOrder => "read positions out of order",
            ChunkError::NoMsgWithoutPositionZero => "RDMA_NOMSG without position-zero read chunk",
            ChunkError::MsgWithPositionZero => "RDMA_MSG with position-zero read chunk",
            ChunkError::EmptyBody => "RDMA_MSG without RPC message",
            ChunkError::ZeroLengthSegment => "zero-length segment",
            ChunkError::OffsetOverflow => "segment offset plus length overflows",
            ChunkError::EmptyChunk => "chunk without segments",
            ChunkError::TooManyReadSegments => "too many read segments",
            ChunkError::TooManyWriteChunks => "too many write chunks",
            ChunkError::TooManySegments => "too many segments in a chunk",
            ChunkError::ChunkTooLong => "chunk too long",
            ChunkError::OverResources => "needs more than the connection has",
        }
    }
}

/// Why a received header was not accepted, and so what to do about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// Fewer than 8 bytes: drop the message. There is no XID and version
    /// to answer.
    TooShort,
    /// Unsupported version `vers`: reply `ERR_VERS` to `xid`.
    Version {
        /// The XID to answer.
        xid: u32,
        /// The version received.
        vers: u32,
    },
    /// Malformed or over our limits: reply `ERR_CHUNK` to `xid`.
    Chunk {
        /// The XID to answer.
        xid: u32,
        /// What was wrong, for the log.
        reason: ChunkError,
    },
    /// The peer sent `RDMA_ERROR` (to a call of ours, or unprompted). An
    /// error is never answered with an error: close the connection.
    PeerError {
        /// The XID the peer's error refers to.
        xid: u32,
    },
}

impl DecodeError {
    /// The XID of the message, when it has one.
    pub fn xid(&self) -> Option<u32> {
        match *self {
            DecodeError::TooShort => None,
            DecodeError::Version { xid, .. }
            | DecodeError::Chunk { xid, .. }
            | DecodeError::PeerError { xid } => Some(xid),
        }
    }

    /// The RDMA_ERROR that answers it, as (XID, `ERR_VERS` or `ERR_CHUNK`);
    /// `None` when the message gets no answer.
    pub fn answer(&self) -> Option<(u32, u32)> {
        match *self {
            DecodeError::TooShort | DecodeError::PeerError { .. } => None,
            DecodeError::Version { xid, .. } => Some((xid, ERR_VERS)),
            DecodeError::Chunk { xid, .. } => Some((xid, ERR_CHUNK)),
        }
    }

    /// A short description for a log line.
    pub fn as_str(&self) -> &'static str {
        match self {
            DecodeError::TooShort => "message shorter than an XID and a version",
            DecodeError::Version { .. } => "unsupported version",
            DecodeError::Chunk { reason, .. } => reason.as_str(),
            DecodeError::PeerError { .. } => "peer sent RDMA_ERROR",
        }
    }
}

/// A validated call header: views into the receive buffer it came from.
///
/// Two headers are equal when their parts are, whatever buffers they view.
#[derive(Clone, Copy, Debug)]
pub struct Header<'a> {
    /// Transaction ID (the RPC XID).
    pub xid: u32,
    /// Credits the requester asks for.
    pub credits: u32,
    /// [`Proc::Msg`] or [`Proc::NoMsg`].
    pub proc_: Proc,
    /// The Read list.
    pub reads: ReadList<'a>,
    /// The Write list.
    pub writes: WriteList<'a>,
    /// The Reply chunk, if present.
    pub reply: Option<Chunk<'a>>,
    /// Length of the transport header, bytes: where the RPC message starts
    /// for [`Proc::Msg`].
    pub hdr_len: usize,
    /// The address of the bytes decoded: where the views' offsets count
    /// from ([`Header::shape`]). Kept instead of the offsets, so that a
    /// header stays small to move.
    base: usize,
    /// The segments' handles, summed up while they were validated
    /// ([`Header::single_handle`]).
    handles: Handles,
}

/// What the handles of a header's segments (all lists) have in common,
/// gathered one segment at a time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Handles {
    /// No segment yet.
    #[default]
    None,
    /// Every segment so far has this handle.
    One(u32),
    /// Two segments differ.
    Many,
}

impl Handles {
    /// Counts a segment with handle `h`.
    #[inline]
    fn add(&mut self, h: u32) {
        *self = match *self {
            Handles::None => Handles::One(h),
            Handles::One(x) if x == h => Handles::One(x),
            _ => Handles::Many,
        };
    }
}

impl PartialEq for Header<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.xid == other.xid
            && self.credits == other.credits
            && self.proc_ == other.proc_
            && self.reads == other.reads
            && self.writes == other.writes
            && self.reply == other.reply
            && self.hdr_len == other.hdr_len
            && self.handles == other.handles
    }
}

impl Eq for Header<'_> {}

/// Where a validated header's parts lie in the bytes it was decoded from:
/// kept beside a copy of those bytes, it gives the [`Header`] back
/// ([`Shape::header`]) without decoding and validating them again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    xid: u32,
    credits: u32,
    proc_: Proc,
    /// The Read list's entries: offset and count.
    reads: (usize, usize),
    /// The Write list's entries: offset, bytes and count.
    writes: (usize, usize, usize),
    /// The Reply chunk's segments: offset, count and total bytes.
    reply: Option<(usize, usize, u32)>,
    hdr_len: usize,
    handles: Handles,
}

impl Shape {
    /// The header this is the shape of, over `buf`: the bytes it was
    /// decoded from, or a copy of at least their first `hdr_len` bytes.
    /// `None` if `buf` is shorter than that. Over other bytes the views
    /// read whatever is there, and their iterators end where it does not
    /// parse.
    pub fn header<'a>(&self, buf: &'a [u8]) -> Option<Header<'a>> {
        let span = |at: usize, n: usize| buf.get(at..at.checked_add(n)?);
        let (at, n) = self.reads;
        let reads = ReadList::new(span(at, n.checked_mul(READ_ENTRY_LEN)?)?, n);
        let (at, bytes, n) = self.writes;
        let writes = WriteList::new(span(at, bytes)?, n);
        let reply = match self.reply {
            Some((at, n, total)) => {
                Some(Chunk::new(span(at, n.checked_mul(SEGMENT_LEN)?)?, n, total))
            }
            None => None,
        };
        buf.get(..self.hdr_len)?;
        Some(Header {
            xid: self.xid,
            credits: self.credits,
            proc_: self.proc_,
            reads,
            writes,
            reply,
            hdr_len: self.hdr_len,
            base: buf.as_ptr() as usize,
            handles: self.handles,
        })
    }
}

impl Header<'_> {
    /// Where its parts lie in the bytes it was decoded from.
    pub fn shape(&self) -> Shape {
        // Each view lies in the bytes decoded (or, for one taken back from
        // a shape, in the copy), so none starts before `base`.
        let at = |b: &[u8]| (b.as_ptr() as usize).saturating_sub(self.base);
        Shape {
            xid: self.xid,
            credits: self.credits,
            proc_: self.proc_,
            reads: (at(self.reads.bytes()), self.reads.len()),
            writes: (
                at(self.writes.bytes()),
                self.writes.bytes().len(),
                self.writes.len(),
            ),
            reply: self.reply.map(|c| (at(c.bytes()), c.count(), c.total())),
            hdr_len: self.hdr_len,
            handles: self.handles,
        }
    }

    /// The STag to invalidate with Send With Invalidate: `Some(h)` when the
    /// call carries at least one segment (in any list) and every segment's
    /// handle is `h`.
    pub fn single_handle(&self) -> Option<u32> {
        match self.handles {
            Handles::One(h) => Some(h),
            Handles::None | Handles::Many => None,
        }
    }
}

/// Reads an XDR boolean list or optional-item discriminator.
fn present(r: &mut Reader<'_>) -> Result<bool, ChunkError> {
    match r.u32() {
        Some(0) => Ok(false),
        Some(1) => Ok(true),
        Some(_) => Err(ChunkError::BadDiscriminator),
        None => Err(ChunkError::Truncated),
    }
}

/// A limit as a `usize` (saturating on targets where it would not fit).
fn as_usize(n: u32) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// Whether `total` plus `len` is still within the chunk limit.
fn add_length(total: u32, len: u32, limits: &Limits) -> Result<u32, ChunkError> {
    total
        .checked_add(len)
        .filter(|t| *t <= limits.max_chunk_bytes)
        .ok_or(ChunkError::ChunkTooLong)
}

/// Validates the Read list at `r`, leaving `r` after its terminator.
fn read_list<'a>(
    r: &mut Reader<'a>,
    limits: &Limits,
    handles: &mut Handles,
) -> Result<ReadList<'a>, ChunkError> {
    let start = r.rest();
    let mut len = 0usize;
    let mut prev: Option<u32> = None;
    let mut chunk_segs = 0u32;
    let mut chunk_total = 0u32;
    while present(r)? {
        let s = read_entry(r).ok_or(ChunkError::Truncated)?;
        len = len.checked_add(1).ok_or(ChunkError::TooManyReadSegments)?;
        if len > as_usize(limits.max_read_segments) {
            return Err(ChunkError::TooManyReadSegments);
        }
        if s.position % 4 != 0 {
            return Err(ChunkError::MisalignedPosition);
        }
        if s.length == 0 {
            return Err(ChunkError::ZeroLengthSegment);
        }
        if s.offset.checked_add(u64::from(s.length)).is_none() {
            return Err(ChunkError::OffsetOverflow);
        }
        match prev {
            Some(p) if s.position < p => return Err(ChunkError::PositionOrder),
            Some(p) if s.position == p => {
                chunk_segs = chunk_segs.saturating_add(1);
                chunk_total = add_length(chunk_total, s.length, limits)?;
            }
            _ => {
                chunk_segs = 1;
                chunk_total = add_length(0, s.length, limits)?;
            }
        }
        if chunk_segs > limits.max_segments_per_chunk {
            return Err(ChunkError::TooManySegments);
        }
        prev = Some(s.position);
        handles.add(s.handle);
    }
    let bytes = len
        .checked_mul(READ_ENTRY_LEN)
        .ok_or(ChunkError::Truncated)?;
    Ok(ReadList::new(
        start.get(..bytes).ok_or(ChunkError::Truncated)?,
        len,
    ))
}

/// Validates one Write or Reply chunk (segment count and segments) at `r`.
fn chunk<'a>(
    r: &mut Reader<'a>,
    limits: &Limits,
    handles: &mut Handles,
) -> Result<Chunk<'a>, ChunkError> {
    let count = r.u32().ok_or(ChunkError::Truncated)?;
    if count == 0 {
        return Err(ChunkError::EmptyChunk);
    }
    if count > limits.max_segments_per_chunk {
        return Err(ChunkError::TooManySegments);
    }
    let count = usize::try_from(count).map_err(|_| ChunkError::TooManySegments)?;
    let bytes = count
        .checked_mul(SEGMENT_LEN)
        .ok_or(ChunkError::Truncated)?;
    let segs = r.bytes(bytes).ok_or(ChunkError::Truncated)?;
    let mut total = 0u32;
    for s in Segments::new(segs) {
        if s.length == 0 {
            return Err(ChunkError::ZeroLengthSegment);
        }
        if s.offset.checked_add(u64::from(s.length)).is_none() {
            return Err(ChunkError::OffsetOverflow);
        }
        total = add_length(total, s.length, limits)?;
        handles.add(s.handle);
    }
    Ok(Chunk::new(segs, count, total))
}

/// Validates the Write list at `r`, leaving `r` after its terminator.
fn write_list<'a>(
    r: &mut Reader<'a>,
    limits: &Limits,
    handles: &mut Handles,
) -> Result<WriteList<'a>, ChunkError> {
    let start = r.rest();
    let begin = r.position();
    let mut len = 0usize;
    while present(r)? {
        len = len.checked_add(1).ok_or(ChunkError::TooManyWriteChunks)?;
        if len > as_usize(limits.max_write_chunks) {
            return Err(ChunkError::TooManyWriteChunks);
        }
        chunk(r, limits, handles)?;
    }
    // Everything consumed except the terminating discriminator.
    let bytes = r
        .position()
        .checked_sub(begin)
        .and_then(|n| n.checked_sub(4))
        .ok_or(ChunkError::Truncated)?;
    Ok(WriteList::new(
        start.get(..bytes).ok_or(ChunkError::Truncated)?,
        len,
    ))
}

/// Decodes and validates the transport header of a received call at the
/// start of `buf` (see the module documentation for the rules).
pub fn decode<'a>(buf: &'a [u8], limits: &Limits) -> Result<Header<'a>, DecodeError> {
    let mut r = Reader::new(buf);
    let (Some(xid), Some(vers)) = (r.u32(), r.u32()) else {
        return Err(DecodeError::TooShort);
    };
    if vers != VERSION {
        return Err(DecodeError::Version { xid, vers });
    }
    let err = |reason| DecodeError::Chunk { xid, reason };
    let (Some(credits), Some(proc_)) = (r.u32(), r.u32()) else {
        return Err(err(ChunkError::Truncated));
    };
    let proc_ = match proc_ {
        RDMA_MSG => Proc::Msg,
        RDMA_NOMSG => Proc::NoMsg,
        RDMA_ERROR => return Err(DecodeError::PeerError { xid }),
        RDMA_MSGP | RDMA_DONE => return Err(err(ChunkError::ObsoleteProc)),
        _ => return Err(err(ChunkError::UnknownProc)),
    };
    let mut handles = Handles::None;
    let reads = read_list(&mut r, limits, &mut handles).map_err(err)?;
    let writes = write_list(&mut r, limits, &mut handles).map_err(err)?;
    let reply = if present(&mut r).map_err(err)? {
        Some(chunk(&mut r, limits, &mut handles).map_err(err)?)
    } else {
        None
    };
    let pz = reads.position_zero().is_some();
    match proc_ {
        Proc::Msg if pz => return Err(err(ChunkError::MsgWithPositionZero)),
        Proc::Msg if r.remaining() == 0 => return Err(err(ChunkError::EmptyBody)),
        Proc::NoMsg if !pz => return Err(err(ChunkError::NoMsgWithoutPositionZero)),
        _ => {}
    }
    let hdr_len = r.position();
    Ok(Header {
        xid,
        credits,
        proc_,
        reads,
        writes,
        reply,
        hdr_len,
        base: buf.as_ptr() as usize,
        handles,
    })
}
