//! Typed calls to the scripts: the only place that knows their keys, argument order and
//! reply shapes (mirrored from the headers in `lock/scripts/`), one submodule per lock
//! family. Everything above this module speaks in holds, tokens and durations.
//!
//! Invariant: a transport failure is handed back untouched as [`CallError::Transport`] so
//! the caller can resolve the ambiguity; everything else is already a caller-facing error.
//!
//! # Joining a fair line: the list is the truth
//! Every fair line is two keys: a list of hold ids in order and a hash of their entries
//! (deadline, lease, attempt). A waiter's attempt (`acquire.lua`, `rw_read_acquire.lua`,
//! `rw_write_acquire.lua`, `semaphore_acquire.lua`) appends its hold to the list only when
//! the list itself lacks it (`LPOS`), then writes its entry. The two keys can part: a full
//! node evicts one of them and keeps the other. Gated on the hash instead, a refresh after
//! the list went would find its entry and never rejoin the list, so every release would
//! hand off past that waiter until the line emptied. Gated on the list, the next refresh
//! puts the waiter back (at the tail: the eviction lost its place, never its turn for
//! good), and a list entry whose hash entry went reads as expired and is skipped or purged
//! as a dead head is. Exclusion is untouched: who may be granted is still decided by the
//! lock key alone, and appending to a list changes only the order of those waiting. The
//! cost is one `LPOS` instead of one `HEXISTS` per attempt, linear in the line's length,
//! which stays as short as the number of waiters.
//!
//! # Expiries are absolute: one reading of the clock per script
//! Every script reads `TIME` once, writes every deadline it keeps (a hold field, a reader's
//! or a permit's score, a line entry) from that reading, and sets every key's expiry it
//! changes as an absolute time from the same reading (`PEXPIREAT`, `SET … PXAT`), comparing
//! with `PEXPIRETIME` where it must never shorten one. Redis before 7.2 judges expiry at a
//! script's start but reads the live clock for each `PTTL`, `PEXPIRE` and `SET … PX` inside
//! it, and that clock moves on while the script runs. A relative TTL set at the k-th call
//! then lands the script's run time so far past the deadline its fields record, and two set
//! one after the other (the readers zset and the owners hash) land apart: a key outlives
//! every hold it records, or an owner count outlives its readers. With absolute expiries a
//! key expires exactly at the latest deadline written in it, on Redis 7.0 and 7.1 as on 7.2
//! and later, where the clock stands still during a script and both forms agree. Exclusion
//! never rested on it (a client trusts a hold only until its own bound, counted from
//! before its request), so the change only ends the stranded tail: the simulator's moving
//! server clock (`sim`'s `ServerClock::Moving`) found it as keys kept 3 to 6 ms past their
//! latest permitted deadline, and mutants 49 and 50 keep two of the relative forms (the
//! reader keys', the write grant's). One relative expiry stays: the fence key's margin
//! after a release that reads no clock (`release.lua`), a lifetime that only bounds
//! tidying; and the retry hints a busy reply carries (`PTTL`) are hints, not deadlines.

mod mutex;
mod rwlock;
mod semaphore;

use std::time::Duration;

use redis::{RedisError, RedisWrite, ToRedisArgs, Value};

use crate::backend::Backend;
pub(crate) use crate::backend::millis;
use crate::error::{self, Error};
use crate::fencing::FencingToken;
use crate::keys::LockKeys;
use crate::owner::HoldId;
use crate::runtime::Runtime;
use crate::script::LuaScript;

pub(crate) use mutex::{HandOff, acquire, probe, release, renew};
pub(crate) use rwlock::{
    read_acquire, read_probe, read_release, read_renew, write_acquire, write_release,
};
pub(crate) use semaphore::{
    permit_acquire, permit_probe, permit_release, permit_renew, permits_resize,
};

/// A validated lock name with its keys.
#[derive(Debug, Clone)]
pub(crate) struct LockRef {
    pub(crate) name: String,
    pub(crate) keys: LockKeys,
}

impl LockRef {
    pub(crate) fn new(name: &str) -> error::Result<Self> {
        Ok(Self {
            keys: LockKeys::new(name)?,
            name: name.to_owned(),
        })
    }
}

/// Why a script call did not produce a reply.
#[derive(Debug)]
pub(crate) enum CallError {
    /// The command may or may not have run (see [`error::is_ambiguous`]), or the server
    /// refused it for now ([`error::is_refused`]): retry, resolving any ambiguity.
    Transport(RedisError),
    /// A definite failure, already mapped for the caller.
    Failed(Error),
}

