// SPDX-License-Identifier: GPL-2.0

//! Completion queues (`struct ib_cq`), polled from a workqueue.
//!
//! Each work request carries an `ib_cqe` whose `done` callback the CQ calls
//! with the completion; the callback finds its context from the `ib_cqe`.

use core::ptr::NonNull;

use kernel::prelude::*;

use super::Device;
use crate::bindings;

/// A completion queue, freed when dropped.
///
/// # Invariants
///
/// `ptr` is a live CQ from `ib_alloc_cq_any()`, owned by this value.
pub(crate) struct Cq {
    ptr: NonNull<bindings::ib_cq>,
}

// SAFETY: CQs are not tied to a thread.
unsafe impl Send for Cq {}
// SAFETY: `&Cq` offers no operation.
unsafe impl Sync for Cq {}

impl Cq {
    /// Allocates a CQ of `entries` completions on `dev`, polled in a
    /// workqueue (completion callbacks may sleep briefly and take mutexes
    /// no interrupt handler takes).
    pub(crate) fn new(dev: &Device<'_>, entries: u32) -> Result<Self> {
        let n = i32::try_from(entries).map_err(|_| EINVAL)?;
        // SAFETY: `dev` is a live device; no private context is used.
        let ptr = unsafe {
            bindings::svcrdma_rs_ib_alloc_cq_any(
                dev.as_ptr(),
                core::ptr::null_mut(),
                n,
                bindings::IB_POLL_WORKQUEUE,
            )
        };
        let ptr = kernel::error::from_err_ptr(ptr)?;
        // INVARIANT: allocated above, now owned.
        NonNull::new(ptr).map(|ptr| Self { ptr }).ok_or(ENOMEM)
    }

    /// Allocates a CQ of `entries` completions on `dev` that its consumer
    /// polls ([`Cq::poll`]): a completion calls `notify` with the CQ and
    /// its context, which either sees to a poll soon or hands the CQ to its
    /// workqueue ([`Cq::defer`]), which polls it as [`Cq::new`]'s are.
    ///
    /// # Safety
    ///
    /// `notify` may be called in any context, interrupts off included, from
    /// the first completion until the CQ is freed.
    pub(crate) unsafe fn new_notified(
        dev: &Device<'_>,
        entries: u32,
        notify: unsafe extern "C" fn(*mut bindings::ib_cq, *mut c_void),
    ) -> Result<Self> {
        let n = i32::try_from(entries).map_err(|_| EINVAL)?;
        // SAFETY: `dev` is a live device; no private context is used; the
        // caller vouches for `notify`.
        let ptr = unsafe {
            bindings::svcrdma_rs_ib_alloc_cq_notify(
                dev.as_ptr(),
                core::ptr::null_mut(),
                n,
                Some(notify),
            )
        };
        let ptr = kernel::error::from_err_ptr(ptr)?;
        // INVARIANT: allocated above, now owned.
        NonNull::new(ptr).map(|ptr| Self { ptr }).ok_or(ENOMEM)
    }

    /// Handles up to `budget` completions here (their callbacks run in the
    /// caller); returns how many. Another poll or the CQ's work may run at
    /// the same time: each completion is handled once.
    pub(crate) fn poll(&self, budget: i32) -> i32 {
        // SAFETY: the CQ is live (invariant); direct processing polls with
        // a batch on the caller's stack.
        unsafe { bindings::ib_process_cq_direct(self.as_ptr(), budget) }
    }

    /// Asks for the next completion's notification; `true` if completions
    /// may have come in since the last poll (poll again).
    pub(crate) fn arm(&self) -> bool {
        // SAFETY: the CQ is live (invariant).
        unsafe { bindings::svcrdma_rs_cq_arm(self.as_ptr()) > 0 }
    }

    /// Hands the CQ to its workqueue, which polls it, runs the callbacks
    /// and re-arms it (any context).
    pub(crate) fn defer(&self) {
        // SAFETY: the CQ is live (invariant), allocated with a workqueue.
        unsafe { bindings::svcrdma_rs_cq_defer(self.as_ptr()) };
    }

    /// The C object.
    pub(crate) fn as_ptr(&self) -> *mut bindings::ib_cq {
        self.ptr.as_ptr()
    }

    /// Sets the CQ's context (`cq_context`), which its completion callbacks
    /// read; the CQ itself never uses it.
    pub(super) fn set_context(&mut self, context: *mut c_void) {
        // `&mut` and no QP yet: only `Endpoint::new` gives a CQ to a QP, and
        // it takes the CQ for good, after this.
        // SAFETY: the CQ is live and ours (invariant); no completion callback
        // runs, so nothing reads the field while it changes.
        unsafe { (*self.as_ptr()).cq_context = context };
    }

    /// The context of the CQ a completion callback was called for.
    ///
    /// # Safety
    ///
    /// `cq` is the live CQ of a running completion callback.
    pub(super) unsafe fn context_of(cq: *mut bindings::ib_cq) -> *mut c_void {
        // SAFETY: live for the callback (the caller's promise).
        unsafe { (*cq).cq_context }
    }
}

impl Drop for Cq {
    fn drop(&mut self) {
        // SAFETY: live and ours (invariant); the QP using it was destroyed
        // first (field order of the owner), so no completion is pending.
        unsafe { bindings::ib_free_cq(self.as_ptr()) };
    }
}
