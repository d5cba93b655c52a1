//! One acquire call's hold on one lock: its id, owner, settings and lock family, and the
//! four operations on it (acquire, release, renew, probe), each one script call.
//!
//! The acquire loop, guard, watchdog and background release serve every family; only the
//! scripts differ, and [`HoldKind`] picks them. Invariant: a hold is only ever acquired,
//! renewed, probed and released by its own family's scripts, on keys that all share the
//! lock's `{name}` hash tag; the release script is idempotent, so retries are always safe.
//!
//! Every hold is a lease of its own on the server, re-entrant holds included: a mutex or
//! write hold's field carries its deadline, as a read hold's or a permit's score does, and
//! the scripts treat a hold past its deadline as gone even while a sibling of its owner
//! keeps the key alive. Safety argument: the client's validity for a hold counts from a
//! request sent before the server set that deadline, for at most the TTL (less the drift
//! margin), so the client stops trusting a hold before the server drops it; and an owner's
//! epoch (its token, its way past the fair queue) lasts only while one of its holds is
//! live, so a sibling whose release was lost cannot lend the old epoch to the owner's later
//! acquires once every hold it believes in has ended (`acquire.lua`'s header).

use std::sync::Arc;
use std::time::Duration;

use redis::RedisError;
use tracing::Instrument;

use crate::backend::BoxFuture;
use crate::backoff::{Backoff, Retry};
use crate::client_state::ClientState;
use crate::config::Config;
use crate::metrics::Labels;
use crate::owner::{HoldId, Owner};
use crate::protocol::{self, Acquire, CallError, CallResult, LockRef, Probe, Target, WaitArgs};
use crate::wait::{Mix, WaitStrategy, found_mixed};
use crate::watchdog::Renewable;

/// Which lock family a hold belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HoldKind {
    /// A lease mutex hold (`acquire.lua` and friends).
    Mutex,
    /// A shared read hold of a read-write lock (`rw_read_*.lua`).
    Read,
    /// The exclusive write hold of a read-write lock (`rw_write_*.lua`; renewed and probed
    /// by the mutex's `renew.lua`/`probe.lua`, whose hash layout it shares). A waiting
    /// writer records an intent that lives `intent` past its last attempt.
    Write {
        /// Lifetime of a waiting writer's intent without refresh.
        intent: Duration,
    },
    /// One permit of a semaphore with `permits` permits (`semaphore_*.lua`).
    Permit {
        /// The semaphore's size.
        permits: u32,
    },
}

impl HoldKind {
    /// For spans, logs and metric labels.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::Mutex => "mutex",
            Self::Read => "read",
            Self::Write { .. } => "write",
            Self::Permit { .. } => "permit",
        }
    }
}

/// What a release found on the server.
#[derive(Debug)]
pub(crate) enum Released {
    /// The hold was live, and is released now.
    Held,
    /// The server had no such hold (already released, expired or never taken).
    NotHeld,
    /// A retry found no such hold, after an earlier attempt's reply was lost (this error):
    /// that attempt may have released the hold, or found it gone already.
    AfterLostReply(RedisError),
}

/// Everything needed to act on one hold.
pub(crate) struct Hold {
    pub(crate) client: Arc<ClientState>,
    pub(crate) lock: Arc<LockRef>,
    /// Reused by retries only until a release of it may have been sent: that release can
    /// still arrive late or be retried in the background, and would delete a new grant
    /// under the same id, so a later attempt takes a fresh hold ([`Hold::sibling`]).
    pub(crate) id: HoldId,
    pub(crate) owner: Owner,
    pub(crate) config: Arc<Config>,
    /// Which lock family (and so which scripts) this hold belongs to.
    pub(crate) kind: HoldKind,
    pub(crate) span: tracing::Span,
}

