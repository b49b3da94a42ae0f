// SPDX-License-Identifier: GPL-2.0

//! Kernel socket addresses, read into [`crate::proto::addr::SockAddr`].

use crate::{bindings, proto::addr::SockAddr};

/// Reads an IPv4 or IPv6 `sockaddr`; `None` for any other family.
///
/// # Safety
///
/// `sa` must point to a valid `sockaddr` whose storage is as large as its
/// family's structure (as in a `sockaddr_storage`).
pub(crate) unsafe fn sockaddr_to_proto(sa: *const bindings::sockaddr) -> Option<SockAddr> {
    // SAFETY: `sa` is valid for reads (caller's promise).
    let family = u32::from(unsafe { (*sa).sa_family });
    match family {
        bindings::AF_INET => {
            // SAFETY: the family says this is a `sockaddr_in`, and the storage
            // is large enough (caller's promise).
            let sin = unsafe { &*sa.cast::<bindings::sockaddr_in>() };
            Some(SockAddr::V4 {
                addr: sin.sin_addr.s_addr.to_ne_bytes(),
                port: u16::from_be(sin.sin_port),
            })
        }
        bindings::AF_INET6 => {
            // SAFETY: as above, for `sockaddr_in6`.
            let sin6 = unsafe { &*sa.cast::<bindings::sockaddr_in6>() };
            // SAFETY: every variant of the `in6_u` union is a plain view of
            // the same 16 bytes.
            let addr = unsafe { sin6.sin6_addr.in6_u.u6_addr8 };
            Some(SockAddr::V6 {
                addr,
                port: u16::from_be(sin6.sin6_port),
                scope_id: sin6.sin6_scope_id,
            })
        }
        _ => None,
    }
}
