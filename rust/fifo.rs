// SPDX-License-Identifier: GPL-2.0

//! First-in, first-out queues of fixed capacity: pushing and popping never
//! allocate nor move the other items (a vector's `remove(0)` moves them
//! all, per item taken).
//!
//! One ring, two kinds of storage: [`Fifo`] allocates its slots up front,
//! sized at run time (a connection's received buffers, its finished
//! Reads); [`InlineFifo`] keeps them in an array, sized at compile time
//! (the chains waiting in a send order).

use core::marker::PhantomData;

use kernel::prelude::*;

/// Where a ring keeps its slots.
pub(crate) trait Slots<T> {
    /// The slots.
    fn slots(&self) -> &[Option<T>];
    /// The slots, to change.
    fn slots_mut(&mut self) -> &mut [Option<T>];
}

impl<T> Slots<T> for KVec<Option<T>> {
    fn slots(&self) -> &[Option<T>] {
        self
    }

    fn slots_mut(&mut self) -> &mut [Option<T>] {
        self
    }
}

impl<T, const N: usize> Slots<T> for [Option<T>; N] {
    fn slots(&self) -> &[Option<T>] {
        self
    }

    fn slots_mut(&mut self) -> &mut [Option<T>] {
        self
    }
}

/// A ring of at most as many items as `S` has slots (see the module
/// documentation).
///
/// # Invariants
///
/// The `len` items start at `head` and wrap around the slots; every other
/// slot is `None`.
pub(crate) struct Ring<T, S> {
    slots: S,
    head: usize,
    len: usize,
    _items: PhantomData<T>,
}

/// A ring whose slots are allocated once, when it is made.
pub(crate) type Fifo<T> = Ring<T, KVec<Option<T>>>;

/// A ring of `N` slots kept inline.
pub(crate) type InlineFifo<T, const N: usize> = Ring<T, [Option<T>; N]>;

impl<T> Fifo<T> {
    /// An empty queue with room for nothing.
    pub(crate) const fn new() -> Self {
        Self {
            slots: KVec::new(),
            head: 0,
            len: 0,
            _items: PhantomData,
        }
    }

    /// An empty queue with room for `capacity` items.
    pub(crate) fn with_capacity(capacity: usize) -> Result<Self> {
        let mut slots = KVec::with_capacity(capacity, GFP_KERNEL)?;
        for _ in 0..capacity {
            slots.push(None, GFP_KERNEL)?;
        }
        Ok(Self {
            slots,
            head: 0,
            len: 0,
            _items: PhantomData,
        })
    }
}

impl<T, const N: usize> InlineFifo<T, N> {
    /// An empty queue with room for `N` items.
    pub(crate) const fn new_inline() -> Self {
        Self {
            slots: [const { None }; N],
            head: 0,
            len: 0,
            _items: PhantomData,
        }
    }
}

impl<T, S: Slots<T>> Ring<T, S> {
    /// Whether the queue holds nothing.
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds `item` at the back, or gives it back if the queue is full.
    pub(crate) fn push_within_capacity(&mut self, item: T) -> core::result::Result<(), T> {
        let cap = self.slots.slots().len();
        if self.len == cap {
            return Err(item);
        }
        let at = (self.head + self.len) % cap;
        match self.slots.slots_mut().get_mut(at) {
            Some(slot) => {
                // INVARIANT: the slot after the last item, empty, takes it.
                *slot = Some(item);
                self.len += 1;
                Ok(())
            }
            None => Err(item),
        }
    }

    /// The item at the front.
    pub(crate) fn front(&self) -> Option<&T> {
        if self.len == 0 {
            return None;
        }
        self.slots.slots().get(self.head)?.as_ref()
    }

    /// Takes the item at the front.
    pub(crate) fn pop_front(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        let cap = self.slots.slots().len();
        let item = self.slots.slots_mut().get_mut(self.head)?.take();
        // INVARIANT: the front item left; the next one is the front.
        self.head = (self.head + 1) % cap;
        self.len -= 1;
        item
    }
}