/// What the acquire script decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Acquire {
    /// This hold owns the lock.
    Acquired(FencingToken),
    /// Not yet; when known, how long until the lock may change hands: the holder's
    /// remaining lease, or for a free lock whose live queue head goes first, the head's
    /// remaining entry time (by then it has taken the lock or its entry is gone).
    Busy(Option<Duration>),
}

/// What the probe script saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Probe {
    /// The hold owns the lock for about `pttl` more.
    Held(FencingToken, Duration),
    /// The hold does not own the lock.
    NotHeld,
}

/// The outcome of one script call.
pub(crate) type CallResult<T> = Result<T, CallError>;

/// The least time a call gets to answer, even when sent at or past its deadline (the last
/// attempt of an acquire is made at its deadline). Redis answers a script in well under a
/// millisecond (docs/DESIGN.md §4: p50 0.087 ms on loopback); 100 ms absorbs a loaded client
/// machine without letting a dead server stretch a deadline by much.
pub const MIN_REPLY_WAIT: Duration = Duration::from_millis(100);

/// Runs `call`, but stops waiting for its reply at `until` (local clock), or
/// [`MIN_REPLY_WAIT`] after sending if that is later. A reply that has not come by then
/// counts as lost: the call may still run on the server, so the caller resolves it like
/// any other ambiguous outcome. This keeps the client's deadlines independent of how long
/// a backend takes to notice a dead connection.
pub(crate) async fn within<T>(
    runtime: &Runtime,
    until: Option<Duration>,
    call: impl Future<Output = CallResult<T>>,
) -> CallResult<T> {
    let Some(until) = until else {
        return call.await;
    };
    let left = until
        .saturating_sub(runtime.clock.now())
        .max(MIN_REPLY_WAIT);
    runtime.timeout(left, call).await.unwrap_or_else(|| {
        let late = std::io::Error::new(std::io::ErrorKind::TimedOut, "no reply before deadline");
        Err(CallError::Transport(late.into()))
    })
}

/// How the caller of one acquire attempt waits, as the acquire scripts need to know it.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct WaitArgs {
    /// The fair-queue entry timeout (`None`: never queue).
    pub(crate) queue_entry: Option<Duration>,
    /// The attempt's number within its acquire call (named by a fair hand-off).
    pub(crate) seq: u64,
    /// Whether the caller waits for the lock's released message.
    pub(crate) listens: bool,
}

/// One hold's script calls: the backend they go to, the lock and the hold they are for.
#[derive(Clone, Copy)]
pub(crate) struct Target<'a> {
    pub(crate) backend: &'a dyn Backend,
    pub(crate) lock: &'a LockRef,
    pub(crate) hold: &'a HoldId,
}

/// Runs `script` on `keys` with `args` for `at` and parses the reply with `parse` (which
/// names the script in a malformed-reply error), mapping a failure for the caller.
/// One script argument, written straight into the command: a call builds no `String` per
/// argument (numbers are formatted on the stack, as redis-rs does for integers).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Arg<'a> {
    /// Text as it is (hold ids, owners, channel names).
    Text(&'a str),
    /// A decimal number (milliseconds, counts, sequence numbers).
    Int(u64),
}

impl Arg<'_> {
    /// A duration as whole milliseconds, the unit of every script.
    pub(crate) fn ms(duration: Duration) -> Self {
        Self::Int(millis(duration))
    }

    /// A flag as the scripts read it: `'1'` or `'0'`.
    pub(crate) fn flag(on: bool) -> Self {
        Self::Text(if on { "1" } else { "0" })
    }
}

impl ToRedisArgs for Arg<'_> {
    fn write_redis_args<W>(&self, out: &mut W)
    where
        W: ?Sized + RedisWrite,
    {
        match self {
            Self::Text(text) => text.write_redis_args(out),
            Self::Int(number) => number.write_redis_args(out),
        }
    }
}

