// SPDX-License-Identifier: GPL-2.0

//! A lock-free log rate limiter: at most `burst` messages per `interval`,
//! counting what it suppressed so the next printed message can say so.
//!
//! Time is supplied by the caller (milliseconds of a monotonic clock), so the
//! limiter is pure and testable. The window start and the count printed in it
//! share one atomic word, so concurrent callers never print more than
//! `burst` per window, and no suppressed message goes uncounted.

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};

/// What to do with one message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Print it; `suppressed` messages were dropped since the last printed one.
    Print {
        /// Messages suppressed since the last one printed.
        suppressed: u32,
    },
    /// Drop it (counted).
    Suppress,
}

const COUNT_BITS: u32 = 24;
const COUNT_MASK: u64 = (1 << COUNT_BITS) - 1;
const TIME_MASK: u64 = (1 << (64 - COUNT_BITS)) - 1;

/// One call site's limiter; meant to be a `static`.
pub struct RateLimit {
    /// Window start (ms, low 40 bits) << 24 | messages printed in it.
    /// A count of 0 means nothing was ever printed.
    state: AtomicU64,
    suppressed: AtomicU32,
}

impl Default for RateLimit {
    fn default() -> Self {
        Self::new()
    }
}

impl RateLimit {
    /// A limiter that has printed nothing yet.
    pub const fn new() -> Self {
        Self {
            state: AtomicU64::new(0),
            suppressed: AtomicU32::new(0),
        }
    }

    /// Decides about one message at time `now_ms`: the first `burst`
    /// messages of each `interval_ms` window are printed. `burst` is at
    /// least 1 and at most 2^24 - 1; `interval_ms` at most 2^40 - 1.
    pub fn check(&self, now_ms: u64, interval_ms: u64, burst: u32) -> Verdict {
        let burst = u64::from(burst).clamp(1, COUNT_MASK);
        let interval = interval_ms.min(TIME_MASK);
        let now = now_ms & TIME_MASK;
        let mut cur = self.state.load(Relaxed);
        loop {
            let (start, count) = (cur >> COUNT_BITS, cur & COUNT_MASK);
            let expired = now.wrapping_sub(start) & TIME_MASK >= interval;
            let (next, opens) = if count == 0 || expired {
                ((now << COUNT_BITS) | 1, true)
            } else if count < burst {
                (cur + 1, false)
            } else {
                self.suppressed.fetch_add(1, Relaxed);
                return Verdict::Suppress;
            };
            match self.state.compare_exchange(cur, next, Relaxed, Relaxed) {
                Ok(_) if opens => {
                    return Verdict::Print {
                        suppressed: self.suppressed.swap(0, Relaxed),
                    }
                }
                Ok(_) => return Verdict::Print { suppressed: 0 },
                Err(actual) => cur = actual,
            }
        }
    }
}
