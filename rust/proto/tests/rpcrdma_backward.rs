// SPDX-License-Identifier: GPL-2.0

//! The backward direction (RFC 8167): backward Call headers byte for byte,
//! and which received messages are backward Replies.

mod rpcrdma_wire;

use rpcrdma_wire::{seg, Call, LIMITS};
use svcrdma_proto::rpcrdma::backward::{
    encode_call_header, granted_calls, is_reply, CALL_HEADER_LEN,
};
use svcrdma_proto::rpcrdma::{decode, EncodeError};

/// An RPC message body: XID, direction, then some words.
fn rpc(xid: u32, direction: u32) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend(xid.to_be_bytes());
    b.extend(direction.to_be_bytes());
    b.extend([0u8; 16]);
    b
}

/// Decodes `c` and asks whether it is a backward Reply.
fn reply(c: &Call) -> bool {
    let wire = c.wire();
    let h = decode(&wire, &LIMITS).expect("valid header");
    is_reply(&h, &wire[h.hdr_len..])
}

#[test]
fn call_header_bytes() {
    let mut out = [0xffu8; 64];
    let n = encode_call_header(&mut out, 0x0102_0304, 2).expect("room");
    assert_eq!(n, CALL_HEADER_LEN);
    #[rustfmt::skip]
    let want = [
        0x01, 0x02, 0x03, 0x04, // xid
        0x00, 0x00, 0x00, 0x01, // version
        0x00, 0x00, 0x00, 0x02, // credits
        0x00, 0x00, 0x00, 0x00, // RDMA_MSG
        0x00, 0x00, 0x00, 0x00, // no Read list
        0x00, 0x00, 0x00, 0x00, // no Write list
        0x00, 0x00, 0x00, 0x00, // no Reply chunk
    ];
    assert_eq!(&out[..n], &want[..]);
    // Nothing written past the header.
    assert!(out[n..].iter().all(|&b| b == 0xff));
}

#[test]
fn call_header_decodes_as_a_plain_message() {
    let mut out = [0u8; CALL_HEADER_LEN + 24];
    let n = encode_call_header(&mut out, 7, 2).expect("room");
    out[n..].copy_from_slice(&rpc(7, 0));
    let h = decode(&out, &LIMITS).expect("our own header decodes");
    assert_eq!((h.xid, h.credits, h.hdr_len), (7, 2, CALL_HEADER_LEN));
    assert!(h.reads.is_empty() && h.writes.is_empty() && h.reply.is_none());
}

#[test]
fn call_header_needs_room() {
    for len in 0..CALL_HEADER_LEN {
        let mut out = vec![0u8; len];
        assert_eq!(
            encode_call_header(&mut out, 1, 2),
            Err(EncodeError::NoRoom),
            "{len} bytes"
        );
    }
}

#[test]
fn a_reply_without_chunks_is_a_backward_reply() {
    let c = Call {
        body: rpc(0x55, 1),
        ..Call::msg()
    };
    assert!(reply(&c));
}

#[test]
fn a_call_is_not() {
    let c = Call {
        body: rpc(0x55, 0),
        ..Call::msg()
    };
    assert!(!reply(&c));
}

#[test]
fn other_directions_are_not() {
    for d in [2, 0x100, 0x0100_0000, u32::MAX] {
        let c = Call {
            body: rpc(0x55, d),
            ..Call::msg()
        };
        assert!(!reply(&c), "direction {d:#x}");
    }
}

#[test]
fn a_body_too_short_for_a_direction_is_not() {
    for len in 1..8 {
        let mut body = rpc(0x55, 1);
        body.truncate(len);
        let c = Call {
            body,
            ..Call::msg()
        };
        assert!(!reply(&c), "{len}-byte body");
    }
}

#[test]
fn a_reply_with_chunks_is_not() {
    let with_write = Call {
        body: rpc(0x55, 1),
        writes: vec![vec![seg(1, 4096, 0)]],
        ..Call::msg()
    };
    assert!(!reply(&with_write));
    let with_reply_chunk = Call {
        body: rpc(0x55, 1),
        reply: Some(vec![seg(2, 4096, 0)]),
        ..Call::msg()
    };
    assert!(!reply(&with_reply_chunk));
    let with_read = Call {
        body: rpc(0x55, 1),
        reads: vec![(8, seg(3, 64, 0))],
        ..Call::msg()
    };
    assert!(!reply(&with_read));
}

#[test]
fn nomsg_is_not() {
    let c = Call {
        body: rpc(0x55, 1),
        ..Call::nomsg()
    };
    let wire = c.wire();
    let h = decode(&wire, &LIMITS).expect("valid header");
    // Even with REPLY bytes after the header: an RDMA_NOMSG has no inline
    // message.
    assert!(!is_reply(&h, &wire[h.hdr_len..]));
}

#[test]
fn granted_calls_stay_within_one_and_max() {
    let mut c = Call {
        body: rpc(1, 1),
        ..Call::msg()
    };
    for (credits, max, want) in [
        (0, 2, 1),
        (1, 2, 1),
        (2, 2, 2),
        (3, 2, 2),
        (u32::MAX, 2, 2),
        (5, 0, 1),
    ] {
        c.credits = credits;
        let wire = c.wire();
        let h = decode(&wire, &LIMITS).expect("valid header");
        assert_eq!(granted_calls(&h, max), want, "credits {credits}, max {max}");
    }
}
