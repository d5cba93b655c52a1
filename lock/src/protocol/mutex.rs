//! The lease mutex's scripts (`acquire.lua`, `release.lua`, `renew.lua`, `probe.lua`), whose
//! hash layout the read-write lock's writer shares for renewal and probing.

use std::time::Duration;

use super::{
    Acquire, CallResult, Probe, Target, call, millis, parse_acquire, parse_probe, parse_release,
    parse_renew,
};
use crate::keys::inbox_prefix;
use crate::script::scripts;

/// Runs `acquire.lua`; `queue_entry` is the fair-queue entry timeout (None: never queue).
pub(crate) async fn acquire(
    at: Target<'_>,
    owner: &str,
    ttl: Duration,
    queue_entry: Option<Duration>,
    fence_margin: Duration,
) -> CallResult<Acquire> {
    let keys = &at.lock.keys;
    let args = [
        at.hold.as_str().to_owned(),
        owner.to_owned(),
        millis(ttl).to_string(),
        queue_entry.map_or(0, millis).to_string(),
        millis(fence_margin).to_string(),
    ];
    let keys: [&str; 4] = [&keys.lock, &keys.fence, &keys.queue, &keys.waiters];
    call(at, &scripts().acquire, &keys, &args, parse_acquire).await
}

/// Runs `release.lua`: the owner's remaining hold count, or `None` if the hold was not held.
pub(crate) async fn release(
    at: Target<'_>,
    owner: &str,
    fence_margin: Duration,
) -> CallResult<Option<u64>> {
    let keys = &at.lock.keys;
    let args = [
        at.hold.as_str().to_owned(),
        owner.to_owned(),
        keys.released.clone(),
        inbox_prefix(),
        millis(fence_margin).to_string(),
    ];
    let keys: [&str; 4] = [&keys.lock, &keys.queue, &keys.waiters, &keys.fence];
    call(at, &scripts().release, &keys, &args, parse_release).await
}

/// Runs `renew.lua`: true if the hold was live and now has a fresh `ttl`.
pub(crate) async fn renew(
    at: Target<'_>,
    ttl: Duration,
    fence_margin: Duration,
) -> CallResult<bool> {
    let keys = &at.lock.keys;
    let args = [
        at.hold.as_str().to_owned(),
        millis(ttl).to_string(),
        millis(fence_margin).to_string(),
    ];
    call(
        at,
        &scripts().renew,
        &[&keys.lock, &keys.fence],
        &args,
        parse_renew,
    )
    .await
}

/// Runs `probe.lua` (read-only).
pub(crate) async fn probe(at: Target<'_>) -> CallResult<Probe> {
    let keys = &at.lock.keys;
    let args = [at.hold.as_str().to_owned()];
    call(
        at,
        &scripts().probe,
        &[&keys.lock, &keys.fence],
        &args,
        parse_probe,
    )
    .await
}
