// SPDX-License-Identifier: GPL-2.0

//! RFC 8797 CM private data: every rule of the RFC, properties, round trips.

use proptest::prelude::*;
use svcrdma_proto::cm_private::{
    decode, decode_size, encode_size, find, CmPrivate, DEFAULT_INLINE, FORMAT_ID, LEN, MAX_INLINE,
};

const ID: [u8; 4] = [0xf6, 0xab, 0x0e, 0x18];

fn msg(version: u8, flags: u8, send: u8, recv: u8) -> Vec<u8> {
    let mut m = ID.to_vec();
    m.extend_from_slice(&[version, flags, send, recv]);
    m
}

#[test]
fn identifier_is_network_byte_order() {
    assert_eq!(FORMAT_ID.to_be_bytes(), ID);
}

#[test]
fn no_private_data_means_defaults() {
    // "MUST behave as if it received ... R bit cleared and both Size fields
    // set to zero" (1024-byte thresholds).
    assert_eq!(decode(&[]), CmPrivate::DEFAULT);
    assert_eq!(
        CmPrivate::DEFAULT,
        CmPrivate {
            remote_invalidate: false,
            send_size: 1024,
            recv_size: 1024
        }
    );
}

#[test]
fn message_at_offset_zero() {
    let m = decode(&msg(1, 1, 3, 7));
    assert_eq!(
        m,
        CmPrivate {
            remote_invalidate: true,
            send_size: 4096,
            recv_size: 8192
        }
    );
}

#[test]
fn message_behind_prefix_bytes_is_found_unaligned() {
    for prefix in 1..=13 {
        let mut buf = vec![0x55u8; prefix];
        buf.extend(msg(1, 0, 0, 255));
        let (off, m) = find(&buf).expect("found");
        assert_eq!(off, prefix);
        assert_eq!(m.send_size, 1024);
        assert_eq!(m.recv_size, 262_144);
        assert!(!m.remote_invalidate);
    }
}

#[test]
fn trailing_bytes_after_the_message_are_fine() {
    let mut buf = msg(1, 1, 1, 1);
    buf.extend_from_slice(&[0u8; 48]); // the CM pads private data with zeros
    assert_eq!(decode(&buf).send_size, 2048);
}

#[test]
fn identifier_absent_means_defaults() {
    assert_eq!(decode(&[0u8; 56]), CmPrivate::DEFAULT);
    assert_eq!(decode(&[1, 2, 3, 4, 5, 6, 7, 8]), CmPrivate::DEFAULT);
    // Byte-swapped identifier is not the identifier.
    assert_eq!(
        decode(&[0x18, 0x0e, 0xab, 0xf6, 1, 1, 9, 9]),
        CmPrivate::DEFAULT
    );
}

#[test]
fn unknown_version_means_defaults() {
    for v in [0u8, 2, 7, 255] {
        assert_eq!(decode(&msg(v, 1, 9, 9)), CmPrivate::DEFAULT, "version {v}");
    }
}

#[test]
fn truncated_message_means_defaults() {
    let full = msg(1, 1, 9, 9);
    for len in 0..LEN {
        assert_eq!(decode(&full[..len]), CmPrivate::DEFAULT, "len {len}");
    }
}

#[test]
fn overrunning_identifier_near_the_end_falls_back() {
    let mut buf = vec![0u8; 20];
    buf.extend(&msg(1, 1, 9, 9)[..6]); // identifier whose 8 octets overrun
    assert_eq!(decode(&buf), CmPrivate::DEFAULT);
}

#[test]
fn reserved_bits_are_ignored() {
    for flags in [0xfeu8, 0x80, 0x02] {
        assert!(
            !decode(&msg(1, flags, 0, 0)).remote_invalidate,
            "{flags:#x}"
        );
    }
    for flags in [0xffu8, 0x81, 0x03] {
        assert!(decode(&msg(1, flags, 0, 0)).remote_invalidate, "{flags:#x}");
    }
}

#[test]
fn r_bit_set_and_clear() {
    assert!(decode(&msg(1, 1, 0, 0)).remote_invalidate);
    assert!(!decode(&msg(1, 0, 0, 0)).remote_invalidate);
}

#[test]
fn sizes_zero_and_255() {
    assert_eq!(decode_size(0), DEFAULT_INLINE);
    assert_eq!(decode_size(255), MAX_INLINE);
    let m = decode(&msg(1, 0, 0, 255));
    assert_eq!((m.send_size, m.recv_size), (1024, 262_144));
    let m = decode(&msg(1, 0, 255, 0));
    assert_eq!((m.send_size, m.recv_size), (262_144, 1024));
}

