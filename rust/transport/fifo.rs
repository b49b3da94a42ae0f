// SPDX-License-Identifier: GPL-2.0

//! A first-in, first-out queue of fixed capacity, in one allocation made
//! up front: pushing and popping never allocate nor move the other items
//! (a vector's `remove(0)` moves them all, per item taken).

use kernel::prelude::*;

/// A ring of at most `capacity` items (see the module documentation).
///
/// # Invariants
///
/// The `len` items start at `head` and wrap around `slots`; every other
/// slot is `None`.
pub(crate) struct Fifo<T> {
    slots: KVec<Option<T>>,
    head: usize,
    len: usize,
}

impl<T> Fifo<T> {
    /// An empty queue with room for nothing.
    pub(crate) const fn new() -> Self {
        Self {
            slots: KVec::new(),
            head: 0,
            len: 0,
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
        })
    }

    /// Whether the queue holds nothing.
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds `item` at the back, or gives it back if the queue is full.
    pub(crate) fn push_within_capacity(&mut self, item: T) -> core::result::Result<(), T> {
        let cap = self.slots.len();
        if self.len == cap {
            return Err(item);
        }
        let at = (self.head + self.len) % cap;
        match self.slots.get_mut(at) {
            Some(slot) => {
                // INVARIANT: the slot after the last item, empty, takes it.
                *slot = Some(item);
                self.len += 1;
                Ok(())
            }
            None => Err(item),
        }
    }

    /// Takes the item at the front.
    pub(crate) fn pop_front(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        let item = self.slots.get_mut(self.head)?.take();
        // INVARIANT: the front item left; the next one is the front.
        self.head = (self.head + 1) % self.slots.len();
        self.len -= 1;
        item
    }
}
