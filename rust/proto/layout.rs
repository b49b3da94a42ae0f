// SPDX-License-Identifier: GPL-2.0

//! Where the bytes of an RPC message go: the offset arithmetic of the data
//! path, kept apart from the kernel so it can be tested exhaustively.
//!
//! A Call arrives as an inline part plus Read chunks. Each Read chunk's
//! Position (RFC 8166 §3.5.3) is the offset in the *whole* XDR stream where
//! its data belongs; the chunk carries the data item without its XDR
//! roundup, and the inline part does not carry it either. [`call_layout`]
//! turns that into a list of placements into nfsd's argument pages and the
//! [`ArgShape`] nfsd reads them in: one contiguous stream, as any stream
//! transport leaves it, or, for the common Call with one data item (an NFS
//! WRITE's payload), the item on pages of its own from their first byte,
//! so that nfsd can hand it to direct I/O.
//!
//! A Reply leaves nfsd as one XDR stream in which some byte ranges are
//! result payloads bound for the client's Write chunks (`xpo_result_payload`).
//! [`reply_regions`] gives the rest: what goes inline or into the Reply
//! chunk, with each payload and its roundup cut out.

/// The XDR roundup of `len`: bytes of padding after a data item.
pub const fn xdr_pad(len: u32) -> u32 {
    (4 - (len & 3)) & 3
}

/// One Read chunk of a Call: where its data belongs and how long it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadChunkRef {
    /// Offset in the whole XDR stream (0: the chunk is the whole message).
    pub position: u32,
    /// Bytes of data the chunk carries (the sum of its segments).
    pub length: u32,
}

/// One step of assembling a Call, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// Copy `len` inline bytes from offset `src` of the inline part to `dst`.
    Inline {
        /// Offset in the inline part (after the transport header).
        src: u32,
        /// Offset in the argument buffer.
        dst: u32,
        /// Bytes.
        len: u32,
    },
    /// RDMA Read chunk number `chunk` (in the order given) to `dst`.
    Chunk {
        /// Index into the chunks passed to [`call_layout`].
        chunk: usize,
        /// Offset in the argument buffer.
        dst: u32,
        /// Bytes.
        len: u32,
    },
    /// Zero `len` bytes at `dst`: the roundup after a chunk's data item.
    Zero {
        /// Offset in the argument buffer.
        dst: u32,
        /// Bytes (1 to 3).
        len: u32,
    },
}

/// Why a Call's chunks cannot be placed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayoutError {
    /// A Position points before data already placed, or past the inline
    /// data that would precede it.
    BadPosition,
    /// A position-zero chunk together with other chunks or inline data
    /// that would have to be merged into it.
    MixedPositionZero,
    /// The assembled message is larger than the argument buffer.
    TooLarge,
    /// More steps than the caller's list holds.
    TooManySteps,
    /// The message would be empty.
    Empty,
}

impl LayoutError {
    /// A short text for a log line.
    pub fn as_str(&self) -> &'static str {
        match self {
            LayoutError::BadPosition => "read chunk position out of order or out of range",
            LayoutError::MixedPositionZero => "position-zero read chunk mixed with other data",
            LayoutError::TooLarge => "call larger than the argument buffer",
            LayoutError::TooManySteps => "too many read chunks",
            LayoutError::Empty => "empty call",
        }
    }
}

/// How an assembled Call lies in the argument pages (nfsd's `rq_arg`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgShape {
    /// One stream of `len` bytes from the first page's first byte on: the
    /// first page is the head, the rest the page list.
    Stream {
        /// Bytes of the Call.
        len: u32,
    },
    /// A Call with one data item, which starts the second page: the `head`
    /// inline bytes before the item start the first page; the item and its
    /// roundup (`pages` bytes) are the page list, from the second page's
    /// first byte; the `tail` inline bytes after it follow the head in the
    /// first page.
    Split {
        /// Inline bytes before the data item.
        head: u32,
        /// The data item with its roundup.
        pages: u32,
        /// Inline bytes after the data item.
        tail: u32,
    },
}

impl ArgShape {
    /// Bytes of the Call.
    pub fn len(&self) -> u32 {
        match *self {
            ArgShape::Stream { len } => len,
            ArgShape::Split { head, pages, tail } => head + pages + tail,
        }
    }

