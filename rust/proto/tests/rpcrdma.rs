// SPDX-License-Identifier: GPL-2.0

//! RPC-over-RDMA v1 call header decoding: every procedure, every error
//! path, chunk grouping, the Send With Invalidate handle.

mod rpcrdma_wire;

use rpcrdma_wire::{seg, words, Call, Seg, LIMITS};
use svcrdma_proto::rpcrdma::header::{
    ERR_CHUNK, ERR_VERS, FIXED_HEADER, MIN_HEADER, RDMA_DONE, RDMA_ERROR, RDMA_MSG, RDMA_MSGP,
    RDMA_NOMSG, VERSION,
};
use svcrdma_proto::rpcrdma::{
    decode, ChunkError, DecodeError, Header, Limits, Proc, ReadSegment, Segment,
};

const XID: u32 = 0x1234_5678;

fn chunk_err(c: &Call) -> ChunkError {
    match decode(&c.wire(), &LIMITS) {
        Err(DecodeError::Chunk { xid, reason }) => {
            assert_eq!(xid, c.xid);
            reason
        }
        other => panic!("expected a chunk error, got {other:?}"),
    }
}

fn ok(buf: &[u8]) -> Header<'_> {
    match decode(buf, &LIMITS) {
        Ok(h) => h,
        Err(e) => panic!("expected Ok, got {e:?}"),
    }
}

fn segs(c: &svcrdma_proto::rpcrdma::Chunk<'_>) -> Vec<Seg> {
    c.segments()
        .map(|s| seg(s.handle, s.length, s.offset))
        .collect()
}

// ---- constants ------------------------------------------------------------

#[test]
fn protocol_numbers() {
    assert_eq!(VERSION, 1);
    assert_eq!(
        (RDMA_MSG, RDMA_NOMSG, RDMA_MSGP, RDMA_DONE, RDMA_ERROR),
        (0, 1, 2, 3, 4)
    );
    assert_eq!((ERR_VERS, ERR_CHUNK), (1, 2));
    assert_eq!((FIXED_HEADER, MIN_HEADER), (16, 28));
    assert_eq!(
        (Proc::Msg.wire(), Proc::NoMsg.wire(), Proc::Error.wire()),
        (0, 1, 4)
    );
}

// ---- procedures -----------------------------------------------------------

#[test]
fn minimal_rdma_msg() {
    let buf = words(&[XID, 1, 17, 0, 0, 0, 0, 0xdead_beef]);
    let h = ok(&buf);
    assert_eq!(h.xid, XID);
    assert_eq!(h.credits, 17);
    assert_eq!(h.proc_, Proc::Msg);
    assert!(h.reads.is_empty());
    assert_eq!(h.reads.len(), 0);
    assert!(h.writes.is_empty());
    assert_eq!(h.writes.len(), 0);
    assert_eq!(h.reply, None);
    assert_eq!(h.hdr_len, MIN_HEADER);
    assert_eq!(&buf[h.hdr_len..], &[0xde, 0xad, 0xbe, 0xef]);
    assert_eq!(h.reads.iter().count(), 0);
    assert_eq!(h.reads.chunks().count(), 0);
    assert_eq!(h.reads.position_zero(), None);
    assert_eq!(h.writes.iter().count(), 0);
}

#[test]
fn rdma_msg_body_of_one_byte_is_accepted() {
    let mut c = Call::msg();
    c.body = vec![7];
    let buf = c.wire();
    let h = ok(&buf);
    assert_eq!(h.hdr_len, buf.len() - 1);
}

#[test]
fn rdma_nomsg_long_call() {
    let mut c = Call::nomsg();
    c.body = vec![1, 2, 3, 4, 5]; // ignored
    let buf = c.wire();
    let h = ok(&buf);
    assert_eq!(h.proc_, Proc::NoMsg);
    assert_eq!(h.hdr_len, MIN_HEADER + 24);
    let pz = h.reads.position_zero().expect("position zero chunk");
    assert_eq!(pz.position, 0);
    assert_eq!(pz.total, 512);
    assert_eq!(pz.segments.len(), 1);
}

