//! The client's one shared subscription: wakes waiting acquirers when a lock is released
//! (PubSub) or handed to them (FairQueue), passing a hand-off message's grant words on to
//! the waiter it names.
//!
//! Invariants: a waiter's channel is subscribed (server-confirmed) before its next acquire
//! attempt, so a release after that attempt cannot be missed while the connection lives;
//! when the connection breaks, every waiter is woken to re-poll and resubscribe, and a
//! waiter never depends on a message alone (each waits at most a TTL-bounded fallback).
//! Subscriptions are sticky, to spare round trips: the client's inbox stays subscribed once
//! used, and a lock's channel is unsubscribed only once it had no waiter for a whole
//! [`UNSUBSCRIBE_LINGER`].

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use redis::RedisResult;
use tokio::sync::{Notify, oneshot};

use crate::backend::{Backend, Notification, SubscriptionControl};
use crate::runtime::Runtime;
use crate::waiters::{Registry, Ticket};

/// How long a lock's `released` channel must go without local waiters before it is
/// unsubscribed. Contention on a hot lock comes in bursts; re-subscribing on every acquisition
/// would add two round trips to each, while an idle subscription costs the server one
/// dictionary entry.
pub const UNSUBSCRIBE_LINGER: Duration = Duration::from_secs(1);

