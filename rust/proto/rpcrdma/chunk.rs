// SPDX-License-Identifier: GPL-2.0

//! Views of a validated header's chunk lists: segments, the Read list and
//! its chunks, Write and Reply chunks, the Write list.
//!
//! The views borrow the receive buffer and re-read it on demand; they never
//! copy or allocate. [`decode`] builds them only over bytes it has
//! checked, so their iterators yield exactly the counted entries; should
//! the bytes somehow not parse, an iterator just ends.
//!
//! [`decode`]: super::header::decode

use super::xdr::Reader;

/// Bytes of one segment on the wire: handle, length, 64-bit offset.
pub(crate) const SEGMENT_LEN: usize = 16;
/// Bytes of one Read list entry: discriminator, position, segment.
pub(crate) const READ_ENTRY_LEN: usize = 24;

/// One RDMA segment: a piece of the peer's registered memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// The STag (R_key) that names the memory.
    pub handle: u32,
    /// Length, bytes.
    pub length: u32,
    /// Offset (address) of the memory in the peer's registration.
    pub offset: u64,
}

/// One Read list entry: a segment and where its data belongs in the RPC
/// message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadSegment {
    /// XDR position (byte offset into the RPC message) of the data.
    pub position: u32,
    /// The STag (R_key) that names the memory.
    pub handle: u32,
    /// Length, bytes.
    pub length: u32,
    /// Offset (address) of the memory in the peer's registration.
    pub offset: u64,
}

impl ReadSegment {
    /// The segment without its position.
    pub fn segment(&self) -> Segment {
        Segment {
            handle: self.handle,
            length: self.length,
            offset: self.offset,
        }
    }
}

/// Reads one segment (handle, length, offset).
#[inline]
pub(super) fn segment(r: &mut Reader<'_>) -> Option<Segment> {
    Some(Segment {
        handle: r.u32()?,
        length: r.u32()?,
        offset: r.u64()?,
    })
}

/// Reads one Read list entry after its discriminator.
#[inline]
pub(super) fn read_entry(r: &mut Reader<'_>) -> Option<ReadSegment> {
    let position = r.u32()?;
    let s = segment(r)?;
    Some(ReadSegment {
        position,
        handle: s.handle,
        length: s.length,
        offset: s.offset,
    })
}

/// The Read list of a call: its entries, without the terminating
/// discriminator. Every entry has passed [`decode`]'s checks.
///
/// [`decode`]: super::header::decode
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadList<'a> {
    /// `len` entries of [`READ_ENTRY_LEN`] bytes, each starting with its
    /// (present) discriminator.
    entries: &'a [u8],
    len: usize,
}

impl<'a> ReadList<'a> {
    /// A view of `len` validated entries.
    pub(super) fn new(entries: &'a [u8], len: usize) -> Self {
        Self { entries, len }
    }

    /// The entries' bytes.
    pub(super) fn bytes(&self) -> &'a [u8] {
        self.entries
    }

    /// Number of Read segments.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the list has no segments.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The segments, in list order.
    pub fn iter(&self) -> ReadSegments<'a> {
        ReadSegments {
            r: Reader::new(self.entries),
        }
    }

    /// The Read chunks: runs of segments with the same position, in
    /// position order.
    pub fn chunks(&self) -> ReadChunks<'a> {
        ReadChunks {
            r: Reader::new(self.entries),
        }
    }

    /// Entries `first..first + n` of the list, if it has them.
    pub fn sub(&self, first: usize, n: usize) -> Option<ReadList<'a>> {
        let end = first.checked_add(n)?;
        if end > self.len {
            return None;
        }
        let bytes = self
            .entries
            .get(first.checked_mul(READ_ENTRY_LEN)?..end.checked_mul(READ_ENTRY_LEN)?)?;
        Some(ReadList {
            entries: bytes,
            len: n,
        })
    }

    /// The Position Zero Read chunk, if the call has one.
    pub fn position_zero(&self) -> Option<ReadChunk<'a>> {
        self.chunks().next().filter(|c| c.position == 0)
    }
}

/// Iterator over a [`ReadList`]'s segments.
#[derive(Clone, Debug)]
pub struct ReadSegments<'a> {
    r: Reader<'a>,
}

impl Iterator for ReadSegments<'_> {
    type Item = ReadSegment;

    fn next(&mut self) -> Option<ReadSegment> {
        // The discriminator (always 1 in a validated list).
        self.r.u32()?;
        read_entry(&mut self.r)
    }
}

