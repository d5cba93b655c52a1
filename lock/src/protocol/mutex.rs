//! The lease mutex's scripts (`acquire.lua`, `release.lua`, `renew.lua`, `probe.lua`), whose
//! hash layout the read-write lock's writer shares for renewal and probing, and the fair
//! hand-off message `release.lua` publishes.

use std::time::Duration;

use super::{
    Acquire, Arg, CallResult, Probe, Target, WaitArgs, call, parse_acquire, parse_probe,
    parse_release, parse_renew,
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
) -> CallResult<Acquire> {
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

/// A fair hand-off granted by `release.lua`, read from the rest of its message after the
/// hold id: `<token> <lease TTL ms> <seq>`.
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
    /// Reads the words after the hold id; `None` unless all three are there and numeric.
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