impl Hold {
    /// A hold of family `kind` with a fresh id.
    pub(crate) fn new(
        client: Arc<ClientState>,
        lock: Arc<LockRef>,
        owner: Owner,
        config: Arc<Config>,
        kind: HoldKind,
    ) -> Arc<Self> {
        let id = HoldId::new(client.runtime.entropy.as_ref(), &owner);
        let span = tracing::info_span!(
            "lock",
            name = %lock.name,
            hold = %id,
            owner = %owner,
            kind = kind.label(),
        );
        Arc::new(Self {
            client,
            lock,
            id,
            owner,
            config,
            kind,
            span,
        })
    }

    /// How this hold waits: the caller's strategy, or the default, FIFO for every family
    /// (fair, and the fewest round trips under contention).
    pub(crate) fn wait(&self) -> WaitStrategy {
        self.config.wait.unwrap_or_default()
    }

    /// Whether a busy attempt leaves something besides a fair-queue entry on the server: a
    /// waiting writer's intent (a writer waiting fairly has its line entry instead), which
    /// an abandoned acquire must withdraw.
    pub(crate) fn records_intent(&self, waiting: bool) -> bool {
        waiting
            && matches!(self.kind, HoldKind::Write { .. })
            && !matches!(self.wait(), WaitStrategy::FairQueue { .. })
    }

    /// The metric labels of this hold's lock: its wait strategy and family.
    pub(crate) fn labels(&self) -> Labels {
        Labels {
            strategy: self.wait().label(),
            kind: self.kind.label(),
            label: self.config.metrics_label,
        }
    }

    /// A fresh hold (new id) for the same owner, lock, settings and family: a re-entry.
    pub(crate) fn sibling(&self) -> Arc<Self> {
        self.with_kind(self.kind)
    }

    /// A fresh hold for the same owner, lock and settings in family `kind` (a downgrade's
    /// read hold).
    pub(crate) fn with_kind(&self, kind: HoldKind) -> Arc<Self> {
        Self::new(
            Arc::clone(&self.client),
            Arc::clone(&self.lock),
            self.owner.clone(),
            Arc::clone(&self.config),
            kind,
        )
    }

