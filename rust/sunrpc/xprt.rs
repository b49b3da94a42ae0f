// SPDX-License-Identifier: GPL-2.0

//! The generic part of a server transport (`struct svc_xprt`), embedded in
//! each of our transports.

use kernel::types::Opaque;

use crate::{bindings, net::NetRef};

/// Transport state bits (`xpt_flags`) this module sets or tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum Flag {
    /// A connection is waiting to be accepted (listeners).
    Conn = bindings::XPT_CONN,
    /// Received data waits for `xpo_recvfrom`.
    Data = bindings::XPT_DATA,
    /// The transport has congestion control (RFC 7530 section 3.1).
    CongCtrl = bindings::XPT_CONG_CTRL,
    /// The transport is closing (set once, by whoever closes it).
    Close = bindings::XPT_CLOSE,
}

/// An embedded `struct svc_xprt`.
///
/// sunrpc owns its life cycle once [`super::NewXprt`] has initialized it:
/// the embedding object is freed by `xpo_free` when the last reference
/// goes.
#[repr(transparent)]
pub(crate) struct SvcXprt(Opaque<bindings::svc_xprt>);

// SAFETY: sunrpc accesses `svc_xprt` from any thread, with its own locking
// and atomic bit operations; this type only offers such accesses.
unsafe impl Sync for SvcXprt {}
// SAFETY: see `Sync`; the object is not tied to a thread.
unsafe impl Send for SvcXprt {}

impl SvcXprt {
    /// Zeroed storage (no class, no flags), for [`super::NewXprt`] to
    /// initialize before sunrpc sees it.
    pub(crate) fn uninit() -> Self {
        Self(Opaque::zeroed())
    }

    /// Whether the transport is a listening endpoint (`XPT_LISTENER`; set
    /// only by [`super::NewXprt`], for a class's listener type).
    pub(crate) fn is_listener(&self) -> bool {
        // SAFETY: `self` is a valid `svc_xprt`; the shim does an atomic
        // `test_bit`.
        unsafe { bindings::svcrdma_rs_xprt_test_flag(self.as_ptr(), bindings::XPT_LISTENER as i32) }
    }

    /// Marks the transport a listening endpoint (`XPT_LISTENER`).
    pub(super) fn set_listener(&self) {
        // SAFETY: `self` is a valid `svc_xprt`; the shim does an atomic
        // `set_bit`.
        unsafe { bindings::svcrdma_rs_xprt_set_flag(self.as_ptr(), bindings::XPT_LISTENER as i32) };
    }

    /// The C object.
    pub(crate) fn as_ptr(&self) -> *mut bindings::svc_xprt {
        self.0.get()
    }

    /// Borrows the `SvcXprt` behind a pointer sunrpc passed us.
    ///
    /// # Safety
    ///
    /// `ptr` must point to a live, initialized `svc_xprt` that stays valid
    /// for `'a`.
    pub(crate) unsafe fn from_raw<'a>(ptr: *mut bindings::svc_xprt) -> &'a Self {
        // SAFETY: `SvcXprt` is a transparent wrapper of `Opaque<svc_xprt>`,
        // which has the layout of `svc_xprt`; validity is the caller's promise.
        unsafe { &*ptr.cast::<Self>() }
    }

    /// The class the transport was initialized with.
    pub(crate) fn class(&self) -> *const bindings::svc_xprt_class {
        // SAFETY: `xpt_class` is set by `svc_xprt_init()` and never changes.
        unsafe { (*self.as_ptr()).xpt_class }
    }

    /// Sets a state bit (atomic).
    pub(crate) fn set_flag(&self, flag: Flag) {
        // SAFETY: `self` is a valid `svc_xprt`; the shim does an atomic `set_bit`.
        unsafe { bindings::svcrdma_rs_xprt_set_flag(self.as_ptr(), flag as i32) };
    }

    /// Clears a state bit (atomic).
    pub(crate) fn clear_flag(&self, flag: Flag) {
        // SAFETY: `self` is a valid `svc_xprt`; the shim does an atomic
        // `clear_bit`.
        unsafe { bindings::svcrdma_rs_xprt_clear_flag(self.as_ptr(), flag as i32) };
    }

