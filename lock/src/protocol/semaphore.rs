//! The semaphore's scripts (`semaphore_*.lua`): permits in a sorted set scored by lease
//! deadline, with the mutex's fair queue for waiters.

use std::time::Duration;

use super::{
    Acquire, CallResult, Probe, Target, call, millis, parse_acquire, parse_probe, parse_release,
    parse_renew,
};
use crate::keys::inbox_prefix;
use crate::script::scripts;

/// Runs `semaphore_acquire.lua`: one of `permits` permits; `queue_entry` as for the mutex.
pub(crate) async fn permit_acquire(
    at: Target<'_>,
    permits: u32,
    ttl: Duration,
    queue_entry: Option<Duration>,
) -> CallResult<Acquire> {
    let keys = &at.lock.keys;
    let args = [
        at.hold.as_str().to_owned(),
        permits.to_string(),
        millis(ttl).to_string(),
        queue_entry.map_or(0, millis).to_string(),
        inbox_prefix(),
    ];
    let keys: [&str; 3] = [&keys.lock, &keys.queue, &keys.waiters];
    call(
        at,
        &scripts().semaphore_acquire,
        &keys,
        &args,
        parse_acquire,
    )
    .await
}

/// Runs `semaphore_release.lua`: `Some(0)` if the permit was held, `None` if not.
pub(crate) async fn permit_release(at: Target<'_>, permits: u32) -> CallResult<Option<u64>> {
    let keys = &at.lock.keys;
    let args = [
        at.hold.as_str().to_owned(),
        permits.to_string(),
        keys.released.clone(),
        inbox_prefix(),
    ];
    let keys: [&str; 3] = [&keys.lock, &keys.queue, &keys.waiters];
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
    let args = [at.hold.as_str().to_owned(), millis(ttl).to_string()];
    call(
        at,
        &scripts().semaphore_renew,
        &[&at.lock.keys.lock],
        &args,
        parse_renew,
    )
    .await
}

/// Runs `semaphore_probe.lua` (read-only).
pub(crate) async fn permit_probe(at: Target<'_>) -> CallResult<Probe> {
    let args = [at.hold.as_str().to_owned()];
    call(
        at,
        &scripts().semaphore_probe,
        &[&at.lock.keys.lock],
        &args,
        parse_probe,
    )
    .await
}
