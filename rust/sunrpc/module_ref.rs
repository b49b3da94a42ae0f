// SPDX-License-Identifier: GPL-2.0

//! A counted reference on a kernel module, as an owned value.
//!
//! A module cannot be unloaded while anyone holds a reference on it
//! (`delete_module()` waits for the count to reach zero). An object that
//! outlives the call that made it, and whose last use runs this module's
//! code (a client transport whose `destroy` op is ours, say), holds one.

use crate::bindings;

/// One reference on a module, put (`module_put()`) when dropped.
///
/// # Invariants
///
/// `module` is null (a built-in module, which is never unloaded and for
/// which getting and putting do nothing) or a module on which this value
/// holds one reference.
pub(crate) struct ModuleRef {
    module: *mut bindings::module,
}

// The reference count is atomic, and putting it needs no particular
// thread.
// SAFETY: so the value may move to, and be dropped on, any thread.
unsafe impl Send for ModuleRef {}
// SAFETY: `&ModuleRef` offers nothing.
unsafe impl Sync for ModuleRef {}

impl ModuleRef {
    /// Takes another reference on `module` (`__module_get()`, which
    /// cannot fail).
    ///
    /// # Safety
    ///
    /// `module` must be null or a module that cannot start unloading
    /// while this runs: someone must already hold a reference on it for
    /// the whole call.
    pub(crate) unsafe fn get(module: *mut bindings::module) -> Self {
        // SAFETY: null, or live and held by someone else (the caller's
        // promise), so its count is above zero and may be raised.
        unsafe { bindings::__module_get(module) };
        // INVARIANT: the reference just taken.
        Self { module }
    }
}

impl Drop for ModuleRef {
    fn drop(&mut self) {
        // SAFETY: null or a module on which this value holds a reference
        // (invariant), put once, here.
        unsafe { bindings::module_put(self.module) };
    }
}
