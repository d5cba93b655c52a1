//! A design client's pub/sub wait: one subscription per process, opened at its first
//! wait, carrying every channel it has waited on.
//!
//! Invariant: a wait ends at a message on any subscribed channel or after its nap,
//! whichever first; a subscription whose connection dropped is forgotten and opened again
//! at the next wait, and until then the client naps.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::future::{Either, select};
use leasehold::backend::{Backend, Subscription};

use crate::world::process::ProcessCtx;

/// The subscription and the channels it carries.
pub(super) struct Channels {
    backend: Arc<dyn Backend>,
    subscription: Option<(Subscription, Vec<String>)>,
}

impl Channels {
    /// No subscription yet, on `backend`.
    pub(super) fn new(backend: Arc<dyn Backend>) -> Self {
        Self {
            backend,
            subscription: None,
        }
    }

    /// Waits for a message on `channel` (subscribing to it first), or `nap` on the
    /// client's clock, whichever comes first.
    pub(super) async fn wait(&mut self, ctx: &ProcessCtx, channel: String, nap: Duration) {
        if self.subscription.is_none() {
            self.subscription = self.backend.subscribe().await.ok().map(|s| (s, Vec::new()));
        }
        if let Some((sub, channels)) = &mut self.subscription
            && !channels.contains(&channel)
            && sub.control.subscribe(&channel).await.is_ok()
        {
            channels.push(channel);
        }
        let sleep = ctx.runtime.clock.sleep(nap);
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
