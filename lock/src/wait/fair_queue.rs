//! FairQueue: wait in a server-side FIFO queue; the release script hands the lock to the
//! head directly and wakes only that waiter (via its client's inbox channel).
//!
//! Invariants: the waiter refreshes its entry several times per entry timeout (each refresh
//! is an acquire attempt, which also claims a hand-off whose message was lost), so a live
//! waiter keeps its place and a dead one expires; giving up (timeout, cancel) runs the
//! release script for the hold, which leaves the queue and passes on a hand-off. The
//! waiter listens on its client's inbox before its first attempt, so that attempt can
//! already queue (the inbox stays subscribed, so this costs a round trip once per client).

use std::time::Duration;

use super::{QUEUE_REFRESHES_PER_TIMEOUT, WaitContext, notified_within};
use crate::notify::{Registration, Topic};

pub(crate) struct FairWait {
    context: WaitContext,
    entry_timeout: Duration,
    registration: Registration,
}

impl FairWait {
    pub(crate) fn new(entry_timeout: Duration, context: WaitContext) -> Self {
        let registration = context.notifier.register(Topic::HandOff(&context.hold));
        Self {
            context,
            entry_timeout,
            registration,
        }
    }

    pub(crate) fn queue_entry(&self) -> Option<Duration> {
        Some(self.entry_timeout)
    }

    pub(crate) async fn prepare(&mut self) {
        // Without a subscription the refresh polls below still claim hand-offs.
        self.registration.ready().await;
    }

    /// Waits for a hand-off message or the next refresh; true if the message came (the
    /// inbox carries nothing else for this hold, except a wake-up of every waiter when the
    /// subscription connection breaks).
    pub(crate) async fn wait(&mut self, busy: Option<Duration>, budget: Option<Duration>) -> bool {
        let refresh = self.entry_timeout / QUEUE_REFRESHES_PER_TIMEOUT;
        let delay = busy.map_or(refresh, |d| d.min(refresh));
        let notified = self.registration.notified();
        notified_within(&self.context.runtime, notified, delay, budget)
            .await
            .is_some()
    }
}
