//! The read-write lock's scripts (`rw_*.lua`) and the extra keys they use. The writer's
//! hold lives in the mutex's hash layout, so it is renewed and probed by `renew.lua` and
//! `probe.lua` ([`super::mutex`]).

use std::time::Duration;

use redis::Value;

use super::{
    Acquire, Arg, CallError, CallResult, LockRef, MixedStrategy, Probe, Target, WaitArgs, call,
    int, parse_flagged_acquire, parse_probe, parse_release, parse_renew,
};
use crate::error::Error;
use crate::keys::{INBOX_PREFIX, ReaderKeys};
use crate::script::scripts;
use crate::wait::QUEUE_REFRESHES_PER_TIMEOUT;

/// The KEYS of both acquire scripts, in their order: the write hash, the readers, their
/// owners, the writers' intents, the fence, then the fair line and its entries.
fn acquire_keys<'a>(lock: &'a LockRef, rw: &'a ReaderKeys) -> [&'a str; 7] {
    [
        &lock.keys.lock,
        &rw.readers,
        &rw.owners,
        &rw.intents,
        &lock.keys.fence,
        &lock.keys.queue,
        &lock.keys.waiters,
    ]
}

/// Runs `rw_read_acquire.lua`: a shared read hold for `owner`. The last write epoch's fence
/// key is kept `fence_margin` past the latest read lease, so every hold of a read epoch
/// carries the same token. A fair waiter (`wait.queue_entry`) that is refused joins the line;
/// one held back by a non-fair writer's intent is told so (a mixed-strategy deployment).
pub(crate) async fn read_acquire(
    at: Target<'_>,
    owner: &str,
    ttl: Duration,
    wait: WaitArgs,
    fence_margin: Duration,
) -> CallResult<(Acquire, MixedStrategy)> {
    let rw = ReaderKeys::of(&at.lock.keys);
    let args = [
        Arg::Text(at.hold.as_str()),
        Arg::Text(owner),
        Arg::ms(ttl),
        Arg::ms(fence_margin),
        Arg::ms(wait.queue_entry.unwrap_or(Duration::ZERO)),
        Arg::Int(wait.seq),
    ];
    let keys = acquire_keys(at.lock, &rw);
    call(
        at,
        &scripts().rw_read_acquire,
        &keys,
        &args,
        parse_flagged_acquire,
    )
    .await
}

/// Runs `rw_write_acquire.lua`. A writer that will wait records an intent living `intent`
/// past this attempt (no new reader of another owner is admitted meanwhile), or, waiting
/// fairly (`wait.queue_entry`), its entry in the line; an owner that holds only read holds
/// is refused ([`Error::UpgradeRefused`]). A writer that does not join the line but finds a
/// live waiter in it is told so (a mixed-strategy deployment).
pub(crate) async fn write_acquire(
    at: Target<'_>,
    owner: &str,
    ttl: Duration,
    intent: Option<Duration>,
    wait: WaitArgs,
    fence_margin: Duration,
) -> CallResult<(Acquire, MixedStrategy)> {
    let rw = ReaderKeys::of(&at.lock.keys);
    let intent = intent.unwrap_or(Duration::ZERO);
    let poll = intent / QUEUE_REFRESHES_PER_TIMEOUT;
    let args = [
        Arg::Text(at.hold.as_str()),
        Arg::Text(owner),
        Arg::ms(ttl),
        Arg::ms(intent),
        Arg::ms(fence_margin),
        Arg::ms(poll),
        Arg::ms(wait.queue_entry.unwrap_or(Duration::ZERO)),
        Arg::Int(wait.seq),
    ];
    let keys = acquire_keys(at.lock, &rw);
    let script = &scripts().rw_write_acquire;
    call(at, script, &keys, &args, parse_write_acquire).await
}

/// Parses `rw_write_acquire.lua`'s reply: `{2, 0}` is a refused upgrade, anything else
/// has the (flagged) acquire shape.
fn parse_write_acquire(
    lock: &LockRef,
    script: &'static str,
    reply: &Value,
) -> CallResult<(Acquire, MixedStrategy)> {
    if let Value::Array(items) = reply
        && items.first().and_then(int) == Some(2)
    {
        return Err(CallError::Failed(Error::UpgradeRefused {
            name: lock.name.clone(),
        }));
    }
    parse_flagged_acquire(lock, script, reply)
}

/// Runs `rw_read_release.lua`: the owner's remaining read holds, or `None` if not held.
/// When the lock becomes free, the script hands it to the fair line's head.
pub(crate) async fn read_release(
    at: Target<'_>,
    owner: &str,
    fence_margin: Duration,
) -> CallResult<Option<u64>> {
    let rw = ReaderKeys::of(&at.lock.keys);
    let keys = &at.lock.keys;
    let args = [
        Arg::Text(at.hold.as_str()),
        Arg::Text(owner),
        Arg::Text(&keys.released),
        Arg::ms(fence_margin),
        Arg::Text(INBOX_PREFIX),
    ];
    let keys = [
        rw.readers.as_str(),
        &rw.owners,
        &keys.lock,
        &keys.fence,
        &keys.queue,
        &keys.waiters,
    ];
    call(at, &scripts().rw_read_release, &keys, &args, parse_release).await
}

/// Runs `rw_write_release.lua`: the owner's remaining write holds, or `None` if not held.
/// When the write lock becomes free, the script hands it to the fair line's head.
pub(crate) async fn write_release(
    at: Target<'_>,
    owner: &str,
    fence_margin: Duration,
) -> CallResult<Option<u64>> {
    let rw = ReaderKeys::of(&at.lock.keys);
    let keys = &at.lock.keys;
    let args = [
        Arg::Text(at.hold.as_str()),
        Arg::Text(owner),
        Arg::Text(&keys.released),
        Arg::ms(fence_margin),
        Arg::Text(INBOX_PREFIX),
    ];
    let keys = [
        keys.lock.as_str(),
        &rw.intents,
        &keys.fence,
        &rw.readers,
        &rw.owners,
        &keys.queue,
        &keys.waiters,
    ];
    call(at, &scripts().rw_write_release, &keys, &args, parse_release).await
}

/// Runs `rw_read_renew.lua`: true if the read hold was live and now has a fresh `ttl` (and
/// the fence key the margin past the latest read lease).
pub(crate) async fn read_renew(
    at: Target<'_>,
    ttl: Duration,
    fence_margin: Duration,
) -> CallResult<bool> {
    let rw = ReaderKeys::of(&at.lock.keys);
    let args = [
        Arg::Text(at.hold.as_str()),
        Arg::ms(ttl),
        Arg::ms(fence_margin),
    ];
    call(
        at,
        &scripts().rw_read_renew,
        &[&rw.readers, &rw.owners, &at.lock.keys.fence],
        &args,
        parse_renew,
    )
    .await
}

/// Runs `rw_read_probe.lua` (read-only).
pub(crate) async fn read_probe(at: Target<'_>) -> CallResult<Probe> {
    let rw = ReaderKeys::of(&at.lock.keys);
    let args = [Arg::Text(at.hold.as_str())];
    let keys = [rw.readers.as_str(), &at.lock.keys.fence];
    call(at, &scripts().rw_read_probe, &keys, &args, parse_probe).await
}
