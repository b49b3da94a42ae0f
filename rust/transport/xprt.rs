// SPDX-License-Identifier: GPL-2.0

//! Our transport object: sunrpc's `svc_xprt` plus the RDMA state.

use kernel::{prelude::*, sync::SetOnce};

use crate::{bindings, rdma::cm::CmId, sunrpc::SvcXprt};

/// One svcrdma_rs transport.
///
/// Allocated as a `KBox` and handed to sunrpc as a pointer to its `xprt`
/// field; sunrpc's reference count owns it from then on, and `xpo_free`
/// ([`RdmaXprt::free`]) frees it.
#[repr(C)]
pub(crate) struct RdmaXprt {
    /// The CM identifier: the listening id, or the connection's id. Set once,
    /// after the id exists; dropped first, so no CM event handler runs while
    /// the rest of the object is torn down.
    cm_id: SetOnce<CmId>,
    /// sunrpc's part.
    xprt: SvcXprt,
}

impl RdmaXprt {
    /// A new transport; `xprt` still needs `SvcXprt::init`.
    pub(crate) fn new() -> Self {
        Self {
            cm_id: SetOnce::new(),
            xprt: SvcXprt::uninit(),
        }
    }

    /// sunrpc's part.
    pub(crate) fn xprt(&self) -> &SvcXprt {
        &self.xprt
    }

    /// Records the transport's CM identifier; `false` if one was set already.
    pub(crate) fn set_cm_id(&self, id: CmId) -> bool {
        self.cm_id.populate(id)
    }

    /// Frees a transport sunrpc has released (its `xpo_free`).
    ///
    /// # Safety
    ///
    /// `ptr` must be the `xprt` field of an `RdmaXprt` leaked from a `KBox`
    /// with no reference left: sunrpc calls `xpo_free` once, on the last put.
    pub(crate) unsafe fn free(ptr: *mut bindings::svc_xprt) {
        // SAFETY: as in `from_svc_xprt`.
        let this = unsafe { kernel::container_of!(ptr.cast::<SvcXprt>(), RdmaXprt, xprt) };
        // SAFETY: the object came from `KBox::into_raw` and nothing refers to
        // it any more (caller's promise).
        drop(unsafe { KBox::from_raw(this) });
    }
}
