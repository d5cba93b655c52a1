//! Waiting for a release message: the pub/sub wake-up the designs that publish on release
//! share (`hash-watchdog`, `zset-queue`).
//!
//! Invariant: a client listens on a lock's channel before it asks for the lock
//! ([`Wake::listen`] ahead of every attempt), so a release that lands between a refused
//! attempt and the wait is a message in the subscription's buffer, not a lost wake-up (a
//! client that subscribed only when it started to wait would sleep through it until its
//! nap ended). A wait never outlasts its nap, message or not, so a lost message (or a
//! subscription the connection dropped) costs a waiter one nap, never its liveness; a
//! subscription whose stream ended is dropped and opened again at the next listen.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::future::{Either, select};
use leasehold::backend::{Backend, Subscription};
use leasehold::runtime::Clock;

/// One process incarnation's subscription to its locks' release channels.
#[derive(Default)]
pub(super) struct Wake {
    /// The subscription, opened at the first wait, and the channels it carries.
    subscription: Option<(Subscription, Vec<String>)>,
}

impl Wake {
    /// Subscribes to `channel` through `backend`, if not yet: called before each attempt.
    pub(super) async fn listen(&mut self, backend: &Arc<dyn Backend>, channel: String) {
        if self.subscription.is_none() {
            self.subscription = backend.subscribe().await.ok().map(|s| (s, Vec::new()));
        }
        if let Some((sub, channels)) = &mut self.subscription
            && !channels.contains(&channel)
            && sub.control.subscribe(&channel).await.is_ok()
        {
            channels.push(channel);
        }
    }

    /// Waits for a message on `channel` (listening first, if need be), or `nap` on
    /// `clock`, whichever comes first.
    pub(super) async fn wait(
        &mut self,
        backend: &Arc<dyn Backend>,
        clock: &Arc<dyn Clock>,
        channel: String,
        nap: Duration,
    ) {
        self.listen(backend, channel).await;
        let sleep = clock.sleep(nap);
        let ended = match &mut self.subscription {
            Some((sub, _)) => matches!(
                select(sub.messages.next(), sleep).await,
                Either::Left((None, _))
            ),
            None => {
                sleep.await;
                false
            }
        };
        if ended {
            self.subscription = None;
        }
    }
}

/// The channel a design's release publishes on for lock `name`.
pub(super) fn channel(name: &str) -> String {
    format!("{}:channel", super::lock_key(name))
}
