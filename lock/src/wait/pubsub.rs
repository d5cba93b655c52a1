//! PubSub: sleep until the lock's `released` message, over the client's shared subscription.
//!
//! Invariant: the waiter subscribes (server-confirmed) before the attempt it then waits on,
//! so a release after that attempt wakes it; if a message is lost anyway, the waiter re-polls
//! when the holder's lease would end (at most one TTL later).

use std::time::Duration;

use super::{WaitContext, notified_within};
use crate::backoff::{Backoff, Retry};
use crate::notify::{Registration, Topic};

pub(crate) struct PubSubWait {
    context: WaitContext,
    registration: Option<Registration>,
    subscribed: bool,
    /// Polling schedule while the subscription is unavailable.
    degraded: Retry,
}

impl PubSubWait {
    pub(crate) fn new(context: WaitContext) -> Self {
        Self {
            context,
            registration: None,
            subscribed: false,
            degraded: Retry::new(Backoff::SPIN),
        }
    }

    pub(crate) async fn prepare(&mut self) {
        if let Some(registration) = &self.registration {
            self.subscribed = registration.ready().await;
        }
    }

    pub(crate) async fn wait(&mut self, busy: Option<Duration>, budget: Option<Duration>) {
        let Some(registration) = &self.registration else {
            // First busy attempt: listen, then retry at once (the lock may have been
            // released before the subscription was confirmed).
            let registration = self
                .context
                .notifier
                .register(Topic::Released(&self.context.released));
            self.registration = Some(registration);
            return;
        };
        let fallback = if self.subscribed {
            busy.unwrap_or(self.context.ttl)
        } else {
            self.degraded.next_delay(&self.context.runtime, busy)
        };
        notified_within(
            &self.context.runtime,
            registration.notified(),
            fallback,
            budget,
        )
        .await;
    }
}