/// What a waiter waits for.
#[derive(Debug, Clone)]
pub(crate) enum Topic<'a> {
    /// A `released` message on this lock channel.
    Released(&'a str),
    /// A hand-off to this hold id, on the client's inbox channel.
    HandOff(&'a str),
}

#[derive(Default)]
struct Connection {
    control: Option<Box<dyn SubscriptionControl>>,
    subscribed: BTreeSet<String>,
    /// Dropping this stops the dispatcher task (and with it the subscription connection).
    shutdown: Option<oneshot::Sender<()>>,
}

/// The shared subscription and its waiter registry.
pub(crate) struct Notifier {
    backend: Arc<dyn Backend>,
    runtime: Runtime,
    inbox: String,
    registry: Arc<Registry<Arc<Wake>>>,
    connection: tokio::sync::Mutex<Connection>,
    broken: Arc<AtomicBool>,
    /// channel -> when (local clock) its last waiter left; a linger ends early for nobody.
    left_at: std::sync::Mutex<BTreeMap<String, Duration>>,
}

impl Notifier {
    pub(crate) fn new(backend: Arc<dyn Backend>, runtime: Runtime, inbox: String) -> Self {
        Self {
            backend,
            runtime,
            inbox,
            registry: Arc::new(Registry::new()),
            connection: tokio::sync::Mutex::new(Connection::default()),
            broken: Arc::new(AtomicBool::new(false)),
            left_at: std::sync::Mutex::new(BTreeMap::new()),
        }
    }

    /// Registers a waiter. Call [`Registration::ready`] before each acquire attempt.
    pub(crate) fn register(self: &Arc<Self>, topic: Topic<'_>) -> Registration {
        let (channel, topic) = match topic {
            Topic::Released(channel) => (channel, channel),
            Topic::HandOff(hold) => (self.inbox.as_str(), hold),
        };
        let signal = Arc::new(Wake::default());
        let ticket = self.registry.register(channel, topic, Arc::clone(&signal));
        Registration {
            notifier: Arc::clone(self),
            ticket,
            signal,
        }
    }

    /// Makes the subscription match the registry for `channel`: subscribed while wanted.
    /// Serialised by the connection mutex, so racing joins and leaves settle correctly.
    async fn reconcile(&self, channel: &str) -> RedisResult<()> {
        let mut connection = self.connection.lock().await;
        if self.broken.swap(false, Ordering::AcqRel) {
            *connection = Connection::default();
        }
        let wanted = channel == self.inbox || self.registry.wants(channel);
        let subscribed = connection.subscribed.contains(channel);
        if wanted && !subscribed {
            if connection.control.is_none() {
                let subscription = self.backend.subscribe().await?;
                let (shutdown, stop) = oneshot::channel();
                self.runtime.spawner.spawn(Box::pin(dispatch(
                    Arc::clone(&self.registry),
                    self.inbox.clone(),
                    subscription.messages,
                    stop,
                    Arc::clone(&self.broken),
                )));
                connection.control = Some(subscription.control);
                connection.shutdown = Some(shutdown);
            }
            if let Some(control) = &connection.control {
                control.subscribe(channel).await?;
                connection.subscribed.insert(channel.to_owned());
            }
        } else if !wanted && subscribed {
            connection.subscribed.remove(channel);
            unpoisoned(&self.left_at).remove(channel);
            if let Some(control) = &connection.control {
                control.unsubscribe(channel).await?;
            }
        }
        Ok(())
    }
}

/// Locks one of the notifier's small std mutexes (the linger bookkeeping, a wake-up's
/// words), outside loom's reach: they are not part of the modelled core. Their critical
/// sections set or take a value whole and cannot panic half-way, so a poisoned lock still
/// holds consistent data.
fn unpoisoned<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One waiter's wake-up: the signal, and the words that came before the hold id in the last
/// hand-off message for it (a mutex hand-off's grant; none for a permit's or a wake-up of
/// everyone).
#[derive(Default)]
struct Wake {
    signal: Notify,
    words: std::sync::Mutex<Option<String>>,
}

impl Wake {
    fn wake(&self, words: Option<&str>) {
        *unpoisoned(&self.words) = words.map(str::to_owned);
        self.signal.notify_one();
    }
}

/// Routes each message to the waiters of its topic until shut down or disconnected: a
/// lock's channel wakes its waiters, an inbox message (`[<words> ]<hold id>`, see
/// [`route`]) the hold's.
async fn dispatch(
    registry: Arc<Registry<Arc<Wake>>>,
    inbox: String,
    mut messages: BoxStream<'static, Notification>,
    mut stop: oneshot::Receiver<()>,
    broken: Arc<AtomicBool>,
) {
    loop {
        let message = tokio::select! {
            biased;
            _ = &mut stop => return,
            message = messages.next() => message,
        };
        let Some(message) = message else {
            tracing::debug!("subscription connection closed; waiters fall back to polling");
            broken.store(true, Ordering::Release);
            registry.all_signals().iter().for_each(|s| s.wake(None));
            return;
        };
        let (topic, words) = if message.channel == inbox {
            let payload = String::from_utf8_lossy(&message.payload);
            let (hold, words) = route(&payload);
            (hold.to_owned(), words.map(str::to_owned))
        } else {
            (message.channel, None)
        };
        registry
            .signals_for(&topic)
            .iter()
            .for_each(|s| s.wake(words.as_deref()));
    }
}

/// Splits an inbox message, `[<words> ]<hold id>`, into the hold id it is for and the words
/// before it. A hold id begins with 16 hex digits and a colon ([`crate::owner`]) and the
/// words (a mutex grant's numbers) hold no colon, so the hold id starts at the last space
/// before the first colon, and runs to the end of the message whole: the owner id in it may
/// contain spaces.
fn route(payload: &str) -> (&str, Option<&str>) {
    let colon = payload.find(':').unwrap_or(0);
    match payload[..colon].rfind(' ') {
        Some(space) => (&payload[space + 1..], Some(&payload[..space])),
        None => (payload, None),
    }
}

/// One waiter's place in the registry; leaving it unsubscribes the channel if it was last.
pub(crate) struct Registration {
    notifier: Arc<Notifier>,
    ticket: Ticket,
    signal: Arc<Wake>,
}

impl Registration {
    /// Ensures the channel is subscribed. False if the subscription could not be set up:
    /// the waiter then relies on its fallback polling alone.
    pub(crate) async fn ready(&self) -> bool {
        match self.notifier.reconcile(self.ticket.channel()).await {
            Ok(()) => true,
            Err(err) => {
                tracing::warn!(error = %err, "subscription unavailable; polling instead");
                false
            }
        }
    }

    /// Resolves on the next message for this waiter (or one that arrived since the last),
    /// with the words a hand-off message carried before the hold id, if any.
    pub(crate) async fn notified(&self) -> Option<String> {
        self.signal.signal.notified().await;
        unpoisoned(&self.signal.words).take()
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let notifier = &self.notifier;
        if notifier.registry.unregister(&self.ticket) && self.ticket.channel() != notifier.inbox {
            let notifier = Arc::clone(notifier);
            let channel = self.ticket.channel().to_owned();
            let left = notifier.runtime.clock.now();
            unpoisoned(&notifier.left_at).insert(channel.clone(), left);
            let linger = notifier.runtime.clock.sleep(UNSUBSCRIBE_LINGER);
            self.notifier.runtime.spawner.spawn(Box::pin(async move {
                linger.await;
                // A waiter that came and went meanwhile started a linger of its own: a hot
                // lock's channel stays subscribed between bursts of waiting.
                if unpoisoned(&notifier.left_at).get(&channel) != Some(&left) {
                    return;
                }
                // Unsubscribes only if no waiter is back (reconcile checks the registry).
                if let Err(err) = notifier.reconcile(&channel).await {
                    tracing::debug!(error = %err, channel, "unsubscribe failed");
                }
            }));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOLD: &str = "0123456789abcdef:0123456789abcdef0123456789abcdef:u:worker 7";

    #[test]
    fn a_grant_is_routed_to_the_whole_hold_id_with_its_words() {
        let message = format!("1700000000000001 30000 4 {HOLD}");
        assert_eq!(route(&message), (HOLD, Some("1700000000000001 30000 4")));
    }

    #[test]
    fn a_bare_hold_id_is_routed_whole_whatever_its_owner_id_ends_with() {
        assert_eq!(route(HOLD), (HOLD, None));
        let numeric = "0123456789abcdef:0123456789abcdef0123456789abcdef:u:job 1 2 3";
        assert_eq!(route(numeric), (numeric, None));
        assert_eq!(route("no colon at all"), ("no colon at all", None));
    }
}