    /// Whether the Call has no bytes (never, for a planned one).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of the argument pages the Call occupies, from the first page's
    /// first byte, with pages of `page_size` bytes.
    pub fn extent(&self, page_size: u32) -> u32 {
        match *self {
            ArgShape::Stream { len } => len,
            ArgShape::Split { pages, .. } => page_size + pages,
        }
    }
}

/// A Call's assembly: how many steps [`call_layout`] wrote, and the shape
/// they leave.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallLayout {
    /// Steps written to the caller's list.
    pub steps: usize,
    /// Where the Call's bytes lie once the steps are done.
    pub shape: ArgShape,
}

/// The fewest inline bytes before a data item for [`ArgShape::Split`]: an
/// RPC Call's fixed words (XID to procedure, and the credential's and
/// verifier's flavor and length), the shortest header [`split_floor`] can
/// find. A Call whose item comes earlier is not one nfsd would take a
/// payload from; it is assembled as a stream and judged by sunrpc.
pub const SPLIT_MIN_HEAD: u32 = 40;

/// What [`call_layout`] needs to give a Call's data item pages of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Split {
    /// The argument buffer's page size.
    pub page_size: u32,
    /// The first Position the item may have ([`split_floor`]).
    pub min_position: u32,
}

/// The big-endian XDR word at byte `off` of `b`, if `b` holds it.
fn word(b: &[u8], off: u32) -> Option<u32> {
    let off = usize::try_from(off).ok()?;
    let w = b.get(off..off.checked_add(4)?)?;
    Some(u32::from_be_bytes([w[0], w[1], w[2], w[3]]))
}

/// The first Position at which the data item of the Call whose inline part
/// is `call` may go on pages of its own: the end of its RPC header (XID to
/// the verifier's body). sunrpc authenticates the header in the first page
/// (RPCSEC_GSS integrity checksums it there as one span, from the XID to
/// the credential's end), so no Read chunk may move any of it elsewhere:
/// a chunk whose Position falls inside the credential or the verifier is
/// assembled as a stream, like any stream transport's record.
///
/// `None`, and no split at all, for a NULL Call (procedure 0: nothing for
/// nfsd to write, and RPCSEC_GSS context creation reads its token from the
/// argument pages past the page list) and for a header that does not lie
/// whole within `call` (sunrpc judges it).
pub fn split_floor(call: &[u8]) -> Option<u32> {
    // XID, message type, RPC version, program, version, procedure.
    if word(call, 20)? == 0 {
        return None;
    }
    // The credential's flavor and length at 24 and 28, its body from 32.
    let cred = word(call, 28)?;
    let verf_at = 32u32.checked_add(cred)?.checked_add(xdr_pad(cred))?;
    let verf = word(call, verf_at.checked_add(4)?)?;
    let end = verf_at
        .checked_add(8)?
        .checked_add(verf)?
        .checked_add(xdr_pad(verf))?;
    (usize::try_from(end).ok()? <= call.len()).then_some(end)
}

/// Plans the assembly of a Call whose inline part is `inline_len` bytes and
/// whose Read chunks are `chunks` (positions non-decreasing, as the header
/// decoder guarantees) into an argument buffer of `capacity` bytes. Writes
/// the steps to `out`.
///
/// With `split`, a Call with exactly one data item (a chunk at an
/// XDR-aligned Position of at least `split.min_position` and
/// [`SPLIT_MIN_HEAD`]) whose inline part fits one page is planned as an
/// [`ArgShape::Split`], if that fits the buffer: the item lands
/// page-aligned. Every other Call, and every Call without `split`, is one
/// stream.
///
/// With a position-zero chunk (RDMA_NOMSG), the chunk is the whole message:
/// no other chunk may accompany it and the inline part is ignored.
pub fn call_layout(
    inline_len: u32,
    chunks: &[ReadChunkRef],
    capacity: u32,
    split: Option<Split>,
    out: &mut [Place],
) -> Result<CallLayout, LayoutError> {
    if let ([c], Some(split)) = (chunks, split) {
        if let Some(l) = split_layout(inline_len, *c, capacity, split, out)? {
            return Ok(l);
        }
    }
    let (steps, len) = stream_layout(inline_len, chunks, capacity, out)?;
    Ok(CallLayout {
        steps,
        shape: ArgShape::Stream { len },
    })
}

