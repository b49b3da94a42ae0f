// SPDX-License-Identifier: GPL-2.0

//! RPC-over-RDMA v1 reply headers and error reports, byte for byte.

mod rpcrdma_wire;

use rpcrdma_wire::{parse_reply, seg, words, Call, LIMITS};
use svcrdma_proto::rpcrdma::encode::{ERR_CHUNK_LEN, ERR_VERS_LEN};
use svcrdma_proto::rpcrdma::{
    decode, encode_error_chunk, encode_error_for, encode_error_vers, encode_reply, reply_len,
    ChunkError, DecodeError, EncodeError, Proc,
};

/// A call with one Write chunk of two 4 KiB segments.
fn one_write_chunk() -> Call {
    let mut c = Call::msg();
    c.xid = 0x0a0b_0c0d;
    c.writes = vec![vec![
        seg(0x1122_3344, 0x1000, 0x0000_0001_0000_0000),
        seg(0x5566_7788, 0x1000, 0x2000),
    ]];
    c
}

fn encode(c: &Call, credits: u32, p: Proc, written: &[u32], reply: Option<u32>) -> Vec<u8> {
    let wire = c.wire();
    let h = decode(&wire, &LIMITS).expect("valid call");
    let mut out = [0u8; 512];
    let n = encode_reply(&mut out, credits, p, &h, written, reply).expect("encoded");
    assert_eq!(Some(n), reply_len(&h, reply.is_some()));
    out[..n].to_vec()
}

#[test]
fn reply_without_chunks() {
    let out = encode(&Call::msg(), 64, Proc::Msg, &[], None);
    #[rustfmt::skip]
    let want = [
        0x12, 0x34, 0x56, 0x78, // xid
        0x00, 0x00, 0x00, 0x01, // version
        0x00, 0x00, 0x00, 0x40, // credits
        0x00, 0x00, 0x00, 0x00, // RDMA_MSG
        0x00, 0x00, 0x00, 0x00, // no read list
        0x00, 0x00, 0x00, 0x00, // no write list
        0x00, 0x00, 0x00, 0x00, // no reply chunk
    ];
    assert_eq!(out, want);
}

#[test]
fn write_chunk_partially_used() {
    // 6 KiB written: the first segment full, the second half.
    let out = encode(&one_write_chunk(), 64, Proc::Msg, &[0x1800], None);
    #[rustfmt::skip]
    let want = [
        0x0a, 0x0b, 0x0c, 0x0d,
        0x00, 0x00, 0x00, 0x01,
        0x00, 0x00, 0x00, 0x40,
        0x00, 0x00, 0x00, 0x00, // RDMA_MSG
        0x00, 0x00, 0x00, 0x00, // read list: empty
        0x00, 0x00, 0x00, 0x01, // write chunk present
        0x00, 0x00, 0x00, 0x02, //   two segments
        0x11, 0x22, 0x33, 0x44, //   handle
        0x00, 0x00, 0x10, 0x00, //   length 4096 (all of it)
        0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, // offset
        0x55, 0x66, 0x77, 0x88, //   handle
        0x00, 0x00, 0x08, 0x00, //   length 2048
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x20, 0x00, // offset
        0x00, 0x00, 0x00, 0x00, // write list end
        0x00, 0x00, 0x00, 0x00, // no reply chunk
    ];
    assert_eq!(out, want);
}

#[test]
fn write_chunk_filled_exactly_and_in_the_first_segment_only() {
    // Segment lengths are at bytes 32 and 48.
    let full = encode(&one_write_chunk(), 1, Proc::Msg, &[0x2000], None);
    assert_eq!(&full[32..36], &[0, 0, 0x10, 0]);
    assert_eq!(&full[48..52], &[0, 0, 0x10, 0]);
    let first = encode(&one_write_chunk(), 1, Proc::Msg, &[100], None);
    assert_eq!(&first[32..36], &100u32.to_be_bytes());
    assert_eq!(&first[48..52], &[0, 0, 0, 0]);
}

