// SPDX-License-Identifier: GPL-2.0

//! The transport class name rules.

use proptest::prelude::*;
use svcrdma_proto::xprt_name::{validate, NameError, MAX_LEN};

#[test]
fn stock_and_test_names_are_accepted() {
    for name in ["rdma", "rdma_rs", "rdma-rs2", "A", "abcdefghijklmno"] {
        assert_eq!(validate(name.as_bytes()), Ok(()), "{name}");
    }
}

#[test]
fn empty_is_refused() {
    assert_eq!(validate(b""), Err(NameError::Empty));
}

#[test]
fn longer_than_portlist_field_is_refused() {
    // nfsd parses "%15s": 16 bytes could never be asked for.
    assert_eq!(validate(b"abcdefghijklmnop"), Err(NameError::TooLong));
}

#[test]
fn white_space_and_separators_are_refused() {
    assert_eq!(validate(b"rd ma"), Err(NameError::BadByte(b' ')));
    assert_eq!(validate(b"rdma\n"), Err(NameError::BadByte(b'\n')));
    assert_eq!(validate(b"a/b"), Err(NameError::BadByte(b'/')));
    assert_eq!(validate(b"rdma\0"), Err(NameError::BadByte(0)));
}

proptest! {
    #[test]
    fn accepted_iff_every_rule_holds(name in proptest::collection::vec(any::<u8>(), 0..24)) {
        let ok = !name.is_empty()
            && name.len() <= MAX_LEN
            && name.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-');
        prop_assert_eq!(validate(&name).is_ok(), ok);
    }
}
