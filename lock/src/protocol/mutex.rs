//! The lease mutex's scripts (`acquire.lua`, `release.lua`, `renew.lua`, `probe.lua`), whose
//! hash layout the read-write lock's writer shares for renewal and probing, and the fair
//! hand-off message `release.lua` publishes.
//!
//! # The lone hold form, and why it is safe
//! An uncontended acquire stores its hold as the string `<hold id>` with the lease as the
//! key's expiry, instead of the hash `{owner: 1, #<hold id>: deadline}` plus its
//! `PEXPIREAT`; its release is `MGET` + `DEL`. With `TIME`, `EXISTS` and the fence `SET`,
//! an uncontended acquire + release costs the server 8 commands (the two `EVALSHA`s
//! included) instead of 10. The argument that nothing else changes:
//! - **One meaning.** The string stands for exactly one hash: owner = the hold id's suffix
//!   with count 1, and the hold's deadline = the key's expiry. Its lease starts no earlier
//!   than the hash form's would (both count from the script's one `TIME`), so the
//!   client's validity, counted from a request sent before the script ran, stays a lower
//!   bound of the server's.
//! - **Every script reads it as that hash.** `renew.lua` extends the key (and the fence
//!   key past it) for the named hold only, `probe.lua` reports the key's PTTL as the
//!   hold's lease, `release.lua` deletes it for the named hold only, a plain attempt
//!   (no queue, no listener) of another owner gets what is left of the lease, as the hash
//!   would give it, and every other path of `acquire.lua` first rewrites it into the hash
//!   it stands for (deadline = the key's `PEXPIRETIME` + 1, the last millisecond Redis
//!   still keeps the key, and that absolute expiry kept), then goes on as for any hash.
//!   Scripts are atomic, so no other command sees a half-rewritten lock. A string held by another hold id is, to release and renew, a
//!   hash without the caller's hold: `-1` / `0`, as before.
//! - **No flag is lost.** A string is written only when neither the lock nor the queue
//!   exists, so no waiter is queued and none listens for that epoch; a waiter that
//!   queues or listens later sets its `~q`/`~p` flag only after the rewrite, into the
//!   hash. So a release that finds the string owes nobody a hand-off or a `released`
//!   message, exactly as the hash release with neither flag.
//! - **Tokens.** The fence key is untouched by the string release, so it keeps the expiry
//!   the grant or the last renewal gave it, the lease and the margin: it outlives every
//!   lease by at least the margin, as tokens need (`fencing.rs`). Only the idle-key bound
//!   moves, from the margin after the release to the margin after the released lease's
//!   end (the last grant or renewal plus the lease).
//! - **Foreign data.** A string that is not a hold id with an expiry is not a lease:
//!   `acquire.lua` answers `WRONGTYPE`, as for a key of any other type.
//!
//! The simulator's `lone-hold-*` scenarios drive the rewrite against releases, renewals,
//! retries and probes under message loss; exploration covers the rest.
//!
//! # The fair line's cost per hand-off, and why the savings change nothing
//! At a hot lock every acquisition is a hand-off: one `release.lua` that grants the head
//! and one `acquire.lua` by which the last holder joins the line again. Three things keep
//! that at 26 server commands instead of 31 (one of the 26 is the release's `LINDEX` of
//! the head, read with the fence key before its first write so that a foreign value fails
//! it cleanly):
//! - **Flags are written once.** A waiter reads `~q`/`~p` with the `HMGET` it already
//!   makes and writes only a missing one. Flags are read after the lone hold's rewrite,
//!   from the hash the waiter then joins, and a script is atomic, so a flag read as set
//!   is set. The one hash the script itself deletes (left with no live hold of the
//!   owner) leaves the lock free, and a free lock's flags are neither read nor written.
//! - **The hand-off writes the new hold and `~q` in one `HSET`,** without asking whether
//!   anyone is still queued. `~q` means "waiters may be queued"; when none is left, the
//!   next release finds that with one `LINDEX` and hands off to nobody, as before.
//! - **Dead heads are purged only where they could stall anyone:** by an acquire that
//!   finds the lock free and must decide who goes first. While the lock is held, the
//!   head waits anyway, and the release skips expired entries as it hands off, so the
//!   line's order and its bound on a crashed waiter (one entry timeout) are unchanged.

