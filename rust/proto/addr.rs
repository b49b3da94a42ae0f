// SPDX-License-Identifier: GPL-2.0

//! Socket addresses as admins read them in logs and sysfs.
//!
//! IPv4 as `a.b.c.d:port`; IPv6 in the RFC 5952 canonical text form, in
//! brackets, as `[addr]:port` (`[addr%scope]:port` for a scoped address);
//! IPv4-mapped IPv6 addresses as `[::ffff:a.b.c.d]:port`.

use core::fmt;

/// An IPv4 or IPv6 transport address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SockAddr {
    /// IPv4 address (network byte order) and port.
    V4 {
        /// The address octets, as on the wire.
        addr: [u8; 4],
        /// The port, host byte order.
        port: u16,
    },
    /// IPv6 address (network byte order), port and scope.
    V6 {
        /// The address octets, as on the wire.
        addr: [u8; 16],
        /// The port, host byte order.
        port: u16,
        /// The scope (interface) id; 0 when none.
        scope_id: u32,
    },
}

impl SockAddr {
    /// The port, host byte order.
    pub fn port(&self) -> u16 {
        match *self {
            SockAddr::V4 { port, .. } | SockAddr::V6 { port, .. } => port,
        }
    }
}

/// Writes `a.b.c.d`.
fn write_v4(f: &mut fmt::Formatter<'_>, a: &[u8]) -> fmt::Result {
    write!(f, "{}.{}.{}.{}", a[0], a[1], a[2], a[3])
}

/// Writes an IPv6 address in RFC 5952 form (no brackets).
fn write_v6(f: &mut fmt::Formatter<'_>, a: &[u8; 16]) -> fmt::Result {
    let mut g = [0u16; 8];
    for (i, w) in g.iter_mut().enumerate() {
        *w = u16::from_be_bytes([a[2 * i], a[2 * i + 1]]);
    }
    // IPv4-mapped (::ffff:0:0/96): the last 32 bits in dotted form.
    if g[..5].iter().all(|&w| w == 0) && g[5] == 0xffff {
        f.write_str("::ffff:")?;
        return write_v4(f, &a[12..]);
    }
    // The longest run of two or more zero groups (the first one on a tie)
    // becomes "::" (RFC 5952 section 4.2).
    let (mut best_start, mut best_len) = (0usize, 0usize);
    let mut i = 0;
    while i < 8 {
        if g[i] == 0 {
            let start = i;
            while i < 8 && g[i] == 0 {
                i += 1;
            }
            if i - start > best_len {
                best_start = start;
                best_len = i - start;
            }
        } else {
            i += 1;
        }
    }
    if best_len < 2 {
        best_len = 0;
    }
    let mut i = 0;
    while i < 8 {
        if best_len > 0 && i == best_start {
            f.write_str("::")?;
            i += best_len;
            continue;
        }
        if i > 0 && !(best_len > 0 && i == best_start + best_len) {
            f.write_str(":")?;
        }
        write!(f, "{:x}", g[i])?;
        i += 1;
    }
    Ok(())
}

impl fmt::Display for SockAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SockAddr::V4 { addr, port } => {
                write_v4(f, addr)?;
                write!(f, ":{port}")
            }
            SockAddr::V6 {
                addr,
                port,
                scope_id,
            } => {
                f.write_str("[")?;
                write_v6(f, addr)?;
                if *scope_id != 0 {
                    write!(f, "%{scope_id}")?;
                }
                write!(f, "]:{port}")
            }
        }
    }
}
