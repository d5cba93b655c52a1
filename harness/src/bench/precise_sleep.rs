//! Holding a critical section (or thinking between acquisitions) for the stated time, not the
//! stated time rounded up to tokio's next timer tick.
//!
//! tokio's timer wheel has millisecond resolution and never fires early, so `sleep(1 ms)`
//! returns after 1–2.3 ms (the quick grid's "cs 1 ms" held 2,148–2,313 µs). Here tokio's timer
//! covers the bulk and stops [`TOKIO_SLACK`] early, a blocking-pool thread sleeps on the OS
//! timer to [`SPIN_TAIL`] before the deadline and spins the rest (the OS timer alone overshoots
//! by 50 µs or more of timer slack), and a final yield loop makes sure the pause is never
//! shorter than asked. What remains is the wake-up of the waiting task; the workload measures
//! the hold it really got and reports it.

use std::time::{Duration, Instant};

/// How early tokio's timer must stop so it cannot overshoot the deadline: one tick of its
/// millisecond wheel for the round-up, one for a late wake-up of a busy worker.
const TOKIO_SLACK: Duration = Duration::from_millis(2);
/// How long before the deadline the blocking thread stops sleeping and spins: above Linux's
/// default 50 µs timer slack plus a wake-up, and short enough that spinning costs at most a
/// tenth of a 1 ms section's CPU.
const SPIN_TAIL: Duration = Duration::from_micros(100);

/// Returns no earlier than `duration` from now, and as little after as the OS timer allows.
pub async fn pause(duration: Duration) {
    if duration.is_zero() {
        return;
    }
    let deadline = Instant::now() + duration;
    if duration > TOKIO_SLACK {
        tokio::time::sleep_until(tokio::time::Instant::from_std(deadline - TOKIO_SLACK)).await;
    }
    let rest = deadline.saturating_duration_since(Instant::now());
    if !rest.is_zero() {
        // A failed join (the runtime shutting down) only skips to the yield loop below.
        let _ = tokio::task::spawn_blocking(move || {
            if let Some(sleep) = rest.checked_sub(SPIN_TAIL) {
                std::thread::sleep(sleep);
            }
            while Instant::now() < deadline {
                std::hint::spin_loop();
            }
        })
        .await;
    }
    while Instant::now() < deadline {
        tokio::task::yield_now().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn never_returns_early() {
        for micros in [0, 300, 1_000, 2_500, 10_000] {
            let asked = Duration::from_micros(micros);
            let started = Instant::now();
            pause(asked).await;
            assert!(started.elapsed() >= asked, "{asked:?}");
        }
    }
}