#[test]
fn a_bad_occurrence_does_not_hide_a_good_one() {
    // An identifier with an unknown version (misidentification), then the
    // real message: the first one that qualifies wins.
    let mut buf = msg(9, 0, 0, 0);
    buf.extend(msg(1, 1, 2, 2));
    let (off, m) = find(&buf).expect("found");
    assert_eq!(off, 8);
    assert_eq!(m.send_size, 3072);
}

#[test]
fn first_of_two_good_occurrences_wins() {
    let mut buf = msg(1, 0, 1, 1);
    buf.extend(msg(1, 1, 2, 2));
    assert_eq!(find(&buf).map(|(o, _)| o), Some(0));
}

#[test]
fn encode_sets_reserved_zero_and_linux_c_values() {
    let ours = CmPrivate {
        remote_invalidate: false,
        send_size: 4096,
        recv_size: 4096,
    };
    // What the C svcrdma sends (seen on the testbed): f6ab0e18 01 00 03 03.
    assert_eq!(ours.encode(), [0xf6, 0xab, 0x0e, 0x18, 1, 0, 3, 3]);
    let r = CmPrivate {
        remote_invalidate: true,
        ..ours
    };
    assert_eq!(r.encode()[5], 0x01);
}

#[test]
fn encode_size_rounds_down_and_clamps() {
    assert_eq!(encode_size(0), 0);
    assert_eq!(encode_size(1024), 0);
    assert_eq!(encode_size(2047), 0);
    assert_eq!(encode_size(2048), 1);
    assert_eq!(encode_size(262_144), 255);
    assert_eq!(encode_size(u32::MAX), 255);
}

proptest! {
    #[test]
    fn any_bytes_decode_without_panic_to_defaults_or_a_valid_message(
        buf in proptest::collection::vec(any::<u8>(), 0..300)
    ) {
        let m = decode(&buf);
        prop_assert!((1024..=262_144).contains(&m.send_size));
        prop_assert!((1024..=262_144).contains(&m.recv_size));
        prop_assert_eq!(m.send_size % 1024, 0);
        if find(&buf).is_none() {
            prop_assert_eq!(m, CmPrivate::DEFAULT);
        }
    }

    #[test]
    fn round_trip(r in any::<bool>(), s in any::<u8>(), v in any::<u8>()) {
        let m = CmPrivate { remote_invalidate: r, send_size: decode_size(s), recv_size: decode_size(v) };
        prop_assert_eq!(decode(&m.encode()), m);
        prop_assert_eq!(m.encode()[6], s);
        prop_assert_eq!(m.encode()[7], v);
    }

    #[test]
    fn identifier_is_found_at_every_offset(
        prefix in proptest::collection::vec(any::<u8>(), 0..64),
        suffix in proptest::collection::vec(any::<u8>(), 0..64),
        r in any::<bool>(), s in any::<u8>(), v in any::<u8>(),
    ) {
        // Prefix bytes that happen to contain an identifier could qualify
        // first; keep them free of it so the message's offset is known.
        prop_assume!(find(&prefix).is_none() && !prefix.windows(4).any(|w| w == ID));
        let m = CmPrivate { remote_invalidate: r, send_size: decode_size(s), recv_size: decode_size(v) };
        let mut buf = prefix.clone();
        buf.extend(m.encode());
        buf.extend(&suffix);
        // An identifier straddling the prefix/message boundary would be
        // found first; only accept inputs where the real one is first.
        let first_id = buf.windows(4).position(|w| w == ID);
        prop_assume!(first_id == Some(prefix.len()));
        prop_assert_eq!(find(&buf), Some((prefix.len(), m)));
    }

    #[test]
    fn overrunning_identifier_at_any_offset_falls_back(
        prefix in proptest::collection::vec(0u8..0xf0, 0..64),
        cut in 4usize..LEN,
    ) {
        let mut buf = prefix;
        buf.extend(&msg(1, 1, 5, 5)[..cut]);
        prop_assert_eq!(decode(&buf), CmPrivate::DEFAULT);
    }

    #[test]
    fn encoded_size_never_exceeds_the_input_above_the_floor(bytes in any::<u32>()) {
        let d = decode_size(encode_size(bytes));
        prop_assert!(d <= bytes.max(DEFAULT_INLINE));
        prop_assert!(d > bytes.min(MAX_INLINE) - 1024 || bytes < 2048);
    }
}
