// SPDX-License-Identifier: GPL-2.0

//! The bounds-checked XDR reader and writer under the transport headers.

use proptest::prelude::*;
use svcrdma_proto::rpcrdma::xdr::{Full, Reader, Writer};

#[test]
fn reader_is_big_endian_and_tracks_position() {
    let buf = [
        0x01, 0x02, 0x03, 0x04, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0xaa,
    ];
    let mut r = Reader::new(&buf);
    assert_eq!((r.position(), r.remaining()), (0, 13));
    assert_eq!(r.u32(), Some(0x0102_0304));
    assert_eq!(r.position(), 4);
    assert_eq!(r.u64(), Some(0x1122_3344_5566_7788));
    assert_eq!((r.position(), r.remaining()), (12, 1));
    assert_eq!(r.rest(), &[0xaa]);
}

#[test]
fn failed_reads_consume_nothing() {
    let buf = [0u8; 7];
    let mut r = Reader::new(&buf);
    assert_eq!(r.u64(), None);
    assert_eq!(r.position(), 0);
    assert_eq!(r.u32(), Some(0));
    assert_eq!(r.u32(), None);
    assert_eq!(r.position(), 4);
    assert_eq!(r.bytes(4), None);
    assert_eq!(r.bytes(usize::MAX), None);
    assert_eq!(r.bytes(3), Some(&[0u8, 0, 0][..]));
    assert_eq!((r.remaining(), r.rest()), (0, &[][..]));
    assert_eq!(r.u32(), None);
    assert_eq!(Reader::new(&[]).u32(), None);
}

#[test]
fn writer_is_big_endian_and_stops_when_full() {
    let mut out = [0u8; 14];
    let mut w = Writer::new(&mut out);
    assert!(w.is_empty());
    assert_eq!(w.put_u32(0x0a0b_0c0d), Ok(()));
    assert_eq!(w.put_u64(0x0102_0304_0506_0708), Ok(()));
    assert_eq!((w.len(), w.remaining()), (12, 2));
    assert_eq!(w.put_u32(1), Err(Full));
    assert_eq!(w.put_u64(1), Err(Full));
    assert_eq!(w.len(), 12);
    assert_eq!(out, [0x0a, 0x0b, 0x0c, 0x0d, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0]);
    let mut none = [0u8; 0];
    assert_eq!(Writer::new(&mut none).put_u32(0), Err(Full));
}

proptest! {
    #[test]
    fn written_words_read_back(ws in proptest::collection::vec((any::<bool>(), any::<u64>()), 0..32)) {
        let mut out = vec![0u8; 8 * ws.len()];
        let mut w = Writer::new(&mut out);
        for (wide, v) in &ws {
            if *wide { w.put_u64(*v).unwrap() } else { w.put_u32(*v as u32).unwrap() }
        }
        let n = w.len();
        let mut r = Reader::new(&out[..n]);
        for (wide, v) in &ws {
            if *wide { prop_assert_eq!(r.u64(), Some(*v)) } else { prop_assert_eq!(r.u32(), Some(*v as u32)) }
        }
        prop_assert_eq!(r.remaining(), 0);
    }
}
