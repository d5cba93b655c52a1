//! Lock names and the Redis keys and channels derived from them.
//!
//! Invariant: every key of one lock carries the same hash tag `{name}`, so the scripts that
//! touch several of them work on Redis Cluster (all keys in one slot). Names that could
//! move or split that tag (braces) are rejected here, before any key is built.

use crate::error::{Error, Result};

/// Longest accepted lock name in bytes. Keys stay well under Redis' practical limits and a
/// name this long is almost certainly a bug (for example a payload used as a name).
pub const MAX_NAME_LEN: usize = 512;

/// Prefix of every key and channel this crate creates, so they are easy to find and ACL.
pub const KEY_PREFIX: &str = "leasehold";

/// The keys and channel of one lock (see the scripts' headers for their contents).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockKeys {
    /// Hash: `owner -> hold count` plus one `#<hold id>` field per hold, valued with that
    /// hold's lease deadline (server ms).
    pub lock: String,
    /// String: the last fencing token issued for this name.
    pub fence: String,
    /// List: hold ids of fair-queue waiters, head first.
    pub queue: String,
    /// Hash: fair-queue hold id -> entry deadline in server milliseconds.
    pub waiters: String,
    /// Channel published when the lock becomes free with nobody queued.
    pub released: String,
    /// String written (and expired at once) before `WAIT`, on `WAIT`'s own connection, so
    /// that `WAIT` covers the acquire (see [`Backend::wait_replicas`](crate::backend::Backend::wait_replicas)).
    pub wait_marker: String,
}

impl LockKeys {
    /// Validates `name` and derives its keys.
    pub fn new(name: &str) -> Result<Self> {
        validate_name(name)?;
        Ok(Self::with_base(format!("{KEY_PREFIX}:{{{name}}}")))
    }

    /// The read-write lock's keys on `name` (`lock` is its write hash): the same hash tag,
    /// so Cluster-safe, and disjoint from the mutex's keys of the same name. Its readers
    /// live in [`ReaderKeys`].
    pub fn rwlock(name: &str) -> Result<Self> {
        Self::family(name, RWLOCK_FAMILY)
    }

    /// The semaphore's keys on `name` (`lock` is its permits sorted set).
    pub fn semaphore(name: &str) -> Result<Self> {
        Self::family(name, SEMAPHORE_FAMILY)
    }

    fn family(name: &str, family: &str) -> Result<Self> {
        validate_name(name)?;
        Ok(Self::with_base(format!("{KEY_PREFIX}:{{{name}}}:{family}")))
    }

    fn with_base(base: String) -> Self {
        Self {
            fence: suffixed(&base, ":fence"),
            queue: suffixed(&base, ":queue"),
            waiters: suffixed(&base, ":waiters"),
            released: suffixed(&base, ":released"),
            wait_marker: suffixed(&base, ":wait"),
            lock: base,
        }
    }
}

/// `base` followed by `suffix`, in one allocation of the exact size (every acquire call
/// derives its lock's keys, so `format!`'s growing buffer would cost it twice as many).
fn suffixed(base: &str, suffix: &str) -> String {
    let mut key = String::with_capacity(base.len() + suffix.len());
    key.push_str(base);
    key.push_str(suffix);
    key
}

/// Key suffix of the read-write lock family (`leasehold:{name}:rw…`).
pub const RWLOCK_FAMILY: &str = "rw";

/// Key suffix of the semaphore family (`leasehold:{name}:sem…`).
pub const SEMAPHORE_FAMILY: &str = "sem";

/// The read-write lock's reader keys, beside its [`LockKeys::rwlock`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReaderKeys {
    /// Sorted set: read hold id -> lease deadline in server milliseconds.
    pub readers: String,
    /// Hash: owner -> number of live read holds.
    pub owners: String,
    /// Sorted set: waiting writer's hold id -> intent deadline in server milliseconds.
    pub intents: String,
}

impl ReaderKeys {
    /// The reader keys of the read-write lock whose keys are `rw`.
    pub fn of(rw: &LockKeys) -> Self {
        let base = &rw.lock;
        Self {
            readers: suffixed(base, ":readers"),
            owners: suffixed(base, ":owners"),
            intents: suffixed(base, ":intents"),
        }
    }
}

/// Prefix of the channel on which a client receives fair-queue hand-offs addressed to its
/// waiters (the client's id follows); the release script derives it from the head waiter's
/// hold id (see [`crate::owner`]). [`KEY_PREFIX`] spelled out, so that no call builds it.
pub const INBOX_PREFIX: &str = "leasehold:inbox:";

fn validate_name(name: &str) -> Result<()> {
    let reason = if name.is_empty() {
        "must not be empty"
    } else if name.len() > MAX_NAME_LEN {
        "longer than MAX_NAME_LEN bytes"
    } else if name.contains(['{', '}']) {
        "contains a brace, which would change the cluster hash tag"
    } else {
        return Ok(());
    };
    Err(Error::InvalidName {
        name: name.to_owned(),
        reason,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn all_keys_share_the_hash_tag() {
        let keys = LockKeys::new("orders:42").unwrap();
        for key in [&keys.lock, &keys.fence, &keys.queue, &keys.waiters] {
            assert!(key.starts_with("leasehold:{orders:42}"), "{key}");
        }
    }

    #[test]
    fn the_inbox_prefix_is_under_the_key_prefix() {
        assert_eq!(INBOX_PREFIX, format!("{KEY_PREFIX}:inbox:"));
    }

    #[test]
    fn rejects_bad_names() {
        for name in ["", "a}b", "{x}", &"n".repeat(MAX_NAME_LEN + 1)] {
            assert!(matches!(
                LockKeys::new(name),
                Err(Error::InvalidName { .. })
            ));
        }
        assert!(LockKeys::new(&"n".repeat(MAX_NAME_LEN)).is_ok());
    }
}