#[test]
fn rdma_nomsg_needs_nothing_after_the_header() {
    let c = Call::nomsg();
    let buf = c.header();
    assert_eq!(ok(&buf).hdr_len, buf.len());
}

#[test]
fn received_rdma_error_closes_the_connection() {
    // ERR_CHUNK, ERR_VERS with range, and a bare fixed header.
    for tail in [vec![ERR_CHUNK], vec![ERR_VERS, 1, 1], vec![]] {
        let mut w = vec![XID, 1, 5, RDMA_ERROR];
        w.extend(tail);
        let e = decode(&words(&w), &LIMITS).unwrap_err();
        assert_eq!(e, DecodeError::PeerError { xid: XID });
        assert_eq!(e.xid(), Some(XID));
    }
}

#[test]
fn obsolete_procedures_get_err_chunk() {
    for p in [RDMA_MSGP, RDMA_DONE] {
        let mut c = Call::msg();
        c.proc_ = p;
        assert_eq!(chunk_err(&c), ChunkError::ObsoleteProc, "proc {p}");
        // Even a bare fixed header: the procedure decides first.
        let e = decode(&words(&[XID, 1, 1, p]), &LIMITS).unwrap_err();
        assert_eq!(
            e,
            DecodeError::Chunk {
                xid: XID,
                reason: ChunkError::ObsoleteProc
            }
        );
    }
}

#[test]
fn unknown_procedures_get_err_chunk() {
    for p in [5, 6, 0x100, u32::MAX] {
        let mut c = Call::msg();
        c.proc_ = p;
        assert_eq!(chunk_err(&c), ChunkError::UnknownProc, "proc {p}");
    }
}

// ---- fixed header ---------------------------------------------------------

#[test]
fn shorter_than_an_xid_and_a_version_is_dropped() {
    let buf = Call::msg().wire();
    for len in 0..8 {
        let e = decode(&buf[..len], &LIMITS).unwrap_err();
        assert_eq!(e, DecodeError::TooShort, "len {len}");
        assert_eq!(e.xid(), None);
    }
}

#[test]
fn a_fixed_header_cut_short_is_answered() {
    let c = Call::msg();
    let buf = c.wire();
    for len in 8..FIXED_HEADER {
        let e = decode(&buf[..len], &LIMITS).unwrap_err();
        assert_eq!(
            e,
            DecodeError::Chunk {
                xid: c.xid,
                reason: ChunkError::Truncated
            },
            "len {len}"
        );
    }
    // An unsupported version is reported whatever is missing after it.
    let mut v2 = buf.clone();
    v2[4..8].copy_from_slice(&2u32.to_be_bytes());
    for len in 8..FIXED_HEADER {
        let e = decode(&v2[..len], &LIMITS).unwrap_err();
        assert_eq!(
            e,
            DecodeError::Version {
                xid: c.xid,
                vers: 2
            },
            "len {len}"
        );
    }
}

#[test]
fn fixed_header_only_is_truncated() {
    let buf = Call::msg().wire();
    assert_eq!(
        decode(&buf[..FIXED_HEADER], &LIMITS),
        Err(DecodeError::Chunk {
            xid: XID,
            reason: ChunkError::Truncated
        })
    );
}

#[test]
fn wrong_version_gets_err_vers_whatever_follows() {
    for vers in [0, 2, 7, u32::MAX] {
        let mut c = Call::msg();
        c.vers = vers;
        let want = DecodeError::Version { xid: XID, vers };
        assert_eq!(decode(&c.wire(), &LIMITS), Err(want));
        // Only the fixed header, and garbage procedure and lists.
        let bare = words(&[XID, vers, 1, 99, 7, 7]);
        assert_eq!(decode(&bare[..16], &LIMITS), Err(want));
        assert_eq!(decode(&bare, &LIMITS), Err(want));
        // An RDMA_ERROR of another version is a version mismatch too.
        let err = words(&[XID, vers, 1, RDMA_ERROR, ERR_CHUNK]);
        assert_eq!(decode(&err, &LIMITS), Err(want));
    }
}

