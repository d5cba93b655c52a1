//! One acquire call's hold on one lock, and how it is released when nobody awaits it.
//!
//! Invariant: once an acquire attempt may have reached the server, something is committed
//! to release its hold — the guard, or a [`PendingRelease`] that, when dropped armed (the
//! acquire future was cancelled, timed out or failed ambiguously), releases it in the
//! background via the [`Spawner`](crate::runtime::Spawner), retrying until the lease would
//! have expired anyway. The release script is idempotent, so retries are always safe.

use std::sync::Arc;
use std::time::Duration;

use tracing::Instrument;

use crate::backoff::{Backoff, Retry};
use crate::client::Shared;
use crate::family::HoldKind;
use crate::mutex::Config;
use crate::owner::{HoldId, Owner};
use crate::protocol::{self, CallError, LockRef};

/// Everything needed to act on one hold.
pub(crate) struct Hold {
    pub(crate) shared: Arc<Shared>,
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
    pub(crate) fn new(
        shared: Arc<Shared>,
        lock: Arc<LockRef>,
        owner: Owner,
        config: Arc<Config>,
    ) -> Arc<Self> {
        Self::with_kind(shared, lock, owner, config, HoldKind::Mutex)
    }

    /// A hold of another lock family (read/write lock, semaphore permit).
    pub(crate) fn with_kind(
        shared: Arc<Shared>,
        lock: Arc<LockRef>,
        owner: Owner,
        config: Arc<Config>,
        kind: HoldKind,
    ) -> Arc<Self> {
        let id = HoldId::new(shared.runtime.entropy.as_ref(), &owner);
        let span =
            tracing::info_span!("lock", name = %lock.name, owner = %owner, kind = kind.label());
        Arc::new(Self {
            shared,
            lock,
            id,
            owner,
            config,
            kind,
            span,
        })
    }

    /// A fresh hold (new id) for the same owner, lock, settings and family: a re-entry.
    pub(crate) fn sibling(&self) -> Arc<Self> {
        Self::with_kind(
            Arc::clone(&self.shared),
            Arc::clone(&self.lock),
            self.owner.clone(),
            Arc::clone(&self.config),
            self.kind,
        )
    }

    /// Releases the hold, retrying lost connections until `give_up_at` (local clock).
    /// `Ok(None)`: the hold was not held (already released, expired or never taken).
    pub(crate) async fn release(&self, give_up_at: Duration) -> Result<Option<u64>, CallError> {
        let runtime = &self.shared.runtime;
        let mut retry = Retry::new(Backoff::RECONNECT);
        loop {
            let attempt = protocol::within(runtime, Some(give_up_at), self.release_once());
            match attempt.await {
                Err(CallError::Transport(err)) => {
                    let left = give_up_at.saturating_sub(runtime.clock.now());
                    if left.is_zero() {
                        return Err(CallError::Transport(err));
                    }
                    tracing::debug!(error = %err, "release reply lost; retrying");
                    let delay = retry.next_delay(runtime, Some(left));
                    runtime.clock.sleep(delay).await;
                }
                other => return other,
            }
        }
    }

    /// Releases the hold from a background task, giving up after `window`.
    pub(crate) fn release_in_background(self: &Arc<Self>, window: Duration) {
        let hold = Arc::clone(self);
        let give_up_at = self.shared.runtime.clock.now() + window;
        let span = self.span.clone();
        let task = async move {
            match hold.release(give_up_at).await {
                Ok(_) => tracing::debug!("released in the background"),
                Err(err) => tracing::warn!(?err, "background release failed; the lease expires"),
            }
        };
        self.shared
            .runtime
            .spawner
            .spawn(Box::pin(task.instrument(span)));
    }
}

/// How long a timed-out acquire waits in line for its release (leaving the fair queue,
/// passing on a hand-off) before leaving it to the background: about one reconnect.
const ABANDON_WAIT: Duration = Backoff::RECONNECT.max;

/// Releases a hold in the background if dropped while armed.
pub(crate) struct PendingRelease {
    hold: Arc<Hold>,
    /// How long whatever the attempt created can live on the server.
    window: Duration,
    armed: bool,
}

impl PendingRelease {
    pub(crate) fn new(hold: Arc<Hold>, window: Duration) -> Self {
        Self {
            hold,
            window,
            armed: false,
        }
    }

    /// Called before each send: from now on the server may know this hold.
    pub(crate) fn arm(&mut self) {
        self.armed = true;
    }

    /// The hold is accounted for elsewhere (a guard owns it, or nothing was created).
    pub(crate) fn disarm(&mut self) {
        self.armed = false;
    }

    /// Releases now if armed (one attempt); a lost reply leaves it armed for the background.
    /// Returns whether the hold is accounted for afterwards (`false`: a release of its id may
    /// still be in flight, so the id must not be acquired again).
    pub(crate) async fn release_now(&mut self) -> bool {
        if !self.armed {
            return true;
        }
        let runtime = &self.hold.shared.runtime;
        let until = runtime.clock.now() + ABANDON_WAIT;
        match protocol::within(runtime, Some(until), self.hold.release_once()).await {
            Ok(_) => self.disarm(),
            Err(CallError::Transport(_)) => {}
            Err(CallError::Failed(err)) => {
                tracing::warn!(error = %err, "abandoning an acquire failed");
                self.disarm();
            }
        }
        !self.armed
    }
}

impl Drop for PendingRelease {
    fn drop(&mut self) {
        if self.armed {
            tracing::debug!(parent: &self.hold.span, "acquire abandoned; releasing in the background");
            self.hold.release_in_background(self.window);
        }
    }
}
