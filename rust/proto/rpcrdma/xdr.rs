// SPDX-License-Identifier: GPL-2.0

//! A minimal XDR (RFC 4506) reader and writer for transport headers.
//!
//! Only what RPC-over-RDMA headers need: 32-bit and 64-bit unsigned
//! integers, big-endian, and sub-slices. Every access is bounds-checked; a
//! failed read leaves the reader where it was, a failed write leaves the
//! writer where it was.

/// Size of one XDR unit (a 32-bit word), bytes.
pub const UNIT: usize = 4;

/// Reads XDR items front to back from a byte slice.
///
/// It keeps the bytes not read yet: each read is one length check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reader<'a> {
    rest: &'a [u8],
    /// The whole buffer's length (for [`Reader::position`]).
    len: usize,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `buf`.
    #[inline]
    pub fn new(buf: &'a [u8]) -> Self {
        Self {
            rest: buf,
            len: buf.len(),
        }
    }

    /// Offset of the next item, bytes from the start of the buffer.
    #[inline]
    pub fn position(&self) -> usize {
        self.len - self.rest.len()
    }

    /// Bytes left to read.
    #[inline]
    pub fn remaining(&self) -> usize {
        self.rest.len()
    }

    /// The bytes not read yet.
    #[inline]
    pub fn rest(&self) -> &'a [u8] {
        self.rest
    }

    /// Takes the next `n` bytes, or `None` (and nothing is consumed) if
    /// fewer are left.
    #[inline]
    pub fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let (b, rest) = self.rest.split_at_checked(n)?;
        self.rest = rest;
        Some(b)
    }

    /// Reads an unsigned 32-bit integer.
    #[inline]
    pub fn u32(&mut self) -> Option<u32> {
        let (b, rest) = self.rest.split_first_chunk::<4>()?;
        self.rest = rest;
        Some(u32::from_be_bytes(*b))
    }

    /// Reads an unsigned 64-bit integer (XDR unsigned hyper).
    #[inline]
    pub fn u64(&mut self) -> Option<u64> {
        let (b, rest) = self.rest.split_first_chunk::<8>()?;
        self.rest = rest;
        Some(u64::from_be_bytes(*b))
    }
}

/// The destination buffer has no room for the item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Full;

/// Writes XDR items front to back into a byte slice.
#[derive(Debug)]
pub struct Writer<'a> {
    out: &'a mut [u8],
    len: usize,
}

impl<'a> Writer<'a> {
    /// A writer at the start of `out`.
    pub fn new(out: &'a mut [u8]) -> Self {
        Self { out, len: 0 }
    }

    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing has been written yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Room left, bytes.
    pub fn remaining(&self) -> usize {
        self.out.len().saturating_sub(self.len)
    }

    #[inline]
    fn put(&mut self, b: &[u8]) -> Result<(), Full> {
        let end = self.len.checked_add(b.len()).ok_or(Full)?;
        self.out
            .get_mut(self.len..end)
            .ok_or(Full)?
            .copy_from_slice(b);
        self.len = end;
        Ok(())
    }

    /// Writes an unsigned 32-bit integer.
    #[inline]
    pub fn put_u32(&mut self, v: u32) -> Result<(), Full> {
        self.put(&v.to_be_bytes())
    }

    /// Writes an unsigned 64-bit integer (XDR unsigned hyper).
    #[inline]
    pub fn put_u64(&mut self, v: u64) -> Result<(), Full> {
        self.put(&v.to_be_bytes())
    }
}