/// The [`ArgShape::Split`] plan of a Call with the one chunk `c`, if it
/// qualifies and fits.
fn split_layout(
    inline_len: u32,
    c: ReadChunkRef,
    capacity: u32,
    Split {
        page_size,
        min_position,
    }: Split,
    out: &mut [Place],
) -> Result<Option<CallLayout>, LayoutError> {
    if c.position < SPLIT_MIN_HEAD.max(min_position)
        || c.position % 4 != 0
        || c.position > inline_len
        || c.length == 0
        || inline_len > page_size
    {
        return Ok(None);
    }
    let pad = xdr_pad(c.length);
    let Some(pages) = c.length.checked_add(pad) else {
        return Ok(None);
    };
    if page_size
        .checked_add(pages)
        .is_none_or(|end| end > capacity)
    {
        return Ok(None);
    }
    let (head, tail) = (c.position, inline_len - c.position);
    let steps = [
        Place::Inline {
            src: 0,
            dst: 0,
            len: head,
        },
        Place::Chunk {
            chunk: 0,
            dst: page_size,
            len: c.length,
        },
        Place::Zero {
            dst: page_size + c.length,
            len: pad,
        },
        Place::Inline {
            src: head,
            dst: head,
            len: tail,
        },
    ];
    let mut out = Steps { out, n: 0 };
    for step in steps {
        out.push(step)?;
    }
    Ok(Some(CallLayout {
        steps: out.n,
        shape: ArgShape::Split { head, pages, tail },
    }))
}

/// The steps of a plan, written into the caller's slice in order; a step
/// that moves no byte is left out.
struct Steps<'a> {
    out: &'a mut [Place],
    /// Steps written.
    n: usize,
}

impl Steps<'_> {
    fn push(&mut self, p: Place) -> Result<(), LayoutError> {
        let (Place::Inline { len, .. } | Place::Chunk { len, .. } | Place::Zero { len, .. }) = p;
        if len == 0 {
            return Ok(());
        }
        *self.out.get_mut(self.n).ok_or(LayoutError::TooManySteps)? = p;
        self.n += 1;
        Ok(())
    }
}

/// Plans the assembly of the Call as one stream: returns `(steps, message
/// length)`.
fn stream_layout(
    inline_len: u32,
    chunks: &[ReadChunkRef],
    capacity: u32,
    out: &mut [Place],
) -> Result<(usize, u32), LayoutError> {
    let mut steps = Steps { out, n: 0 };
    if let Some(first) = chunks.first().filter(|c| c.position == 0) {
        // RDMA_NOMSG: the chunk is the whole message.
        if chunks.len() != 1 {
            return Err(LayoutError::MixedPositionZero);
        }
        if first.length == 0 {
            return Err(LayoutError::Empty);
        }
        if first.length > capacity {
            return Err(LayoutError::TooLarge);
        }
        steps.push(Place::Chunk {
            chunk: 0,
            dst: 0,
            len: first.length,
        })?;
        return Ok((steps.n, first.length));
    }
    let mut stream = Stream {
        steps,
        inline_len,
        capacity,
        placed: 0,
        used: 0,
    };
    for (i, c) in chunks.iter().enumerate() {
        stream.chunk(i, c)?;
    }
    stream.finish()
}

/// A Call being laid out as one stream ([`stream_layout`]), chunk by chunk.
struct Stream<'a> {
    steps: Steps<'a>,
    inline_len: u32,
    capacity: u32,
    /// Bytes of the message placed so far.
    placed: u32,
    /// Inline bytes consumed so far.
    used: u32,
}