/// One Read chunk: consecutive Read segments with the same position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadChunk<'a> {
    /// XDR position of the chunk's data in the RPC message.
    pub position: u32,
    /// The chunk's segments (every one has `position`), as a list of their
    /// own.
    pub segments: ReadList<'a>,
    /// Sum of the segment lengths, bytes.
    pub total: u32,
}

/// Iterator over a [`ReadList`]'s chunks.
#[derive(Clone, Debug)]
pub struct ReadChunks<'a> {
    r: Reader<'a>,
}

impl<'a> Iterator for ReadChunks<'a> {
    type Item = ReadChunk<'a>;

    fn next(&mut self) -> Option<ReadChunk<'a>> {
        let rest = self.r.rest();
        self.r.u32()?;
        let first = read_entry(&mut self.r)?;
        let mut len = 1usize;
        let mut total = first.length;
        loop {
            let mut peek = self.r;
            match peek.u32().and_then(|_| read_entry(&mut peek)) {
                Some(s) if s.position == first.position => {
                    len = len.checked_add(1)?;
                    total = total.checked_add(s.length)?;
                    self.r = peek;
                }
                _ => break,
            }
        }
        Some(ReadChunk {
            position: first.position,
            segments: ReadList {
                entries: rest.get(..len.checked_mul(READ_ENTRY_LEN)?)?,
                len,
            },
            total,
        })
    }
}

/// A Write chunk or the Reply chunk: an array of segments the responder
/// writes into. Validated by [`decode`].
///
/// [`decode`]: super::header::decode
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chunk<'a> {
    /// `count` segments of [`SEGMENT_LEN`] bytes.
    segs: &'a [u8],
    count: usize,
    total: u32,
}

impl<'a> Chunk<'a> {
    /// A view of `count` validated segments holding `total` bytes.
    pub(super) fn new(segs: &'a [u8], count: usize, total: u32) -> Self {
        Self { segs, count, total }
    }

    /// The segments' bytes.
    pub(super) fn bytes(&self) -> &'a [u8] {
        self.segs
    }

    /// The segments, in order.
    pub fn segments(&self) -> Segments<'a> {
        Segments {
            r: Reader::new(self.segs),
        }
    }

    /// Number of segments.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Sum of the segment lengths: the chunk's capacity, bytes.
    pub fn total(&self) -> u32 {
        self.total
    }
}

/// Iterator over a [`Chunk`]'s segments.
#[derive(Clone, Debug)]
pub struct Segments<'a> {
    r: Reader<'a>,
}

impl<'a> Segments<'a> {
    /// An iterator over `segs`, consecutive segments on the wire.
    pub(super) fn new(segs: &'a [u8]) -> Self {
        Self {
            r: Reader::new(segs),
        }
    }
}

impl Iterator for Segments<'_> {
    type Item = Segment;

    fn next(&mut self) -> Option<Segment> {
        segment(&mut self.r)
    }
}

/// The Write list of a call: its chunks, without the terminating
/// discriminator. Validated by [`decode`](super::header::decode).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteList<'a> {
    /// `len` entries: discriminator, segment count, segments.
    entries: &'a [u8],
    len: usize,
}

impl<'a> WriteList<'a> {
    /// A view of `len` validated entries.
    pub(super) fn new(entries: &'a [u8], len: usize) -> Self {
        Self { entries, len }
    }

    /// The entries' bytes.
    pub(super) fn bytes(&self) -> &'a [u8] {
        self.entries
    }

    /// Number of Write chunks.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the list has no chunks.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The chunks, in list order.
    pub fn iter(&self) -> WriteChunks<'a> {
        WriteChunks {
            r: Reader::new(self.entries),
        }
    }
}

/// Iterator over a [`WriteList`]'s chunks.
#[derive(Clone, Debug)]
pub struct WriteChunks<'a> {
    r: Reader<'a>,
}

impl<'a> Iterator for WriteChunks<'a> {
    type Item = Chunk<'a>;

    fn next(&mut self) -> Option<Chunk<'a>> {
        self.r.u32()?;
        let count = usize::try_from(self.r.u32()?).ok()?;
        let segs = self.r.bytes(count.checked_mul(SEGMENT_LEN)?)?;
        let mut total = 0u32;
        for s in Segments::new(segs) {
            total = total.checked_add(s.length)?;
        }
        Some(Chunk { segs, count, total })
    }
}
