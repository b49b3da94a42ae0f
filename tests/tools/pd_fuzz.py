#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""RFC 8797 CM private data cases for the connect suite's fuzz test.

    pd_fuzz.py --seed N --max-len M [--pad P] [--count C]

Prints one case per line: HEX SEND RECV R -- the private data a client
sends (hex, "-" when empty) and the decoding the server must show for it
(send and receive size in bytes, the R bit). Without --count there is one
case per length 0..M (every length the CM allows on that transport); with
--count, C cases of random lengths. Contents are random with, most of the
time, one or two format identifiers planted at random (unaligned) offsets,
with random versions, flags and sizes, some running past the end.

The expected decoding comes from the rules of RFC 8797 section 5.2,
written here independently of the module: the identifier 0xf6ab0e18 is
searched at every offset of the buffer the server receives (what was sent,
zero-padded to P bytes on IB/RoCE, whose CM pads private data); the first
occurrence with version 1 and all 8 octets inside the buffer is the
message; none means the defaults (1024, 1024, R clear).
"""
import argparse
import random

IDENT = bytes.fromhex("f6ab0e18")


def decode(buf):
    for off in range(0, len(buf) - 3):
        if buf[off:off + 4] != IDENT:
            continue
        if off + 8 > len(buf) or buf[off + 4] != 1:
            continue
        flags, send, recv = buf[off + 5], buf[off + 6], buf[off + 7]
        return (send + 1) * 1024, (recv + 1) * 1024, flags & 1
    return 1024, 1024, 0


def case(rng, length):
    buf = bytearray(rng.getrandbits(8) for _ in range(length))
    plants = rng.choice((0, 1, 1, 1, 2)) if length >= 4 else 0
    for _ in range(plants):
        # Mostly whole messages; the rest may run past the end.
        if length >= 8 and rng.random() < 0.8:
            off = rng.randrange(0, length - 7)
        else:
            off = rng.randrange(0, length - 3)
        version = rng.choice((1, 1, 1, 0, 2, rng.getrandbits(8)))
        msg = IDENT + bytes((version, rng.getrandbits(8), rng.getrandbits(8), rng.getrandbits(8)))
        end = min(length, off + 8)
        buf[off:end] = msg[:end - off]
    return bytes(buf)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--max-len", type=int, required=True)
    ap.add_argument("--pad", type=int, default=0)
    ap.add_argument("--count", type=int)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    if a.count is None:
        lengths = list(range(0, a.max_len + 1))
    else:
        lengths = [rng.randrange(0, a.max_len + 1) for _ in range(a.count)]
    for length in lengths:
        sent = case(rng, length)
        seen = sent + bytes(max(0, a.pad - len(sent)))
        send, recv, r = decode(seen)
        print(f"{sent.hex() or '-'} {send} {recv} {r}")


if __name__ == "__main__":
    main()
