// SPDX-License-Identifier: GPL-2.0

//! RPC-over-RDMA v1 headers, properties: well-formed calls round-trip,
//! anything decodes without panicking to something consistent, truncation
//! is always noticed, replies re-parse to what was asked for.

mod rpcrdma_wire;

use proptest::prelude::*;
use rpcrdma_wire::{parse_reply, seg, Call, Seg, LIMITS};
use svcrdma_proto::rpcrdma::{
    decode, encode_reply, reply_len, DecodeError, EncodeError, Header, Limits, Proc,
};

fn any_seg(max_len: u32) -> impl Strategy<Value = Seg> {
    (any::<u32>(), 1..=max_len, 0..=(u64::MAX - (1u64 << 32))).prop_map(|(h, l, o)| seg(h, l, o))
}

/// Handles from a small set, so that single-handle calls happen often.
fn any_seg_few_handles(max_len: u32) -> impl Strategy<Value = Seg> {
    (0u32..3, 1..=max_len, 0..=(u64::MAX - (1u64 << 32))).prop_map(|(h, l, o)| seg(h, l, o))
}

fn segs(max: usize) -> impl Strategy<Value = Vec<Seg>> {
    prop_oneof![
        proptest::collection::vec(any_seg(20_000), 1..=max),
        proptest::collection::vec(any_seg_few_handles(20_000), 1..=max),
    ]
}

/// A well-formed call within [`LIMITS`]: read chunks at strictly increasing
/// aligned positions (position zero exactly when `RDMA_NOMSG`), up to four
/// Write chunks, maybe a Reply chunk, a body when `RDMA_MSG`.
fn well_formed() -> impl Strategy<Value = Call> {
    (
        any::<u32>(),
        any::<u32>(),
        any::<bool>(),
        proptest::collection::vec((1u32..64, segs(3)), 0..4),
        proptest::collection::vec(segs(4), 0..=4),
        proptest::option::of(segs(4)),
        proptest::collection::vec(any::<u8>(), 1..64),
        segs(3),
    )
        .prop_map(
            |(xid, credits, nomsg, read_chunks, writes, reply, body, pz)| {
                let mut reads = vec![];
                let mut pos = 0u32;
                if nomsg {
                    reads.extend(pz.into_iter().map(|s| (0, s)));
                }
                for (delta, chunk) in read_chunks {
                    pos += delta * 4;
                    reads.extend(chunk.into_iter().map(|s| (pos, s)));
                }
                Call {
                    xid,
                    vers: 1,
                    credits,
                    proc_: u32::from(nomsg),
                    reads,
                    writes,
                    reply,
                    body: if nomsg {
                        body[..body.len() / 2].to_vec()
                    } else {
                        body
                    },
                }
            },
        )
}

/// The chunks of a well-formed call's Read list, grouped by hand.
fn model_chunks(c: &Call) -> Vec<(u32, Vec<Seg>)> {
    let mut out: Vec<(u32, Vec<Seg>)> = vec![];
    for (p, s) in &c.reads {
        match out.last_mut() {
            Some((lp, v)) if lp == p => v.push(*s),
            _ => out.push((*p, vec![*s])),
        }
    }
    out
}

fn chunk_segs(c: &svcrdma_proto::rpcrdma::Chunk<'_>) -> Vec<Seg> {
    c.segments()
        .map(|s| seg(s.handle, s.length, s.offset))
        .collect()
}

/// What every successfully decoded header must satisfy.
fn check_invariants(buf: &[u8], h: &Header<'_>, lim: &Limits) -> Result<(), TestCaseError> {
    prop_assert!(h.hdr_len <= buf.len());
    prop_assert!(h.hdr_len >= 28);
    prop_assert_eq!(h.hdr_len % 4, 0);
    // Kept beside a copy of its bytes, its shape gives the same header back
    // without a second decode; a copy one byte short gives none.
    let kept = buf[..h.hdr_len].to_vec();
    prop_assert_eq!(h.shape().header(&kept), Some(*h));
    prop_assert_eq!(h.shape().header(&kept[..h.hdr_len - 1]), None);
    match h.proc_ {
        Proc::Msg => {
            prop_assert!(h.hdr_len < buf.len());
            prop_assert!(h.reads.position_zero().is_none());
        }
        Proc::NoMsg => prop_assert!(h.reads.position_zero().is_some()),
        Proc::Error => prop_assert!(false, "decode returned Proc::Error"),
    }
    prop_assert_eq!(h.reads.iter().count(), h.reads.len());
    prop_assert!(h.reads.len() <= lim.max_read_segments as usize);
    let mut n = 0;
    let mut last = None;
    for c in h.reads.chunks() {
        prop_assert!(last.is_none_or(|l| c.position > l));
        last = Some(c.position);
        prop_assert_eq!(c.position % 4, 0);
        prop_assert_eq!(c.segments.iter().count(), c.segments.len());
        prop_assert!(c.segments.len() <= lim.max_segments_per_chunk as usize);
        let sum: u64 = c.segments.iter().map(|s| u64::from(s.length)).sum();
        prop_assert_eq!(sum, u64::from(c.total));
        prop_assert!(c.total <= lim.max_chunk_bytes);
        prop_assert!(c
            .segments
            .iter()
            .all(|s| s.position == c.position && s.length > 0));
        n += c.segments.len();
    }
    prop_assert_eq!(n, h.reads.len());
    prop_assert_eq!(h.writes.iter().count(), h.writes.len());
    prop_assert!(h.writes.len() <= lim.max_write_chunks as usize);
    for c in h.writes.iter().chain(h.reply) {
        prop_assert_eq!(c.segments().count(), c.count());
        prop_assert!(c.count() >= 1 && c.count() <= lim.max_segments_per_chunk as usize);
        let sum: u64 = c.segments().map(|s| u64::from(s.length)).sum();
        prop_assert_eq!(sum, u64::from(c.total()));
        prop_assert!(c.total() <= lim.max_chunk_bytes);
    }
    // A reply that fills every chunk encodes, and re-parses.
    let written: Vec<u32> = h.writes.iter().map(|c| c.total()).collect();
    let reply = h.reply.map(|c| c.total());
    let p = if reply.is_some() {
        Proc::NoMsg
    } else {
        Proc::Msg
    };
    let mut out = [0u8; 4096];
    match encode_reply(&mut out, 1, p, h, &written, reply) {
        Ok(len) => {
            prop_assert_eq!(Some(len), reply_len(h, reply.is_some()));
            let r = parse_reply(&out[..len]).expect("reply parses");
            prop_assert_eq!(r.len, len);
        }
        Err(e) => prop_assert_eq!(e, EncodeError::NoRoom),
    }
    Ok(())
}

