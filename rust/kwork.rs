// SPDX-License-Identifier: GPL-2.0

//! Delayed work items of [`Anchored`] objects.
//!
//! The kernel crate's workqueue runs a work item through a pointer type
//! that keeps its object alive (`Arc`, `Pin<KBox>`). Our listener is owned
//! by sunrpc, so here that pointer is an [`AnchorRef`]: a queued work item
//! holds a count on its object's anchor until it has run or was cancelled,
//! and the object's drop waits for it. The object embeds a
//! `kernel::workqueue::DelayedWork` (declared with `impl_has_delayed_work!`)
//! and implements `WorkItem<Pointer = AnchorRef<Self>>`.

use core::ptr::NonNull;

use kernel::{
    bindings, container_of,
    prelude::*,
    time::msecs_to_jiffies,
    workqueue::{
        HasDelayedWork, HasWork, Queue, RawDelayedWorkItem, RawWorkItem, Work, WorkItem,
        WorkItemPointer,
    },
};

use crate::anchor::{Anchor, AnchorRef, Anchored};

// `__enqueue` below queues the `work_struct` of `T`'s `Work<T, ID>` (or
// `DelayedWork<T, ID>`) field, which its `new` (the only way to make one)
// initialized with `T::Pointer::run`.
// SAFETY: that is this `run`, as `T: WorkItem<ID, Pointer = Self>` says.
unsafe impl<T, const ID: u64> WorkItemPointer<ID> for AnchorRef<T>
where
    T: Anchored + WorkItem<ID, Pointer = Self> + HasWork<T, ID>,
{
    unsafe extern "C" fn run(ptr: *mut bindings::work_struct) {
        // `__enqueue` queued the `work_struct` of a `Work<T, ID>`.
        let ptr = ptr.cast::<Work<T, ID>>();
        // SAFETY: the work of a `T` that `__enqueue` counted and that is
        // therefore live.
        let obj = unsafe { T::work_container_of(ptr) };
        // SAFETY: as above; the count `__enqueue` kept is now ours.
        let r = unsafe { AnchorRef::from_raw(NonNull::from((*obj).anchor())) };
        T::run(r)
    }
}

// The `work_struct` handed to `queue_work_on` is in a `T` on which a count
// is kept from before the call until the work has run (`run` takes the count
// back) or was cancelled ([`cancel_delayed_sync`] gives it back).
// SAFETY: the count keeps the `T`, and so its work, alive and in place.
unsafe impl<T, const ID: u64> RawWorkItem<ID> for AnchorRef<T>
where
    T: Anchored + WorkItem<ID, Pointer = Self> + HasWork<T, ID>,
{
    type EnqueueOutput = Result<(), Self>;

    unsafe fn __enqueue<F>(self, queue_work_on: F) -> Self::EnqueueOutput
    where
        F: FnOnce(*mut bindings::work_struct) -> bool,
    {
        let obj = core::ptr::from_ref(self.get().get_ref()).cast_mut();
        // SAFETY: `obj` is a live `T` (counted by `self`).
        let work = unsafe { Work::raw_get(T::raw_get_work(obj)) };
        let anchor = self.into_raw();
        if queue_work_on(work) {
            Ok(())
        } else {
            // SAFETY: not queued: the count `into_raw` kept is still ours.
            Err(unsafe { AnchorRef::from_raw(anchor) })
        }
    }
}

// SAFETY: `HasDelayedWork` promises the `work_struct` is the `work` of a
// `delayed_work` with the same access rules.
unsafe impl<T, const ID: u64> RawDelayedWorkItem<ID> for AnchorRef<T> where
    T: Anchored + WorkItem<ID, Pointer = Self> + HasDelayedWork<T, ID>
{
}

/// The unbound queue for long-running work (the relisten work waits in
/// `rdma_destroy_id()`).
fn long_queue() -> &'static Queue {
    // SAFETY: `system_dfl_long_wq` is set up at boot and never freed.
    unsafe { Queue::from_raw(bindings::system_dfl_long_wq) }
}

/// Queues `obj`'s delayed work to run after `ms` milliseconds; false if it
/// was queued already (and not yet started).
pub(crate) fn queue_delayed_ms<T>(obj: Pin<&T>, ms: u32) -> bool
where
    T: Anchored + WorkItem<Pointer = AnchorRef<T>> + HasDelayedWork<T>,
{
    long_queue()
        .enqueue_delayed(AnchorRef::new(obj), msecs_to_jiffies(ms))
        .is_ok()
}

/// Cancels `obj`'s delayed work if it is queued, and waits for a run under
/// way to return. Sleeps.
pub(crate) fn cancel_delayed_sync<T>(obj: &T)
where
    T: Anchored + WorkItem<Pointer = AnchorRef<T>> + HasDelayedWork<T>,
{
    let obj_ptr = core::ptr::from_ref(obj).cast_mut();
    // SAFETY: `obj` is a live `T`.
    let work = unsafe { Work::raw_get(T::raw_get_work(obj_ptr)) };
    // SAFETY: the `work` of a `delayed_work` (`HasDelayedWork`).
    let dwork = unsafe { container_of!(work, bindings::delayed_work, work) };
    // SAFETY: an initialized delayed work (made by `DelayedWork::new`).
    if unsafe { bindings::cancel_delayed_work_sync(dwork) } {
        // A queued run was taken off the queue: it will not take back the
        // count its `__enqueue` kept, so it is given back here.
        // SAFETY: that count, given back once (the work is no longer queued).
        unsafe { Anchor::release_raw(NonNull::from(obj.anchor())) };
    }
}