// ---- discriminators -------------------------------------------------------

#[test]
fn discriminators_other_than_zero_or_one_are_rejected() {
    // Word offsets of the discriminators in a header with one read
    // segment, one write chunk of one segment, and a reply chunk of one.
    let mut c = Call::msg();
    c.reads = vec![(8, seg(1, 4, 0))];
    c.writes = vec![vec![seg(2, 4, 0)]];
    c.reply = Some(vec![seg(3, 4, 0)]);
    let base = c.wire();
    assert!(decode(&base, &LIMITS).is_ok());
    // read entry, read end, write entry, write end, reply.
    let disc_words = [4usize, 10, 11, 17, 18];
    for &at in &disc_words {
        for bad in [2u32, 3, 0x100, 0x8000_0000, u32::MAX] {
            let mut b = base.clone();
            b[at * 4..at * 4 + 4].copy_from_slice(&bad.to_be_bytes());
            assert_eq!(
                decode(&b, &LIMITS),
                Err(DecodeError::Chunk {
                    xid: XID,
                    reason: ChunkError::BadDiscriminator
                }),
                "word {at} = {bad:#x}"
            );
        }
    }
}

// ---- truncation -----------------------------------------------------------

fn full_call() -> Call {
    let mut c = Call::msg();
    c.reads = vec![(8, seg(1, 100, 0x10)), (8, seg(2, 28, 0x20))];
    c.writes = vec![
        vec![seg(3, 4096, 0x30), seg(4, 4096, 0x40)],
        vec![seg(5, 1, 0)],
    ];
    c.reply = Some(vec![seg(6, 1024, 0x60)]);
    c
}

#[test]
fn truncated_anywhere_in_the_lists() {
    let c = full_call();
    let hdr = c.header();
    let full = ok(&c.wire()).hdr_len;
    assert_eq!(full, hdr.len());
    for len in FIXED_HEADER..hdr.len() {
        assert_eq!(
            decode(&hdr[..len], &LIMITS),
            Err(DecodeError::Chunk {
                xid: XID,
                reason: ChunkError::Truncated
            }),
            "len {len}"
        );
    }
    // NOMSG likewise (its lists must end inside the buffer too).
    let mut n = c.clone();
    n.proc_ = RDMA_NOMSG;
    n.reads[0].0 = 0;
    n.reads[1].0 = 0;
    let hdr = n.header();
    assert_eq!(ok(&hdr).hdr_len, hdr.len());
    for len in FIXED_HEADER..hdr.len() {
        assert_eq!(
            decode(&hdr[..len], &LIMITS).unwrap_err(),
            DecodeError::Chunk {
                xid: XID,
                reason: ChunkError::Truncated
            },
            "len {len}"
        );
    }
}

#[test]
fn write_chunk_count_beyond_the_buffer_is_truncated() {
    // Count 3 within the limit, but only one segment follows.
    let buf = words(&[XID, 1, 1, 0, 0, 1, 3, 9, 4, 0, 0, 0, 0, 0xaa]);
    assert_eq!(
        decode(&buf, &LIMITS),
        Err(DecodeError::Chunk {
            xid: XID,
            reason: ChunkError::Truncated
        })
    );
}

// ---- read list rules ------------------------------------------------------

#[test]
fn positions_must_be_multiples_of_four() {
    for pos in [1, 2, 3, 5, 6, 7, 10, u32::MAX] {
        let mut c = Call::msg();
        c.reads = vec![(pos, seg(1, 8, 0))];
        assert_eq!(chunk_err(&c), ChunkError::MisalignedPosition, "{pos}");
    }
    // Also in a later segment.
    let mut c = Call::msg();
    c.reads = vec![(8, seg(1, 8, 0)), (14, seg(1, 8, 0))];
    assert_eq!(chunk_err(&c), ChunkError::MisalignedPosition);
    // The highest aligned position is fine.
    c.reads = vec![(0xffff_fffc, seg(1, 8, 0))];
    assert!(decode(&c.wire(), &LIMITS).is_ok());
}

