//! The single-key designs: the lock is one string key on one node.
//!
//! - `setnx-then-expire`: `SETNX key 1`, then `PEXPIRE key ttl` as a second command (a
//!   crash or a lost reply between the two leaves the key with no expiry); release `DEL`.
//! - `setnx-getset`: the key's value is its holder's expiry on the holder's clock, and the
//!   key has no TTL. `SETNX key <now + ttl>`; when busy, `GET` it, and once the stored
//!   expiry has passed on this client's clock, `GETSET key <now + ttl>`, winning only if
//!   the value it replaced had passed too (a racer that got there first wrote a future
//!   one); release `DEL`.
//! - `set-nx-px-del`: `SET key token NX PX ttl`; release `DEL`, whoever holds the key.
//! - `set-nx-px-cad`: the same acquire; release by compare-and-delete
//!   (`sim/designs/compare_and_delete.lua`).
//!
//! Each client believes from the grant until it sends its release, as the descriptions'
//! users do: none keeps a validity estimate or renews.

use std::sync::Arc;

use leasehold::backend::Backend;
use redis::Cmd;

use leasehold::runtime::Runtime;

use super::{Attempt, Grant, Lease, ONE_PERMIT, bytes, int, is_ok, lock_key, token};
use crate::world::truth::{Claim, Member};

/// The compare-and-delete release script.
const COMPARE_AND_DELETE: &str = include_str!("../../../designs/compare_and_delete.lua");

/// Which single-key design.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// `setnx-then-expire`.
    ThenExpire,
    /// `setnx-getset`.
    GetSet,
    /// `set-nx-px-del` (`compare: false`) or `set-nx-px-cad`.
    NxPx {
        /// Whether the release compares the token before it deletes.
        compare: bool,
    },
}

/// A single-key design's client.
pub(super) struct SingleKey {
    kind: Kind,
    backend: Arc<dyn Backend>,
    ttl_ms: u64,
    pub(super) rt: Runtime,
}

impl SingleKey {
    /// The client of design `kind` on `backend`.
    pub(super) fn new(kind: Kind, lease: Lease, rt: &Runtime, backend: Arc<dyn Backend>) -> Self {
        Self {
            kind,
            backend,
            ttl_ms: lease.ttl_ms(),
            rt: rt.clone(),
        }
    }

    async fn query(&self, cmd: &Cmd) -> redis::RedisResult<redis::Value> {
        self.backend.query(cmd).await
    }

    /// The client's own clock, ms: what `setnx-getset` stores and compares.
    fn now_ms(&self) -> u64 {
        super::millis(self.rt.clock.now())
    }

    fn granted(&self, name: &str, value: Vec<u8>) -> Attempt {
        Attempt::Granted(Grant {
            claim: Claim {
                key: lock_key(name).into_bytes(),
                members: vec![(0, Member::Value(value.clone()))],
                quorum: 1,
            },
            valid_until: None,
            value,
            access: ONE_PERMIT,
        })
    }

    pub(super) async fn attempt(&mut self, name: &str) -> Attempt {
        let lock = lock_key(name);
        match self.kind {
            Kind::ThenExpire => {
                let set = self.query(redis::cmd("SETNX").arg(&lock).arg(1)).await;
                if int(&set) != Some(1) {
                    return Attempt::Busy(None);
                }
                // Its reply is not looked at: the client holds once SETNX said so.
                let _ = self
                    .query(redis::cmd("PEXPIRE").arg(&lock).arg(self.ttl_ms))
                    .await;
                self.granted(name, b"1".to_vec())
            }
            Kind::GetSet => {
                let expiry = self.now_ms().saturating_add(self.ttl_ms).to_string();
                let set = self
                    .query(redis::cmd("SETNX").arg(&lock).arg(&expiry))
                    .await;
                if int(&set) == Some(1) {
                    return self.granted(name, expiry.into_bytes());
                }
                let stored = self.query(redis::cmd("GET").arg(&lock)).await;
                let passed = |value: Option<&[u8]>| {
                    value
                        .and_then(|v| std::str::from_utf8(v).ok())
                        .and_then(|v| v.parse::<u64>().ok())
                        .is_some_and(|at| at < self.now_ms())
                };
                if !passed(bytes(&stored)) {
                    return Attempt::Busy(None);
                }
                let expiry = self.now_ms().saturating_add(self.ttl_ms).to_string();
                let old = self
                    .query(redis::cmd("GETSET").arg(&lock).arg(&expiry))
                    .await;
                // A key deleted meanwhile (GETSET answers nil) was set by this call: won.
                if matches!(old, Ok(redis::Value::Nil)) || passed(bytes(&old)) {
                    self.granted(name, expiry.into_bytes())
                } else {
                    Attempt::Busy(None)
                }
            }
            Kind::NxPx { .. } => {
                let token = token(&self.rt);
                let set = self
                    .query(
                        redis::cmd("SET")
                            .arg(&lock)
                            .arg(&token)
                            .arg("NX")
                            .arg("PX")
                            .arg(self.ttl_ms),
                    )
                    .await;
                if is_ok(&set) {
                    self.granted(name, token)
                } else {
                    Attempt::Busy(None)
                }
            }
        }
    }

    pub(super) async fn release(&mut self, name: &str, grant: Grant) {
        let lock = lock_key(name);
        let _ = match self.kind {
            Kind::NxPx { compare: true } => {
                self.query(
                    redis::cmd("EVAL")
                        .arg(COMPARE_AND_DELETE)
                        .arg(1)
                        .arg(&lock)
                        .arg(&grant.value),
                )
                .await
            }
            _ => self.query(redis::cmd("DEL").arg(&lock)).await,
        };
    }
}
