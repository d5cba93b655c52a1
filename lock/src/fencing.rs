//! Fencing tokens: strictly increasing per lock name, across lease expiries and restarts of
//! the token key, without a key that lives forever.
//!
//! Each new holding epoch (fresh acquire or fair hand-off) gets
//! `token = max(last + 1, server TIME in µs)`, stored in `leasehold:{name}:fence` with a
//! [`FENCE_KEY_TTL`] refreshed on every use. Once that key expires after a long idle gap,
//! server time alone still exceeds every earlier token. Assumption (documented for users):
//! the server's clock never goes back by more than the idle gap. A re-entry keeps its
//! epoch's token. µs since 1970 stay below 2^53 until the year 2255, so Lua's doubles are
//! exact; the scripts format the token as a decimal string to keep all its digits.

use std::fmt;
use std::time::Duration;

/// Lifetime of the token key after its last use. Longer than [`MAX_TTL`](crate::MAX_TTL),
/// so it cannot expire while a lease is held (renewals refresh it as well).
pub const FENCE_KEY_TTL: Duration = Duration::from_secs(7 * 24 * 60 * 60);

/// A fencing token: pass it with every write to the protected resource and have the
/// resource reject tokens lower than the highest it has seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
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