#[test]
fn decreasing_positions_are_rejected() {
    let mut c = Call::msg();
    c.reads = vec![(16, seg(1, 8, 0)), (8, seg(2, 8, 0))];
    assert_eq!(chunk_err(&c), ChunkError::PositionOrder);
    c.reads = vec![(8, seg(1, 8, 0)), (16, seg(2, 8, 0)), (12, seg(3, 8, 0))];
    assert_eq!(chunk_err(&c), ChunkError::PositionOrder);
}

#[test]
fn two_position_zero_chunks_are_rejected() {
    // A second run at position zero can only come after a higher position.
    let mut c = Call::nomsg();
    c.reads = vec![(0, seg(1, 8, 0)), (8, seg(2, 8, 0)), (0, seg(3, 8, 0))];
    assert_eq!(chunk_err(&c), ChunkError::PositionOrder);
}

#[test]
fn nomsg_without_position_zero_chunk() {
    let mut c = Call::nomsg();
    c.reads = vec![];
    assert_eq!(chunk_err(&c), ChunkError::NoMsgWithoutPositionZero);
    // Only non-zero positions.
    c.reads = vec![(4, seg(1, 8, 0))];
    assert_eq!(chunk_err(&c), ChunkError::NoMsgWithoutPositionZero);
    // Write and Reply chunks do not hold a call.
    c.reads = vec![];
    c.writes = vec![vec![seg(2, 8, 0)]];
    c.reply = Some(vec![seg(3, 8, 0)]);
    assert_eq!(chunk_err(&c), ChunkError::NoMsgWithoutPositionZero);
}

#[test]
fn msg_with_position_zero_chunk() {
    let mut c = Call::msg();
    c.reads = vec![(0, seg(1, 8, 0))];
    assert_eq!(chunk_err(&c), ChunkError::MsgWithPositionZero);
    c.reads = vec![(0, seg(1, 8, 0)), (4, seg(1, 8, 0))];
    assert_eq!(chunk_err(&c), ChunkError::MsgWithPositionZero);
}

#[test]
fn msg_with_empty_body() {
    let mut c = Call::msg();
    c.body = vec![];
    assert_eq!(chunk_err(&c), ChunkError::EmptyBody);
    // With chunks too.
    let mut c = full_call();
    c.body = vec![];
    assert_eq!(chunk_err(&c), ChunkError::EmptyBody);
}

#[test]
fn zero_length_segments_are_rejected() {
    let mut c = Call::msg();
    c.reads = vec![(8, seg(1, 0, 0))];
    assert_eq!(chunk_err(&c), ChunkError::ZeroLengthSegment);
    let mut c = Call::msg();
    c.writes = vec![vec![seg(1, 8, 0), seg(1, 0, 0)]];
    assert_eq!(chunk_err(&c), ChunkError::ZeroLengthSegment);
    let mut c = Call::msg();
    c.reply = Some(vec![seg(1, 0, 0)]);
    assert_eq!(chunk_err(&c), ChunkError::ZeroLengthSegment);
}

#[test]
fn segments_whose_end_overflows_64_bits_are_rejected() {
    let top = u64::MAX - 7;
    let mut c = Call::msg();
    c.reads = vec![(8, seg(1, 9, top))];
    assert_eq!(chunk_err(&c), ChunkError::OffsetOverflow);
    let mut c = Call::msg();
    c.writes = vec![vec![seg(1, 8, 0), seg(2, 4096, u64::MAX)]];
    assert_eq!(chunk_err(&c), ChunkError::OffsetOverflow);
    let mut c = Call::msg();
    c.reply = Some(vec![seg(1, 9, top)]);
    assert_eq!(chunk_err(&c), ChunkError::OffsetOverflow);
    // Ending at the last byte of the address space is fine.
    let mut c = Call::msg();
    c.reply = Some(vec![seg(1, 7, top)]);
    assert!(decode(&c.wire(), &LIMITS).is_ok());
}

