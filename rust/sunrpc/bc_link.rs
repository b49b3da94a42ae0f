// SPDX-License-Identifier: GPL-2.0

//! A server transport's link to its backchannel: the client transport
//! (`svc_xprt::xpt_bc_xprt`) that sends the server's callbacks over the
//! same connection.
//!
//! The link owns one reference on the client transport, which sunrpc drops
//! when it frees the server transport (`svc_xprt_free()`). It is set once:
//! [`SvcXprt::bind_backchannel`] fills it only while it is empty, so two
//! setups racing for one connection cannot both bind (and leak) one.

use super::{RpcXprt, SvcXprt};
use crate::bindings;

impl SvcXprt {
    /// Whether sunrpc has deleted the transport (`XPT_DEAD`): it is closed
    /// and sends nothing any more.
    pub(crate) fn is_dead(&self) -> bool {
        // SAFETY: `self` is a valid `svc_xprt`; the shim does an atomic
        // `test_bit`.
        unsafe { bindings::svcrdma_rs_xprt_test_flag(self.as_ptr(), bindings::XPT_DEAD as i32) }
    }

    /// The backchannel bound to this transport, if any.
    pub(crate) fn backchannel(&self) -> Option<&RpcXprt> {
        // SAFETY: a valid `svc_xprt`; the shim reads the link once
        // (`READ_ONCE`), as it may be bound concurrently.
        let bc = unsafe { bindings::svcrdma_rs_xprt_bc_read(self.as_ptr()) };
        if bc.is_null() {
            return None;
        }
        // SAFETY: a bound client transport holds the link's reference until
        // sunrpc frees this server transport, which outlives `&self`.
        Some(unsafe { RpcXprt::from_raw(bc) })
    }

    /// Binds `bc` as this transport's backchannel if none is bound yet;
    /// `false` if one was. On success the link owns one reference on `bc`,
    /// which the caller must have taken for it.
    pub(super) fn bind_backchannel(&self, bc: &RpcXprt) -> bool {
        // SAFETY: a valid `svc_xprt`; the shim compares and exchanges the
        // link atomically, so only one caller ever finds it empty.
        let old = unsafe { bindings::svcrdma_rs_xprt_bc_bind(self.as_ptr(), bc.as_ptr()) };
        old.is_null()
    }
}
