//! `redlock-no-drift`: RedLock as commonly written. The client sends `SET key token NX PX
//! ttl` to every master at once (each with a short timeout of its own), and holds when a
//! majority answered `OK` with validity `ttl - elapsed` left, elapsed measured on its own
//! clock from before the first request: no drift term. It believes until its release or
//! the validity's end on its own clock, whichever comes first. A failed attempt, and the
//! release, compare-and-delete on every master; a refused client retries after a random
//! delay. No fencing token.

use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use leasehold::backend::Backend;
use leasehold::runtime::Runtime;
use redis::Cmd;

use super::{Attempt, Grant, Lease, ONE_PERMIT, is_ok, lock_key, token};
use crate::world::truth::{Claim, Member};

const COMPARE_AND_DELETE: &str = include_str!("../../../designs/compare_and_delete.lua");

/// How long the client waits for one master's answer: small against the TTL, as the
/// RedLock description asks, so a master that is down does not eat the validity.
const PER_MASTER_TIMEOUT: Duration = Duration::from_millis(50);

/// The `redlock-no-drift` client of one process incarnation.
pub(super) struct RedlockNoDrift {
    masters: Vec<Arc<dyn Backend>>,
    ttl: Duration,
    pub(super) rt: Runtime,
}

impl RedlockNoDrift {
    /// The client over `masters`.
    pub(super) fn new(lease: Lease, rt: &Runtime, masters: Vec<Arc<dyn Backend>>) -> Self {
        Self {
            masters,
            ttl: lease.ttl,
            rt: rt.clone(),
        }
    }

    /// Sends `cmd` to every master at once; whether each answered `OK` in time.
    async fn everywhere(&self, cmd: &Cmd) -> Vec<bool> {
        join_all(self.masters.iter().map(|master| async move {
            let reply = self.rt.timeout(PER_MASTER_TIMEOUT, master.query(cmd)).await;
            reply.is_some_and(|r| is_ok(&r))
        }))
        .await
    }

    pub(super) async fn attempt(&mut self, name: &str) -> Attempt {
        let lock = lock_key(name);
        let token = token(&self.rt);
        let ttl_ms = u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX);
        let clock = Arc::clone(&self.rt.clock);
        let start = clock.now();
        let set = redis::cmd("SET")
            .arg(&lock)
            .arg(&token)
            .arg("NX")
            .arg("PX")
            .arg(ttl_ms)
            .clone();
        let granted = self.everywhere(&set).await;
        let members: Vec<_> = granted
            .iter()
            .enumerate()
            .filter(|(_, ok)| **ok)
            .map(|(i, _)| (i, Member::Value(token.clone())))
            .collect();
        let quorum = self.masters.len() / 2 + 1;
        let elapsed = clock.now().saturating_sub(start);
        if members.len() >= quorum && elapsed < self.ttl {
            return Attempt::Granted(Grant {
                claim: Claim {
                    key: lock.into_bytes(),
                    members,
                    quorum: u32::try_from(quorum).unwrap_or(u32::MAX),
                },
                valid_until: Some(start + (self.ttl - elapsed)),
                value: token,
                access: ONE_PERMIT,
            });
        }
        self.unlock(&lock, &token).await;
        Attempt::Busy(Some(self.rt.jitter(self.ttl / 5)))
    }

    async fn unlock(&self, lock: &str, token: &[u8]) {
        let cad = redis::cmd("EVAL")
            .arg(COMPARE_AND_DELETE)
            .arg(1)
            .arg(lock)
            .arg(token)
            .clone();
        self.everywhere(&cad).await;
    }

    pub(super) async fn release(&mut self, name: &str, grant: Grant) {
        self.unlock(&lock_key(name), &grant.value).await;
    }
}
