//! A held lease as the client sees it: until when it is surely valid, and whether it is lost.
//!
//! Invariant: validity is computed from the local clock at the moment the granting command
//! was *sent* (acquire or renewal), minus a drift margin, so the client believes it holds
//! the lock only while the server's key certainly still exists; "lost" is final, and
//! nothing changes the lease after the guard stopped it (released or dropped).
//!
//! A guard's lease also reports its transitions (renewed, renewal failed, lost) to an
//! [`Observer`]: the lease is the one place every path that changes it goes through, so
//! the metrics and lease events cannot miss one or report one twice.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

use crate::error::{Error, Result};
use crate::events::{LeaseEvents, LostReason, Observer, RenewalFailure};
use crate::runtime::Clock;
use crate::sync::{Mutex, lock};

/// Shortest accepted lease. Below this the drift margin and a loopback round trip eat most
/// of the lease and the watchdog would renew every few milliseconds.
pub const MIN_TTL: Duration = Duration::from_millis(10);

/// Longest accepted lease: a day. Longer critical sections should use the watchdog; the
/// bound keeps every millisecond and microsecond computation (client and Lua) far from
/// overflow.
pub const MAX_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// Relative clock drift allowed between client and server, as in the Redis RedLock spec
/// (`CLOCK_DRIFT_FACTOR = 0.01`): 1 % of the TTL ...
pub const CLOCK_DRIFT_DIVISOR: u32 = 100;

/// ... plus a fixed 2 ms for timer granularity (also from the RedLock spec).
pub const CLOCK_DRIFT_FLOOR: Duration = Duration::from_millis(2);

/// Checks `ttl` against [`MIN_TTL`]..=[`MAX_TTL`].
pub(crate) fn validate_ttl(name: &str, ttl: Duration) -> Result<()> {
    if (MIN_TTL..=MAX_TTL).contains(&ttl) {
        Ok(())
    } else {
        Err(Error::InvalidTtl {
            name: name.to_owned(),
            ttl,
            min: MIN_TTL,
            max: MAX_TTL,
        })
    }
}

/// How long before the server-side expiry the client stops trusting its lease. Always less
/// than `ttl` for accepted TTLs (10 ms -> 2.1 ms), so validity never underflows.
pub(crate) fn safety_margin(ttl: Duration) -> Duration {
    ttl / CLOCK_DRIFT_DIVISOR + CLOCK_DRIFT_FLOOR
}

/// The lease's state at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseState {
    /// Local clock reading after which the lease may have expired on the server.
    pub valid_until: Duration,
    /// The lease was lost (final).
    pub lost: bool,
    /// The guard released or dropped the lease (final); nothing changes afterwards.
    pub stopped: bool,
}

/// The synchronous core of a lease, shared by the guard, its watchdog and `lost()` futures.
#[derive(Debug)]
pub struct LeaseCell {
    state: Mutex<LeaseState>,
}

impl LeaseCell {
    /// A live lease valid until `valid_until`.
    pub fn new(valid_until: Duration) -> Self {
        Self {
            state: Mutex::new(LeaseState {
                valid_until,
                lost: false,
                stopped: false,
            }),
        }
    }

    /// The current state.
    pub fn snapshot(&self) -> LeaseState {
        *lock(&self.state)
    }

    /// Records a confirmed renewal; ignored (false) once lost or stopped.
    pub fn renewed(&self, valid_until: Duration) -> bool {
        let mut state = lock(&self.state);
        if state.lost || state.stopped {
            return false;
        }
        state.valid_until = state.valid_until.max(valid_until);
        true
    }

    /// Marks the lease lost; true only for the first call before a stop.
    pub fn mark_lost(&self) -> bool {
        let mut state = lock(&self.state);
        if state.lost || state.stopped {
            return false;
        }
        state.lost = true;
        true
    }

    /// Stops the lease (release or drop) and returns the state just before.
    pub fn stop(&self) -> LeaseState {
        let mut state = lock(&self.state);
        let before = *state;
        state.stopped = true;
        before
    }
}

/// A lease with its clock and change notifications.
pub(crate) struct Lease {
    cell: LeaseCell,
    changed: Notify,
    clock: Arc<dyn Clock>,
    ttl: Duration,
    /// How long before the server-side expiry the client stops trusting the lease.
    margin: Duration,
    /// Set once the lease belongs to a guard; an acquire's lease reports nothing.
    observer: Option<Observer>,
    /// Held while a renewal failure is checked and reported, and while the lease is marked
    /// lost and that is reported, so the reports keep their order (failures, then lost)
    /// even when the watchdog's last renewal times out in the same instant as `lost()`
    /// finds the validity over on another thread.
    reporting: Mutex<()>,
}

impl Lease {
    /// A lease of configured length `ttl`, which a command sent at `sent_at` found to have
    /// `granted` left on the server (the full `ttl` for a fresh grant).
    pub(crate) fn new(
        clock: Arc<dyn Clock>,
        ttl: Duration,
        sent_at: Duration,
        granted: Duration,
    ) -> Self {
        Self::with_margin(clock, ttl, safety_margin(ttl), sent_at, granted)
    }