#[test]
fn unused_write_chunk_goes_back_with_zero_lengths() {
    let want = words(&[
        0x0a0b_0c0d,
        1,
        8,
        0,
        0,
        1,
        2,
        0x1122_3344,
        0,
        1,
        0,
        0x5566_7788,
        0,
        0,
        0x2000,
        0,
        0,
    ]);
    assert_eq!(encode(&one_write_chunk(), 8, Proc::Msg, &[], None), want);
    assert_eq!(encode(&one_write_chunk(), 8, Proc::Msg, &[0], None), want);
}

#[test]
fn second_write_chunk_unused() {
    let mut c = Call::msg();
    c.writes = vec![vec![seg(0xa, 100, 0x10)], vec![seg(0xb, 200, 0x20)]];
    let out = encode(&c, 2, Proc::Msg, &[5], None);
    let want = words(&[
        0x1234_5678,
        1,
        2,
        0,
        0,
        1,
        1,
        0xa,
        5,
        0,
        0x10,
        1,
        1,
        0xb,
        0,
        0,
        0x20,
        0,
        0,
    ]);
    assert_eq!(out, want);
}

#[test]
fn long_reply_in_the_reply_chunk() {
    let mut c = Call::msg();
    c.xid = 1;
    c.reply = Some(vec![seg(0x99, 0x400, 0x10), seg(0x98, 0x400, 0x20)]);
    let out = encode(&c, 3, Proc::NoMsg, &[], Some(0x500));
    #[rustfmt::skip]
    let want = [
        0, 0, 0, 1,
        0, 0, 0, 1,
        0, 0, 0, 3,
        0, 0, 0, 1, // RDMA_NOMSG
        0, 0, 0, 0, // read list
        0, 0, 0, 0, // write list
        0, 0, 0, 1, // reply chunk present
        0, 0, 0, 2,
        0, 0, 0, 0x99, 0, 0, 0x04, 0, 0, 0, 0, 0, 0, 0, 0, 0x10,
        0, 0, 0, 0x98, 0, 0, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0x20,
    ];
    assert_eq!(out, want);
}

#[test]
fn reply_chunk_offered_but_reply_inline() {
    let mut c = Call::msg();
    c.reply = Some(vec![seg(0x99, 0x400, 0x10)]);
    // Absent in the reply ...
    let out = encode(&c, 3, Proc::Msg, &[], None);
    assert_eq!(out, words(&[0x1234_5678, 1, 3, 0, 0, 0, 0]));
    // ... or returned unused.
    let out = encode(&c, 3, Proc::Msg, &[], Some(0));
    assert_eq!(
        out,
        words(&[0x1234_5678, 1, 3, 0, 0, 0, 1, 1, 0x99, 0, 0, 0x10])
    );
}

#[test]
fn write_and_reply_chunks_together() {
    let mut c = one_write_chunk();
    c.reply = Some(vec![seg(0x33, 64, 0x40)]);
    let out = encode(&c, 9, Proc::NoMsg, &[0x1001], Some(64));
    let r = parse_reply(&out).expect("parses");
    assert_eq!(r.len, out.len());
    assert_eq!((r.xid, r.vers, r.credits, r.proc_), (0x0a0b_0c0d, 1, 9, 1));
    assert!(r.reads.is_empty());
    assert_eq!(
        r.writes,
        vec![vec![
            seg(0x1122_3344, 0x1000, 0x0000_0001_0000_0000),
            seg(0x5566_7788, 1, 0x2000)
        ]]
    );
    assert_eq!(r.reply, Some(vec![seg(0x33, 64, 0x40)]));
}

// ---- argument errors ------------------------------------------------------

fn try_encode(
    c: &Call,
    p: Proc,
    written: &[u32],
    reply: Option<u32>,
) -> Result<usize, EncodeError> {
    let wire = c.wire();
    let h = decode(&wire, &LIMITS).expect("valid call");
    encode_reply(&mut [0u8; 512], 1, p, &h, written, reply)
}

