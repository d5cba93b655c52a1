//! One Redis database: keys, typed values and their expiry deadlines.
//!
//! Invariant: a key whose deadline has passed on the owning node's clock is never visible
//! (lookups treat it as absent and drop it, as Redis's lazy expiry does). As in Redis, a
//! deadline passes strictly after it: a key with `PEXPIREAT t` is still there at `t`
//! (`keyIsExpired` is `now > when`). An aggregate that becomes empty is deleted, so
//! `EXISTS`/`TYPE`/`PTTL` agree with a real server.
//! Iteration is over a `BTreeMap`, never a hash map, so every reply is deterministic.

use std::collections::{BTreeMap, VecDeque};

/// A value and its absolute expiry (node wall-clock milliseconds), if any.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The typed value.
    pub data: Data,
    /// When the key disappears, in the node's Unix milliseconds.
    pub expires_at: Option<i64>,
}

/// Hash fields in insertion order.
pub type HashFields = Vec<(Vec<u8>, Vec<u8>)>;
/// List items, head first.
pub type ListItems = VecDeque<Vec<u8>>;
/// Sorted-set members ordered by (score, member).
pub type ZMembers = Vec<(f64, Vec<u8>)>;

/// The Redis types the lock scripts use.
#[derive(Debug, Clone, PartialEq)]
pub enum Data {
    /// A string (also the representation of counters).
    Str(Vec<u8>),
    /// A hash, in insertion order as a small Redis hash (listpack) keeps it.
    Hash(HashFields),
    /// A list.
    List(ListItems),
    /// A sorted set, kept ordered by (score, member) as Redis orders it.
    ZSet(ZMembers),
}

impl Data {
    /// The name `TYPE` reports.
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::Str(_) => "string",
            Self::Hash(_) => "hash",
            Self::List(_) => "list",
            Self::ZSet(_) => "zset",
        }
    }

    /// Whether an aggregate has no elements left (Redis deletes such keys).
    pub fn is_empty_aggregate(&self) -> bool {
        match self {
            Self::Str(_) => false,
            Self::Hash(fields) => fields.is_empty(),
            Self::List(items) => items.is_empty(),
            Self::ZSet(members) => members.is_empty(),
        }
    }
}

/// A database: the live keys of one node.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Keyspace {
    entries: BTreeMap<Vec<u8>, Entry>,
    /// Keys a lookup found expired and dropped, not yet collected by
    /// [`Keyspace::take_expired`]: Redis propagates each lazy expiry as a `DEL`.
    expired: Vec<Vec<u8>>,
}

impl Keyspace {
    /// An empty database.
    pub fn new() -> Self {
        Self::default()
    }

    /// Drops `key` if its deadline has passed; returns whether it is (still) live.
    fn expire_if_due(&mut self, key: &[u8], now_ms: i64) -> bool {
        match self.entries.get(key) {
            None => false,
            Some(entry) if entry.expires_at.is_some_and(|at| now_ms > at) => {
                self.entries.remove(key);
                self.expired.push(key.to_vec());
                false
            }
            Some(_) => true,
        }
    }

    /// The live entry under `key`.
    pub fn get(&mut self, key: &[u8], now_ms: i64) -> Option<&Entry> {
        if self.expire_if_due(key, now_ms) {
            self.entries.get(key)
        } else {
            None
        }
    }

    /// The live entry under `key`, mutably.
    pub fn get_mut(&mut self, key: &[u8], now_ms: i64) -> Option<&mut Entry> {
        if self.expire_if_due(key, now_ms) {
            self.entries.get_mut(key)
        } else {
            None
        }
    }

    /// Stores `entry` under `key`, replacing anything there.
    pub fn insert(&mut self, key: Vec<u8>, entry: Entry) {
        self.entries.insert(key, entry);
    }

    /// Removes `key`; returns whether a live key was removed.
    pub fn remove(&mut self, key: &[u8], now_ms: i64) -> bool {
        self.expire_if_due(key, now_ms) && self.entries.remove(key).is_some()
    }

    /// Deletes `key` if it holds an empty aggregate (after HDEL/LPOP/ZREM...).
    pub fn drop_if_empty(&mut self, key: &[u8]) {
        if self
            .entries
            .get(key)
            .is_some_and(|entry| entry.data.is_empty_aggregate())
        {
            self.entries.remove(key);
        }
    }

    /// The stored entry regardless of expiry (replication ships raw entries).
    pub fn raw(&self, key: &[u8]) -> Option<&Entry> {
        self.entries.get(key)
    }

    /// Stores or deletes a raw entry (applying a replicated effect).
    pub fn apply_raw(&mut self, key: &[u8], entry: Option<Entry>) {
        match entry {
            Some(entry) => {
                self.entries.insert(key.to_vec(), entry);
            }
            None => {
                self.entries.remove(key);
            }
        }
    }

    /// Number of live keys at `now_ms`.
    pub fn live_len(&self, now_ms: i64) -> usize {
        self.entries
            .values()
            .filter(|entry| entry.expires_at.is_none_or(|at| now_ms <= at))
            .count()
    }

    /// The keys lookups dropped as expired since the last call, in the order they went.
    pub fn take_expired(&mut self) -> Vec<Vec<u8>> {
        std::mem::take(&mut self.expired)
    }

    /// Removes every key.
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    /// All stored entries in key order (for invariant checks and dumps).
    pub fn iter(&self) -> impl Iterator<Item = (&Vec<u8>, &Entry)> {
        self.entries.iter()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn string(value: &str, expires_at: Option<i64>) -> Entry {
        Entry {
            data: Data::Str(value.as_bytes().to_vec()),
            expires_at,
        }
    }

    #[test]
    fn expired_keys_are_invisible_and_dropped() {
        let mut ks = Keyspace::new();
        ks.insert(b"k".to_vec(), string("v", Some(100)));
        assert!(ks.get(b"k", 99).is_some());
        assert!(ks.get(b"k", 101).is_none());
        assert!(ks.raw(b"k").is_none());
    }

    #[test]
    fn a_key_is_still_there_at_its_deadline() {
        // Redis expires a key when now > deadline, not when now >= deadline.
        let mut ks = Keyspace::new();
        ks.insert(b"k".to_vec(), string("v", Some(100)));
        assert_eq!(ks.live_len(100), 1);
        assert!(ks.get(b"k", 100).is_some());
        assert!(ks.get_mut(b"k", 100).is_some());
        assert_eq!(ks.live_len(101), 0);
        assert!(ks.remove(b"k", 100));
    }

    #[test]
    fn lazy_expiry_is_reported_once() {
        let mut ks = Keyspace::new();
        ks.insert(b"k".to_vec(), string("v", Some(100)));
        ks.insert(b"p".to_vec(), string("v", None));
        assert!(ks.get(b"k", 100).is_some());
        assert!(ks.get(b"p", 200).is_some());
        assert!(ks.take_expired().is_empty());
        assert!(!ks.remove(b"k", 101));
        assert_eq!(ks.take_expired(), vec![b"k".to_vec()]);
        assert!(ks.take_expired().is_empty());
    }

    #[test]
    fn empty_aggregates_are_deleted() {
        let mut ks = Keyspace::new();
        ks.insert(
            b"h".to_vec(),
            Entry {
                data: Data::Hash(Vec::new()),
                expires_at: None,
            },
        );
        ks.drop_if_empty(b"h");
        assert!(ks.get(b"h", 0).is_none());
    }
}
