//! The semaphore's scripts (`semaphore_*.lua`): permits in a sorted set scored by lease
//! deadline, with the mutex's fair queue for waiters.

use std::time::Duration;

use super::{
    Acquire, Arg, CallResult, Probe, Target, call, parse_acquire, parse_probe, parse_release,
    parse_renew,
};
use crate::keys::INBOX_PREFIX;
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
        Arg::Text(at.hold.as_str()),
        Arg::Int(u64::from(permits)),
        Arg::ms(ttl),
        Arg::ms(queue_entry.unwrap_or(Duration::ZERO)),
        Arg::Text(INBOX_PREFIX),
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
        Arg::Text(at.hold.as_str()),
        Arg::Int(u64::from(permits)),
        Arg::Text(&keys.released),
        Arg::Text(INBOX_PREFIX),
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
    let args = [Arg::Text(at.hold.as_str()), Arg::ms(ttl)];
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
