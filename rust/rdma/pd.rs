// SPDX-License-Identifier: GPL-2.0

//! Protection domains (`struct ib_pd`).

use core::ptr::NonNull;

use kernel::prelude::*;

use super::Device;
use crate::bindings;

/// A protection domain, deallocated when dropped.
///
/// # Invariants
///
/// `ptr` is a live PD from `ib_alloc_pd()`, owned by this value.
pub(crate) struct Pd {
    ptr: NonNull<bindings::ib_pd>,
}

// SAFETY: PDs are not tied to a thread; the verbs that use them are
// thread-safe.
unsafe impl Send for Pd {}
// SAFETY: `&Pd` only reads immutable fields.
unsafe impl Sync for Pd {}

impl Pd {
    /// Allocates a PD on `dev`. With `all_memory`, the PD also gets
    /// a remote-accessible key for all memory (`IB_PD_UNSAFE_GLOBAL_RKEY`):
    /// only the policy's remote-write DMA MR model asks for it.
    pub(crate) fn new(dev: &Device<'_>, all_memory: bool) -> Result<Self> {
        let flags = if all_memory {
            bindings::IB_PD_UNSAFE_GLOBAL_RKEY
        } else {
            0
        };
        // SAFETY: `dev` is a live device.
        let ptr = unsafe { bindings::svcrdma_rs_ib_alloc_pd(dev.as_ptr(), flags) };
        let ptr = kernel::error::from_err_ptr(ptr)?;
        // INVARIANT: allocated above, now owned.
        NonNull::new(ptr).map(|ptr| Self { ptr }).ok_or(ENOMEM)
    }

    /// The C object.
    pub(crate) fn as_ptr(&self) -> *mut bindings::ib_pd {
        self.ptr.as_ptr()
    }

    /// The key for local access to any memory (the device's global lkey,
    /// or the PD's own local-write DMA MR).
    pub(crate) fn local_dma_lkey(&self) -> u32 {
        // SAFETY: the PD is live (invariant); the field is set at allocation.
        unsafe { (*self.as_ptr()).local_dma_lkey }
    }
}

impl Pd {
    /// The PD's remote-accessible key for all memory (0 unless it was
    /// allocated with `all_memory`).
    pub(crate) fn global_rkey(&self) -> u32 {
        // SAFETY: the PD is live (invariant); the field is set at allocation.
        unsafe { (*self.as_ptr()).unsafe_global_rkey }
    }
}

impl Drop for Pd {
    fn drop(&mut self) {
        // SAFETY: live and ours (invariant); owners drop every object made
        // on the PD first (field order of the owning structs).
        unsafe { bindings::svcrdma_rs_ib_dealloc_pd(self.as_ptr()) };
    }
}
