//! The release that stands ready while an acquire is in flight.
//!
//! Invariant: once an acquire attempt may have reached the server, something is committed
//! to release its hold — the guard, or a [`PendingRelease`] that, when dropped armed (the
//! acquire future was cancelled, timed out or failed ambiguously), releases it in the
//! background via the [`Spawner`](crate::runtime::Spawner), retrying until the lease would
//! have expired anyway.

use std::sync::Arc;
use std::time::Duration;

use crate::backoff::Backoff;
use crate::hold::Hold;
use crate::protocol::{self, CallError};

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

    /// The hold this stands ready to release.
    pub(crate) fn hold(&self) -> &Arc<Hold> {
        &self.hold
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
        let runtime = &self.hold.client.runtime;
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
