// SPDX-License-Identifier: GPL-2.0

//! Network namespaces and socket addresses as both the RDMA CM and sunrpc
//! pass them: a borrowed `struct net` ([`NetRef`]) and IPv4/IPv6 socket
//! addresses ([`IpSockAddr`], or read into
//! [`crate::proto::addr::SockAddr`]).

use core::{marker::PhantomData, ptr::NonNull};

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

/// A copy of an IPv4 or IPv6 socket address (a `sockaddr_in` or
/// `sockaddr_in6`), in storage large enough for either.
///
/// # Invariants
///
/// `sa` holds a whole `sockaddr_in` (family `AF_INET`) or `sockaddr_in6`
/// (family `AF_INET6`).
#[derive(Clone, Copy)]
pub(crate) struct IpSockAddr {
    sa: bindings::sockaddr_in6,
}

impl IpSockAddr {
    /// Copies an IPv4 or IPv6 `sockaddr`; `None` for any other family.
    ///
    /// # Safety
    ///
    /// `sa` must point to a valid `sockaddr` whose storage is as large as its
    /// family's structure (as in a `sockaddr_storage`).
    pub(crate) unsafe fn copy_from(sa: *const bindings::sockaddr) -> Option<Self> {
        let mut a = bindings::sockaddr_in6::default();
        // SAFETY: `sa` is valid (caller's promise); the shim reads the family.
        let len = unsafe { bindings::svcrdma_rs_sockaddr_len(sa) }.min(size_of_val(&a));
        if len == 0 {
            return None;
        }
        // SAFETY: `len` bytes are readable at `sa` (its family's size) and
        // writable in `a`; the two do not overlap.
        unsafe { core::ptr::copy_nonoverlapping(sa.cast::<u8>(), (&raw mut a).cast::<u8>(), len) };
        // INVARIANT: a whole `sockaddr_in` or `sockaddr_in6`, by its family.
        Some(Self { sa: a })
    }

    /// The address as a `sockaddr` pointer, valid while `self` is.
    pub(crate) fn as_ptr(&self) -> *const bindings::sockaddr {
        (&raw const self.sa).cast()
    }

    /// Whether it is an IPv6 address.
    pub(crate) fn is_v6(&self) -> bool {
        u32::from(self.sa.sin6_family) == bindings::AF_INET6
    }

    /// The address for the log and the protocol code.
    pub(crate) fn to_proto(self) -> Option<SockAddr> {
        // SAFETY: a whole `sockaddr_in`/`sockaddr_in6` in storage large
        // enough for either (invariant).
        unsafe { sockaddr_to_proto(self.as_ptr()) }
    }
}

/// A network namespace, borrowed from sunrpc (a transport's or a create
/// call's) for the RDMA CM (the namespace an id is made in).
#[derive(Clone, Copy)]
pub(crate) struct NetRef<'a> {
    ptr: NonNull<bindings::net>,
    _p: PhantomData<&'a bindings::net>,
}

impl NetRef<'_> {
    /// Borrows a namespace.
    ///
    /// # Safety
    ///
    /// `ptr` must point to a live `struct net` for the borrow's lifetime.
    pub(crate) unsafe fn from_raw(ptr: *mut bindings::net) -> Option<Self> {
        NonNull::new(ptr).map(|ptr| Self {
            ptr,
            _p: PhantomData,
        })
    }

    /// The C object, for the calls that take a namespace.
    pub(crate) fn as_ptr(&self) -> *mut bindings::net {
        self.ptr.as_ptr()
    }
}
