//! How far the linearizability check reached on a run's lock keys: the keys it searched,
//! in all and by lock family, and how many of them it checked only coarsely (widened) or
//! gave up on (unchecked).
//!
//! Invariant: a family's keys are counted once each, whatever became of their search, so
//! a reader sees which families were judged at all.

use serde::Serialize;

/// How far the check reached on a run's lock keys, in all and by lock family.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Reach {
    /// Keys given up as too costly to search.
    pub unchecked: u64,
    /// Keys checked to the end over a widened frontier (soundly, more coarsely).
    pub widened: u64,
    /// The mutex's keys (and RedLock's, per master).
    pub mutex: KeyReach,
    /// The read-write lock's keys (its readers', writers' and writer's renewals).
    pub rwlock: KeyReach,
    /// The semaphore's keys.
    pub semaphore: KeyReach,
}

/// How far the check reached on one lock family's keys.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct KeyReach {
    /// Keys searched (checked exactly, widened or given up).
    pub keys: u64,
    /// Of those, checked over a widened frontier.
    pub widened: u64,
    /// Of those, given up as too costly.
    pub unchecked: u64,
}

impl KeyReach {
    /// The sum of both.
    pub fn plus(self, other: Self) -> Self {
        Self {
            keys: self.keys + other.keys,
            widened: self.widened + other.widened,
            unchecked: self.unchecked + other.unchecked,
        }
    }
}
