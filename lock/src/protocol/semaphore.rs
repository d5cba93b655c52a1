//! The semaphore's scripts (`semaphore_*.lua`): permits in a sorted set scored by lease
//! deadline, with the mutex's fair queue for waiters, and the size stored beside them.

use std::time::Duration;

use redis::Value;

use super::{
    Acquire, Arg, CallError, CallResult, LockRef, Probe, Target, call, classify, int, malformed,
    parse_acquire, parse_probe, parse_release, parse_renew, text,
};
use crate::backend::Backend;
use crate::error::Error;
use crate::keys::INBOX_PREFIX;
use crate::script::scripts;

/// The key the semaphore's size is stored in: its permits key's name plus `:size`, so the
/// same hash tag (cluster slot). Passed in KEYS like every key a script touches.
fn size_key(lock: &LockRef) -> String {
    format!("{}:size", lock.keys.lock)
}

/// Runs `semaphore_acquire.lua`: one of `permits` permits; `queue_entry` as for the mutex.
/// A size stored on the server other than `permits` is [`Error::PermitsMismatch`].
pub(crate) async fn permit_acquire(
    at: Target<'_>,
    permits: u32,
    ttl: Duration,
    queue_entry: Option<Duration>,
) -> CallResult<Acquire> {
    let keys = &at.lock.keys;
    let args = [
        Arg::Text(at.hold.as_str()),
        Arg::Int(u64::from(permits)),
        Arg::ms(ttl),
        Arg::ms(queue_entry.unwrap_or(Duration::ZERO)),
        Arg::Text(INBOX_PREFIX),
    ];
    let size = size_key(at.lock);
    let keys: [&str; 4] = [&keys.lock, &keys.queue, &keys.waiters, &size];
    let reply = call(
        at,
        &scripts().semaphore_acquire,
        &keys,
        &args,
        parse_permit_acquire,
    )
    .await?;
    match reply {
        PermitAcquire::Decided(decided) => Ok(decided),
        PermitAcquire::Mismatch(stored) => Err(CallError::Failed(Error::PermitsMismatch {
            name: at.lock.name.clone(),
            stored,
            requested: permits,
        })),
    }
}

/// What `semaphore_acquire.lua` answered.
enum PermitAcquire {
    /// Granted or busy, as the mutex's acquire.
    Decided(Acquire),
    /// The server stores this other size: `{-1, stored}`.
    Mismatch(u32),
}

fn parse_permit_acquire(
    lock: &LockRef,
    script: &'static str,
    reply: &Value,
) -> CallResult<PermitAcquire> {
    if let Value::Array(items) = reply
        && let [flag, stored] = items.as_slice()
        && int(flag) == Some(-1)
    {
        return text(stored)
            .and_then(|stored| stored.parse().ok())
            .map(PermitAcquire::Mismatch)
            .ok_or_else(|| malformed(lock, script, reply));
    }
    parse_acquire(lock, script, reply).map(PermitAcquire::Decided)
}

/// Runs `semaphore_resize.lua`: true if the semaphore was live and now stores `permits`,
/// false if it was idle (nothing stored). Not tied to a hold, so no [`Target`].
pub(crate) async fn permits_resize(
    backend: &dyn Backend,
    lock: &LockRef,
    permits: u32,
) -> CallResult<bool> {
    let keys = &lock.keys;
    let args = [
        Arg::Int(u64::from(permits)),
        Arg::Text(&keys.released),
        Arg::Text(INBOX_PREFIX),
    ];
    let script = &scripts().semaphore_resize;
    let size = size_key(lock);
    let keys: [&str; 4] = [&keys.lock, &keys.queue, &keys.waiters, &size];
    let reply = script
        .run(backend, &keys, &args)
        .await
        .map_err(|err| classify(lock, err))?;
    parse_renew(lock, script.name(), &reply)
}

/// Runs `semaphore_release.lua`: `Some(0)` if the permit was held, `None` if not.
pub(crate) async fn permit_release(at: Target<'_>, permits: u32) -> CallResult<Option<u64>> {
    let keys = &at.lock.keys;
    let args = [
        Arg::Text(at.hold.as_str()),
        Arg::Int(u64::from(permits)),
        Arg::Text(&keys.released),
        Arg::Text(INBOX_PREFIX),
    ];
    let size = size_key(at.lock);
    let keys: [&str; 4] = [&keys.lock, &keys.queue, &keys.waiters, &size];
    call(
        at,
        &scripts().semaphore_release,
        &keys,
        &args,
        parse_release,
    )
    .await
}

/// Runs `semaphore_renew.lua`: true if the permit was live and now has a fresh `ttl`.
pub(crate) async fn permit_renew(at: Target<'_>, ttl: Duration) -> CallResult<bool> {
    let args = [Arg::Text(at.hold.as_str()), Arg::ms(ttl)];
    call(
        at,
        &scripts().semaphore_renew,
        &[&at.lock.keys.lock, &size_key(at.lock)],
        &args,
        parse_renew,
    )
    .await
}

/// Runs `semaphore_probe.lua` (read-only).
pub(crate) async fn permit_probe(at: Target<'_>) -> CallResult<Probe> {
    let args = [Arg::Text(at.hold.as_str())];
    call(
        at,
        &scripts().semaphore_probe,
        &[&at.lock.keys.lock],
        &args,
        parse_probe,
    )
    .await
}
