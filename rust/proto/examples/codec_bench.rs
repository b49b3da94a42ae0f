// SPDX-License-Identifier: GPL-2.0

//! Host micro-benchmarks of the `rust/proto` codecs, in nanoseconds per
//! message: the transport-header decoder on the calls an NFS client sends,
//! the reply and error encoders, and the RFC 8797 private-data search.
//!
//! Run: `scripts/bench-proto` (or `cargo run --release --example
//! codec_bench` in rust/proto). Prints one line per case, the best of
//! several rounds, and `--json` prints the same as JSON.

use std::hint::black_box;
use std::time::Instant;

use svcrdma_proto::cm_private;
use svcrdma_proto::rpcrdma::{decode, encode_error_chunk, encode_reply, Limits, Proc};

/// Limits like the module's (`LIMITS` in rust/transport/recvfrom.rs): the
/// bounds do not change the cost of a message within them.
const LIMITS: Limits = Limits {
    max_read_segments: 64,
    max_write_chunks: 4,
    max_segments_per_chunk: 64,
    max_chunk_bytes: 16 << 20,
};

/// Big-endian words, then `body` bytes of RPC message.
fn wire(words: &[u32], body: usize) -> Vec<u8> {
    let mut v: Vec<u8> = words.iter().flat_map(|w| w.to_be_bytes()).collect();
    v.resize(v.len() + body, 0x5a);
    v
}

const XID: u32 = 0x1234_5678;
const VERS: u32 = 1;
const CREDITS: u32 = 64;
const MSG: u32 = 0;
const NOMSG: u32 = 1;

/// One segment: handle, length, 64-bit offset.
fn seg(handle: u32, len: u32, off: u64) -> [u32; 4] {
    [handle, len, (off >> 32) as u32, off as u32]
}

/// A small call (GETATTR-sized): RDMA_MSG, no chunks, 120-byte message.
fn small_call() -> Vec<u8> {
    wire(&[XID, VERS, CREDITS, MSG, 0, 0, 0], 120)
}

/// An NFS WRITE of 1 MiB: one Read chunk of one segment at position 128.
fn write_call() -> Vec<u8> {
    let mut w = vec![XID, VERS, CREDITS, MSG, 1, 128];
    w.extend(seg(0x100, 1 << 20, 0x7f00_0000_1000));
    w.extend([0, 0, 0]);
    wire(&w, 128)
}

/// An NFS READ of 1 MiB: one Write chunk of one segment.
fn read_call() -> Vec<u8> {
    let mut w = vec![XID, VERS, CREDITS, MSG, 0, 1, 1];
    w.extend(seg(0x200, 1 << 20, 0x7f00_0000_2000));
    w.extend([0, 0]);
    wire(&w, 140)
}

/// A READDIR with a Reply chunk of two segments, call in a Read chunk at
/// position zero (RDMA_NOMSG).
fn nomsg_call() -> Vec<u8> {
    let mut w = vec![XID, VERS, CREDITS, NOMSG, 1, 0];
    w.extend(seg(0x300, 200, 0x7f00_0000_3000));
    w.extend([0, 0, 1, 2]);
    w.extend(seg(0x301, 4096, 0x7f00_0000_4000));
    w.extend(seg(0x301, 4096, 0x7f00_0000_5000));
    wire(&w, 0)
}

/// Runs `f` `iters` times per round and returns the best round's ns/op.
fn measure<R>(iters: u32, mut f: impl FnMut() -> R) -> f64 {
    let mut best = f64::INFINITY;
    for _ in 0..7 {
        let t = Instant::now();
        for _ in 0..iters {
            black_box(f());
        }
        let ns = t.elapsed().as_nanos() as f64 / f64::from(iters);
        best = best.min(ns);
    }
    best
}

/// Decodes `buf`; `false` if it is rejected (a benchmark of the error path
/// by accident would be worthless).
fn decodes(buf: &[u8]) -> bool {
    decode(black_box(buf), &LIMITS).is_ok()
}

/// Stops the benchmark with a message (its inputs are fixed: a rejection is
/// a bug in this file or in the decoder).
fn bad_input(what: &str) -> ! {
    eprintln!("codec_bench: {what} rejected by the decoder");
    std::process::exit(1)
}

fn main() {
    let json = std::env::args().any(|a| a == "--json");
    let iters = 200_000;
    let mut rows: Vec<(&str, f64)> = Vec::new();

    for (name, buf) in [
        ("decode small call (no chunks)", small_call()),
        ("decode WRITE call (1 Read chunk)", write_call()),
        ("decode READ call (1 Write chunk)", read_call()),
        (
            "decode NOMSG call (Read at 0 + 2-segment Reply chunk)",
            nomsg_call(),
        ),
    ] {
        if !decodes(&buf) {
            bad_input(name);
        }
        rows.push((name, measure(iters, || black_box(decodes(&buf)))));
    }

    let (read, nomsg) = (read_call(), nomsg_call());
    let mut out = [0u8; 256];
    let (rcall, ncall) = match (decode(&read, &LIMITS), decode(&nomsg, &LIMITS)) {
        (Ok(r), Ok(n)) => (r, n),
        _ => bad_input("a reply benchmark's call"),
    };
    rows.push((
        "encode READ reply (Write chunk, 1 MiB used)",
        measure(iters, || {
            let n = encode_reply(
                &mut out,
                CREDITS,
                Proc::Msg,
                black_box(&rcall),
                &[1 << 20],
                None,
            );
            black_box(n.is_ok());
        }),
    ));
    rows.push((
        "encode NOMSG reply (Reply chunk, 6000 bytes used)",
        measure(iters, || {
            let n = encode_reply(
                &mut out,
                CREDITS,
                Proc::NoMsg,
                black_box(&ncall),
                &[],
                Some(6000),
            );
            black_box(n.is_ok());
        }),
    ));
    rows.push((
        "encode ERR_CHUNK",
        measure(iters, || {
            black_box(encode_error_chunk(&mut out, black_box(XID), CREDITS).is_ok());
        }),
    ));

    // RFC 8797 private data as RoCE delivers it: 56 bytes, message first;
    // and behind 40 bytes of another upper layer's data.
    let mut roce = [0u8; 56];
    roce[..8].copy_from_slice(&[0xf6, 0xab, 0x0e, 0x18, 1, 1, 3, 3]);
    let mut behind = [0u8; 56];
    behind[40..48].copy_from_slice(&[0xf6, 0xab, 0x0e, 0x18, 1, 1, 3, 3]);
    let none = [0u8; 196];
    for (name, buf) in [
        ("private data: message at offset 0 (56 bytes)", &roce[..]),
        ("private data: message at offset 40 (56 bytes)", &behind[..]),
        ("private data: none in 196 bytes (IB maximum)", &none[..]),
    ] {
        rows.push((
            name,
            measure(iters, || {
                black_box(cm_private::decode(black_box(buf)));
            }),
        ));
    }

    if json {
        println!("[");
        for (i, (name, ns)) in rows.iter().enumerate() {
            let comma = if i + 1 < rows.len() { "," } else { "" };
            println!("  {{\"case\": \"{name}\", \"ns_per_op\": {ns:.1}}}{comma}");
        }
        println!("]");
    } else {
        println!("| case | ns per message |");
        println!("|---|---|");
        for (name, ns) in &rows {
            println!("| {name} | {ns:.1} |");
        }
    }
}