#[test]
fn chunks_without_segments_are_rejected() {
    let mut c = Call::msg();
    c.writes = vec![vec![]];
    assert_eq!(chunk_err(&c), ChunkError::EmptyChunk);
    let mut c = Call::msg();
    c.reply = Some(vec![]);
    assert_eq!(chunk_err(&c), ChunkError::EmptyChunk);
}

// ---- limits ---------------------------------------------------------------

#[test]
fn read_segment_limit() {
    let lim = Limits {
        max_read_segments: 3,
        ..LIMITS
    };
    let mut c = Call::msg();
    c.reads = (1..=3).map(|i| (i * 8, seg(i, 8, 0))).collect();
    assert_eq!(decode(&c.wire(), &lim).map(|h| h.reads.len()), Ok(3));
    c.reads.push((32, seg(4, 8, 0)));
    assert_eq!(
        decode(&c.wire(), &lim),
        Err(DecodeError::Chunk {
            xid: XID,
            reason: ChunkError::TooManyReadSegments
        })
    );
    let zero = Limits {
        max_read_segments: 0,
        ..LIMITS
    };
    assert!(decode(&Call::msg().wire(), &zero).is_ok());
    assert!(decode(&Call::nomsg().wire(), &zero).is_err());
}

#[test]
fn write_chunk_limit() {
    let lim = Limits {
        max_write_chunks: 2,
        ..LIMITS
    };
    let mut c = Call::msg();
    c.writes = vec![vec![seg(1, 8, 0)]; 2];
    assert_eq!(decode(&c.wire(), &lim).map(|h| h.writes.len()), Ok(2));
    c.writes.push(vec![seg(1, 8, 0)]);
    assert_eq!(
        decode(&c.wire(), &lim),
        Err(DecodeError::Chunk {
            xid: XID,
            reason: ChunkError::TooManyWriteChunks
        })
    );
}

#[test]
fn segments_per_chunk_limit() {
    let lim = Limits {
        max_segments_per_chunk: 2,
        ..LIMITS
    };
    let err = Err(DecodeError::Chunk {
        xid: XID,
        reason: ChunkError::TooManySegments,
    });
    // Write chunk.
    let mut c = Call::msg();
    c.writes = vec![vec![seg(1, 8, 0); 2]];
    assert!(decode(&c.wire(), &lim).is_ok());
    c.writes = vec![vec![seg(1, 8, 0); 3]];
    assert_eq!(decode(&c.wire(), &lim), err);
    // Reply chunk.
    let mut c = Call::msg();
    c.reply = Some(vec![seg(1, 8, 0); 2]);
    assert!(decode(&c.wire(), &lim).is_ok());
    c.reply = Some(vec![seg(1, 8, 0); 3]);
    assert_eq!(decode(&c.wire(), &lim), err);
    // Read chunk: three segments at one position; three positions are fine.
    let mut c = Call::msg();
    c.reads = vec![(8, seg(1, 8, 0)), (12, seg(1, 8, 0)), (16, seg(1, 8, 0))];
    assert!(decode(&c.wire(), &lim).is_ok());
    c.reads = vec![(8, seg(1, 8, 0)), (8, seg(1, 8, 0)), (8, seg(1, 8, 0))];
    assert_eq!(decode(&c.wire(), &lim), err);
}

#[test]
fn huge_segment_count_is_refused_before_reading() {
    // A count of 2^32 - 1 with nothing behind it: the limit answers, not a
    // 64 GiB walk or a truncation.
    let buf = words(&[XID, 1, 1, 0, 0, 1, u32::MAX]);
    assert_eq!(
        decode(&buf, &LIMITS),
        Err(DecodeError::Chunk {
            xid: XID,
            reason: ChunkError::TooManySegments
        })
    );
    let buf = words(&[XID, 1, 1, 0, 0, 0, 1, u32::MAX]);
    assert_eq!(
        decode(&buf, &LIMITS).unwrap_err().as_str(),
        ChunkError::TooManySegments.as_str()
    );
}

