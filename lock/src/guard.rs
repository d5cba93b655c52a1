//! The guard of a held lock: fencing token, lease status, extend, re-enter, release.
//!
//! Invariant: every guard's hold is released exactly once — by [`Guard::unlock`], or when
//! the guard is dropped, by a background task on the client's
//! [`Spawner`](crate::runtime::Spawner) (a drop never blocks the caller's executor).

use std::sync::Arc;
use std::time::Duration;

use tracing::Instrument;

use crate::acquire::{self, Grant, Mode};
use crate::error::{Error, Result};
use crate::events::{LostReason, Observer};
use crate::fencing::FencingToken;
use crate::hold::{Hold, Released};
use crate::lease::Lease;
use crate::metrics::{self, Ambiguity};
use crate::owner::{HoldId, Owner};
use crate::protocol::CallError;
use crate::scoped::scoped_guard;

/// How long [`Guard::unlock`] waits in line for the server's answer before leaving the
/// release to the background: two of the connection manager's reconnect intervals
/// ([`Backoff::RECONNECT`](crate::Backoff::RECONNECT)'s 1 s cap), so an outage costs the
/// caller seconds rather than the lease TTL (up to a day).
pub const UNLOCK_WAIT: Duration = Duration::from_secs(2);

/// Proof of holding a lock; see the crate docs for the lease rules.
///
/// Dropping the guard releases the lock in the background (spawned on the client's
/// runtime, retried until the lease would have expired). Call [`Guard::unlock`] to release
/// in line and learn whether the lease was still held.
///
/// A guard dropped after its tokio runtime shut down cannot spawn that release: the lock
/// then stays until its lease ends (the TTL; the watchdog died with the runtime, so no
/// renewal extends it). Unlock guards before shutting the runtime down.
#[must_use = "dropping the guard releases the lock"]
pub struct Guard {
    hold: Arc<Hold>,
    token: FencingToken,
    lease: Arc<Lease>,
    released: bool,
    /// Replicas that acknowledged the acquire (`WAIT`), when configured.
    replicas_acked: Option<u32>,
    /// This guard in the `leasehold_held` gauge; dropped with the guard, after its release.
    _held: metrics::Held,
}

impl std::fmt::Debug for Guard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guard")
            .field("name", &self.hold.lock.name)
            .field("owner", &self.hold.owner)
            .field("token", &self.token)
            .finish_non_exhaustive()
    }
}

impl Guard {
    /// Acquires `hold` in `mode` and wraps the grant; then, if configured, runs `WAIT` for
    /// replicas within what is left of the acquire deadline and of the lease. The guard
    /// exists first, so a call cancelled during `WAIT` drops it (and so releases the hold),
    /// and its watchdog renews the lease while `WAIT` blocks. A `WAIT` that fails or times
    /// out still returns the guard, reporting no replica — unless the replicas are
    /// required: then a grant acknowledged by fewer is released in line and the acquire
    /// fails with [`Error::ReplicasShort`].
    pub(crate) async fn acquire(hold: Arc<Hold>, mode: Mode) -> Result<Self> {
        let grant = acquire::acquire(hold, mode).await?;
        let deadline = grant.deadline;
        let mut guard = Self::new(grant);
        if let Some(replication) = guard.hold.config.replication {
            let (client, span) = (&guard.hold.client, guard.hold.span.clone());
            let left = deadline.map(|d| d.saturating_sub(guard.lease.clock().now()));
            let budget = left.map_or(guard.lease.remaining(), |left| {
                left.min(guard.lease.remaining())
            });
            let marker = &guard.hold.lock.keys.wait_marker;
            let acked = replication
                .acknowledged(client.backend.as_ref(), &client.runtime, marker, budget)
                .instrument(span)
                .await;
            guard.replicas_acked = Some(acked);
            if replication.required && acked < replication.replicas {
                return Err(guard.refuse_short(acked, replication.replicas).await);
            }
        }
        Ok(guard)
    }

    /// Releases a grant that fewer replicas acknowledged than required, and returns the
    /// acquire's error. The release runs in line so that the lock is free once the acquire
    /// returns; one the server does not answer in time goes on in the background (as for
    /// [`unlock`](Self::unlock)), and its error is only logged: the caller's failure is
    /// the missing replicas.
    async fn refuse_short(self, acknowledged: u32, required: u32) -> Error {
        let name = self.hold.lock.name.clone();
        let span = self.hold.span.clone();
        tracing::debug!(
            parent: &span,
            acknowledged,
            required,
            "too few replicas acknowledged; releasing the grant"
        );
        if let Err(err) = self.unlock().await {
            tracing::warn!(
                parent: &span,
                error = %err,
                "releasing a grant short of replicas failed"
            );
        }
        Error::ReplicasShort {
            name,
            acknowledged,
            required,
        }
    }

