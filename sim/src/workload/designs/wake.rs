//! Waiting for a release message: the pub/sub wake-up the designs that publish on release
//! share (`hash-watchdog`, `zset-queue`).
//!
//! Invariant: a wait never outlasts its nap, message or not, so a lost message (or a
//! subscription the connection dropped) costs a waiter one nap, never its liveness; a
//! subscription whose stream ended is dropped and opened again at the next wait.

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
    /// Waits for a message on `channel` (subscribing to it through `backend` first, if
    /// need be), or `nap` on `clock`, whichever comes first.
    pub(super) async fn wait(
        &mut self,
        backend: &Arc<dyn Backend>,
        clock: &Arc<dyn Clock>,
        channel: String,
        nap: Duration,
    ) {
        if self.subscription.is_none() {
            self.subscription = backend.subscribe().await.ok().map(|s| (s, Vec::new()));
        }
        if let Some((sub, channels)) = &mut self.subscription
            && !channels.contains(&channel)
            && sub.control.subscribe(&channel).await.is_ok()
        {
            channels.push(channel);
        }
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