#[test]
fn chunk_byte_limit() {
    let lim = Limits {
        max_chunk_bytes: 1000,
        ..LIMITS
    };
    let err = Err(DecodeError::Chunk {
        xid: XID,
        reason: ChunkError::ChunkTooLong,
    });
    let mut c = Call::msg();
    c.writes = vec![vec![seg(1, 600, 0), seg(2, 400, 0)]];
    assert_eq!(
        decode(&c.wire(), &lim).map(|h| h.writes.iter().next().map(|w| w.total())),
        Ok(Some(1000))
    );
    c.writes = vec![vec![seg(1, 600, 0), seg(2, 401, 0)]];
    assert_eq!(decode(&c.wire(), &lim), err);
    // Per chunk, not per list: two chunks of 1000 are fine.
    c.writes = vec![vec![seg(1, 1000, 0)], vec![seg(1, 1000, 0)]];
    assert!(decode(&c.wire(), &lim).is_ok());
    // Reply chunk.
    let mut c = Call::msg();
    c.reply = Some(vec![seg(1, 1001, 0)]);
    assert_eq!(decode(&c.wire(), &lim), err);
    // Read chunk: the segments at one position add up.
    let mut c = Call::msg();
    c.reads = vec![(8, seg(1, 500, 0)), (8, seg(1, 501, 0))];
    assert_eq!(decode(&c.wire(), &lim), err);
    c.reads = vec![(8, seg(1, 500, 0)), (12, seg(1, 501, 0))];
    assert!(decode(&c.wire(), &lim).is_ok());
    // A single segment over the limit.
    c.reads = vec![(8, seg(1, 1001, 0))];
    assert_eq!(decode(&c.wire(), &lim), err);
}

#[test]
fn chunk_length_u32_overflow() {
    let lim = Limits {
        max_chunk_bytes: u32::MAX,
        ..LIMITS
    };
    let err = Err(DecodeError::Chunk {
        xid: XID,
        reason: ChunkError::ChunkTooLong,
    });
    let mut c = Call::msg();
    c.writes = vec![vec![seg(1, u32::MAX, 0)]];
    assert!(decode(&c.wire(), &lim).is_ok());
    c.writes = vec![vec![seg(1, u32::MAX, 0), seg(1, 1, 0)]];
    assert_eq!(decode(&c.wire(), &lim), err);
    c.writes = vec![vec![seg(1, 0x8000_0000, 0), seg(1, 0x8000_0000, 0)]];
    assert_eq!(decode(&c.wire(), &lim), err);
    let mut c = Call::msg();
    c.reads = vec![(8, seg(1, 0x8000_0000, 0)), (8, seg(1, 0x8000_0000, 0))];
    assert_eq!(decode(&c.wire(), &lim), err);
    let mut c = Call::msg();
    c.reply = Some(vec![seg(1, 0xffff_fff0, 0), seg(1, 0x20, 0)]);
    assert_eq!(decode(&c.wire(), &lim), err);
}

// ---- views ----------------------------------------------------------------

