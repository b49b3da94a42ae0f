// SPDX-License-Identifier: GPL-2.0

//! Test-side RPC-over-RDMA wire helpers: an encoder for call headers
//! (well-formed or not) and a parser for reply headers, written
//! independently of the code under test.

#![allow(dead_code)]

use svcrdma_proto::rpcrdma::Limits;

/// Generous limits for tests that are not about limits.
pub const LIMITS: Limits = Limits {
    max_read_segments: 16,
    max_write_chunks: 4,
    max_segments_per_chunk: 8,
    max_chunk_bytes: 1 << 20,
};

/// One segment as the test encoder writes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seg {
    pub handle: u32,
    pub length: u32,
    pub offset: u64,
}

pub fn seg(handle: u32, length: u32, offset: u64) -> Seg {
    Seg {
        handle,
        length,
        offset,
    }
}

/// A call header, field by field, with the RPC message bytes after it.
#[derive(Clone, Debug)]
pub struct Call {
    pub xid: u32,
    pub vers: u32,
    pub credits: u32,
    pub proc_: u32,
    /// (position, segment), in wire order.
    pub reads: Vec<(u32, Seg)>,
    pub writes: Vec<Vec<Seg>>,
    pub reply: Option<Vec<Seg>>,
    pub body: Vec<u8>,
}

impl Call {
    /// An `RDMA_MSG` call with no chunks and an 8-byte body.
    pub fn msg() -> Self {
        Call {
            xid: 0x1234_5678,
            vers: 1,
            credits: 32,
            proc_: 0,
            reads: vec![],
            writes: vec![],
            reply: None,
            body: vec![0xaa; 8],
        }
    }

    /// An `RDMA_NOMSG` call whose message is in one position-zero segment.
    pub fn nomsg() -> Self {
        Call {
            proc_: 1,
            reads: vec![(0, seg(0x100, 512, 0x1000))],
            body: vec![],
            ..Call::msg()
        }
    }

    /// The header alone.
    pub fn header(&self) -> Vec<u8> {
        let mut w = vec![self.xid, self.vers, self.credits, self.proc_];
        for (pos, s) in &self.reads {
            w.extend([1, *pos]);
            push_seg(&mut w, s);
        }
        w.push(0);
        for c in &self.writes {
            w.extend([1, c.len() as u32]);
            for s in c {
                push_seg(&mut w, s);
            }
        }
        w.push(0);
        match &self.reply {
            None => w.push(0),
            Some(c) => {
                w.extend([1, c.len() as u32]);
                for s in c {
                    push_seg(&mut w, s);
                }
            }
        }
        words(&w)
    }

    /// The header and the body.
    pub fn wire(&self) -> Vec<u8> {
        let mut b = self.header();
        b.extend(&self.body);
        b
    }
}

fn push_seg(w: &mut Vec<u32>, s: &Seg) {
    w.extend([s.handle, s.length, (s.offset >> 32) as u32, s.offset as u32]);
}

/// Big-endian bytes of a list of words.
pub fn words(ws: &[u32]) -> Vec<u8> {
    ws.iter().flat_map(|w| w.to_be_bytes()).collect()
}

/// A reply header as parsed by [`parse_reply`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    pub xid: u32,
    pub vers: u32,
    pub credits: u32,
    pub proc_: u32,
    pub reads: Vec<(u32, Seg)>,
    pub writes: Vec<Vec<Seg>>,
    pub reply: Option<Vec<Seg>>,
    pub len: usize,
}

struct Words<'a> {
    b: &'a [u8],
    at: usize,
}

impl Words<'_> {
    fn word(&mut self) -> Option<u32> {
        let w = self.b.get(self.at..self.at + 4)?;
        self.at += 4;
        Some(u32::from_be_bytes(w.try_into().ok()?))
    }

    fn seg(&mut self) -> Option<Seg> {
        let handle = self.word()?;
        let length = self.word()?;
        let hi = u64::from(self.word()?);
        let lo = u64::from(self.word()?);
        Some(seg(handle, length, hi << 32 | lo))
    }

    fn chunk(&mut self) -> Option<Vec<Seg>> {
        let n = self.word()?;
        (0..n).map(|_| self.seg()).collect()
    }
}

/// Parses an `RDMA_MSG`/`RDMA_NOMSG` header without any validation beyond
/// the XDR: zero lengths and empty bodies are fine here.
pub fn parse_reply(b: &[u8]) -> Option<Reply> {
    let mut w = Words { b, at: 0 };
    let (xid, vers, credits, proc_) = (w.word()?, w.word()?, w.word()?, w.word()?);
    let mut reads = vec![];
    loop {
        match w.word()? {
            0 => break,
            1 => {
                let pos = w.word()?;
                reads.push((pos, w.seg()?));
            }
            _ => return None,
        }
    }
    let mut writes = vec![];
    loop {
        match w.word()? {
            0 => break,
            1 => writes.push(w.chunk()?),
            _ => return None,
        }
    }
    let reply = match w.word()? {
        0 => None,
        1 => Some(w.chunk()?),
        _ => return None,
    };
    Some(Reply {
        xid,
        vers,
        credits,
        proc_,
        reads,
        writes,
        reply,
        len: w.at,
    })
}
