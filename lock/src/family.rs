//! Lock families — mutex, read, write, permit — and the scripts that act on each one's holds.
//!
//! The acquire loop, guard, watchdog and background release (`mutex.rs`, `guard.rs`,
//! `watchdog.rs`, `hold.rs`) serve every family; only these four script calls differ.
//! Invariant: a hold is only ever acquired, renewed, probed and released by its own
//! family's scripts, on keys that all share the lock's `{name}` hash tag.

use std::time::Duration;

use redis::Value;

use crate::backend::BoxFuture;
use crate::error::Error;
use crate::fencing::FENCE_KEY_TTL;
use crate::hold::Hold;
use crate::keys::inbox_prefix;
use crate::protocol::{
    self, Acquire, CallError, LockRef, Probe, Reply, classify, int, malformed, millis,
    parse_acquire, parse_probe,
};
use crate::runtime::Runtime;
use crate::script::{LuaScript, scripts};
use crate::wait::QUEUE_REFRESHES_PER_TIMEOUT;
use crate::watchdog::Renewable;

/// Which lock family a hold belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HoldKind {
    /// A lease mutex hold (`acquire.lua` and friends).
    Mutex,
    /// A shared read hold of a read-write lock (`rw_read_*.lua`).
    Read,
    /// The exclusive write hold of a read-write lock (`rw_write_*.lua`; renewed and probed
    /// by the mutex's `renew.lua`/`probe.lua`, whose hash layout it shares). A waiting
    /// writer records an intent that lives `intent` past its last attempt.
    Write {
        /// Lifetime of a waiting writer's intent without refresh.
        intent: Duration,
    },
    /// One permit of a semaphore with `permits` permits (`semaphore_*.lua`).
    Permit {
        /// The semaphore's size.
        permits: u32,
    },
}

impl HoldKind {
    /// Whether a busy attempt leaves something besides a fair-queue entry on the server
    /// (a waiting writer's intent), which an abandoned acquire must withdraw.
    pub(crate) fn leaves_intent(self, waiting: bool) -> bool {
        waiting && matches!(self, Self::Write { .. })
    }

    /// For spans and logs.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::Mutex => "mutex",
            Self::Read => "read",
            Self::Write { .. } => "write",
            Self::Permit { .. } => "permit",
        }
    }
}

/// The extra keys of a read-write lock, derived from its family keys (`leasehold:{name}:rw`).
struct RwKeys {
    readers: String,
    owners: String,
    intents: String,
}

impl RwKeys {
    fn of(lock: &LockRef) -> Self {
        let base = &lock.keys.lock;
        Self {
            readers: format!("{base}:readers"),
            owners: format!("{base}:owners"),
            intents: format!("{base}:intents"),
        }
    }
}

impl Hold {
    async fn run(&self, script: &LuaScript, keys: &[&str], args: &[String]) -> Reply<Value> {
        script
            .run(self.shared.backend.as_ref(), keys, args)
            .await
            .map_err(|err| classify(&self.lock, err))
    }

    /// One acquire attempt. `queue_entry`: the fair-queue entry timeout (mutex, permit);
    /// `waiting`: the caller will wait if busy (a writer then records its intent).
    pub(crate) async fn acquire_once(
        &self,
        queue_entry: Option<Duration>,
        waiting: bool,
    ) -> Reply<Acquire> {
        let lock = &self.lock;
        let keys = &lock.keys;
        let hold = self.id.as_str().to_owned();
        let owner = self.owner.as_str().to_owned();
        let ttl = millis(self.config.ttl).to_string();
        match self.kind {
            HoldKind::Mutex => {
                let backend = self.shared.backend.as_ref();
                protocol::acquire(
                    backend,
                    lock,
                    &self.id,
                    &owner,
                    self.config.ttl,
                    queue_entry,
                )
                .await
            }
            HoldKind::Read => {
                let rw = RwKeys::of(lock);
                let reply = self
                    .run(
                        &scripts().rw_read_acquire,
                        &[
                            &keys.lock,
                            &rw.readers,
                            &rw.owners,
                            &rw.intents,
                            &keys.fence,
                        ],
                        &[hold, owner, ttl],
                    )
                    .await?;
                parse_acquire(lock, "rw_read_acquire", &reply)
            }
            HoldKind::Write { intent } => {
                let rw = RwKeys::of(lock);
                let intent = if waiting { intent } else { Duration::ZERO };
                let poll = intent / QUEUE_REFRESHES_PER_TIMEOUT;
                let args = [
                    hold,
                    owner,
                    ttl,
                    millis(intent).to_string(),
                    millis(FENCE_KEY_TTL).to_string(),
                    millis(poll).to_string(),
                ];
                let reply = self
                    .run(
                        &scripts().rw_write_acquire,
                        &[
                            &keys.lock,
                            &rw.readers,
                            &rw.owners,
                            &rw.intents,
                            &keys.fence,
                        ],
                        &args,
                    )
                    .await?;
                if let Value::Array(items) = &reply
                    && items.first().and_then(int) == Some(2)
                {
                    return Err(CallError::Failed(Error::UpgradeRefused {
                        name: lock.name.clone(),
                    }));
                }
                parse_acquire(lock, "rw_write_acquire", &reply)
            }
            HoldKind::Permit { permits } => {
                let args = [
                    hold,
                    permits.to_string(),
                    ttl,
                    queue_entry.map_or(0, millis).to_string(),
                    inbox_prefix(),
                ];
                let reply = self
                    .run(
                        &scripts().semaphore_acquire,
                        &[&keys.lock, &keys.queue, &keys.waiters],
                        &args,
                    )
                    .await?;
                parse_acquire(lock, "semaphore_acquire", &reply)
            }
        }
    }

