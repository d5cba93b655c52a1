//! The read-write lock's scripts (`rw_*.lua`) and the extra keys they use. The writer's
//! hold lives in the mutex's hash layout, so it is renewed and probed by `renew.lua` and
//! `probe.lua` ([`super::mutex`]).

use std::time::Duration;

use redis::Value;

use super::{
    Acquire, CallError, CallResult, LockRef, Probe, int, millis, parse_acquire, parse_probe,
    parse_release, parse_renew, run,
};
use crate::backend::Backend;
use crate::error::Error;
use crate::fencing::FENCE_KEY_TTL;
use crate::owner::HoldId;
use crate::script::scripts;
use crate::wait::QUEUE_REFRESHES_PER_TIMEOUT;

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

/// Runs `rw_read_acquire.lua`: a shared read hold for `owner`.
pub(crate) async fn read_acquire(
    backend: &dyn Backend,
    lock: &LockRef,
    hold: &HoldId,
    owner: &str,
    ttl: Duration,
) -> CallResult<Acquire> {
    let rw = RwKeys::of(lock);
    let args = [
        hold.as_str().to_owned(),
        owner.to_owned(),
        millis(ttl).to_string(),
    ];
    let keys: [&str; 5] = [
        &lock.keys.lock,
        &rw.readers,
        &rw.owners,
        &rw.intents,
        &lock.keys.fence,
    ];
    let script = &scripts().rw_read_acquire;
    let reply = run(backend, lock, script, &keys, &args).await?;
    parse_acquire(lock, "rw_read_acquire", &reply)
}

/// Runs `rw_write_acquire.lua`. A writer that will wait records an intent living `intent`
/// past this attempt (no new reader of another owner is admitted meanwhile); an owner that
/// holds only read holds is refused ([`Error::UpgradeRefused`]).
pub(crate) async fn write_acquire(
    backend: &dyn Backend,
    lock: &LockRef,
    hold: &HoldId,
    owner: &str,
    ttl: Duration,
    intent: Option<Duration>,
) -> CallResult<Acquire> {
    let rw = RwKeys::of(lock);
    let intent = intent.unwrap_or(Duration::ZERO);
    let poll = intent / QUEUE_REFRESHES_PER_TIMEOUT;
    let args = [
        hold.as_str().to_owned(),
        owner.to_owned(),
        millis(ttl).to_string(),
        millis(intent).to_string(),
        millis(FENCE_KEY_TTL).to_string(),
        millis(poll).to_string(),
    ];
    let keys: [&str; 5] = [
        &lock.keys.lock,
        &rw.readers,
        &rw.owners,
        &rw.intents,
        &lock.keys.fence,
    ];
    let script = &scripts().rw_write_acquire;
    let reply = run(backend, lock, script, &keys, &args).await?;
    if let Value::Array(items) = &reply
        && items.first().and_then(int) == Some(2)
    {
        return Err(CallError::Failed(Error::UpgradeRefused {
            name: lock.name.clone(),
        }));
    }
    parse_acquire(lock, "rw_write_acquire", &reply)
}

/// Runs `rw_read_release.lua`: the owner's remaining read holds, or `None` if not held.
pub(crate) async fn read_release(
    backend: &dyn Backend,
    lock: &LockRef,
    hold: &HoldId,
    owner: &str,
) -> CallResult<Option<u64>> {
    let rw = RwKeys::of(lock);
    let args = [
        hold.as_str().to_owned(),
        owner.to_owned(),
        lock.keys.released.clone(),
    ];
    let script = &scripts().rw_read_release;
    let reply = run(backend, lock, script, &[&rw.readers, &rw.owners], &args).await?;
    parse_release(lock, "rw_read_release", &reply)
}

/// Runs `rw_write_release.lua`: the owner's remaining write holds, or `None` if not held.
pub(crate) async fn write_release(
    backend: &dyn Backend,
    lock: &LockRef,
    hold: &HoldId,
    owner: &str,
) -> CallResult<Option<u64>> {
    let rw = RwKeys::of(lock);
    let args = [
        hold.as_str().to_owned(),
        owner.to_owned(),
        lock.keys.released.clone(),
    ];
    let script = &scripts().rw_write_release;
    let reply = run(
        backend,
        lock,
        script,
        &[&lock.keys.lock, &rw.intents],
        &args,
    )
    .await?;
    parse_release(lock, "rw_write_release", &reply)
}

/// Runs `rw_read_renew.lua`: true if the read hold was live and now has a fresh `ttl`.
pub(crate) async fn read_renew(
    backend: &dyn Backend,
    lock: &LockRef,
    hold: &HoldId,
    ttl: Duration,
) -> CallResult<bool> {
    let rw = RwKeys::of(lock);
    let args = [hold.as_str().to_owned(), millis(ttl).to_string()];
    let script = &scripts().rw_read_renew;
    let reply = run(backend, lock, script, &[&rw.readers, &rw.owners], &args).await?;
    parse_renew(lock, "rw_read_renew", &reply)
}

/// Runs `rw_read_probe.lua` (read-only).
pub(crate) async fn read_probe(
    backend: &dyn Backend,
    lock: &LockRef,
    hold: &HoldId,
) -> CallResult<Probe> {
    let rw = RwKeys::of(lock);
    let args = [hold.as_str().to_owned()];
    let script = &scripts().rw_read_probe;
    let reply = run(
        backend,
        lock,
        script,
        &[&rw.readers, &lock.keys.fence],
        &args,
    )
    .await?;
    parse_probe(lock, "rw_read_probe", &reply)
}
