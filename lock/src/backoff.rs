//! Capped exponential backoff with full jitter, the one retry schedule of the crate (Spin
//! waits, release and probe retries, watchdog retries).
//!
//! Full jitter (a uniform draw in `[0, min(max, initial * 2^n)]`, from AWS's "Exponential
//! Backoff And Jitter") spreads competing retries apart; draws come from the client's
//! [`Entropy`](crate::runtime::Entropy) so the simulator replays them.

use std::time::Duration;

use crate::runtime::Runtime;

/// Bounds of a capped exponential backoff with full jitter: retry `n` waits a uniform draw
/// in `[0, min(max, initial * 2^n)]`.
///
/// A user meets it in [`WaitStrategy::Spin`](crate::WaitStrategy::Spin), whose waiters
/// re-poll a busy lock on this schedule (each delay also capped by the holder's remaining
/// lease); [`Backoff::SPIN`] is the default there.
///
/// ```no_run
/// # async fn demo(client: leasehold::Client) -> leasehold::Result<()> {
/// use std::time::Duration;
/// use leasehold::{Backoff, WaitStrategy};
///
/// // Poll a contended lock less eagerly than the default: from 5 ms up to 250 ms.
/// let gentle = Backoff { initial: Duration::from_millis(5), max: Duration::from_millis(250) };
/// assert_eq!(gentle.ceiling(1), Duration::from_millis(10));
/// let guard = client.mutex("reports:nightly").wait(WaitStrategy::Spin(gentle)).lock().await?;
/// guard.unlock().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// Ceiling of the first delay.
    pub initial: Duration,
    /// Largest ceiling; doubling stops here.
    pub max: Duration,
}

impl Backoff {
    /// Spin default: first ceiling 1 ms (about ten loopback EVALSHA round trips, docs/DESIGN.md §4)
    /// doubling to 100 ms, so a waiter re-polls a busy hot lock at least ten times a second.
    pub const SPIN: Backoff = Backoff {
        initial: Duration::from_millis(1),
        max: Duration::from_millis(100),
    };

    /// Retries after a lost connection (release, probe, renewal): 10 ms up to 1 s, about
    /// the reconnect cadence of redis-rs' connection manager.
    pub const RECONNECT: Backoff = Backoff {
        initial: Duration::from_millis(10),
        max: Duration::from_secs(1),
    };

    /// The jitter ceiling of retry number `retry` (0-based).
    pub fn ceiling(&self, retry: u32) -> Duration {
        let factor = 1u32.checked_shl(retry.min(31)).unwrap_or(u32::MAX);
        self.initial.saturating_mul(factor).min(self.max)
    }
}

/// A running schedule: each call draws the next delay.
#[derive(Debug)]
pub(crate) struct Retry {
    backoff: Backoff,
    retries: u32,
}

impl Retry {
    pub(crate) fn new(backoff: Backoff) -> Self {
        Self {
            backoff,
            retries: 0,
        }
    }

    /// The next delay, with its ceiling additionally capped by `cap`.
    pub(crate) fn next_delay(&mut self, runtime: &Runtime, cap: Option<Duration>) -> Duration {
        let mut ceiling = self.backoff.ceiling(self.retries);
        self.retries = self.retries.saturating_add(1);
        if let Some(cap) = cap {
            ceiling = ceiling.min(cap);
        }
        runtime.jitter(ceiling)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ceiling_doubles_then_caps() {
        let b = Backoff::SPIN;
        assert_eq!(b.ceiling(0), Duration::from_millis(1));
        assert_eq!(b.ceiling(3), Duration::from_millis(8));
        assert_eq!(b.ceiling(7), Duration::from_millis(100));
        assert_eq!(b.ceiling(u32::MAX), Duration::from_millis(100));
    }
}
