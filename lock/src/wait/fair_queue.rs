//! FairQueue: wait in a server-side FIFO queue; the release script grants the lock to the
//! head outright and tells only that waiter (via its client's inbox channel), with the
//! grant in the message: the waiter holds the lock when the message arrives.
//!
//! Invariants: the waiter refreshes its entry several times per entry timeout (each refresh
//! is an acquire attempt, which also finds a grant whose message was lost), so a live
//! waiter keeps its place and a dead one expires; giving up (timeout, cancel) runs the
//! release script for the hold, which leaves the queue or gives back a grant (and with it
//! passes the lock on). The waiter listens on its client's inbox before its first attempt,
//! so that attempt can already queue (the inbox stays subscribed, so this costs a round
//! trip once per client). While the subscription is down (a server restart closes it and
//! takes the queue with it), no hand-off can reach the waiter, so it polls at the spin
//! backoff's pace, as a PubSub waiter does, instead of waiting a whole refresh. How the
//! acquire loop bounds a handed lease: see [`crate::acquire`].

use std::time::Duration;

use super::{QUEUE_REFRESHES_PER_TIMEOUT, WaitContext, Woken, notified_within};
use crate::backoff::{Backoff, Retry};
use crate::notify::{Registration, Topic};
use crate::protocol::HandOff;

pub(crate) struct FairWait {
    context: WaitContext,
    entry_timeout: Duration,
    registration: Registration,
    subscribed: bool,
    /// Polling schedule while the subscription is unavailable.
    degraded: Retry,
}

impl FairWait {
    pub(crate) fn new(entry_timeout: Duration, context: WaitContext) -> Self {
        let registration = context.notifier.register(Topic::HandOff(&context.hold));
        Self {
            context,
            entry_timeout,
            registration,
            subscribed: false,
            degraded: Retry::new(Backoff::SPIN),
        }
    }

    pub(crate) fn queue_entry(&self) -> Option<Duration> {
        Some(self.entry_timeout)
    }

    pub(crate) async fn prepare(&mut self) {
        // Without a subscription the refresh polls below still claim hand-offs.
        self.subscribed = self.registration.ready().await;
    }

    /// Waits for a hand-off message or the next refresh, whichever is first, but no longer
    /// than `busy`: the holder's lease, or the remaining entry of a head that goes first at
    /// a free lock (a crashed head's entry expires with nobody to tell the line, so the
    /// waiter must ask then, not a refresh later). The inbox carries nothing else for this
    /// hold, except a wake-up of every waiter when the subscription connection breaks, and
    /// a permit's hand-off, which names no grant: both are `Notified`.
    pub(crate) async fn wait(&mut self, busy: Option<Duration>, budget: Option<Duration>) -> Woken {
        let refresh = self.entry_timeout / QUEUE_REFRESHES_PER_TIMEOUT;
        let mut delay = busy.map_or(refresh, |d| d.min(refresh));
        if !self.subscribed {
            delay = self.degraded.next_delay(&self.context.runtime, Some(delay));
        }
        let notified = self.registration.notified();
        match notified_within(&self.context.runtime, notified, delay, budget).await {
            None => Woken::Timer,
            Some(words) => match words.as_deref().and_then(HandOff::parse) {
                Some(grant) => Woken::Granted(grant),
                None => Woken::Notified,
            },
        }
    }
}
