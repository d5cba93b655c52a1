//! PubSub: sleep until the lock's `released` message, over the client's shared subscription.
//!
//! Invariant: the waiter subscribes (server-confirmed) before the attempt it then waits on,
//! so a release after that attempt wakes it; if a message is lost anyway, the waiter re-polls
//! when the holder's lease would end (at most one TTL later). A woken waiter retries after a
//! small random delay, so which client wins the herd is a lottery, not its place in the
//! server's subscriber list.
//!
//! A PubSub waiter is not woken by a fair hand-off, so on a name where others wait in the
//! fair queue it can starve. The acquire script tells a PubSub attempt when it found fair
//! waiters, and [`super::mixed`] counts that and warns once per name.

use std::time::Duration;

use super::{WaitContext, notified_within, sleep_within};
use crate::backoff::{Backoff, Retry};
use crate::notify::{Registration, Topic};

/// Upper bound of the random delay between a wake-up and the retry. Every release wakes
/// every waiting client, and the server writes the message to its subscribers in a fixed
/// order, so without it the same few clients, first in that order, win every race (bench,
/// N=32 cs 1 ms: Jain 0.37, some clients starved for the whole run). A few hundred µs is a
/// few loopback round trips (docs/DESIGN.md §4: p50 0.087 ms): enough to shuffle the order, while
/// the first of N waiters retries after about `WAKE_JITTER / N`.
const WAKE_JITTER: Duration = Duration::from_micros(500);

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

    /// Listening (registered) since the first busy attempt.
    pub(crate) fn listens(&self) -> bool {
        self.registration.is_some()
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
        let runtime = &self.context.runtime;
        let started = runtime.clock.now();
        if notified_within(runtime, registration.notified(), fallback, budget)
            .await
            .is_some()
        {
            let left = budget.map(|b| b.saturating_sub(runtime.clock.now() - started));
            sleep_within(runtime, runtime.jitter(WAKE_JITTER), left).await;
        }
    }
}