#[test]
fn read_chunks_are_grouped_by_position() {
    let mut c = Call::nomsg();
    c.reads = vec![
        (0, seg(1, 100, 0x1000)),
        (0, seg(2, 200, 0x2000)),
        (8, seg(3, 300, 0x3000)),
        (24, seg(4, 1, 0x4000)),
        (24, seg(5, 2, 0x5000)),
        (24, seg(6, 3, 0x6000)),
    ];
    let buf = c.wire();
    let h = ok(&buf);
    assert_eq!(h.reads.len(), 6);
    let all: Vec<ReadSegment> = h.reads.iter().collect();
    let want: Vec<ReadSegment> = c
        .reads
        .iter()
        .map(|(p, s)| ReadSegment {
            position: *p,
            handle: s.handle,
            length: s.length,
            offset: s.offset,
        })
        .collect();
    assert_eq!(all, want);
    let chunks: Vec<_> = h.reads.chunks().collect();
    assert_eq!(chunks.len(), 3);
    assert_eq!(
        chunks
            .iter()
            .map(|c| (c.position, c.segments.len(), c.total))
            .collect::<Vec<_>>(),
        vec![(0, 2, 300), (8, 1, 300), (24, 3, 6)]
    );
    let third: Vec<Segment> = chunks[2].segments.iter().map(|s| s.segment()).collect();
    assert_eq!(
        third,
        vec![
            Segment {
                handle: 4,
                length: 1,
                offset: 0x4000
            },
            Segment {
                handle: 5,
                length: 2,
                offset: 0x5000
            },
            Segment {
                handle: 6,
                length: 3,
                offset: 0x6000
            },
        ]
    );
    assert!(chunks[2].segments.iter().all(|s| s.position == 24));
    let pz = h.reads.position_zero().expect("pz");
    assert_eq!(pz, chunks[0]);
    assert_eq!(
        pz.segments.iter().map(|s| s.handle).collect::<Vec<_>>(),
        [1, 2]
    );
}

#[test]
fn read_chunks_in_rdma_msg() {
    let mut c = Call::msg();
    c.reads = vec![(12, seg(7, 4, 0)), (12, seg(8, 4, 4))];
    let buf = c.wire();
    let h = ok(&buf);
    assert_eq!(h.reads.position_zero(), None);
    let chunks: Vec<_> = h.reads.chunks().collect();
    assert_eq!(chunks.len(), 1);
    assert_eq!((chunks[0].position, chunks[0].total), (12, 8));
}

#[test]
fn write_list_and_reply_chunk_views() {
    let c = full_call();
    let buf = c.wire();
    let h = ok(&buf);
    // Fixed, read list (24-byte entries), write list, reply chunk.
    assert_eq!(
        h.hdr_len,
        16 + (2 * 24 + 4) + (8 + 32 + 8 + 16 + 4) + (8 + 16)
    );
    assert_eq!(&buf[h.hdr_len..], &c.body[..]);
    assert_eq!(h.writes.len(), 2);
    let w: Vec<_> = h.writes.iter().collect();
    assert_eq!(w.len(), 2);
    assert_eq!((w[0].count(), w[0].total()), (2, 8192));
    assert_eq!(segs(&w[0]), c.writes[0]);
    assert_eq!((w[1].count(), w[1].total()), (1, 1));
    assert_eq!(segs(&w[1]), c.writes[1]);
    let r = h.reply.expect("reply chunk");
    assert_eq!((r.count(), r.total()), (1, 1024));
    assert_eq!(segs(&r), c.reply.clone().unwrap());
}

#[test]
fn offsets_are_64_bit() {
    let mut c = Call::msg();
    c.writes = vec![vec![seg(9, 8, 0x0123_4567_89ab_cdef)]];
    c.reads = vec![(4, seg(9, 8, 0xfedc_ba98_7654_3210))];
    let buf = c.wire();
    let h = ok(&buf);
    assert_eq!(h.reads.iter().next().unwrap().offset, 0xfedc_ba98_7654_3210);
    let w = h.writes.iter().next().unwrap();
    assert_eq!(w.segments().next().unwrap().offset, 0x0123_4567_89ab_cdef);
}

// ---- Send With Invalidate -------------------------------------------------

#[test]
fn single_handle_needs_a_segment() {
    assert_eq!(ok(&Call::msg().wire()).single_handle(), None);
}

