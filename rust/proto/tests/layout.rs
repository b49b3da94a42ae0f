// SPDX-License-Identifier: GPL-2.0

//! Call assembly and Reply regions: worked examples and properties.

use proptest::prelude::*;
use svcrdma_proto::layout::{
    call_layout, reply_inline_len, reply_regions, split_floor, xdr_pad, ArgShape, CallLayout,
    LayoutError, Payload, Place, ReadChunkRef, Split, SPLIT_MIN_HEAD,
};

const CAP: u32 = 1 << 20;
const PAGE: u32 = 4096;

/// Splitting allowed from the shortest RPC header on, with pages of `page`.
fn sp(page: u32) -> Option<Split> {
    Some(Split {
        page_size: page,
        min_position: SPLIT_MIN_HEAD,
    })
}

fn plan(
    inline: u32,
    chunks: &[ReadChunkRef],
    cap: u32,
) -> Result<(Vec<Place>, ArgShape), LayoutError> {
    let mut out = [Place::Zero { dst: 0, len: 0 }; 16];
    let CallLayout { steps, shape } = call_layout(inline, chunks, cap, sp(PAGE), &mut out)?;
    Ok((out[..steps].to_vec(), shape))
}

fn layout(inline: u32, chunks: &[ReadChunkRef]) -> Result<(Vec<Place>, u32), LayoutError> {
    plan(inline, chunks, CAP).map(|(steps, shape)| (steps, shape.len()))
}

/// The Call's stream, read out of argument pages `buf` the way nfsd reads
/// a Call of this shape (head, page list, tail).
fn read_out(buf: &[u8], shape: ArgShape, page: u32) -> Vec<u8> {
    match shape {
        ArgShape::Stream { len } => buf[..len as usize].to_vec(),
        ArgShape::Split { head, pages, tail } => {
            let (h, p, t, page) = (head as usize, pages as usize, tail as usize, page as usize);
            let mut v = buf[..h].to_vec();
            v.extend_from_slice(&buf[page..page + p]);
            v.extend_from_slice(&buf[h..h + t]);
            v
        }
    }
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
fn nfs_write_payload_starts_a_page() {
    // 100 inline bytes of WRITE arguments, a 4099-byte payload at 100,
    // then 12 more inline bytes (e.g. the rest of a COMPOUND): the payload
    // fills the pages from the second one's first byte, its roundup after
    // it; the 12 bytes follow the head in the first page.
    let (steps, shape) = plan(112, &[rc(100, 4099)], CAP).unwrap();
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
                dst: PAGE,
                len: 4099
            },
            Place::Zero {
                dst: PAGE + 4099,
                len: 1
            },
            Place::Inline {
                src: 100,
                dst: 100,
                len: 12
            },
        ]
    );
    assert_eq!(
        shape,
        ArgShape::Split {
            head: 100,
            pages: 4100,
            tail: 12
        }
    );
    assert_eq!(shape.len(), 4212);
    assert_eq!(shape.extent(PAGE), PAGE + 4100);
    // A payload that ends the Call and needs no roundup: two steps.
    let (steps, shape) = plan(100, &[rc(100, 8192)], CAP).unwrap();
    assert_eq!(steps.len(), 2);
    assert_eq!(
        shape,
        ArgShape::Split {
            head: 100,
            pages: 8192,
            tail: 0
        }
    );
}

