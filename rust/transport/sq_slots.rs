// SPDX-License-Identifier: GPL-2.0

//! A connection's send-queue slots. The send queue holds a fixed number of
//! work requests; every chain reserves its slots before it is posted
//! (`super::sq`), waiting in turn while other RPCs hold them, and its last
//! completion gives them back.

use kernel::prelude::*;

use super::fair::FairPool;

/// A connection's send-queue slots: the free ones and how many exist.
pub(crate) struct Slots {
    avail: u32,
    total: u32,
}

/// The send-queue slots, handed out in turn (see [`FairPool`]).
pub(crate) type SendQueue = FairPool<Slots>;

impl SendQueue {
    /// No slots until [`SendQueue::set_size`].
    pub(crate) fn empty() -> impl PinInit<Self> {
        Self::new(Slots { avail: 0, total: 0 })
    }

    /// Sets the number of slots (at accept, before any use).
    pub(crate) fn set_size(&self, slots: u32) {
        self.with(|s| {
            s.avail = slots;
            s.total = slots;
        });
    }

    /// Takes `n` slots, waiting in turn while others hold them; fails with
    /// `EMSGSIZE` if the queue can never hold `n` (at its turn: callers
    /// check the total first, `Live::sq_reserve`), with `ENOTCONN` once the
    /// queue is closed or `closing()`.
    pub(crate) fn reserve(
        &self,
        n: u32,
        closing: impl Fn() -> bool,
        on_wait: impl FnOnce(),
    ) -> Result {
        // One look under the lock: more than exist fails at its turn.
        self.acquire(closing, on_wait, |s| {
            if n > s.total {
                return Some(Err(EMSGSIZE));
            }
            s.avail = s.avail.checked_sub(n)?;
            Some(Ok(()))
        })?
    }

    /// Takes `n` slots if they are free now and nobody waits for slots;
    /// never sleeps.
    pub(crate) fn try_reserve(&self, n: u32, closing: impl Fn() -> bool) -> bool {
        self.try_acquire(closing, |s| {
            s.avail = s.avail.checked_sub(n)?;
            Some(())
        })
        .is_some()
    }

    /// Gives back `n` slots.
    pub(crate) fn give_back(&self, n: u32) {
        self.release(|s| s.avail = s.avail.saturating_add(n).min(s.total));
    }
}
