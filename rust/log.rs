// SPDX-License-Identifier: GPL-2.0

//! Rate-limited logging for anything a remote peer can trigger.
//!
//! `pr_*_ratelimited!` print at most [`BURST`] messages per [`INTERVAL_MS`]
//! from each call site (as the kernel's printk_ratelimited does), and say how
//! many were suppressed when printing resumes. The limiter itself is pure
//! logic in [`crate::proto::ratelimit`].

use crate::bindings;

/// Length of a rate-limit window (the kernel's `DEFAULT_RATELIMIT_INTERVAL`).
pub(crate) const INTERVAL_MS: u64 = 5000;
/// Messages printed per window and call site (`DEFAULT_RATELIMIT_BURST`).
pub(crate) const BURST: u32 = 10;

/// Milliseconds of the monotonic clock (coarse; fine for rate limiting).
pub(crate) fn now_ms() -> u64 {
    // SAFETY: reads a clock; callable from any context.
    unsafe { bindings::svcrdma_rs_now_ms() }
}

/// Prints with `$pr` (`pr_err`, `pr_warn`, …) unless this call site is over
/// its budget.
macro_rules! ratelimited {
    ($pr:ident, $($arg:tt)*) => {{
        static LIMIT: $crate::proto::ratelimit::RateLimit =
            $crate::proto::ratelimit::RateLimit::new();
        if let $crate::proto::ratelimit::Verdict::Print { suppressed } =
            LIMIT.check($crate::log::now_ms(), $crate::log::INTERVAL_MS, $crate::log::BURST)
        {
            if suppressed > 0 {
                ::kernel::$pr!("{} similar messages suppressed\n", suppressed);
            }
            ::kernel::$pr!($($arg)*);
        }
    }};
}

/// `pr_err!`, rate-limited per call site.
#[allow(unused_macros)]
macro_rules! pr_err_ratelimited {
    ($($arg:tt)*) => { $crate::log::ratelimited!(pr_err, $($arg)*) };
}

/// `pr_warn!`, rate-limited per call site.
macro_rules! pr_warn_ratelimited {
    ($($arg:tt)*) => { $crate::log::ratelimited!(pr_warn, $($arg)*) };
}

/// `pr_info!`, rate-limited per call site.
#[allow(unused_macros)]
macro_rules! pr_info_ratelimited {
    ($($arg:tt)*) => { $crate::log::ratelimited!(pr_info, $($arg)*) };
}

#[allow(unused_imports)]
pub(crate) use {pr_err_ratelimited, pr_info_ratelimited, pr_warn_ratelimited, ratelimited};

/// Shows a `core::fmt::Display` value (from [`crate::proto`]) in `pr_*!`,
/// which take the kernel's own `Display`.
pub(crate) struct Show<T>(pub(crate) T);

impl<T: core::fmt::Display> kernel::fmt::Display for Show<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        core::fmt::Display::fmt(&self.0, f)
    }
}
