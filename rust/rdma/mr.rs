// SPDX-License-Identifier: GPL-2.0

//! Memory regions for fast registration (`IB_MR_TYPE_MEM_REG`).

use core::ptr::NonNull;

use kernel::prelude::*;

use super::Pd;
use crate::bindings::{self, IB_MR_TYPE_MEM_REG};

/// A fast-registration MR, deregistered when dropped.
///
/// # Invariants
///
/// `ptr` is a live MR from `ib_alloc_mr()`, owned by this value; its PD
/// outlives it (owners drop MRs before the PD).
pub(crate) struct Mr {
    ptr: NonNull<bindings::ib_mr>,
}

// SAFETY: MRs are not tied to a thread.
unsafe impl Send for Mr {}
// SAFETY: `&Mr` only reads immutable fields.
unsafe impl Sync for Mr {}

impl Mr {
    /// Allocates an MR able to map `max_pages` pages at once.
    pub(crate) fn new(pd: &Pd, max_pages: u32) -> Result<Self> {
        // SAFETY: the PD is live.
        let ptr = unsafe { bindings::ib_alloc_mr(pd.as_ptr(), IB_MR_TYPE_MEM_REG, max_pages) };
        let ptr = kernel::error::from_err_ptr(ptr)?;
        // INVARIANT: allocated above, now owned.
        NonNull::new(ptr).map(|ptr| Self { ptr }).ok_or(ENOMEM)
    }

    /// The C object.
    pub(crate) fn as_ptr(&self) -> *mut bindings::ib_mr {
        self.ptr.as_ptr()
    }

    /// Deregisters the MR now; gives it back if the device refused.
    ///
    /// # Safety
    ///
    /// No work request that uses the MR may be outstanding, and none may be
    /// posted any more (as for the drop at teardown).
    pub(crate) unsafe fn deregister(self) -> core::result::Result<(), Self> {
        // SAFETY: live and ours (invariant); idle (function contract).
        let rc = unsafe { bindings::svcrdma_rs_dereg_mr(self.as_ptr()) };
        if rc != 0 {
            // `ib_dereg_mr` keeps the MR when the driver fails.
            return Err(self);
        }
        // Freed by the call above: no second deregistration on drop.
        core::mem::forget(self);
        Ok(())
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        // SAFETY: live and ours (invariant); no work request uses it (the
        // QP was drained and destroyed first).
        let _ = unsafe { bindings::svcrdma_rs_dereg_mr(self.as_ptr()) };
    }
}
