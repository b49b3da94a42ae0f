// SPDX-License-Identifier: GPL-2.0

//! The log rate limiter.

use svcrdma_proto::ratelimit::{RateLimit, Verdict};

#[test]
fn burst_then_suppress_then_report_in_next_window() {
    let rl = RateLimit::new();
    let t0 = 1_000_000;
    for i in 0..10 {
        assert_eq!(
            rl.check(t0 + i, 5000, 10),
            Verdict::Print { suppressed: 0 },
            "{i}"
        );
    }
    for i in 10..25 {
        assert_eq!(rl.check(t0 + i, 5000, 10), Verdict::Suppress, "{i}");
    }
    // Next window: printed again, reporting the 15 dropped.
    assert_eq!(
        rl.check(t0 + 5000, 5000, 10),
        Verdict::Print { suppressed: 15 }
    );
    assert_eq!(
        rl.check(t0 + 5001, 5000, 10),
        Verdict::Print { suppressed: 0 }
    );
}

#[test]
fn first_message_at_time_zero_prints() {
    let rl = RateLimit::new();
    assert_eq!(rl.check(0, 5000, 1), Verdict::Print { suppressed: 0 });
    assert_eq!(rl.check(1, 5000, 1), Verdict::Suppress);
    assert_eq!(rl.check(5000, 5000, 1), Verdict::Print { suppressed: 1 });
}

#[test]
fn clock_wrap_opens_a_new_window() {
    let rl = RateLimit::new();
    let t0 = u64::MAX - 10;
    assert_eq!(rl.check(t0, 100, 1), Verdict::Print { suppressed: 0 });
    assert_eq!(rl.check(t0 + 5, 100, 1), Verdict::Suppress);
    assert_eq!(
        rl.check(t0.wrapping_add(200), 100, 1),
        Verdict::Print { suppressed: 1 }
    );
}

#[test]
fn concurrent_callers_print_at_most_burst_per_window_and_count_the_rest() {
    let rl = std::sync::Arc::new(RateLimit::new());
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let rl = rl.clone();
            std::thread::spawn(move || {
                let mut printed = 0;
                for _ in 0..1000 {
                    if let Verdict::Print { .. } = rl.check(42, 1_000_000, 10) {
                        printed += 1;
                    }
                }
                printed
            })
        })
        .collect();
    let printed: u32 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!(printed, 10);
    assert_eq!(
        rl.check(42 + 1_000_000, 1_000_000, 10),
        Verdict::Print { suppressed: 3990 }
    );
}