/// Headers built from words likely to mean something in a header.
fn wordy() -> impl Strategy<Value = Vec<u8>> {
    (
        any::<u32>(),
        prop_oneof![9 => Just(1u32), 1 => any::<u32>()],
        prop_oneof![6 => 0u32..2, 1 => 0u32..6],
        proptest::collection::vec(
            prop_oneof![
                6 => Just(0u32),
                6 => Just(1u32),
                3 => Just(4u32),
                3 => Just(8u32),
                2 => 0u32..64,
                1 => any::<u32>(),
            ],
            0..80,
        ),
    )
        .prop_map(|(xid, vers, proc_, rest)| {
            let mut w = vec![xid, vers, 1, proc_];
            w.extend(rest);
            rpcrdma_wire::words(&w)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn well_formed_calls_round_trip(c in well_formed()) {
        let wire = c.wire();
        let h = decode(&wire, &LIMITS).map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
        prop_assert_eq!(h.xid, c.xid);
        prop_assert_eq!(h.credits, c.credits);
        prop_assert_eq!(h.proc_, if c.proc_ == 1 { Proc::NoMsg } else { Proc::Msg });
        prop_assert_eq!(h.hdr_len, c.header().len());
        prop_assert_eq!(&wire[h.hdr_len..], &c.body[..]);

        let reads: Vec<(u32, Seg)> = h.reads.iter()
            .map(|s| (s.position, seg(s.handle, s.length, s.offset)))
            .collect();
        prop_assert_eq!(&reads, &c.reads);
        let chunks: Vec<(u32, Vec<Seg>, u32)> = h.reads.chunks()
            .map(|k| (k.position, k.segments.iter().map(|s| seg(s.handle, s.length, s.offset)).collect(), k.total))
            .collect();
        let want: Vec<(u32, Vec<Seg>, u32)> = model_chunks(&c).into_iter()
            .map(|(p, v)| { let t = v.iter().map(|s| s.length).sum(); (p, v, t) })
            .collect();
        prop_assert_eq!(chunks, want);
        prop_assert_eq!(h.reads.position_zero().is_some(), c.proc_ == 1);

        let writes: Vec<Vec<Seg>> = h.writes.iter().map(|k| chunk_segs(&k)).collect();
        prop_assert_eq!(&writes, &c.writes);
        prop_assert_eq!(h.reply.map(|k| chunk_segs(&k)), c.reply.clone());

        let mut handles = c.reads.iter().map(|(_, s)| s.handle)
            .chain(c.writes.iter().flatten().map(|s| s.handle))
            .chain(c.reply.iter().flatten().map(|s| s.handle));
        let single = handles.next().filter(|f| handles.all(|h| h == *f));
        prop_assert_eq!(h.single_handle(), single);

        check_invariants(&wire, &h, &LIMITS)?;
    }

    #[test]
    fn truncation_is_always_noticed(c in well_formed()) {
        let wire = c.wire();
        let full = decode(&wire, &LIMITS).map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
        for cut in 0..wire.len() {
            match decode(&wire[..cut], &LIMITS) {
                Ok(h) => {
                    // Only the body may be cut, and never all of an
                    // RDMA_MSG body.
                    prop_assert!(cut >= full.hdr_len, "Ok at {} < {}", cut, full.hdr_len);
                    prop_assert_eq!(h.hdr_len, full.hdr_len);
                    prop_assert!(h.hdr_len <= cut);
                    if h.proc_ == Proc::Msg {
                        prop_assert!(h.hdr_len < cut);
                    }
                }
                Err(DecodeError::TooShort) => prop_assert!(cut < 8),
                Err(DecodeError::Chunk { xid, .. }) => {
                    prop_assert!(cut >= 8);
                    prop_assert_eq!(xid, c.xid);
                }
                Err(e) => prop_assert!(false, "unexpected {:?} at {}", e, cut),
            }
        }
    }

    #[test]
    fn any_bytes_decode_without_panic(buf in proptest::collection::vec(any::<u8>(), 0..400)) {
        if let Ok(h) = decode(&buf, &LIMITS) {
            check_invariants(&buf, &h, &LIMITS)?;
        }
    }

    #[test]
    fn wordy_headers_decode_consistently(buf in wordy(), tight in any::<bool>()) {
        let lim = if tight {
            Limits { max_read_segments: 2, max_write_chunks: 1, max_segments_per_chunk: 2, max_chunk_bytes: 16 }
        } else {
            Limits { max_read_segments: u32::MAX, max_write_chunks: u32::MAX, max_segments_per_chunk: u32::MAX, max_chunk_bytes: u32::MAX }
        };
        match decode(&buf, &lim) {
            Ok(h) => check_invariants(&buf, &h, &lim)?,
            Err(DecodeError::TooShort) => prop_assert!(buf.len() < 8),
            Err(e) => prop_assert_eq!(e.xid(), buf.get(..4).map(|b| u32::from_be_bytes(b.try_into().unwrap()))),
        }
    }

    #[test]
    fn one_changed_word_never_panics(c in well_formed(), at in any::<prop::sample::Index>(), v in any::<u32>()) {
        let mut wire = c.wire();
        let words = wire.len() / 4;
        let i = at.index(words) * 4;
        wire[i..i + 4].copy_from_slice(&v.to_be_bytes());
        if let Ok(h) = decode(&wire, &LIMITS) {
            check_invariants(&wire, &h, &LIMITS)?;
        }
    }

    #[test]
    fn replies_reparse_with_the_written_lengths(
        c in well_formed(),
        fractions in proptest::collection::vec(0u32..=1000, 0..=4),
        reply_fraction in proptest::option::of(0u32..=1000),
        credits in any::<u32>(),
    ) {
        let wire = c.wire();
        let h = decode(&wire, &LIMITS).map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
        let n = fractions.len().min(c.writes.len());
        let total = |v: &[Seg]| v.iter().map(|s| s.length).sum::<u32>();
        let written: Vec<u32> = c.writes.iter().zip(&fractions[..n])
            .map(|(w, f)| (u64::from(total(w)) * u64::from(*f) / 1000) as u32)
            .collect();
        let reply_written = match (&c.reply, reply_fraction) {
            (Some(r), Some(f)) => Some((u64::from(total(r)) * u64::from(f) / 1000) as u32),
            _ => None,
        };
        let p = if reply_written.is_some() { Proc::NoMsg } else { Proc::Msg };
        let mut out = [0u8; 4096];
        let len = encode_reply(&mut out, credits, p, &h, &written, reply_written)
            .map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
        prop_assert_eq!(Some(len), reply_len(&h, reply_written.is_some()));
        let r = parse_reply(&out[..len]).expect("parses");
        prop_assert_eq!(r.len, len);
        prop_assert_eq!((r.xid, r.vers, r.credits, r.proc_), (c.xid, 1, credits, p.wire()));
        prop_assert!(r.reads.is_empty());

        // Same chunks, same handles and offsets; lengths filled in order.
        let fill = |call: &[Seg], got: &[Seg], bytes: u32| -> Result<(), TestCaseError> {
            prop_assert_eq!(call.len(), got.len());
            let mut left = bytes;
            for (a, b) in call.iter().zip(got) {
                prop_assert_eq!((a.handle, a.offset), (b.handle, b.offset));
                let used = a.length.min(left);
                prop_assert_eq!(b.length, used);
                left -= used;
            }
            prop_assert_eq!(left, 0);
            Ok(())
        };
        prop_assert_eq!(r.writes.len(), c.writes.len());
        for (i, (a, b)) in c.writes.iter().zip(&r.writes).enumerate() {
            fill(a, b, written.get(i).copied().unwrap_or(0))?;
        }
        match (reply_written, &c.reply, &r.reply) {
            (None, _, None) => {}
            (Some(n), Some(a), Some(b)) => fill(a, b, n)?,
            other => prop_assert!(false, "reply chunk mismatch {:?}", other),
        }
    }

    #[test]
    fn overrun_is_reported_for_the_first_overfull_chunk(c in well_formed(), extra in 1u32..100) {
        prop_assume!(!c.writes.is_empty());
        let wire = c.wire();
        let h = decode(&wire, &LIMITS).map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
        let mut written: Vec<u32> = h.writes.iter().map(|k| k.total()).collect();
        let last = written.len() - 1;
        written[last] += extra;
        prop_assert_eq!(
            encode_reply(&mut [0u8; 4096], 1, Proc::Msg, &h, &written, None),
            Err(EncodeError::WriteChunkOverrun { index: last })
        );
    }
}
