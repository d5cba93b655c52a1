//! The watchdog: renews a held lease every TTL/3 (sooner when little of it is left) and
//! declares it lost in time.
//!
//! Invariants: it starts only for a guard (never for an acquire that was cancelled), stops
//! as soon as the guard is released or dropped, and marks the lease lost when the server
//! says the hold is gone or when renewals kept failing until the local validity deadline —
//! by the client's own clock, before the holder could act on an expired lease. Every
//! failed attempt is reported to the lease (metrics, lease events) before it is retried.

use std::sync::Arc;
use std::time::Duration;

use tracing::Instrument;

use crate::backend::BoxFuture;
use crate::backoff::{Backoff, Retry};
use crate::events::{LostReason, RenewalFailure};
use crate::lease::Lease;
use crate::protocol::CallError;
use crate::runtime::Runtime;

/// Renew after this fraction of the TTL: with 1/3 (Redisson's `lockWatchdogTimeout / 3`)
/// two renewals in a row can fail before the lease is in danger.
pub const RENEWALS_PER_TTL: u32 = 3;

/// What a watchdog keeps alive: one hold ([`Hold`](crate::hold::Hold)), or a RedLock's
/// holds on its masters (renewed only when a quorum confirms).
pub(crate) trait Renewable: Send + Sync + 'static {
    /// The runtime whose clock, timers and entropy pace the renewals.
    fn runtime(&self) -> &Runtime;
    /// The span renewals are logged under.
    fn span(&self) -> &tracing::Span;
    /// One renewal for another `ttl`: `Ok(true)` renewed, `Ok(false)` definitely gone.
    fn renew(&self, ttl: Duration) -> BoxFuture<'_, Result<bool, CallError>>;
}

/// Starts the watchdog of a freshly granted lease.
pub(crate) fn spawn<R: Renewable>(hold: Arc<R>, lease: Arc<Lease>) {
    let span = hold.span().clone();
    let spawner = Arc::clone(&hold.runtime().spawner);
    spawner.spawn(Box::pin(run(hold, lease).instrument(span)));
}

async fn run<R: Renewable>(hold: Arc<R>, lease: Arc<Lease>) {
    let clock = Arc::clone(lease.clock());
    let interval = lease.ttl() / RENEWALS_PER_TTL;
    let mut next = next_renewal(&lease, clock.now(), interval);
    loop {
        let pause = next.saturating_sub(clock.now());
        tokio::select! {
            biased;
            () = lease.stopped() => return,
            () = clock.sleep(pause) => {}
        }
        match renew_until_valid(hold.as_ref(), &lease).await {
            Some(sent) => next = next_renewal(&lease, sent, interval),
            None => return,
        }
    }
}

/// When to renew next, from `from`: after `interval` (TTL/3), or halfway through what is
/// left of the lease if that is sooner. A lease born with little validity (a grant
/// resolved by the probe with a small PTTL, a slow reply, a handed-over permit's short
/// entry) is renewed in time instead of being declared lost.
fn next_renewal(lease: &Lease, from: Duration, interval: Duration) -> Duration {
    let left = lease.snapshot().valid_until.saturating_sub(from);
    from + interval.min(left / 2)
}

/// Renews, retrying failures while the lease is still valid. Returns when the renewal was
/// sent, or `None` when the watchdog must stop (stopped, lost, or validity ran out).
async fn renew_until_valid<R: Renewable>(hold: &R, lease: &Lease) -> Option<Duration> {
    let runtime = hold.runtime();
    let mut retry = Retry::new(Backoff::RECONNECT);
    loop {
        let state = lease.snapshot();
        if state.stopped || state.lost {
            return None;
        }
        let sent = runtime.clock.now();
        let Some(left) = state.valid_until.checked_sub(sent).filter(|d| !d.is_zero()) else {
            tracing::warn!("renewals failed until the lease's validity ran out");
            lease.mark_lost(LostReason::Expired);
            return None;
        };
        let renewal = hold.renew(lease.ttl());
        let outcome = tokio::select! {
            biased;
            () = lease.stopped() => return None,
            outcome = runtime.timeout(left, renewal) => outcome,
        };
        match outcome {
            Some(Ok(true)) => {
                lease.renewed(sent);
                return Some(sent);
            }
            Some(Ok(false)) => {
                tracing::warn!("renewal found the hold gone");
                lease.mark_lost(LostReason::NotHeld);
                return None;
            }
            Some(Err(CallError::Transport(err))) => {
                tracing::debug!(error = %err, "renewal failed; retrying");
                lease.renewal_failed(RenewalFailure::Transport(err));
            }
            Some(Err(CallError::Failed(err))) => {
                tracing::warn!(error = %err, "renewal failed");
                lease.renewal_failed(RenewalFailure::Failed(err));
            }
            None => {
                // The validity ran out waiting for the answer: the next round declares it lost.
                lease.renewal_failed(RenewalFailure::Timeout);
                continue;
            }
        }
        let left = lease
            .snapshot()
            .valid_until
            .saturating_sub(runtime.clock.now());
        let delay = retry.next_delay(runtime, Some(left));
        tokio::select! {
            biased;
            () = lease.stopped() => return None,
            () = runtime.clock.sleep(delay) => {}
        }
    }
}
