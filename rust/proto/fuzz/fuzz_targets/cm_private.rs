// SPDX-License-Identifier: GPL-2.0

//! Fuzz the RFC 8797 decoder: any bytes decode without panicking, to the
//! defaults or to a message that re-encodes to the bytes found.

#![no_main]

use libfuzzer_sys::fuzz_target;
use svcrdma_proto::cm_private::{decode, find, CmPrivate, LEN};

fuzz_target!(|data: &[u8]| {
    let m = decode(data);
    assert!((1024..=262_144).contains(&m.send_size));
    assert!((1024..=262_144).contains(&m.recv_size));
    match find(data) {
        None => assert_eq!(m, CmPrivate::DEFAULT),
        Some((off, found)) => {
            assert_eq!(found, m);
            let wire = &data[off..off + LEN];
            let mut ours = found.encode();
            // Reserved bits are ignored on receipt and zero when we send.
            ours[5] |= wire[5] & 0xfe;
            assert_eq!(&ours[..], wire);
        }
    }
});
