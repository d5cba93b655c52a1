//! The in-process registry of waiters multiplexed over a client's one subscription.
//!
//! Invariants: a waiter registered before a message is dispatched is among the signals that
//! message wakes; a channel is wanted exactly while at least one waiter listens on it.
//! Generic over the wake-up handle so loom can model it without tokio.

use std::collections::BTreeMap;

use crate::sync::{Mutex, lock};

/// A registration's identity, returned by [`Registry::register`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ticket {
    id: u64,
    channel: String,
    topic: String,
}

impl Ticket {
    /// The channel this waiter needs subscribed.
    pub fn channel(&self) -> &str {
        &self.channel
    }
}

#[derive(Debug)]
struct State<S> {
    next_id: u64,
    /// topic -> waiters by registration order.
    topics: BTreeMap<String, BTreeMap<u64, S>>,
    /// channel -> number of registered waiters.
    channels: BTreeMap<String, usize>,
}

/// Waiters by topic (a lock's release channel, or one fair waiter's hold id on the inbox).
#[derive(Debug)]
pub struct Registry<S> {
    state: Mutex<State<S>>,
}

impl<S: Clone> Default for Registry<S> {
    fn default() -> Self {
        Self::new()
    }
}

impl<S: Clone> Registry<S> {
    /// An empty registry.
    pub fn new() -> Self {
        Self {
            state: Mutex::new(State {
                next_id: 0,
                topics: BTreeMap::new(),
                channels: BTreeMap::new(),
            }),
        }
    }

    /// Adds a waiter for `topic`, delivered over `channel`.
    pub fn register(&self, channel: &str, topic: &str, signal: S) -> Ticket {
        let mut state = lock(&self.state);
        let id = state.next_id;
        state.next_id += 1;
        state
            .topics
            .entry(topic.to_owned())
            .or_default()
            .insert(id, signal);
        *state.channels.entry(channel.to_owned()).or_default() += 1;
        Ticket {
            id,
            channel: channel.to_owned(),
            topic: topic.to_owned(),
        }
    }

    /// Removes a waiter; true if its channel has no waiters left (time to unsubscribe).
    pub fn unregister(&self, ticket: &Ticket) -> bool {
        let mut state = lock(&self.state);
        let mut removed = false;
        if let Some(waiters) = state.topics.get_mut(&ticket.topic) {
            removed = waiters.remove(&ticket.id).is_some();
            if waiters.is_empty() {
                state.topics.remove(&ticket.topic);
            }
        }
        if !removed {
            return false;
        }
        match state.channels.get_mut(&ticket.channel) {
            Some(count) if *count > 1 => {
                *count -= 1;
                false
            }
            Some(_) => {
                state.channels.remove(&ticket.channel);
                true
            }
            None => false,
        }
    }

    /// True while some waiter listens on `channel`.
    pub fn wants(&self, channel: &str) -> bool {
        lock(&self.state).channels.contains_key(channel)
    }

    /// The signals of every waiter on `topic`, oldest first.
    pub fn signals_for(&self, topic: &str) -> Vec<S> {
        lock(&self.state)
            .topics
            .get(topic)
            .map(|waiters| waiters.values().cloned().collect())
            .unwrap_or_default()
    }

    /// Every registered signal (the subscription broke: everyone re-polls).
    pub fn all_signals(&self) -> Vec<S> {
        lock(&self.state)
            .topics
            .values()
            .flat_map(|waiters| waiters.values().cloned())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channel_wanted_while_waiters_remain() {
        let registry = Registry::new();
        let a = registry.register("c", "t1", 1);
        let b = registry.register("c", "t2", 2);
        assert_eq!(registry.signals_for("t1"), vec![1]);
        assert!(!registry.unregister(&a));
        assert!(registry.wants("c"));
        assert!(!registry.unregister(&a), "double unregister is a no-op");
        assert!(registry.unregister(&b));
        assert!(!registry.wants("c"));
        assert!(registry.all_signals().is_empty());
    }
}