    /// Where this hold's script calls go.
    fn target(&self) -> Target<'_> {
        Target {
            backend: self.client.backend.as_ref(),
            lock: &self.lock,
            hold: &self.id,
        }
    }

    /// One acquire attempt. `wait`: how its caller waits (the fair-queue entry timeout
    /// applies to mutex and permit holds, the rest to the mutex); `waiting`: the caller
    /// will wait if busy (a writer then records its intent).
    pub(crate) async fn acquire_once(&self, wait: WaitArgs, waiting: bool) -> CallResult<Acquire> {
        let at = self.target();
        let (owner, ttl, margin) = (
            self.owner.as_str(),
            self.config.ttl,
            self.config.fence_margin,
        );
        match self.kind {
            HoldKind::Mutex => {
                let (reply, mixed) = protocol::acquire(at, owner, ttl, wait, margin).await?;
                if mixed && self.wait() == WaitStrategy::PubSub {
                    found_mixed(&self.lock.name, self.labels(), Mix::PubSubBehindQueue);
                }
                Ok(reply)
            }
            HoldKind::Read => {
                // Flagged only for a fair reader (one held back by a writer's intent).
                let (reply, mixed) = protocol::read_acquire(at, owner, ttl, wait, margin).await?;
                if mixed {
                    found_mixed(&self.lock.name, self.labels(), Mix::LineAgainstIntent);
                }
                Ok(reply)
            }
            HoldKind::Write { intent } => {
                // A fair writer waits in the line, which keeps readers out as an intent
                // would.
                let intent = self.records_intent(waiting).then_some(intent);
                let (reply, mixed) =
                    protocol::write_acquire(at, owner, ttl, intent, wait, margin).await?;
                // Flagged for any writer outside the line that found a live entry in it; a
                // fair writer's own try (`try_write`) is no mix.
                if mixed && !matches!(self.wait(), WaitStrategy::FairQueue { .. }) {
                    found_mixed(&self.lock.name, self.labels(), Mix::LineAgainstIntent);
                }
                Ok(reply)
            }
            HoldKind::Permit { permits } => {
                protocol::permit_acquire(at, permits, ttl, wait.queue_entry).await
            }
        }
    }

    /// One release attempt: the owner's remaining hold count, or `None` if not held.
    pub(crate) async fn release_once(&self) -> CallResult<Option<u64>> {
        let at = self.target();
        let (owner, margin) = (self.owner.as_str(), self.config.fence_margin);
        match self.kind {
            HoldKind::Mutex => protocol::release(at, owner, margin).await,
            HoldKind::Read => protocol::read_release(at, owner, margin).await,
            HoldKind::Write { .. } => protocol::write_release(at, owner, margin).await,
            HoldKind::Permit { permits } => protocol::permit_release(at, permits).await,
        }
    }

    /// One renewal for another `ttl`: true if the hold was live.
    pub(crate) async fn renew_once(&self, ttl: Duration) -> CallResult<bool> {
        let at = self.target();
        match self.kind {
            HoldKind::Mutex | HoldKind::Write { .. } => {
                protocol::renew(at, ttl, self.config.fence_margin).await
            }
            HoldKind::Read => protocol::read_renew(at, ttl, self.config.fence_margin).await,
            HoldKind::Permit { .. } => protocol::permit_renew(at, ttl).await,
        }
    }

    /// Read-only: does this hold own the lock (after an ambiguous acquire)?
    pub(crate) async fn probe_once(&self) -> CallResult<Probe> {
        let at = self.target();
        match self.kind {
            HoldKind::Mutex | HoldKind::Write { .. } => protocol::probe(at).await,
            HoldKind::Read => protocol::read_probe(at).await,
            HoldKind::Permit { .. } => protocol::permit_probe(at).await,
        }
    }

    /// Releases the hold, retrying lost connections until `give_up_at` (local clock).
    /// A retry that finds no hold after a lost reply says so ([`Released::AfterLostReply`]):
    /// the lost attempt may well have run and released it.
    pub(crate) async fn release(&self, give_up_at: Duration) -> Result<Released, CallError> {
        let runtime = &self.client.runtime;
        let mut retry = Retry::new(Backoff::RECONNECT);
        let mut lost = None;
        loop {
            let attempt = protocol::within(runtime, Some(give_up_at), self.release_once());
            match attempt.await {
                Ok(Some(_)) => return Ok(Released::Held),
                Ok(None) => return Ok(lost.map_or(Released::NotHeld, Released::AfterLostReply)),
                Err(CallError::Transport(err)) => {
                    let left = give_up_at.saturating_sub(runtime.clock.now());
                    if left.is_zero() {
                        return Err(CallError::Transport(err));
                    }
                    tracing::debug!(error = %err, "release reply lost; retrying");
                    lost = Some(err);
                    let delay = retry.next_delay(runtime, Some(left));
                    runtime.clock.sleep(delay).await;
                }
                Err(failed @ CallError::Failed(_)) => return Err(failed),
            }
        }
    }

    /// Releases the hold from a background task, giving up after `window`.
    pub(crate) fn release_in_background(self: &Arc<Self>, window: Duration) {
        let hold = Arc::clone(self);
        let give_up_at = self.client.runtime.clock.now() + window;
        let span = self.span.clone();
        let task = async move {
            match hold.release(give_up_at).await {
                Ok(_) => tracing::debug!("released in the background"),
                Err(err) => tracing::warn!(?err, "background release failed; the lease expires"),
            }
        };
        self.client
            .runtime
            .spawner
            .spawn(Box::pin(task.instrument(span)));
    }
}

impl Renewable for Hold {
    fn span(&self) -> &tracing::Span {
        &self.span
    }

    fn renew(&self, ttl: Duration) -> BoxFuture<'_, Result<bool, CallError>> {
        Box::pin(self.renew_once(ttl))
    }
}
