//! The guard of a RedLock: validity, quorum renewal, `lost()`, release on every master.
//!
//! Invariant: as for [`Guard`](crate::Guard), the holds are released exactly once — by
//! [`RedLockGuard::unlock`] or, on drop, by background tasks on each master's client —
//! and the lease is trusted only until the last quorum-confirmed grant or renewal's send
//! time + TTL − drift.

use std::sync::Arc;

use tracing::Instrument;

use super::quorum::Quorum;
use crate::error::{Error, Result};
use crate::events::{LostReason, Observer};
use crate::fencing::FencingToken;
use crate::guard::lease_views;
use crate::lease::Lease;
use crate::metrics::{self, Ambiguity, Labels};
use crate::owner::HoldId;
use crate::protocol::CallError;
use crate::watchdog::Renewable;

/// Proof of holding a [`RedLock`](super::RedLock) on a quorum of masters.
///
/// Dropping the guard releases every master in the background. Call
/// [`RedLockGuard::unlock`] to release in line.
#[must_use = "dropping the guard releases the lock"]
pub struct RedLockGuard {
    quorum: Arc<Quorum>,
    token: FencingToken,
    granted: usize,
    lease: Arc<Lease>,
    released: bool,
}

impl std::fmt::Debug for RedLockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedLockGuard")
            .field("name", &self.name())
            .field("granted", &self.granted)
            .field("token", &self.token)
            .finish_non_exhaustive()
    }
}

impl RedLockGuard {
    pub(super) fn new(
        quorum: Arc<Quorum>,
        token: FencingToken,
        granted: usize,
        mut lease: Lease,
    ) -> Self {
        if let Some(first) = quorum.holds.first() {
            lease.observe(Observer::new(
                Labels::REDLOCK,
                first.lock.name.clone(),
                first.id.clone(),
                first.client.lease_listener.clone(),
            ));
        }
        let lease = Arc::new(lease);
        if quorum.holds.first().is_some_and(|h| h.config.watchdog) {
            quorum.watchdog.register(&quorum, &lease);
        }
        tracing::debug!(parent: &quorum.span, %token, granted, "acquired on a quorum");
        Self {
            quorum,
            token,
            granted,
            lease,
            released: false,
        }
    }

    /// The lock name.
    pub fn name(&self) -> &str {
        self.quorum
            .holds
            .first()
            .map_or("", |hold| hold.lock.name.as_str())
    }

    /// How many masters had granted the lock when the acquire answered (at least the
    /// quorum; masters that grant later hold it too, and are released with the rest).
    pub fn granted(&self) -> usize {
        self.granted
    }

    /// The hold id on each master, in master order (each master's hold has its own id;
    /// the masters that did not grant it simply lack it). For finding the hold on a
    /// master, for example with the `leasehold` ops tool.
    pub fn hold_ids(&self) -> impl Iterator<Item = &HoldId> {
        self.quorum.holds.iter().map(|hold| &hold.id)
    }

    /// The largest of the per-master fencing tokens of the granting quorum.
    ///
    /// Each master issues `max(last + 1, its server time in µs)`, strictly increasing *per
    /// master*. Any two quorums share a master, so the next holder's token on that master
    /// exceeds this holder's token there — but not necessarily this maximum, which may come
    /// from a master with a faster clock. Across holders, the maximum therefore grows as
    /// long as the masters' clocks agree within the time between two holders; a master
    /// clock that jumps, or one that runs ahead, can break it, and so can a master that
    /// restarts without persistence *and* with its clock behind. A resource that needs
    /// strict fencing should use a single-master [`Mutex`](crate::Mutex) token instead.
    pub fn fencing_token(&self) -> FencingToken {
        self.token
    }

    lease_views!(lease);

    /// Renews on a quorum of masters for another TTL from now.
    ///
    /// [`Error::LeaseLost`] if the validity had already run out; [`Error::NotHeld`] if so
    /// many masters deny the hold that no quorum is possible; [`Error::Ambiguous`] if too
    /// few masters answered in time.
    pub async fn extend(&self) -> Result<()> {
        let name = self.name().to_owned();
        if self.lease.is_lost() {
            self.lease.mark_lost(LostReason::Expired);
            return Err(Error::LeaseLost { name });
        }
        let sent = self.lease.clock().now();
        let renewal = self.quorum.renew(self.lease.ttl());
        match renewal.instrument(self.quorum.span.clone()).await {
            Ok(true) if self.lease.renewed(sent) => Ok(()),
            Ok(true) => Err(Error::LeaseLost { name }),
            Ok(false) => {
                self.lease.mark_lost(LostReason::NotHeld);
                Err(Error::NotHeld { name })
            }
            Err(CallError::Transport(source)) => {
                metrics::ambiguous(Labels::REDLOCK, "extend", Ambiguity::Surfaced);
                Err(Error::Ambiguous {
                    name,
                    operation: "extend",
                    source,
                })
            }
            Err(CallError::Failed(err)) => Err(err),
        }
    }

    /// Releases on every master, and answers once a quorum confirmed (the other masters
    /// finish in the background, and those that do not answer in time are released in the
    /// background until the lease would have ended). `Ok` if the lease was still valid;
    /// [`Error::LeaseLost`] if it had run out, [`Error::NotHeld`] if too many masters had
    /// no record of it for a quorum.
    ///
    /// Cancellation-safe: if this future is dropped before every master answered, the
    /// guard's drop releases on every master in the background (releases are idempotent).
    pub async fn unlock(mut self) -> Result<()> {
        let before = self.lease.stop();
        let expired = before.lost || self.lease.clock().now() >= before.valid_until;
        let name = self.name().to_owned();
        let ttl = self.lease.ttl();
        let span = self.quorum.span.clone();
        let not_held = self.quorum.release(ttl).instrument(span).await;
        // Every master answered or was handed to the background: the drop must not.
        self.released = true;
        if expired {
            Err(Error::LeaseLost { name })
        } else if self.quorum.holds.len() - not_held < self.quorum.size() {
            Err(Error::NotHeld { name })
        } else {
            Ok(())
        }
    }
}

impl Drop for RedLockGuard {
    fn drop(&mut self) {
        if !self.released {
            self.lease.stop();
            self.quorum.release_in_background(self.lease.ttl());
        }
    }
}