#[test]
fn rdma_error_is_not_a_reply() {
    assert_eq!(
        try_encode(&Call::msg(), Proc::Error, &[], None),
        Err(EncodeError::NotAReply)
    );
}

#[test]
fn nomsg_reply_needs_the_reply_chunk() {
    let mut c = Call::msg();
    assert_eq!(
        try_encode(&c, Proc::NoMsg, &[], None),
        Err(EncodeError::NoMsgWithoutReplyChunk)
    );
    assert_eq!(
        try_encode(&c, Proc::NoMsg, &[], Some(0)),
        Err(EncodeError::NoReplyChunk)
    );
    assert_eq!(
        try_encode(&c, Proc::Msg, &[], Some(0)),
        Err(EncodeError::NoReplyChunk)
    );
    c.reply = Some(vec![seg(1, 8, 0)]);
    assert!(try_encode(&c, Proc::NoMsg, &[], Some(8)).is_ok());
}

#[test]
fn more_counts_than_write_chunks() {
    let c = one_write_chunk();
    assert_eq!(
        try_encode(&c, Proc::Msg, &[1, 0], None),
        Err(EncodeError::TooManyWriteCounts)
    );
    assert_eq!(
        try_encode(&Call::msg(), Proc::Msg, &[0], None),
        Err(EncodeError::TooManyWriteCounts)
    );
}

#[test]
fn overruns() {
    let mut c = one_write_chunk();
    c.writes.push(vec![seg(1, 10, 0)]);
    c.reply = Some(vec![seg(2, 10, 0)]);
    assert_eq!(
        try_encode(&c, Proc::Msg, &[0x2001], None),
        Err(EncodeError::WriteChunkOverrun { index: 0 })
    );
    assert_eq!(
        try_encode(&c, Proc::Msg, &[0x2000, 11], None),
        Err(EncodeError::WriteChunkOverrun { index: 1 })
    );
    assert_eq!(
        try_encode(&c, Proc::Msg, &[0x2000, 10], Some(11)),
        Err(EncodeError::ReplyChunkOverrun)
    );
    assert!(try_encode(&c, Proc::Msg, &[0x2000, 10], Some(10)).is_ok());
    assert_eq!(
        try_encode(&c, Proc::Msg, &[u32::MAX], None),
        Err(EncodeError::WriteChunkOverrun { index: 0 })
    );
}

#[test]
fn output_buffer_too_small_at_every_length() {
    let mut c = one_write_chunk();
    c.reply = Some(vec![seg(2, 10, 0)]);
    let wire = c.wire();
    let h = decode(&wire, &LIMITS).unwrap();
    let need = reply_len(&h, true).unwrap();
    assert_eq!(need, 16 + 4 + (8 + 32 + 4) + (8 + 16));
    let mut out = vec![0u8; need];
    for len in 0..need {
        assert_eq!(
            encode_reply(&mut out[..len], 1, Proc::NoMsg, &h, &[3], Some(4)),
            Err(EncodeError::NoRoom),
            "len {len}"
        );
    }
    assert_eq!(
        encode_reply(&mut out, 1, Proc::NoMsg, &h, &[3], Some(4)),
        Ok(need)
    );
    // Argument errors take precedence over a small buffer.
    assert_eq!(
        encode_reply(&mut [], 1, Proc::Msg, &h, &[0x2001], None),
        Err(EncodeError::WriteChunkOverrun { index: 0 })
    );
}

#[test]
fn reply_len_without_the_reply_chunk() {
    let wire = one_write_chunk().wire();
    let h = decode(&wire, &LIMITS).unwrap();
    assert_eq!(reply_len(&h, false), Some(16 + 4 + (8 + 32 + 4) + 4));
    assert_eq!(reply_len(&h, true), None);
}