impl Stream<'_> {
    /// Places the inline bytes before chunk `i` (`c`), then the chunk and
    /// its XDR padding.
    fn chunk(&mut self, i: usize, c: &ReadChunkRef) -> Result<(), LayoutError> {
        if c.position == 0 {
            return Err(LayoutError::MixedPositionZero);
        }
        let before = c
            .position
            .checked_sub(self.placed)
            .ok_or(LayoutError::BadPosition)?;
        let end_used = self
            .used
            .checked_add(before)
            .ok_or(LayoutError::BadPosition)?;
        if end_used > self.inline_len {
            return Err(LayoutError::BadPosition);
        }
        let pad = xdr_pad(c.length);
        let after = c
            .position
            .checked_add(c.length)
            .and_then(|v| v.checked_add(pad))
            .ok_or(LayoutError::TooLarge)?;
        if after > self.capacity {
            return Err(LayoutError::TooLarge);
        }
        self.steps.push(Place::Inline {
            src: self.used,
            dst: self.placed,
            len: before,
        })?;
        self.steps.push(Place::Chunk {
            chunk: i,
            dst: c.position,
            len: c.length,
        })?;
        self.steps.push(Place::Zero {
            dst: c.position + c.length,
            len: pad,
        })?;
        self.used = end_used;
        self.placed = after;
        Ok(())
    }

    /// Places the inline bytes after the last chunk: returns `(steps,
    /// message length)`.
    fn finish(mut self) -> Result<(usize, u32), LayoutError> {
        let rest = self.inline_len - self.used;
        let total = self.placed.checked_add(rest).ok_or(LayoutError::TooLarge)?;
        if total > self.capacity {
            return Err(LayoutError::TooLarge);
        }
        self.steps.push(Place::Inline {
            src: self.used,
            dst: self.placed,
            len: rest,
        })?;
        if total == 0 {
            return Err(LayoutError::Empty);
        }
        Ok((self.steps.n, total))
    }
}

/// A result payload nfsd reported for a Write chunk: `len` bytes at offset
/// `position` of the Reply's XDR stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Payload {
    /// Offset in the Reply.
    pub position: u32,
    /// Bytes.
    pub len: u32,
}

/// Why a Reply's payloads do not fit its stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegionError;

/// Checks that `payloads` (the empty ones aside) are in stream order and
/// inside a `len`-byte Reply; returns how many of its bytes they cover,
/// roundups included.
fn payload_bytes(len: u32, payloads: &[Payload]) -> Result<u32, RegionError> {
    let mut at: u32 = 0;
    let mut covered: u32 = 0;
    for p in payloads {
        if p.len == 0 {
            continue;
        }
        let end = p.position.checked_add(p.len).ok_or(RegionError)?;
        if p.position < at || end > len {
            return Err(RegionError);
        }
        let next = end.saturating_add(xdr_pad(p.len)).min(len);
        covered += next - p.position;
        at = next;
    }
    Ok(covered)
}

/// The byte ranges `[start, end)` of a `len`-byte Reply that are not
/// result payloads (nor their roundup), in order, empty ones left out.
/// Payloads must be in stream order and inside the Reply.
pub fn reply_regions(len: u32, payloads: &[Payload]) -> Result<Regions<'_>, RegionError> {
    reply_layout(len, payloads).map(|(_, regions)| regions)
}

/// The ranges of [`reply_regions`].
#[derive(Clone, Debug)]
pub struct Regions<'a> {
    payloads: core::slice::Iter<'a, Payload>,
    /// Where the next range starts.
    cursor: u32,
    len: u32,
    /// The last range (after every payload) was given.
    done: bool,
}

impl Iterator for Regions<'_> {
    type Item = (u32, u32);

    fn next(&mut self) -> Option<(u32, u32)> {
        for p in self.payloads.by_ref() {
            if p.len == 0 {
                continue;
            }
            let region = (self.cursor, p.position);
            self.cursor = p
                .position
                .saturating_add(p.len)
                .saturating_add(xdr_pad(p.len))
                .min(self.len);
            if region.1 > region.0 {
                return Some(region);
            }
        }
        if self.done {
            return None;
        }
        self.done = true;
        (self.len > self.cursor).then_some((self.cursor, self.len))
    }
}

/// The total length of [`reply_regions`].
pub fn reply_inline_len(len: u32, payloads: &[Payload]) -> Result<u32, RegionError> {
    reply_layout(len, payloads).map(|(inline, _)| inline)
}

/// [`reply_inline_len`] and [`reply_regions`] of one check: the Reply's
/// inline length, and its inline ranges.
pub fn reply_layout(len: u32, payloads: &[Payload]) -> Result<(u32, Regions<'_>), RegionError> {
    let inline = len - payload_bytes(len, payloads)?;
    Ok((
        inline,
        Regions {
            payloads: payloads.iter(),
            cursor: 0,
            len,
            done: false,
        },
    ))
}
