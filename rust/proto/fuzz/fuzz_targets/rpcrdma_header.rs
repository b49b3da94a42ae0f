// SPDX-License-Identifier: GPL-2.0

//! Fuzz the RPC-over-RDMA call header decoder: any bytes decode without
//! panicking; a header that decodes is consistent with its limits, its
//! shape gives it back over a copy of its bytes, and a reply to it encodes.

#![no_main]

use libfuzzer_sys::fuzz_target;
use svcrdma_proto::rpcrdma::{
    decode, encode_error_for, encode_reply, reply_len, DecodeError, Limits, Proc,
};

const LIMITS: Limits = Limits {
    max_read_segments: 16,
    max_write_chunks: 4,
    max_segments_per_chunk: 8,
    max_chunk_bytes: 1 << 20,
};

fuzz_target!(|data: &[u8]| {
    let h = match decode(data, &LIMITS) {
        Ok(h) => h,
        Err(e) => {
            let mut out = [0u8; 64];
            let r = encode_error_for(&mut out, &e, 1);
            assert!(r.is_ok(), "64 bytes are enough");
            let Ok(n) = r else { return };
            let answered = matches!(e, DecodeError::Version { .. } | DecodeError::Chunk { .. });
            assert_eq!(n.is_some(), answered);
            return;
        }
    };
    assert!(h.hdr_len <= data.len());
    // Its shape gives it back over a copy of its bytes, without decoding.
    assert_eq!(h.shape().header(&data[..h.hdr_len].to_vec()), Some(h));
    match h.proc_ {
        Proc::Msg => assert!(h.hdr_len < data.len() && h.reads.position_zero().is_none()),
        Proc::NoMsg => assert!(h.reads.position_zero().is_some()),
        Proc::Error => unreachable!("decode never returns RDMA_ERROR"),
    }

    assert_eq!(h.reads.iter().count(), h.reads.len());
    assert!(h.reads.len() <= LIMITS.max_read_segments as usize);
    let mut segments = 0;
    for c in h.reads.chunks() {
        assert_eq!(c.position % 4, 0);
        assert_eq!(c.segments.iter().count(), c.segments.len());
        assert!(c.segments.len() <= LIMITS.max_segments_per_chunk as usize);
        let sum: u64 = c.segments.iter().map(|s| u64::from(s.length)).sum();
        assert_eq!(sum, u64::from(c.total));
        assert!(c.total <= LIMITS.max_chunk_bytes);
        segments += c.segments.len();
    }
    assert_eq!(segments, h.reads.len());

    assert_eq!(h.writes.iter().count(), h.writes.len());
    assert!(h.writes.len() <= LIMITS.max_write_chunks as usize);
    for c in h.writes.iter().chain(h.reply) {
        assert_eq!(c.segments().count(), c.count());
        assert!(c.count() <= LIMITS.max_segments_per_chunk as usize);
        let sum: u64 = c.segments().map(|s| u64::from(s.length)).sum();
        assert_eq!(sum, u64::from(c.total()));
        assert!(c.total() <= LIMITS.max_chunk_bytes);
    }
    let _ = h.single_handle();

    // Replies that use every chunk fully, and none of them.
    let full: Vec<u32> = h.writes.iter().map(|c| c.total()).collect();
    let mut out = [0u8; 4096];
    for (written, reply) in [
        (&full[..], h.reply.map(|c| c.total())),
        (&[][..], h.reply.map(|_| 0)),
        (&[][..], None),
    ] {
        let p = if reply.is_some() {
            Proc::NoMsg
        } else {
            Proc::Msg
        };
        let r = encode_reply(&mut out, 1, p, &h, written, reply);
        assert!(r.is_ok(), "fits 4096 bytes");
        let Ok(n) = r else { return };
        assert_eq!(Some(n), reply_len(&h, reply.is_some()));
    }
});