    /// Wraps a granted hold (taking over its armed release), reports its lease's
    /// transitions, and starts its watchdog if configured.
    pub(crate) fn new(grant: Grant) -> Self {
        let Grant {
            hold,
            token,
            mut lease,
            mut pending,
            ..
        } = grant;
        // From here on the guard's unlock or drop releases the hold.
        pending.disarm();
        lease.observe(Observer::new(
            hold.labels(),
            hold.lock.name.clone(),
            hold.id.clone(),
            hold.client.lease_listener.clone(),
        ));
        let held = metrics::Held::start(hold.labels(), Arc::clone(lease.clock()));
        let lease = Arc::new(lease);
        if hold.config.watchdog {
            hold.client.watchdog.register(&hold, &lease);
        }
        tracing::debug!(parent: &hold.span, %token, "acquired");
        Self {
            hold,
            token,
            lease,
            released: false,
            replicas_acked: None,
            _held: held,
        }
    }

    /// How many replicas acknowledged the acquire, when the mutex was configured with
    /// [`Mutex::wait_replicas`](crate::Mutex::wait_replicas) or
    /// [`Mutex::require_replicas`](crate::Mutex::require_replicas); `None` otherwise. A report,
    /// not a guarantee: see the crate docs on failover.
    pub fn replicas_acked(&self) -> Option<u32> {
        self.replicas_acked
    }

    /// The hold behind this guard (for the read-write lock and semaphore wrappers).
    pub(crate) fn hold(&self) -> &Arc<Hold> {
        &self.hold
    }

    /// The lock name.
    pub fn name(&self) -> &str {
        &self.hold.lock.name
    }

    /// The owner this hold counts for (holds of one owner re-enter).
    pub fn owner(&self) -> &Owner {
        &self.hold.owner
    }

    /// This hold's id: the `hold` field of its tracing span and of the
    /// [`LeaseNotice`](crate::LeaseNotice)s of its lease.
    pub fn hold_id(&self) -> &HoldId {
        &self.hold.id
    }

    /// The fencing token of this holding epoch: strictly greater than every token issued
    /// for this name before the epoch began. Re-entrant holds share their epoch's token.
    pub fn fencing_token(&self) -> FencingToken {
        self.token
    }

    lease_views!(lease);

    /// Renews the lease for another TTL from now.
    ///
    /// Fails with [`Error::LeaseLost`] if the lease had already run out locally (it is not
    /// revived), [`Error::NotHeld`] if the server no longer has the hold.
    pub async fn extend(&self) -> Result<()> {
        let name = &self.hold.lock.name;
        if self.lease.is_lost() {
            self.lease.mark_lost(LostReason::Expired);
            return Err(Error::LeaseLost { name: name.clone() });
        }
        let sent = self.lease.clock().now();
        let renewal = self.hold.renew_once(self.hold.config.ttl);
        match renewal.instrument(self.hold.span.clone()).await {
            Ok(true) if self.lease.renewed(sent) => Ok(()),
            Ok(true) => Err(Error::LeaseLost { name: name.clone() }),
            Ok(false) => {
                self.lease.mark_lost(LostReason::NotHeld);
                Err(Error::NotHeld { name: name.clone() })
            }
            Err(CallError::Transport(source)) => {
                metrics::ambiguous(self.hold.labels(), "extend", Ambiguity::Surfaced);
                Err(Error::Ambiguous {
                    name: name.clone(),
                    operation: "extend",
                    source,
                })
            }
            Err(CallError::Failed(err)) => Err(err),
        }
    }

    /// Takes another hold for the same owner (re-entry): never waits, refreshes the TTL,
    /// and keeps this epoch's fencing token. Each hold is released separately.
    ///
    /// Fails with [`Error::LeaseLost`] if this lease had run out or the server answered that
    /// the lock is no longer this owner's, and with [`Error::Ambiguous`] if the attempt's
    /// reply was lost and it was not granted: that says nothing about this guard's lease.
    pub async fn reenter(&self) -> Result<Guard> {
        if self.lease.is_lost() {
            return Err(Error::LeaseLost {
                name: self.hold.lock.name.clone(),
            });
        }
        match Guard::acquire(self.hold.sibling(), Mode::Reenter).await {
            Ok(guard) => Ok(guard),
            Err(Error::WouldBlock { name, .. }) => Err(Error::LeaseLost { name }),
            Err(err) => Err(err),
        }
    }