#[test]
fn encode_error_descriptions_differ() {
    let all = [
        EncodeError::NoRoom,
        EncodeError::NotAReply,
        EncodeError::NoMsgWithoutReplyChunk,
        EncodeError::NoReplyChunk,
        EncodeError::TooManyWriteCounts,
        EncodeError::WriteChunkOverrun { index: 3 },
        EncodeError::ReplyChunkOverrun,
    ];
    let mut s: Vec<&str> = all.iter().map(|e| e.as_str()).collect();
    s.sort_unstable();
    s.dedup();
    assert_eq!(s.len(), all.len());
}

// ---- error reports --------------------------------------------------------

#[test]
fn err_vers_byte_for_byte() {
    let mut out = [0xffu8; 64];
    let n = encode_error_vers(&mut out, 0xcafe_f00d, 32, 1, 1).unwrap();
    assert_eq!(n, ERR_VERS_LEN);
    #[rustfmt::skip]
    let want = [
        0xca, 0xfe, 0xf0, 0x0d, // xid
        0, 0, 0, 1,             // version
        0, 0, 0, 32,            // credits
        0, 0, 0, 4,             // RDMA_ERROR
        0, 0, 0, 1,             // ERR_VERS
        0, 0, 0, 1,             // low
        0, 0, 0, 1,             // high
    ];
    assert_eq!(&out[..n], &want);
    assert!(out[n..].iter().all(|b| *b == 0xff));
    let n = encode_error_vers(&mut out, 7, 0, 1, 3).unwrap();
    assert_eq!(&out[..n], &words(&[7, 1, 0, 4, 1, 1, 3])[..]);
}

#[test]
fn err_chunk_byte_for_byte() {
    let mut out = [0u8; 20];
    let n = encode_error_chunk(&mut out, 0x0102_0304, 5).unwrap();
    assert_eq!(n, ERR_CHUNK_LEN);
    #[rustfmt::skip]
    let want = [
        1, 2, 3, 4,
        0, 0, 0, 1,
        0, 0, 0, 5,
        0, 0, 0, 4, // RDMA_ERROR
        0, 0, 0, 2, // ERR_CHUNK
    ];
    assert_eq!(out, want);
}

#[test]
fn error_reports_need_room() {
    for len in 0..ERR_VERS_LEN {
        let mut out = vec![0u8; len];
        assert_eq!(
            encode_error_vers(&mut out, 1, 1, 1, 1),
            Err(EncodeError::NoRoom)
        );
    }
    for len in 0..ERR_CHUNK_LEN {
        let mut out = vec![0u8; len];
        assert_eq!(encode_error_chunk(&mut out, 1, 1), Err(EncodeError::NoRoom));
    }
}

#[test]
fn the_report_a_decode_error_calls_for() {
    let mut out = [0u8; 64];
    assert_eq!(
        encode_error_for(&mut out, &DecodeError::TooShort, 1),
        Ok(None)
    );
    assert_eq!(
        encode_error_for(&mut out, &DecodeError::PeerError { xid: 9 }, 1),
        Ok(None)
    );
    let n = encode_error_for(&mut out, &DecodeError::Version { xid: 9, vers: 2 }, 4)
        .unwrap()
        .unwrap();
    assert_eq!(&out[..n], &words(&[9, 1, 4, 4, 1, 1, 1])[..]);
    let e = DecodeError::Chunk {
        xid: 10,
        reason: ChunkError::Truncated,
    };
    let n = encode_error_for(&mut out, &e, 4).unwrap().unwrap();
    assert_eq!(&out[..n], &words(&[10, 1, 4, 4, 2])[..]);

    // End to end: a call of version 2 is answered with ERR_VERS to its XID.
    let mut c = Call::msg();
    c.vers = 2;
    let e = decode(&c.wire(), &LIMITS).unwrap_err();
    let n = encode_error_for(&mut out, &e, 4).unwrap().unwrap();
    assert_eq!(&out[..n], &words(&[0x1234_5678, 1, 4, 4, 1, 1, 1])[..]);
}
