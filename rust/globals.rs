// SPDX-License-Identifier: GPL-2.0

//! Module-wide statics, for the C callbacks that reach module state without
//! a context pointer (sunrpc's `xpo_create`).
//!
//! Each is initialized by [`init`], once, in the module initializer.

use kernel::{
    prelude::*,
    sync::{global_lock, Arc},
};

use crate::transport::Registry;

global_lock! {
    // SAFETY: `init` initializes it in the module initializer, before any use.
    pub(crate) unsafe(uninit) static REGISTRY: Mutex<Option<Arc<Registry>>> = None;
}

/// Initializes the statics.
///
/// # Safety
///
/// Called once, from the module initializer, before anything uses them.
pub(crate) unsafe fn init() {
    // SAFETY: once, before any use (this function's contract).
    unsafe { REGISTRY.init() };
}