async fn call<T>(
    at: Target<'_>,
    script: &LuaScript,
    keys: &[&str],
    args: &[Arg<'_>],
    parse: fn(&LockRef, &'static str, &Value) -> CallResult<T>,
) -> CallResult<T> {
    let reply = script
        .run(at.backend, keys, args)
        .await
        .map_err(|err| classify(at.lock, err))?;
    parse(at.lock, script.name(), &reply)
}

fn classify(lock: &LockRef, err: RedisError) -> CallError {
    if error::is_ambiguous(&err) || error::is_refused(&err) {
        CallError::Transport(err)
    } else {
        CallError::Failed(error::from_backend(&lock.name, err))
    }
}

fn malformed(lock: &LockRef, script: &'static str, reply: &Value) -> CallError {
    CallError::Failed(Error::Protocol {
        name: lock.name.clone(),
        script,
        reply: format!("{reply:?}"),
    })
}

fn int(value: &Value) -> Option<i64> {
    match value {
        Value::Int(n) => Some(*n),
        _ => None,
    }
}

fn text(value: &Value) -> Option<&str> {
    match value {
        Value::BulkString(bytes) => std::str::from_utf8(bytes).ok(),
        Value::SimpleString(s) => Some(s),
        _ => None,
    }
}

fn pttl(ms: i64) -> Option<Duration> {
    u64::try_from(ms).ok().map(Duration::from_millis)
}

/// Parses an acquire-shaped reply: `{1, token}` or `{0, pttl}`.
fn parse_acquire(lock: &LockRef, script: &'static str, reply: &Value) -> CallResult<Acquire> {
    let parsed = match reply {
        Value::Array(items) => match items.as_slice() {
            [flag, token] if int(flag) == Some(1) => text(token)
                .and_then(FencingToken::parse)
                .map(Acquire::Acquired),
            [flag, ms] if int(flag) == Some(0) => int(ms).map(|ms| Acquire::Busy(pttl(ms))),
            _ => None,
        },
        _ => None,
    };
    parsed.ok_or_else(|| malformed(lock, script, reply))
}

/// Whether a busy attempt met waiters of another wait strategy on its lock (a
/// mixed-strategy deployment, see `wait::mixed`): the scripts answer `{0, ms, 1}` then.
pub(crate) type MixedStrategy = bool;

/// Parses an acquire-shaped reply that may flag a mixed-strategy deployment: `{0, ms, 1}`
/// is busy with the flag, anything else as [`parse_acquire`].
fn parse_flagged_acquire(
    lock: &LockRef,
    script: &'static str,
    reply: &Value,
) -> CallResult<(Acquire, MixedStrategy)> {
    if let Value::Array(items) = reply
        && let [flag, ms, mixed] = items.as_slice()
        && int(flag) == Some(0)
        && int(mixed) == Some(1)
    {
        return int(ms)
            .map(|ms| (Acquire::Busy(pttl(ms)), true))
            .ok_or_else(|| malformed(lock, script, reply));
    }
    parse_acquire(lock, script, reply).map(|acquire| (acquire, false))
}

/// Parses a probe-shaped reply: `{1, token, pttl}` or `{0, _, _}`.
fn parse_probe(lock: &LockRef, script: &'static str, reply: &Value) -> CallResult<Probe> {
    let parsed = match reply {
        Value::Array(items) => match items.as_slice() {
            [flag, token, ms] if int(flag) == Some(1) => {
                let token = text(token).and_then(FencingToken::parse);
                token
                    .zip(int(ms).and_then(pttl))
                    .map(|(t, d)| Probe::Held(t, d))
            }
            [flag, _, _] if int(flag) == Some(0) => Some(Probe::NotHeld),
            _ => None,
        },
        _ => None,
    };
    parsed.ok_or_else(|| malformed(lock, script, reply))
}

/// Parses a release-shaped reply: the owner's remaining hold count, or `-1` (not held).
fn parse_release(lock: &LockRef, script: &'static str, reply: &Value) -> CallResult<Option<u64>> {
    match int(reply) {
        Some(-1) => Ok(None),
        Some(left) => u64::try_from(left)
            .map(Some)
            .map_err(|_| malformed(lock, script, reply)),
        None => Err(malformed(lock, script, reply)),
    }
}

/// Parses a renew-shaped reply: `1` renewed, `0` the hold is gone.
fn parse_renew(lock: &LockRef, script: &'static str, reply: &Value) -> CallResult<bool> {
    match int(reply) {
        Some(1) => Ok(true),
        Some(0) => Ok(false),
        _ => Err(malformed(lock, script, reply)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_go_out_as_the_scripts_read_them() {
        let args = [
            Arg::Text("0123456789abcdef:owner"),
            Arg::ms(Duration::from_millis(30_000)),
            Arg::ms(Duration::from_micros(1_999)),
            Arg::Int(u64::MAX),
            Arg::flag(true),
            Arg::flag(false),
        ];
        let written: Vec<Vec<u8>> = args.iter().flat_map(ToRedisArgs::to_redis_args).collect();
        let expected = [
            "0123456789abcdef:owner",
            "30000",
            "1",
            "18446744073709551615",
            "1",
            "0",
        ];
        assert_eq!(written, expected.map(|text| text.as_bytes().to_vec()));
    }
}
