// SPDX-License-Identifier: GPL-2.0

//! A pool that nfsd threads wait on in turn, and that a closing connection
//! empties of waiters at once.
//!
//! A connection's send-queue slots ([`super::sq_slots::SendQueue`]) and its FRMR
//! entries ([`super::frmr::MrFree`]) are each one [`FairPool`]: its stock
//! behind one lock, and two wait queues. A thread that cannot be served at
//! once takes a ticket; tickets are served in the order they were taken, so
//! a newcomer never overtakes a thread that is already waiting (it queues
//! behind it even when the stock would cover its own smaller need). The
//! ticket being served waits on `room` for stock; the others wait on `turn`.
//!
//! [`FairPool::close`] (the connection is closing) wakes every waiter, and
//! every wait re-checks both that and the caller's own "closing" test
//! (sunrpc's `XPT_CLOSE`), so no thread sleeps on a connection nobody will
//! serve again. While anyone holds a ticket, [`FairPool::waiting`] says so
//! without taking the lock (`xpo_has_wspace`).
//!
//! The lock disables interrupts: [`FairPool::close`] runs from QP event
//! handlers, which some providers call in softirq or interrupt context.

use kernel::{
    new_condvar, new_spinlock_irq,
    prelude::*,
    sync::{
        atomic::{ordering::Relaxed, Atomic},
        CondVar, SpinLockIrq,
    },
};

/// What the lock protects.
struct Inner<S> {
    stock: S,
    /// Permanent: nothing is handed out any more.
    closed: bool,
    /// The next ticket to hand out.
    next: u32,
    /// The ticket being served (`next` when nobody waits).
    serving: u32,
}

/// A stock handed out in ticket order.
#[pin_data]
pub(crate) struct FairPool<S> {
    #[pin]
    inner: SpinLockIrq<Inner<S>>,
    /// The ticket being served waits here for stock.
    #[pin]
    room: CondVar,
    /// The other ticket holders wait here for their turn.
    #[pin]
    turn: CondVar,
    /// Ticket holders (read without the lock by [`FairPool::waiting`]).
    waiters: Atomic<u32>,
}

impl<S: Unpin> FairPool<S> {
    /// A pool holding `stock`.
    pub(crate) fn new(stock: S) -> impl PinInit<Self> {
        pin_init!(Self {
            inner <- new_spinlock_irq!(Inner {
                stock,
                closed: false,
                next: 0,
                serving: 0,
            }),
            room <- new_condvar!(),
            turn <- new_condvar!(),
            waiters: Atomic::new(0),
        })
    }

    /// Takes what `take` finds in the stock (it returns `None` while the
    /// stock cannot cover the need), waiting in line while it cannot, or
    /// while others wait before us. Fails with `ENOTCONN` once the pool is
    /// closed or `closing()` says so (then it closes the pool, for the
    /// threads queued behind).
    pub(crate) fn acquire<R>(
        &self,
        closing: impl Fn() -> bool,
        on_wait: impl FnOnce(),
        mut take: impl FnMut(&mut S) -> Option<R>,
    ) -> Result<R> {
        let mut g = self.inner.lock();
        if g.closed || closing() {
            return Err(ENOTCONN);
        }
        if g.next == g.serving {
            if let Some(r) = take(&mut g.stock) {
                return Ok(r);
            }
        }
        on_wait();
        let ticket = g.next;
        g.next = g.next.wrapping_add(1);
        self.waiters.fetch_add(1, Relaxed);
        let got = loop {
            if g.closed || closing() {
                break None;
            }
            if g.serving != ticket {
                self.turn.wait(&mut g);
                continue;
            }
            match take(&mut g.stock) {
                Some(r) => break Some(r),
                None => self.room.wait(&mut g),
            }
        };
        self.waiters.fetch_sub(1, Relaxed);
        match got {
            Some(r) => {
                // Our turn is over: the next ticket's begins.
                g.serving = g.serving.wrapping_add(1);
                drop(g);
                // Every ticket holder looks; only the next one goes on
                // (one wake-up per thread served, not per release).
                self.turn.notify_all();
                Ok(r)
            }
            None => {
                // Leaving out of turn: nobody may wait behind us.
                g.closed = true;
                drop(g);
                self.wake_all();
                Err(ENOTCONN)
            }
        }
    }

    /// Takes what `take` finds in the stock at once, or nothing: `None`
    /// while the stock cannot cover the need, while anyone waits in line
    /// (a newcomer never overtakes them), or once the pool is closed or
    /// `closing()`. Never sleeps (completion context).
    pub(crate) fn try_acquire<R>(
        &self,
        closing: impl Fn() -> bool,
        take: impl FnOnce(&mut S) -> Option<R>,
    ) -> Option<R> {
        let mut g = self.inner.lock();
        if g.closed || closing() || g.next != g.serving {
            return None;
        }
        take(&mut g.stock)
    }

    /// Gives back to the stock (`give` adds to it) and wakes the ticket
    /// being served.
    pub(crate) fn release(&self, give: impl FnOnce(&mut S)) {
        give(&mut self.inner.lock().stock);
        // Only a ticket holder sleeps on `room`, and it counts itself in
        // `waiters` under the lock before it sleeps: if its lock section
        // came before ours, the count is seen here (its unlock, our lock
        // and unlock order the two); if it came after, it saw the stock we
        // gave and did not sleep. So no waiter means nobody to wake, and
        // the common release takes no wait-queue lock.
        if self.waiting() {
            self.room.notify_all();
        }
    }

    /// Changes the stock without waking anyone (set-up).
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut S) -> R) -> R {
        f(&mut self.inner.lock().stock)
    }

    /// Closes the pool: every waiter returns `ENOTCONN`, and so does every
    /// later [`FairPool::acquire`]. Any context.
    pub(crate) fn close(&self) {
        // Under the lock: a thread between its check and its sleep holds it,
        // so the wake-up below comes after that thread sleeps.
        self.inner.lock().closed = true;
        self.wake_all();
    }

    /// Whether a thread waits in line.
    pub(crate) fn waiting(&self) -> bool {
        self.waiters.load(Relaxed) != 0
    }

    fn wake_all(&self) {
        self.room.notify_all();
        self.turn.notify_all();
    }
}
