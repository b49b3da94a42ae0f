// SPDX-License-Identifier: GPL-2.0

//! Objects that C callbacks reach by address, and the references that keep
//! them from going while a callback may still come.
//!
//! A listener, a connection request and a connection are owned by sunrpc or
//! by a box, not by a reference count, yet a CM id, a QP or a work item
//! holds their address and calls back with it. Each such object embeds an
//! [`Anchor`]: every holder of its address takes a count on it
//! ([`AnchorRef`]) and gives it back once no callback with the address can
//! run any more. The object's drop begins by waiting until no count is left
//! (the `PinnedDrop` that [`impl_anchored!`] writes), and a pinned object
//! is dropped before its memory goes: so a counted reference is always to a
//! live object. Owners give the counts back before they free the object
//! (destroying or silencing their ids, destroying their QPs, cancelling
//! their work), so in a correct program the wait never waits.
//!
//! The count is a `refcount_t` ([`Refcount`]: it saturates instead of
//! wrapping, and warns on a count taken on an object whose drop began), and
//! the wait sleeps on a [`Completion`] that the last count given back
//! completes, as the C kernel pairs a `kref` with a `completion`.

use core::ptr::NonNull;

use kernel::{
    prelude::*,
    sync::{Completion, Refcount},
};

/// The count of references to the object that embeds it.
///
/// # Invariants
///
/// `refs` is one for the object itself until its drop begins
/// ([`Anchor::wait`]), plus one per [`AnchorRef`] and raw count
/// ([`AnchorRef::into_raw`]) taken on this anchor and not yet given back.
/// `released` is completed by whoever takes `refs` to zero, and only then.
#[pin_data]
pub(crate) struct Anchor {
    refs: Refcount,
    /// Pinned, so an embedding object is `!Unpin`: a `Pin<&T>` means it
    /// stays put.
    #[pin]
    released: Completion,
}

impl Anchor {
    /// An anchor with no references but the object's own.
    pub(crate) fn new() -> impl PinInit<Self> {
        // INVARIANT: the object's own count; nothing completed yet.
        pin_init!(Self {
            refs: Refcount::new(1),
            released <- Completion::new(),
        })
    }

    /// Gives back one count, completing `released` with the last.
    fn put(&self) {
        if self.refs.dec_and_test() {
            self.released.complete_all();
        }
    }

    /// Gives back the object's own count and waits until every other is
    /// given back. Once, from the object's drop; sleeps (only if a count is
    /// left, which is a bug of the owner); process context.
    pub(crate) fn wait(&self) {
        if !self.refs.dec_and_test() {
            // The last holder's `put` completes it, and `complete_all` is
            // done with the anchor before this returns (it holds the
            // completion's lock, which the wait takes on its way out).
            self.released.wait_for_completion();
        }
    }

    /// Gives back a count taken with [`AnchorRef::into_raw`].
    ///
    /// # Safety
    ///
    /// `anchor` comes from [`AnchorRef::into_raw`], and this count is given
    /// back once only; nothing uses the object through it afterwards.
    pub(crate) unsafe fn release_raw(anchor: NonNull<Anchor>) {
        // The object's drop waits for `released`, which only the last count
        // given back completes.
        // SAFETY: so the count held keeps the anchor alive until `put`.
        unsafe { anchor.as_ref() }.put();
    }
}

/// An object that embeds an [`Anchor`] and waits for it when dropped.
///
/// Implemented by [`impl_anchored!`] only.
///
/// # Safety
///
/// [`Anchored::anchor`] returns a field of `self`, and
/// [`Anchored::from_anchor`] is its inverse; the object's drop calls
/// [`Anchor::wait`] on that field before anything else of it is dropped.
pub(crate) unsafe trait Anchored: Sync + Sized + 'static {
    /// The embedded anchor.
    fn anchor(&self) -> &Anchor;

    /// The object whose anchor `anchor` points to.
    ///
    /// # Safety
    ///
    /// `anchor` must point to the anchor field of a `Self`.
    unsafe fn from_anchor(anchor: *const Anchor) -> *const Self;
}

