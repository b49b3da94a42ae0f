// SPDX-License-Identifier: GPL-2.0

//! Call assembly and Reply regions: worked examples and properties.

use proptest::prelude::*;
use svcrdma_proto::layout::{
    call_layout, reply_inline_len, reply_regions, xdr_pad, LayoutError, Payload, Place,
    ReadChunkRef,
};

const CAP: u32 = 1 << 20;

fn layout(inline: u32, chunks: &[ReadChunkRef]) -> Result<(Vec<Place>, u32), LayoutError> {
    let mut out = [Place::Zero { dst: 0, len: 0 }; 16];
    let (n, total) = call_layout(inline, chunks, CAP, &mut out)?;
    Ok((out[..n].to_vec(), total))
}

fn rc(position: u32, length: u32) -> ReadChunkRef {
    ReadChunkRef { position, length }
}

#[test]
fn pad_values() {
    assert_eq!([0, 1, 2, 3, 4, 5, 8191].map(xdr_pad), [0, 3, 2, 1, 0, 3, 1]);
}

#[test]
fn inline_only_is_one_copy() {
    assert_eq!(
        layout(120, &[]).unwrap(),
        (
            vec![Place::Inline {
                src: 0,
                dst: 0,
                len: 120
            }],
            120
        )
    );
}

#[test]
fn nfs_write_payload_in_the_middle() {
    // 100 inline bytes of WRITE arguments, a 4099-byte payload at 100,
    // then 12 more inline bytes (e.g. the rest of a COMPOUND).
    let (steps, total) = layout(112, &[rc(100, 4099)]).unwrap();
    assert_eq!(
        steps,
        vec![
            Place::Inline {
                src: 0,
                dst: 0,
                len: 100
            },
            Place::Chunk {
                chunk: 0,
                dst: 100,
                len: 4099
            },
            Place::Zero { dst: 4199, len: 1 },
            Place::Inline {
                src: 100,
                dst: 4200,
                len: 12
            },
        ]
    );
    assert_eq!(total, 4212);
}

#[test]
fn position_zero_is_the_whole_message() {
    assert_eq!(
        layout(0, &[rc(0, 9000)]).unwrap(),
        (
            vec![Place::Chunk {
                chunk: 0,
                dst: 0,
                len: 9000
            }],
            9000
        )
    );
    // Inline bytes after a NOMSG header are ignored.
    assert_eq!(layout(64, &[rc(0, 8)]).unwrap().1, 8);
}

#[test]
fn two_chunks_positions_count_earlier_chunks() {
    // inline: 8 bytes, chunk A (5 bytes, pad 3) at 8, 4 inline bytes,
    // chunk B (4 bytes) at 8+8+4 = 20, then 4 inline bytes.
    let (steps, total) = layout(16, &[rc(8, 5), rc(20, 4)]).unwrap();
    assert_eq!(
        steps,
        vec![
            Place::Inline {
                src: 0,
                dst: 0,
                len: 8
            },
            Place::Chunk {
                chunk: 0,
                dst: 8,
                len: 5
            },
            Place::Zero { dst: 13, len: 3 },
            Place::Inline {
                src: 8,
                dst: 16,
                len: 4
            },
            Place::Chunk {
                chunk: 1,
                dst: 20,
                len: 4
            },
            Place::Inline {
                src: 12,
                dst: 24,
                len: 4
            },
        ]
    );
    assert_eq!(total, 28);
}

#[test]
fn errors() {
    assert_eq!(layout(8, &[rc(12, 4)]), Err(LayoutError::BadPosition));
    assert_eq!(
        layout(64, &[rc(8, 16), rc(12, 4)]),
        Err(LayoutError::BadPosition)
    );
    assert_eq!(
        layout(64, &[rc(0, 16), rc(12, 4)]),
        Err(LayoutError::MixedPositionZero)
    );
    assert_eq!(
        layout(64, &[rc(8, 16), rc(0, 4)]),
        Err(LayoutError::MixedPositionZero)
    );
    assert_eq!(layout(0, &[]), Err(LayoutError::Empty));
    assert_eq!(layout(0, &[rc(0, 0)]), Err(LayoutError::Empty));
    assert_eq!(layout(8, &[rc(8, CAP)]), Err(LayoutError::TooLarge));
    assert_eq!(layout(8, &[rc(8, u32::MAX)]), Err(LayoutError::TooLarge));
    assert_eq!(layout(0, &[rc(0, CAP + 1)]), Err(LayoutError::TooLarge));
    let mut one = [Place::Zero { dst: 0, len: 0 }; 1];
    assert_eq!(
        call_layout(16, &[rc(8, 5)], CAP, &mut one),
        Err(LayoutError::TooManySteps)
    );
}

#[test]
fn reply_without_payloads_is_whole() {
    let r: Vec<_> = reply_regions(500, &[]).unwrap().collect();
    assert_eq!(r, vec![(0, 500)]);
}

#[test]
fn reply_payload_and_its_pad_are_cut_out() {
    let p = [Payload {
        position: 96,
        len: 4097,
    }];
    let r: Vec<_> = reply_regions(96 + 4100 + 20, &p).unwrap().collect();
    assert_eq!(r, vec![(0, 96), (4196, 4216)]);
    assert_eq!(reply_inline_len(4216, &p), Ok(116));
}

