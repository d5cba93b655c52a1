//! `zset-queue`: a FIFO of waiters in a sorted set beside a `SET NX PX` lock key
//! (`sim/designs/zset_queue_*.lua`).
//!
//! A waiter joins the queue once per acquisition (`ZADD NX`, scored by its own clock in
//! ms) and refreshes nothing after; whoever runs the acquire script first drops the entries
//! older than the entry timeout *on its own clock*, then the head of the queue (lowest
//! score) takes the lock key if it is free and leaves the queue; every other caller is told
//! busy. The release compare-and-deletes the lock key and publishes on the lock's channel;
//! a waiter waits for that message or the lock key's remaining lease, whichever comes
//! first. A waiter that gives up removes its entry (`ZREM`).
//!
//! The line's order and its staleness are client clocks' word: a client whose clock is
//! ahead joins behind waiters that came after it, one whose clock is behind heads the line
//! (and a clock ahead by more than the entry timeout drops every live waiter), and a dead
//! waiter's entry heads the line, refusing everyone while the lock is free, until it is
//! stale on the next caller's clock. The lock key itself is a server-side lease, so clocks
//! move the line, not the exclusion. Each client believes from the grant until it sends its
//! release: no renewal, no validity estimate, no fencing token.

use std::sync::Arc;
use std::time::Duration;

use leasehold::backend::Backend;
use leasehold::runtime::Runtime;
use redis::Value;

use super::wake::{Wake, channel};
use super::{Attempt, Grant, Lease, ONE_PERMIT, int, lock_key, millis, token};
use crate::world::truth::{Claim, Member};

const ACQUIRE: &str = include_str!("../../../designs/zset_queue_acquire.lua");
const RELEASE: &str = include_str!("../../../designs/zset_queue_release.lua");

/// The `zset-queue` client of one process incarnation.
pub(super) struct ZsetQueue {
    backend: Arc<dyn Backend>,
    ttl_ms: u64,
    /// How old an entry may get on the judging caller's clock: the workload's entry
    /// timeout, Leasehold's fair line's by default, so both lines forget a dead waiter
    /// alike.
    entry_timeout_ms: u64,
    pub(super) rt: Runtime,
    wake: Wake,
    /// The running acquisition's token, its queue entry's member: drawn at its first
    /// attempt, kept until it is granted or given up.
    waiting: Option<Vec<u8>>,
}

/// The queue key of lock `name`.
fn queue_key(name: &str) -> String {
    format!("{}:queue", lock_key(name))
}

impl ZsetQueue {
    /// The client on `backend`.
    pub(super) fn new(lease: Lease, rt: &Runtime, backend: Arc<dyn Backend>) -> Self {
        Self {
            backend,
            ttl_ms: lease.ttl_ms(),
            entry_timeout_ms: millis(
                lease
                    .entry_timeout
                    .unwrap_or(leasehold::DEFAULT_QUEUE_ENTRY_TIMEOUT),
            ),
            rt: rt.clone(),
            wake: Wake::default(),
            waiting: None,
        }
    }

    pub(super) async fn attempt(&mut self, name: &str) -> Attempt {
        self.wake.listen(&self.backend, channel(name)).await;
        let token = self.waiting.get_or_insert_with(|| token(&self.rt)).clone();
        let lock = lock_key(name);
        let now_ms = millis(self.rt.clock.now());
        let reply = self
            .backend
            .query(
                redis::cmd("EVAL")
                    .arg(ACQUIRE)
                    .arg(2)
                    .arg(&lock)
                    .arg(queue_key(name))
                    .arg(self.ttl_ms)
                    .arg(&token)
                    .arg(now_ms)
                    .arg(self.entry_timeout_ms),
            )
            .await;
        if !matches!(reply, Ok(Value::Nil)) {
            return Attempt::Busy(
                int(&reply)
                    .and_then(|ms| u64::try_from(ms).ok())
                    .map(Duration::from_millis),
            );
        }
        self.waiting = None;
        Attempt::Granted(Grant {
            claim: Claim {
                key: lock.into_bytes(),
                members: vec![(0, Member::Value(token.clone()))],
                quorum: 1,
            },
            valid_until: None,
            value: token,
            access: ONE_PERMIT,
        })
    }

    /// Waits for the release message on `name`'s channel, or `hint` (the lock key's
    /// remaining lease; Leasehold's longest spin nap without one, as when the lock is free
    /// and another waiter heads the line), whichever comes first.
    pub(super) async fn wait(&mut self, name: &str, hint: Option<Duration>) {
        let nap = hint.unwrap_or(leasehold::Backoff::SPIN.max);
        self.wake
            .wait(&self.backend, &self.rt.clock, channel(name), nap)
            .await;
    }

    /// Leaves the queue after the acquire timeout.
    pub(super) async fn give_up(&mut self, name: &str) {
        if let Some(token) = self.waiting.take() {
            let _ = self
                .backend
                .query(redis::cmd("ZREM").arg(queue_key(name)).arg(token))
                .await;
        }
    }

    pub(super) async fn release(&mut self, name: &str, grant: Grant) {
        let _ = self
            .backend
            .query(
                redis::cmd("EVAL")
                    .arg(RELEASE)
                    .arg(2)
                    .arg(lock_key(name))
                    .arg(channel(name))
                    .arg(&grant.value),
            )
            .await;
    }
}