    /// As [`Lease::new`] with an explicit drift `margin` (RedLock's is configurable).
    pub(crate) fn with_margin(
        clock: Arc<dyn Clock>,
        ttl: Duration,
        margin: Duration,
        sent_at: Duration,
        granted: Duration,
    ) -> Self {
        Self {
            cell: LeaseCell::new(Self::expiry(margin, sent_at, granted)),
            changed: Notify::new(),
            clock,
            ttl,
            margin,
            observer: None,
            reporting: Mutex::new(()),
        }
    }

    /// Reports this lease's transitions to `observer` from now on (a guard's lease).
    pub(crate) fn observe(&mut self, observer: Observer) {
        self.observer = Some(observer);
    }

    /// A reader of this lease's events from now on.
    pub(crate) fn events(&self) -> LeaseEvents {
        self.observer
            .as_ref()
            .map_or_else(LeaseEvents::closed, Observer::subscribe)
    }

    fn expiry(margin: Duration, sent_at: Duration, granted: Duration) -> Duration {
        sent_at + granted.saturating_sub(margin)
    }

    pub(crate) fn ttl(&self) -> Duration {
        self.ttl
    }

    pub(crate) fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    pub(crate) fn snapshot(&self) -> LeaseState {
        self.cell.snapshot()
    }

    /// Records a renewal confirmed by the server, sent at `sent_at`.
    pub(crate) fn renewed(&self, sent_at: Duration) -> bool {
        let applied = self
            .cell
            .renewed(Self::expiry(self.margin, sent_at, self.ttl));
        self.changed.notify_waiters();
        if let Some(observer) = self.observer.as_ref().filter(|_| applied) {
            observer.renewed(self.remaining());
        }
        applied
    }

    /// Reports a failed renewal attempt (ignored once lost or stopped: it changes nothing).
    pub(crate) fn renewal_failed(&self, failure: RenewalFailure) {
        let _in_order = lock(&self.reporting);
        let state = self.snapshot();
        if state.lost || state.stopped {
            return;
        }
        if let Some(observer) = &self.observer {
            observer.renewal_failed(failure, self.remaining());
        }
    }

    /// Marks the lease lost for `reason`; true only for the first call before a stop.
    pub(crate) fn mark_lost(&self, reason: LostReason) -> bool {
        let in_order = lock(&self.reporting);
        let first = self.cell.mark_lost();
        if let Some(observer) = self.observer.as_ref().filter(|_| first) {
            observer.lost(reason);
        }
        drop(in_order);
        self.changed.notify_waiters();
        first
    }

    /// Stops the lease (release or drop) and returns the state just before. A lease that
    /// had run out unnoticed (no watchdog) is marked lost first, so it is reported once.
    pub(crate) fn stop(&self) -> LeaseState {
        if self.clock.now() >= self.snapshot().valid_until {
            self.mark_lost(LostReason::Expired);
        }
        let before = self.cell.stop();
        self.changed.notify_waiters();
        before
    }

    /// Lost, or past the local validity deadline.
    pub(crate) fn is_lost(&self) -> bool {
        let state = self.snapshot();
        state.lost || self.clock.now() >= state.valid_until
    }

    /// How much longer the lease is surely valid (zero once lost).
    pub(crate) fn remaining(&self) -> Duration {
        let state = self.snapshot();
        if state.lost {
            return Duration::ZERO;
        }
        state.valid_until.saturating_sub(self.clock.now())
    }

    /// Resolves once the lease is lost: marked by the watchdog, or the local validity
    /// deadline passed without a confirmed renewal.
    pub(crate) async fn lost(&self) {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let state = self.snapshot();
            if state.lost {
                return;
            }
            let now = self.clock.now();
            if now >= state.valid_until {
                self.mark_lost(LostReason::Expired);
                return;
            }
            let sleep = self.clock.sleep(state.valid_until - now);
            tokio::select! {
                biased;
                () = &mut notified => {}
                () = sleep => {}
            }
        }
    }

    /// Resolves once the lease is stopped.
    pub(crate) async fn stopped(&self) {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.snapshot().stopped {
                return;
            }
            notified.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn margin_never_exceeds_ttl() {
        for ttl in [
            MIN_TTL,
            Duration::from_millis(11),
            Duration::from_secs(1),
            MAX_TTL,
        ] {
            assert!(safety_margin(ttl) < ttl, "{ttl:?}");
        }
    }

    #[test]
    fn ttl_bounds() {
        assert!(validate_ttl("x", Duration::ZERO).is_err());
        assert!(validate_ttl("x", MIN_TTL - Duration::from_nanos(1)).is_err());
        assert!(validate_ttl("x", MIN_TTL).is_ok());
        assert!(validate_ttl("x", MAX_TTL).is_ok());
        assert!(validate_ttl("x", MAX_TTL + Duration::from_millis(1)).is_err());
    }

    #[test]
    fn lost_is_final_and_stop_freezes() {
        let cell = LeaseCell::new(Duration::from_secs(1));
        assert!(cell.renewed(Duration::from_secs(2)));
        assert!(cell.mark_lost());
        assert!(!cell.renewed(Duration::from_secs(3)));
        assert!(!cell.mark_lost());
        let cell = LeaseCell::new(Duration::from_secs(1));
        cell.stop();
        assert!(!cell.mark_lost());
        assert!(!cell.renewed(Duration::from_secs(5)));
        assert_eq!(cell.snapshot().valid_until, Duration::from_secs(1));
    }
}
