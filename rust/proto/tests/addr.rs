// SPDX-License-Identifier: GPL-2.0

//! Address text forms (RFC 5952 for IPv6).

use proptest::prelude::*;
use std::net::Ipv6Addr;
use svcrdma_proto::addr::SockAddr;

fn v6(s: &str, port: u16) -> String {
    let addr: Ipv6Addr = s.parse().unwrap();
    SockAddr::V6 {
        addr: addr.octets(),
        port,
        scope_id: 0,
    }
    .to_string()
}

#[test]
fn ipv4() {
    let a = SockAddr::V4 {
        addr: [10, 0, 2, 15],
        port: 20049,
    };
    assert_eq!(a.to_string(), "10.0.2.15:20049");
    assert_eq!(a.port(), 20049);
}

#[test]
fn ipv6_rfc5952_examples() {
    assert_eq!(v6("::", 1), "[::]:1");
    assert_eq!(v6("::1", 2049), "[::1]:2049");
    assert_eq!(v6("2001:db8::1", 0), "[2001:db8::1]:0");
    // A single zero group is not compressed (RFC 5952 4.2.2).
    assert_eq!(v6("2001:db8:0:1:1:1:1:1", 0), "[2001:db8:0:1:1:1:1:1]:0");
    // The longest run wins (4.2.3) ...
    assert_eq!(v6("2001:0:0:1:0:0:0:1", 0), "[2001:0:0:1::1]:0");
    // ... and the first of equal runs.
    assert_eq!(v6("2001:db8:0:0:1:0:0:1", 0), "[2001:db8::1:0:0:1]:0");
    assert_eq!(v6("fe80::", 0), "[fe80::]:0");
    assert_eq!(v6("::ffff:10.0.2.15", 7), "[::ffff:10.0.2.15]:7");
}

#[test]
fn ipv6_scope() {
    let a = SockAddr::V6 {
        addr: "fe80::1".parse::<Ipv6Addr>().unwrap().octets(),
        port: 20049,
        scope_id: 3,
    };
    assert_eq!(a.to_string(), "[fe80::1%3]:20049");
}

proptest! {
    // Every address prints as text that parses back to the same address and
    // port, and agrees with the standard library's RFC 5952 formatting.
    #[test]
    fn ipv6_round_trips(octets in any::<[u8; 16]>(), port in any::<u16>()) {
        let std_addr = Ipv6Addr::from(octets);
        let text = SockAddr::V6 { addr: octets, port, scope_id: 0 }.to_string();
        let sa: std::net::SocketAddrV6 = text.parse().unwrap();
        prop_assert_eq!(*sa.ip(), std_addr);
        prop_assert_eq!(sa.port(), port);
        if std_addr.to_ipv4_mapped().is_none() {
            prop_assert_eq!(text, format!("[{std_addr}]:{port}"));
        }
    }

    #[test]
    fn ipv4_matches_std(octets in any::<[u8; 4]>(), port in any::<u16>()) {
        let text = SockAddr::V4 { addr: octets, port }.to_string();
        prop_assert_eq!(text, std::net::SocketAddrV4::new(octets.into(), port).to_string());
    }
}
