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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `buf`.
    #[inline]
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    /// Offset of the next item, bytes from the start of the buffer.
    #[inline]
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Bytes left to read.
    #[inline]
    pub fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    /// The bytes not read yet.
    #[inline]
    pub fn rest(&self) -> &'a [u8] {
        self.buf.get(self.pos..).unwrap_or(&[])
    }

    /// Takes the next `n` bytes, or `None` (and nothing is consumed) if
    /// fewer are left.
    #[inline]
    pub fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let b = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(b)
    }

    /// Takes the next `N` bytes as an array, consuming nothing on failure.
    #[inline]
    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        let end = self.pos.checked_add(N)?;
        let a: [u8; N] = self.buf.get(self.pos..end)?.try_into().ok()?;
        self.pos = end;
        Some(a)
    }

    /// Reads an unsigned 32-bit integer.
    #[inline]
    pub fn u32(&mut self) -> Option<u32> {
        self.array().map(u32::from_be_bytes)
    }

    /// Reads an unsigned 64-bit integer (XDR unsigned hyper).
    #[inline]
    pub fn u64(&mut self) -> Option<u64> {
        self.array().map(u64::from_be_bytes)
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