/// Makes a pinned type [`Anchored`] by its `Anchor` field: implements the
/// trait, and a `PinnedDrop` that waits for the anchor first (so the type
/// is declared `#[pin_data(PinnedDrop)]`, with the field `#[pin]`, and has
/// no drop of its own).
macro_rules! impl_anchored {
    (impl Anchored for $t:ty { self.$field:ident }) => {
        // `container_of!` checks the field's type; the `PinnedDrop` below
        // waits for the anchor before any field of the type is dropped.
        // SAFETY: `anchor` returns the field, `from_anchor` inverts it.
        unsafe impl $crate::anchor::Anchored for $t {
            fn anchor(&self) -> &$crate::anchor::Anchor {
                &self.$field
            }

            unsafe fn from_anchor(anchor: *const $crate::anchor::Anchor) -> *const Self {
                // SAFETY: `anchor` points to the field of a `Self` (the
                // function's safety requirement).
                unsafe { ::kernel::container_of!(anchor.cast_mut(), Self, $field) }.cast_const()
            }
        }

        #[::kernel::prelude::pinned_drop]
        impl PinnedDrop for $t {
            fn drop(self: Pin<&mut Self>) {
                self.$field.wait();
            }
        }
    };
}
pub(crate) use impl_anchored;

/// A counted reference to a pinned [`Anchored`] object: the object cannot
/// be dropped while it exists.
///
/// # Invariants
///
/// `ptr` points to a live, pinned `T`, and this value holds one count on
/// its anchor.
pub(crate) struct AnchorRef<T: Anchored> {
    ptr: NonNull<T>,
}

// SAFETY: the reference only gives `&T`, and `T` is `Sync`.
unsafe impl<T: Anchored> Send for AnchorRef<T> {}
// SAFETY: as for `Send`.
unsafe impl<T: Anchored> Sync for AnchorRef<T> {}

impl<T: Anchored> AnchorRef<T> {
    /// Takes a count on `obj`.
    pub(crate) fn new(obj: Pin<&T>) -> Self {
        let obj = obj.get_ref();
        // The caller's borrow keeps the object's own count (its drop has not
        // begun), so the count is above zero here.
        obj.anchor().refs.inc();
        // INVARIANT: counted just above; `obj` is pinned and its drop waits
        // for the count (`Anchored`), which it cannot do before the count
        // is given back: so it stays live and in place.
        Self {
            ptr: NonNull::from(obj),
        }
    }

    /// The object, pinned.
    pub(crate) fn get(&self) -> Pin<&T> {
        // SAFETY: live while counted (invariant); pinned since `new`.
        unsafe { Pin::new_unchecked(self.ptr.as_ref()) }
    }

    /// Gives up the reference as a raw pointer to the anchor, keeping the
    /// count: [`AnchorRef::from_raw`] or [`Anchor::release_raw`] gives it
    /// back.
    pub(crate) fn into_raw(self) -> NonNull<Anchor> {
        let a = NonNull::from(self.get().get_ref().anchor());
        core::mem::forget(self);
        a
    }

    /// Takes back a reference made with [`AnchorRef::into_raw`].
    ///
    /// # Safety
    ///
    /// `anchor` comes from `AnchorRef::<T>::into_raw`, and its count is
    /// taken back once only.
    pub(crate) unsafe fn from_raw(anchor: NonNull<Anchor>) -> Self {
        // SAFETY: the anchor is that of a live `T` (the caller's promise).
        let ptr = unsafe { T::from_anchor(anchor.as_ptr()) };
        // INVARIANT: the count taken by the reference `into_raw` consumed.
        Self {
            ptr: NonNull::from(
                // SAFETY: as above, a live `T`.
                unsafe { &*ptr },
            ),
        }
    }

    /// Borrows the object of a raw count without taking it back.
    ///
    /// # Safety
    ///
    /// `anchor` comes from `AnchorRef::<T>::into_raw`, and the count is
    /// held for at least `'a`.
    pub(crate) unsafe fn borrow_raw<'a>(anchor: *const Anchor) -> Pin<&'a T> {
        // SAFETY: a live, pinned `T` while the count is held (the caller's
        // promise).
        unsafe { Pin::new_unchecked(&*T::from_anchor(anchor)) }
    }
}

impl<T: Anchored> Clone for AnchorRef<T> {
    fn clone(&self) -> Self {
        Self::new(self.get())
    }
}

impl<T: Anchored> core::ops::Deref for AnchorRef<T> {
    type Target = T;

    fn deref(&self) -> &T {
        self.get().get_ref()
    }
}

impl<T: Anchored> Drop for AnchorRef<T> {
    fn drop(&mut self) {
        // Nothing of `self` is used after the count is given back.
        self.get().anchor().put();
    }
}