    /// One release attempt: the owner's remaining hold count, or `None` if not held.
    pub(crate) async fn release_once(&self) -> Reply<Option<u64>> {
        let lock = &self.lock;
        let keys = &lock.keys;
        let hold = self.id.as_str().to_owned();
        let owner = self.owner.as_str().to_owned();
        let (name, reply) = match self.kind {
            HoldKind::Mutex => {
                let backend = self.shared.backend.as_ref();
                return protocol::release(backend, lock, &self.id, &owner).await;
            }
            HoldKind::Read => {
                let rw = RwKeys::of(lock);
                let args = [hold, owner, keys.released.clone()];
                let script = &scripts().rw_read_release;
                (
                    "rw_read_release",
                    self.run(script, &[&rw.readers, &rw.owners], &args).await?,
                )
            }
            HoldKind::Write { .. } => {
                let rw = RwKeys::of(lock);
                let args = [hold, owner, keys.released.clone()];
                let script = &scripts().rw_write_release;
                (
                    "rw_write_release",
                    self.run(script, &[&keys.lock, &rw.intents], &args).await?,
                )
            }
            HoldKind::Permit { permits } => {
                let args = [
                    hold,
                    permits.to_string(),
                    keys.released.clone(),
                    inbox_prefix(),
                ];
                let script = &scripts().semaphore_release;
                (
                    "semaphore_release",
                    self.run(script, &[&keys.lock, &keys.queue, &keys.waiters], &args)
                        .await?,
                )
            }
        };
        match int(&reply) {
            Some(-1) => Ok(None),
            Some(left) => u64::try_from(left)
                .map(Some)
                .map_err(|_| malformed(lock, name, &reply)),
            None => Err(malformed(lock, name, &reply)),
        }
    }

    /// One renewal for another `ttl`: true if the hold was live.
    pub(crate) async fn renew_once(&self, ttl: Duration) -> Reply<bool> {
        let lock = &self.lock;
        let hold = self.id.as_str().to_owned();
        let ms = millis(ttl).to_string();
        let (name, reply) = match self.kind {
            HoldKind::Mutex | HoldKind::Write { .. } => {
                let backend = self.shared.backend.as_ref();
                return protocol::renew(backend, lock, &self.id, ttl).await;
            }
            HoldKind::Read => {
                let rw = RwKeys::of(lock);
                let script = &scripts().rw_read_renew;
                (
                    "rw_read_renew",
                    self.run(script, &[&rw.readers, &rw.owners], &[hold, ms])
                        .await?,
                )
            }
            HoldKind::Permit { .. } => {
                let script = &scripts().semaphore_renew;
                (
                    "semaphore_renew",
                    self.run(script, &[&lock.keys.lock], &[hold, ms]).await?,
                )
            }
        };
        match int(&reply) {
            Some(1) => Ok(true),
            Some(0) => Ok(false),
            _ => Err(malformed(lock, name, &reply)),
        }
    }

    /// Read-only: does this hold own the lock (after an ambiguous acquire)?
    pub(crate) async fn probe_once(&self) -> Reply<Probe> {
        let lock = &self.lock;
        let hold = [self.id.as_str().to_owned()];
        match self.kind {
            HoldKind::Mutex | HoldKind::Write { .. } => {
                protocol::probe(self.shared.backend.as_ref(), lock, &self.id).await
            }
            HoldKind::Read => {
                let rw = RwKeys::of(lock);
                let script = &scripts().rw_read_probe;
                let reply = self
                    .run(script, &[&rw.readers, &lock.keys.fence], &hold)
                    .await?;
                parse_probe(lock, "rw_read_probe", &reply)
            }
            HoldKind::Permit { .. } => {
                let script = &scripts().semaphore_probe;
                let reply = self.run(script, &[&lock.keys.lock], &hold).await?;
                parse_probe(lock, "semaphore_probe", &reply)
            }
        }
    }
}

impl Renewable for Hold {
    fn runtime(&self) -> &Runtime {
        &self.shared.runtime
    }

    fn span(&self) -> &tracing::Span {
        &self.span
    }

    fn renew(&self, ttl: Duration) -> BoxFuture<'_, Result<bool, CallError>> {
        Box::pin(self.renew_once(ttl))
    }
}