    /// Tests a state bit (atomic).
    pub(crate) fn test_flag(&self, flag: Flag) -> bool {
        // SAFETY: `self` is a valid `svc_xprt`; the shim does an atomic
        // `test_bit`.
        unsafe { bindings::svcrdma_rs_xprt_test_flag(self.as_ptr(), flag as i32) }
    }

    /// Asks an nfsd thread to look at the transport (after setting a flag).
    pub(crate) fn enqueue(&self) {
        // SAFETY: `self` is a valid, initialized `svc_xprt`.
        unsafe { bindings::svc_xprt_enqueue(self.as_ptr()) };
    }

    /// How many threads the transport's service runs (0 before it is
    /// registered with one).
    pub(crate) fn server_threads(&self) -> u32 {
        // `xpt_server`, set at init, is the service, which outlives its
        // transports. The count changes under the service's lock; a racy
        // read is enough for a bound (`READ_ONCE`, here a volatile read).
        // SAFETY: `self` is a valid, initialized `svc_xprt` (see above).
        unsafe {
            let serv = (*self.as_ptr()).xpt_server;
            if serv.is_null() {
                0
            } else {
                core::ptr::read_volatile(core::ptr::addr_of!((*serv).sv_nrthreads))
            }
        }
    }

    /// Releases `XPT_BUSY` after a receive, letting other threads in.
    pub(crate) fn received(&self) {
        // SAFETY: `self` is a valid, initialized `svc_xprt` whose `XPT_BUSY`
        // the calling nfsd thread holds (it is in `xpo_recvfrom`).
        unsafe { bindings::svc_xprt_received(self.as_ptr()) };
    }

    /// Marks the transport for closing by an nfsd thread (any context).
    pub(crate) fn deferred_close(&self) {
        // SAFETY: `self` is a valid, initialized `svc_xprt`.
        unsafe { bindings::svc_xprt_deferred_close(self.as_ptr()) };
    }

    /// The network namespace the transport lives in.
    pub(crate) fn net(&self) -> *mut bindings::net {
        // SAFETY: `self` is a valid, initialized `svc_xprt`; `xpt_net` is
        // set by `svc_xprt_init()` and never changes.
        unsafe { (*self.as_ptr()).xpt_net }
    }

    /// The network namespace, borrowed; `None` before `svc_xprt_init()`.
    pub(crate) fn net_ref(&self) -> Option<NetRef<'_>> {
        // SAFETY: an initialized transport holds a reference on `xpt_net`
        // until it is freed, so at least while `self` is borrowed.
        unsafe { NetRef::from_raw(self.net()) }
    }

    /// The service the transport serves.
    pub(crate) fn serv(&self) -> *mut bindings::svc_serv {
        // SAFETY: as for `net`: `xpt_server` is set once at init.
        unsafe { (*self.as_ptr()).xpt_server }
    }

    /// Records the peer's address (port set to 0, so the duplicate reply
    /// cache still matches after the client reconnects from another port).
    ///
    /// # Safety
    ///
    /// `sa` must point to a valid `sockaddr_in` or `sockaddr_in6`, and the
    /// transport must not yet be visible to sunrpc's threads.
    pub(crate) unsafe fn set_remote(&self, sa: *const bindings::sockaddr) {
        // SAFETY: per the function's safety requirements.
        unsafe {
            bindings::svcrdma_rs_svc_xprt_set_remote(self.as_ptr(), sa);
            bindings::svcrdma_rs_xprt_clear_remote_port(self.as_ptr());
        }
    }

    /// Records the local address (shown by sunrpc, used to find listeners).
    ///
    /// # Safety
    ///
    /// `sa` must point to a valid `sockaddr_in` or `sockaddr_in6`, and the
    /// transport must not yet be visible to sunrpc's threads.
    pub(crate) unsafe fn set_local(&self, sa: *const bindings::sockaddr) {
        // SAFETY: per the function's safety requirements.
        unsafe { bindings::svcrdma_rs_svc_xprt_set_local(self.as_ptr(), sa) };
    }
}