#[test]
fn single_handle_across_all_lists() {
    let mut c = Call::nomsg();
    c.reads = vec![(0, seg(0x77, 8, 0)), (8, seg(0x77, 8, 8))];
    c.writes = vec![
        vec![seg(0x77, 8, 16), seg(0x77, 8, 24)],
        vec![seg(0x77, 4, 0)],
    ];
    c.reply = Some(vec![seg(0x77, 64, 32)]);
    assert_eq!(ok(&c.wire()).single_handle(), Some(0x77));

    // One differing handle anywhere spoils it.
    let mut r = c.clone();
    r.reads[1].1.handle = 0x78;
    assert_eq!(ok(&r.wire()).single_handle(), None);
    let mut w = c.clone();
    w.writes[1][0].handle = 0x78;
    assert_eq!(ok(&w.wire()).single_handle(), None);
    let mut p = c.clone();
    p.reply = Some(vec![seg(0x78, 64, 0)]);
    assert_eq!(ok(&p.wire()).single_handle(), None);
}

#[test]
fn single_handle_from_one_list() {
    let mut c = Call::msg();
    c.reply = Some(vec![seg(5, 64, 0), seg(5, 64, 64)]);
    assert_eq!(ok(&c.wire()).single_handle(), Some(5));
    let mut c = Call::msg();
    c.writes = vec![vec![seg(6, 64, 0)]];
    assert_eq!(ok(&c.wire()).single_handle(), Some(6));
    assert_eq!(ok(&Call::nomsg().wire()).single_handle(), Some(0x100));
    // Handle 0 is a handle like any other.
    let mut c = Call::msg();
    c.writes = vec![vec![seg(0, 64, 0)]];
    assert_eq!(ok(&c.wire()).single_handle(), Some(0));
}

// ---- error descriptions ---------------------------------------------------

#[test]
fn reasons_have_distinct_descriptions() {
    let all = [
        ChunkError::Truncated,
        ChunkError::BadDiscriminator,
        ChunkError::ObsoleteProc,
        ChunkError::UnknownProc,
        ChunkError::MisalignedPosition,
        ChunkError::PositionOrder,
        ChunkError::NoMsgWithoutPositionZero,
        ChunkError::MsgWithPositionZero,
        ChunkError::EmptyBody,
        ChunkError::ZeroLengthSegment,
        ChunkError::EmptyChunk,
        ChunkError::TooManyReadSegments,
        ChunkError::TooManyWriteChunks,
        ChunkError::TooManySegments,
        ChunkError::ChunkTooLong,
        ChunkError::OverResources,
    ];
    let mut s: Vec<&str> = all.iter().map(|e| e.as_str()).collect();
    assert!(s.iter().all(|d| !d.is_empty()));
    s.sort_unstable();
    s.dedup();
    assert_eq!(s.len(), all.len());
    assert_ne!(DecodeError::TooShort.as_str(), "");
    assert_ne!(
        DecodeError::Version { xid: 1, vers: 2 }.as_str(),
        DecodeError::PeerError { xid: 1 }.as_str()
    );
}

#[test]
fn a_kept_header_comes_back_from_its_shape_alone() {
    let c = full_call();
    let wire = c.wire();
    let h = ok(&wire);
    let kept = wire[..h.hdr_len].to_vec();
    // Without its RPC message an RDMA_MSG header is not a valid call...
    assert_eq!(
        decode(&kept, &LIMITS),
        Err(DecodeError::Chunk {
            xid: XID,
            reason: ChunkError::EmptyBody
        })
    );
    // ...but its shape gives the same header over the kept bytes alone.
    let k = h.shape().header(&kept).unwrap();
    assert_eq!(k, h);
    assert_eq!(k.xid, h.xid);
    assert_eq!(k.hdr_len, h.hdr_len);
    assert_eq!(
        k.reads.iter().collect::<Vec<_>>(),
        h.reads.iter().collect::<Vec<_>>()
    );
    assert_eq!(k.writes.len(), 2);
    assert_eq!(segs(&k.reply.unwrap()), segs(&h.reply.unwrap()));
    // Bytes shorter than the header give none.
    assert_eq!(h.shape().header(&kept[..kept.len() - 4]), None);
}