#[test]
fn reply_payload_at_end_and_unused_payloads() {
    let p = [
        Payload {
            position: 40,
            len: 8,
        },
        Payload {
            position: 0,
            len: 0,
        },
    ];
    let r: Vec<_> = reply_regions(48, &p).unwrap().collect();
    assert_eq!(r, vec![(0, 40)]);
    // A payload whose roundup nfsd did not encode (end of stream).
    let p = [Payload {
        position: 40,
        len: 7,
    }];
    assert_eq!(
        reply_regions(47, &p).unwrap().collect::<Vec<_>>(),
        vec![(0, 40)]
    );
}

#[test]
fn reply_payload_errors() {
    assert!(reply_regions(
        10,
        &[Payload {
            position: 8,
            len: 4
        }]
    )
    .is_err());
    assert!(reply_regions(
        100,
        &[
            Payload {
                position: 40,
                len: 8
            },
            Payload {
                position: 44,
                len: 4
            }
        ]
    )
    .is_err());
    assert!(reply_regions(
        100,
        &[Payload {
            position: u32::MAX,
            len: 8
        }]
    )
    .is_err());
}

/// A Call's whole stream: inline runs (multiples of 4) and data items.
fn stream() -> impl Strategy<Value = Vec<(bool, usize)>> {
    prop::collection::vec((any::<bool>(), 0usize..40), 1..8)
}

proptest! {
    /// Cutting data items out of a stream and assembling the Call from the
    /// inline rest and the chunks gives back the stream, roundups zeroed.
    #[test]
    fn assembly_restores_the_stream(parts in stream(), seed in any::<u8>()) {
        let mut full = Vec::new();
        let mut inline = Vec::new();
        let mut chunk_data: Vec<Vec<u8>> = Vec::new();
        let mut chunks = Vec::new();
        let mut b = seed;
        let mut byte = || { b = b.wrapping_mul(31).wrapping_add(7); b | 1 };
        for (is_chunk, n) in parts {
            if is_chunk {
                let data: Vec<u8> = (0..n).map(|_| byte()).collect();
                chunks.push(rc(full.len() as u32, n as u32));
                full.extend_from_slice(&data);
                full.extend(std::iter::repeat_n(0, xdr_pad(n as u32) as usize));
                chunk_data.push(data);
            } else {
                let data: Vec<u8> = (0..n * 4).map(|_| byte()).collect();
                full.extend_from_slice(&data);
                inline.extend_from_slice(&data);
            }
        }
        let mut out = [Place::Zero { dst: 0, len: 0 }; 32];
        let res = call_layout(inline.len() as u32, &chunks, CAP, &mut out);
        if chunks.first().map(|c| c.position) == Some(0) && (chunks.len() > 1 || !inline.is_empty()) {
            // A leading data item makes this a NOMSG-style Call.
            if chunks.len() > 1 {
                prop_assert_eq!(res, Err(LayoutError::MixedPositionZero));
            }
            return Ok(());
        }
        if full.is_empty() || chunks.first().map(|c| (c.position, c.length)) == Some((0, 0)) {
            prop_assert!(res.is_err());
            return Ok(());
        }
        let (n, total) = res.unwrap();
        let mut got = vec![0xeeu8; total as usize];
        for p in &out[..n] {
            match *p {
                Place::Inline { src, dst, len } => got[dst as usize..(dst + len) as usize]
                    .copy_from_slice(&inline[src as usize..(src + len) as usize]),
                Place::Chunk { chunk, dst, len } => {
                    prop_assert_eq!(len as usize, chunk_data[chunk].len());
                    got[dst as usize..(dst + len) as usize].copy_from_slice(&chunk_data[chunk]);
                }
                Place::Zero { dst, len } => {
                    prop_assert!((1..=3).contains(&len));
                    got[dst as usize..(dst + len) as usize].fill(0)
                }
            }
        }
        if chunks.first().map(|c| c.position) == Some(0) {
            prop_assert_eq!(&got[..], &chunk_data[0][..]);
        } else {
            prop_assert_eq!(got, full);
        }
    }

    /// The regions and the payloads (with roundup) tile the Reply.
    #[test]
    fn regions_and_payloads_tile(items in prop::collection::vec((any::<bool>(), 1u32..30), 0..8)) {
        let mut len = 0u32;
        let mut payloads = Vec::new();
        for (is_payload, n) in items {
            if is_payload {
                payloads.push(Payload { position: len, len: n });
                len += n + xdr_pad(n);
            } else {
                len += n * 4;
            }
        }
        let regions: Vec<_> = reply_regions(len, &payloads).unwrap().collect();
        let mut covered = vec![0u8; len as usize];
        for (s, e) in &regions {
            prop_assert!(s < e);
            for c in &mut covered[*s as usize..*e as usize] { *c += 1; }
        }
        for p in &payloads {
            for c in &mut covered[p.position as usize..(p.position + p.len + xdr_pad(p.len)) as usize] { *c += 1; }
        }
        prop_assert!(covered.iter().all(|&c| c == 1));
        let inline: u32 = regions.iter().map(|(s, e)| e - s).sum();
        prop_assert_eq!(reply_inline_len(len, &payloads), Ok(inline));
    }
}
