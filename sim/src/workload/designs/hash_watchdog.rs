//! `hash-watchdog`: a reentrant lock in one hash (owner -> hold count) whose whole key
//! expires with the lease (`sim/designs/hash_*.lua`).
//!
//! The holder's watchdog restarts the lease every TTL/3 until the release, and stops
//! quietly when a renewal finds the owner gone: the design has no lost-lease signal, so the
//! holder believes until it releases. A waiter told "busy" gets the hash's remaining time
//! to live and waits for the release message on the lock's channel, or for that long,
//! whichever comes first. No fencing token.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use leasehold::backend::Backend;
use leasehold::runtime::Runtime;
use redis::{Cmd, Value};

use super::wake::{Wake, channel};
use super::{Attempt, Grant, Lease, ONE_PERMIT, int, lock_key, owner, spawn_renewals};
use crate::world::truth::{Claim, Member};

const ACQUIRE: &str = include_str!("../../../designs/hash_acquire.lua");
const RENEW: &str = include_str!("../../../designs/hash_renew.lua");
const RELEASE: &str = include_str!("../../../designs/hash_release.lua");

/// The `hash-watchdog` client of one process incarnation.
pub(super) struct HashWatchdog {
    backend: Arc<dyn Backend>,
    ttl: Duration,
    owner: String,
    pub(super) rt: Runtime,
    /// The subscription waiters listen on.
    wake: Wake,
    /// The current hold's watchdog: set to stop it.
    stop: Option<Arc<AtomicBool>>,
}

fn script(source: &str, keys: &[&str], ttl_ms: u64, owner: &str) -> Cmd {
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(source).arg(keys.len());
    for k in keys {
        cmd.arg(*k);
    }
    cmd.arg(ttl_ms).arg(owner);
    cmd
}

impl HashWatchdog {
    /// The client on `backend`, with an owner id of its own.
    pub(super) fn new(lease: Lease, rt: &Runtime, backend: Arc<dyn Backend>) -> Self {
        Self {
            backend,
            ttl: lease.ttl,
            owner: owner(rt),
            rt: rt.clone(),
            wake: Wake::default(),
            stop: None,
        }
    }

    fn ttl_ms(&self) -> u64 {
        u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX)
    }

    pub(super) async fn attempt(&mut self, name: &str) -> Attempt {
        self.wake.listen(&self.backend, channel(name)).await;
        let hash = lock_key(name);
        let reply = self
            .backend
            .query(&script(ACQUIRE, &[&hash], self.ttl_ms(), &self.owner))
            .await;
        match reply {
            Ok(Value::Nil) => {
                self.start_watchdog(hash.clone());
                Attempt::Granted(Grant {
                    claim: Claim {
                        key: hash.into_bytes(),
                        members: vec![(0, Member::Field(self.owner.clone().into_bytes()))],
                        quorum: 1,
                    },
                    valid_until: None,
                    value: Vec::new(),
                    access: ONE_PERMIT,
                })
            }
            other => Attempt::Busy(
                int(&other)
                    .and_then(|ms| u64::try_from(ms).ok())
                    .map(Duration::from_millis),
            ),
        }
    }

    /// Renews the hold every TTL/3 until its release, or until a renewal finds it gone (quietly:
    /// the design has no lost-lease signal).
    fn start_watchdog(&mut self, hash: String) {
        let backend = Arc::clone(&self.backend);
        let (ttl_ms, owner) = (self.ttl_ms(), self.owner.clone());
        self.stop = Some(spawn_renewals(
            &self.rt,
            self.ttl / 3,
            move || {
                let (backend, renew) = (
                    Arc::clone(&backend),
                    script(RENEW, &[&hash], ttl_ms, &owner),
                );
                async move { int(&backend.query(&renew).await) != Some(0) }
            },
            || (),
        ));
    }

    /// Waits for the release message on `name`'s channel, or `hint` (the hash's remaining
    /// lease; Leasehold's longest spin nap without one), whichever comes first.
    pub(super) async fn wait(&mut self, name: &str, hint: Option<Duration>) {
        let nap = hint.unwrap_or(leasehold::Backoff::SPIN.max);
        self.wake
            .wait(&self.backend, &self.rt.clock, channel(name), nap)
            .await;
    }

    pub(super) async fn release(&mut self, name: &str) {
        if let Some(stop) = self.stop.take() {
            stop.store(true, Ordering::SeqCst);
        }
        let (hash, channel) = (lock_key(name), channel(name));
        let _ = self
            .backend
            .query(&script(
                RELEASE,
                &[&hash, &channel],
                self.ttl_ms(),
                &self.owner,
            ))
            .await;
    }
}
