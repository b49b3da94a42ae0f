// SPDX-License-Identifier: GPL-2.0

//! What a server transport class hands to `xpo_create`.
//!
//! sunrpc calls `xpo_create` with a service, a namespace and an address,
//! and nothing of the class: a class keeps its data here, in its `static`,
//! set at registration and taken back at unregistration. The read side is
//! RCU's, as for any pointer the kernel swaps under readers: a create
//! under way clones the data's `Arc` inside a read-side section, and the
//! unregistration waits for such sections (`synchronize_rcu`) before it
//! drops its own reference.

use core::ptr;

use kernel::sync::{
    atomic::{
        ordering::{Acquire, Release},
        Atomic,
    },
    rcu, Arc, ArcBorrow,
};

/// A class's data while it is registered (see the module documentation).
///
/// # Invariants
///
/// `ptr` is null, or comes from [`Arc::into_raw`] and holds that reference
/// until [`ClassData::take`] swaps it out.
pub(crate) struct ClassData<T> {
    ptr: Atomic<*const T>,
}

impl<T: Send + Sync> ClassData<T> {
    /// No data.
    pub(super) const fn new() -> Self {
        // INVARIANT: null.
        Self {
            ptr: Atomic::new(ptr::null()),
        }
    }

    /// Keeps `data`; gives it back if data is already kept.
    pub(super) fn set(&self, data: Arc<T>) -> core::result::Result<(), Arc<T>> {
        let raw = Arc::into_raw(data);
        match self.ptr.cmpxchg(ptr::null(), raw, Release) {
            // INVARIANT: the reference `into_raw` kept.
            Ok(_) => Ok(()),
            // SAFETY: not stored: the reference is still ours.
            Err(_) => Err(unsafe { Arc::from_raw(raw) }),
        }
    }

    /// Another reference to the data, if it is kept.
    pub(super) fn get(&self) -> Option<Arc<T>> {
        let _guard = rcu::read_lock();
        let raw = self.ptr.load(Acquire);
        if raw.is_null() {
            return None;
        }
        // `take` waits for this read-side section before it gives back the
        // reference `ptr` holds.
        // SAFETY: so the data lives until the clone below.
        let data = unsafe { ArcBorrow::from_raw(raw) };
        Some(data.into())
    }

    /// Takes the data back, once no [`ClassData::get`] that could still
    /// see it is under way. Sleeps; process context.
    pub(super) fn take(&self) -> Option<Arc<T>> {
        let raw = self.ptr.xchg(ptr::null(), Acquire);
        if raw.is_null() {
            return None;
        }
        rcu::synchronize_rcu();
        // INVARIANT: null now; the reference it held is taken back below.
        // SAFETY: from `Arc::into_raw` (invariant), swapped out once.
        Some(unsafe { Arc::from_raw(raw) })
    }
}