    /// Releases this hold and waits for the server's answer, for at most
    /// [`UNLOCK_WAIT`] (or the TTL, if shorter); a release not answered by then goes on in
    /// the background until the lease would have expired anyway, and this returns
    /// [`Error::Ambiguous`].
    ///
    /// `Ok` means the hold was still live on the server and is now released (even if
    /// [`lost`](Self::lost) had fired: the lease ended by local reckoning only);
    /// [`Error::LeaseLost`] or [`Error::NotHeld`] mean it had already ended, so the
    /// critical section may not have been exclusive. A release retried after a lost reply
    /// that finds the hold gone is [`Error::Ambiguous`] (the lost attempt most likely
    /// released it; nothing is left to release), or `LeaseLost` if the lease had run out.
    ///
    /// Cancellation-safe: if this future is dropped before the answer, the guard's drop
    /// hands the release to the background, as for a dropped guard.
    pub async fn unlock(mut self) -> Result<()> {
        let before = self.lease.stop();
        let name = self.hold.lock.name.clone();
        let clock = Arc::clone(self.lease.clock());
        let lease_end = clock.now() + self.hold.config.ttl;
        let give_up_at = clock.now() + self.hold.config.ttl.min(UNLOCK_WAIT);
        let span = self.hold.span.clone();
        let outcome = self.hold.release(give_up_at).instrument(span).await;
        // Answered, or handed to the background below: the drop must not release again.
        self.released = true;
        match outcome {
            Ok(Released::Held) => Ok(()),
            Ok(Released::NotHeld | Released::AfterLostReply(_))
                if before.lost || clock.now() >= before.valid_until =>
            {
                Err(Error::LeaseLost { name })
            }
            Ok(Released::NotHeld) => Err(Error::NotHeld { name }),
            Ok(Released::AfterLostReply(source)) => {
                metrics::ambiguous(self.hold.labels(), "release", Ambiguity::Surfaced);
                Err(Error::Ambiguous {
                    name,
                    operation: "release",
                    source,
                })
            }
            Err(CallError::Transport(source)) => {
                let window = lease_end.saturating_sub(clock.now());
                if !window.is_zero() {
                    self.hold.release_in_background(window);
                }
                metrics::ambiguous(self.hold.labels(), "release", Ambiguity::Surfaced);
                Err(Error::Ambiguous {
                    name,
                    operation: "release",
                    source,
                })
            }
            Err(CallError::Failed(err)) => Err(err),
        }
    }
}

scoped_guard!(Guard, unlock);

impl Drop for Guard {
    fn drop(&mut self) {
        if !self.released {
            self.lease.stop();
            self.hold.release_in_background(self.hold.config.ttl);
        }
    }
}

/// Generates the views of a lease every guard offers — `is_lost`, `remaining`, `lost` and
/// `events` — over `self.$field`, a [`Lease`] or a guard wrapping one (they answer alike).
macro_rules! lease_views {
    ($field:ident) => {
        /// True once the lease is lost or past its local validity deadline.
        pub fn is_lost(&self) -> bool {
            self.$field.is_lost()
        }

        /// How much longer the lease is surely valid by the local clock (zero once lost).
        pub fn remaining(&self) -> std::time::Duration {
            self.$field.remaining()
        }

        /// Resolves when the lease is lost: the watchdog found the hold gone (or no quorum
        /// possible, for RedLock), or no renewal was confirmed before the local validity
        /// deadline (send time + TTL − drift margin). Without a watchdog this is simply
        /// that deadline, moved by `extend`.
        pub async fn lost(&self) {
            self.$field.lost().await;
        }

        /// The lease's events from now on: renewed, renewal failed, lost. The stream ends
        /// after [`LeaseEvent::Lost`](crate::LeaseEvent::Lost) or once the guard is
        /// released or dropped; see [`LeaseEvents`](crate::LeaseEvents) for what it can
        /// miss. For every guard of a client at once, see
        /// [`ClientBuilder::on_lease_event`](crate::ClientBuilder::on_lease_event).
        pub fn events(&self) -> $crate::LeaseEvents {
            self.$field.events()
        }
    };
}
pub(crate) use lease_views;

/// Generates the lease accessors that every guard wrapping a [`Guard`] in its `inner`
/// field shares ([`ReadGuard`](crate::ReadGuard), [`WriteGuard`](crate::WriteGuard),
/// [`Permit`](crate::Permit)): `name`, `hold_id`, `is_lost`, `remaining`, `lost`, `events`
/// and `extend`, with the same meaning as on [`Guard`].
macro_rules! lease_accessors {
    () => {
        /// The lock name.
        pub fn name(&self) -> &str {
            self.inner.name()
        }

        /// This hold's id (see [`Guard::hold_id`](crate::Guard::hold_id)).
        pub fn hold_id(&self) -> &$crate::HoldId {
            self.inner.hold_id()
        }

        $crate::guard::lease_views!(inner);

        /// Renews the lease for another TTL from now (see
        /// [`Guard::extend`](crate::Guard::extend)).
        pub async fn extend(&self) -> $crate::Result<()> {
            self.inner.extend().await
        }
    };
}
pub(crate) use lease_accessors;
