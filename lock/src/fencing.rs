//! Fencing tokens: strictly increasing per lock name, across lease expiries and restarts of
//! the token key, without a key that outlives its lock by more than a bounded margin.
//!
//! Each new holding epoch (a fresh acquire, or a fair hand-off) gets
//! `token = max(last + 1, server TIME in µs)`, where `last` is the value of
//! `leasehold:{name}:fence` (the rwlock's writer has its own, `...:rw:fence`). A re-entry
//! keeps its epoch's token. µs since 1970 stay below 2^53 until the year 2255, so Lua's
//! doubles are exact; the scripts format the token as a decimal string to keep all digits.
//!
//! ## How long the fence key lives
//! The fence key lives exactly as long as the lock may still be held, plus the *fence
//! margin* `m` ([`DEFAULT_FENCE_MARGIN`], 60 s; `fence_margin` on the builders):
//! - every grant and renewal sets the lock's TTL (extend-only) and then the fence key's to at
//!   least the lock's remaining TTL + `m` (a fair hand-off: the lease it grants + `m`);
//! - the release that frees a lock hash sets the fence key's TTL to `m`;
//! - the release of a lone hold (the uncontended grant's string form, `protocol/mutex.rs`)
//!   leaves the fence key's TTL as the grant or last renewal set it: what the lease had
//!   left + `m`, so the key still outlives the released lease by `m`;
//! - a lock that simply expires leaves a fence key that expires at most `m` later.
//!
//! So an idle name keeps no key longer than `m` after its last lease would have ended (the
//! queue keys live at most one entry timeout; the rwlock's and semaphore's keys expire with
//! their last lease). The argument below needs only that the key lives at least `m` past
//! the end of the epoch, which every case above gives.
//!
//! ## Why tokens still grow after the key is gone (the safety argument)
//! Let `t` be the last token issued for a name, at server time `T` (µs). Then
//! `t <= T + k`, where `k` is the number of grants issued within the same microsecond chain
//! (`last + 1` only wins while tokens run ahead of the clock, and each script takes several
//! µs, so `k` stays tiny). The fence key holding `t` lives until at least the end of that
//! epoch + `m`, so any grant before then reads `t` and issues `max(t + 1, now) > t`. A grant
//! after the key expired runs at server time `now >= T + m` (the epoch began at `T`, ended
//! no earlier, and the key lived `m` past its end) and issues `now`; `now > t` as long as
//! the server clock did not step back by more than `m - k µs` between `T` and that grant.
//!
//! Tolerated: a server clock step-back of up to the margin (60 s by default) across an idle
//! gap, and any step-back while the key lives. Not tolerated (documented non-goals): a
//! larger step-back while the name is idle, and failover to a replica whose clock is behind
//! by more than the margin (`failover-replica-clock-behind` in the simulator).
//!
//! A node restart without persistence loses the key early, before its `m` have run: the
//! argument above does not cover it, since the next grant may come sooner than `T + m`. It
//! issues `now` (the server's clock after the restart), which exceeds `t` exactly when that
//! clock reads past `T + k`: so tokens stay increasing across such a restart only if the
//! server clock never stepped back, between the last grant before the restart and the first
//! one after it, to a time at or before the last token's (`t`, µs). Any step-back across the
//! restart that lands before `t` — an NTP correction, a restart on a host whose clock is
//! behind — makes the next token lower; the fence margin does not help here.

use std::fmt;
use std::time::Duration;

/// How long a lock name's fence key outlives the lock by default: 60 s, the bound an idle
/// name may keep a key. It is also the server clock step-back the tokens tolerate across an
/// idle gap (see the module doc); raise it if the servers' clocks may step back further.
pub const DEFAULT_FENCE_MARGIN: Duration = Duration::from_secs(60);

/// The shortest fence margin accepted: the margin is how far the server clock may step back
/// across an idle gap without tokens going backwards, and below a millisecond the scripts'
/// expiries (whole milliseconds) would not keep the key at all.
pub const MIN_FENCE_MARGIN: Duration = Duration::from_millis(1);

/// A fencing token: pass it with every write to the protected resource and have the
/// resource reject tokens lower than the highest it has seen.
///
/// With the `serde` feature it serialises as its number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize), serde(transparent))]
pub struct FencingToken(u64);

impl FencingToken {
    /// Wraps a raw token (for resources that store them).
    pub const fn new(raw: u64) -> Self {
        Self(raw)
    }

    /// The raw value.
    pub const fn get(self) -> u64 {
        self.0
    }

    /// Parses the decimal string the scripts return.
    pub(crate) fn parse(text: &str) -> Option<Self> {
        text.parse().ok().map(Self)
    }
}

impl fmt::Display for FencingToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}