#[test]
fn a_stream_where_a_split_does_not_apply() {
    let stream = |inline, chunks: &[ReadChunkRef], cap| {
        plan(inline, chunks, cap).map(|(steps, shape)| match shape {
            ArgShape::Stream { len } => (steps, len),
            other => panic!("{other:?} is not a stream"),
        })
    };
    // The same Call in a buffer too small for the item's own pages but not
    // for the stream: the payload at its XDR offset.
    let (steps, total) = stream(112, &[rc(100, 4099)], 8192).unwrap();
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
    // An item before an RPC Call's fixed words could end.
    let early = SPLIT_MIN_HEAD - 4;
    assert_eq!(
        stream(early + 8, &[rc(early, 64)], CAP).unwrap().1,
        early + 72
    );
    assert!(plan(SPLIT_MIN_HEAD, &[rc(SPLIT_MIN_HEAD, 64)], CAP)
        .is_ok_and(|(_, s)| matches!(s, ArgShape::Split { .. })));
    // A Position that is not XDR-aligned (the tail would not be).
    assert_eq!(
        stream(SPLIT_MIN_HEAD + 10, &[rc(SPLIT_MIN_HEAD + 2, 64)], CAP)
            .unwrap()
            .1,
        SPLIT_MIN_HEAD + 10 + 64
    );
    // A Call the caller does not let be split.
    let mut out = [Place::Zero { dst: 0, len: 0 }; 16];
    assert_eq!(
        call_layout(112, &[rc(100, 4099)], CAP, None, &mut out).map(|l| l.shape),
        Ok(ArgShape::Stream { len: 4212 })
    );
    // An inline part longer than a page.
    assert_eq!(
        stream(PAGE + 4, &[rc(100, 64)], CAP).unwrap().1,
        PAGE + 4 + 64
    );
    // Two data items.
    assert_eq!(
        stream(200, &[rc(100, 64), rc(200, 64)], CAP).unwrap().1,
        328
    );
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
        call_layout(16, &[rc(8, 5)], CAP, sp(PAGE), &mut one),
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
        // Small pages, so that both shapes come up.
        let page = 64u32;
        let mut out = [Place::Zero { dst: 0, len: 0 }; 32];
        let res = call_layout(inline.len() as u32, &chunks, CAP, sp(page), &mut out);
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
        let CallLayout { steps: n, shape } = res.unwrap();
        // The split shape exactly where its rule says.
        let split = matches!(chunks.as_slice(),
            [c] if c.position >= SPLIT_MIN_HEAD && c.position % 4 == 0 && c.length > 0)
            && inline.len() as u32 <= page;
        prop_assert_eq!(matches!(shape, ArgShape::Split { .. }), split);
        let mut got = vec![0xeeu8; shape.extent(page) as usize];
        for p in &out[..n] {
            match *p {
                Place::Inline { src, dst, len } => got[dst as usize..(dst + len) as usize]
                    .copy_from_slice(&inline[src as usize..(src + len) as usize]),
                Place::Chunk { chunk, dst, len } => {
                    prop_assert_eq!(len as usize, chunk_data[chunk].len());
                    if split {
                        prop_assert_eq!(dst % page, 0);
                    }
                    got[dst as usize..(dst + len) as usize].copy_from_slice(&chunk_data[chunk]);
                }
                Place::Zero { dst, len } => {
                    prop_assert!((1..=3).contains(&len));
                    got[dst as usize..(dst + len) as usize].fill(0)
                }
            }
        }
        let got = read_out(&got, shape, page);
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

/// An RPC Call header: XID 7, CALL, RPC 2, NFS 3, `proc`, a credential of
/// `cred` body bytes and a verifier of `verf`, each padded; then `rest`.
fn rpc_call(proc_: u32, cred: u32, verf: u32, rest: u32) -> Vec<u8> {
    let mut v = Vec::new();
    for w in [7u32, 0, 2, 100003, 3, proc_, 1, cred] {
        v.extend_from_slice(&w.to_be_bytes());
    }
    v.extend(std::iter::repeat_n(0xaa, (cred + xdr_pad(cred)) as usize));
    v.extend_from_slice(&6u32.to_be_bytes());
    v.extend_from_slice(&verf.to_be_bytes());
    v.extend(std::iter::repeat_n(
        0xbb,
        (verf + xdr_pad(verf) + rest) as usize,
    ));
    v
}

#[test]
fn split_floor_is_the_end_of_the_verifier() {
    // AUTH_NONE-sized: the fixed words only.
    assert_eq!(split_floor(&rpc_call(7, 0, 0, 0)), Some(SPLIT_MIN_HEAD));
    // An AUTH_SYS-sized credential, an RPCSEC_GSS-sized verifier, padded.
    assert_eq!(split_floor(&rpc_call(7, 85, 37, 12)), Some(40 + 88 + 40));
    // A NULL Call is never split.
    assert_eq!(split_floor(&rpc_call(0, 85, 37, 12)), None);
    // A header that runs past the inline part (the verifier's body, its
    // length word, the credential's body, the procedure).
    let whole = rpc_call(7, 85, 37, 0);
    for cut in [whole.len() - 1, 40 + 88 + 3, 40 + 88 - 1, 40, 23, 0] {
        assert_eq!(split_floor(&whole[..cut]), None, "cut at {cut}");
    }
    assert_eq!(split_floor(&whole), Some(whole.len() as u32));
    // Lengths that would wrap the arithmetic.
    let mut huge_cred = rpc_call(7, 0, 0, 64);
    huge_cred[28..32].copy_from_slice(&0xffff_fffdu32.to_be_bytes());
    assert_eq!(split_floor(&huge_cred), None);
    let mut huge_verf = rpc_call(7, 4, 0, 64);
    huge_verf[40..44].copy_from_slice(&0xffff_fffeu32.to_be_bytes());
    assert_eq!(split_floor(&huge_verf), None);
}

#[test]
fn a_data_item_inside_the_rpc_header_is_not_split() {
    // An RPCSEC_GSS-style Call (credential 100 bytes, verifier 36) whose
    // one Read chunk claims Position 40, inside the credential: sunrpc
    // authenticates the header in the first page, so the item must not
    // take any of it elsewhere.
    let call = rpc_call(7, 100, 36, 24);
    let floor = split_floor(&call);
    assert_eq!(floor, Some(40 + 100 + 36));
    let split = floor.map(|min_position| Split {
        page_size: PAGE,
        min_position,
    });
    let mut out = [Place::Zero { dst: 0, len: 0 }; 16];
    let inline = call.len() as u32;
    for position in [40, 44, 100, 40 + 100 + 36 - 4] {
        assert_eq!(
            call_layout(inline, &[rc(position, 8192)], CAP, split, &mut out).map(|l| l.shape),
            Ok(ArgShape::Stream { len: inline + 8192 }),
            "Position {position}"
        );
    }
    // At the header's end the item is split off.
    assert!(matches!(
        call_layout(inline, &[rc(40 + 100 + 36, 8192)], CAP, split, &mut out).map(|l| l.shape),
        Ok(ArgShape::Split {
            head: 176,
            pages: 8192,
            ..
        })
    ));
}