use std::time::Duration;

use super::{
    Acquire, Arg, CallResult, MixedStrategy, Probe, Target, WaitArgs, call, parse_flagged_acquire,
    parse_probe, parse_release, parse_renew,
};
use crate::fencing::FencingToken;
use crate::keys::INBOX_PREFIX;
use crate::script::scripts;

/// Runs `acquire.lua` for an attempt that waits as `wait` says.
pub(crate) async fn acquire(
    at: Target<'_>,
    owner: &str,
    ttl: Duration,
    wait: WaitArgs,
    fence_margin: Duration,
) -> CallResult<(Acquire, MixedStrategy)> {
    let keys = &at.lock.keys;
    let args = [
        Arg::Text(at.hold.as_str()),
        Arg::Text(owner),
        Arg::ms(ttl),
        Arg::ms(wait.queue_entry.unwrap_or(Duration::ZERO)),
        Arg::ms(fence_margin),
        Arg::Int(wait.seq),
        Arg::flag(wait.listens),
    ];
    let keys: [&str; 4] = [&keys.lock, &keys.fence, &keys.queue, &keys.waiters];
    call(at, &scripts().acquire, &keys, &args, parse_flagged_acquire).await
}

/// Runs `release.lua`: the owner's remaining hold count, or `None` if the hold was not held.
pub(crate) async fn release(
    at: Target<'_>,
    owner: &str,
    fence_margin: Duration,
) -> CallResult<Option<u64>> {
    let keys = &at.lock.keys;
    let args = [
        Arg::Text(at.hold.as_str()),
        Arg::Text(owner),
        Arg::Text(&keys.released),
        Arg::Text(INBOX_PREFIX),
        Arg::ms(fence_margin),
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
        Arg::Text(at.hold.as_str()),
        Arg::ms(ttl),
        Arg::ms(fence_margin),
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
    let args = [Arg::Text(at.hold.as_str())];
    call(
        at,
        &scripts().probe,
        &[&keys.lock, &keys.fence],
        &args,
        parse_probe,
    )
    .await
}

/// A fair hand-off granted by `release.lua`, read from the words of its message before the
/// hold id (which goes last, as the owner id in it may contain spaces): `<token> <lease TTL
/// ms> <seq>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HandOff {
    /// The new epoch's fencing token.
    pub(crate) token: FencingToken,
    /// The lease the server set, from the moment of the grant.
    pub(crate) ttl: Duration,
    /// The waiter's attempt whose queue entry the server granted: it ran before the grant.
    pub(crate) seq: u64,
}

impl HandOff {
    /// Reads the words before the hold id; `None` unless all three are there and numeric.
    pub(crate) fn parse(words: &str) -> Option<Self> {
        let mut words = words.split(' ');
        let token = FencingToken::parse(words.next()?)?;
        let ttl = Duration::from_millis(words.next()?.parse().ok()?);
        let seq = words.next()?.parse().ok()?;
        words.next().is_none().then_some(Self { token, ttl, seq })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hand_off_message_reads_token_lease_and_attempt() {
        let read = HandOff::parse("1700000000000001 30000 4");
        assert_eq!(
            read,
            Some(HandOff {
                token: FencingToken::new(1_700_000_000_000_001),
                ttl: Duration::from_millis(30_000),
                seq: 4,
            })
        );
        for bad in ["", "12 30000", "x 30000 4", "12 30000 4 5", "12 -1 4"] {
            assert_eq!(HandOff::parse(bad), None, "{bad:?}");
        }
    }
}
