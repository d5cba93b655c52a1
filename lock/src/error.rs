//! The one error type of the crate, and the classification of backend failures.
//!
//! Every variant names a failure the caller can act on and carries the lock name. The
//! invariant: a reply lost in transit (the command may or may not have run) is never
//! reported as a plain failure — it is either resolved or surfaced as [`Error::Ambiguous`].

use std::time::Duration;

use redis::RedisError;

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What can go wrong with a lock operation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The lock name is empty, too long, or contains a brace (which would break the
    /// cluster hash tag shared by all of the lock's keys).
    #[error("invalid lock name {name:?}: {reason}")]
    InvalidName {
        /// The rejected name.
        name: String,
        /// Why it was rejected.
        reason: &'static str,
    },
    /// The lease TTL is outside [`MIN_TTL`](crate::MIN_TTL)..=[`MAX_TTL`](crate::MAX_TTL).
    #[error("lock {name:?}: invalid lease TTL {ttl:?} (allowed {min:?}..={max:?})")]
    InvalidTtl {
        /// The lock name.
        name: String,
        /// The rejected TTL.
        ttl: Duration,
        /// Smallest accepted TTL.
        min: Duration,
        /// Largest accepted TTL.
        max: Duration,
    },
    /// Another builder setting is out of range (owner id, queue entry timeout, backoff).
    #[error("lock {name:?}: invalid configuration: {reason}")]
    InvalidConfig {
        /// The lock name.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// The lock was not acquired before the acquire deadline; nothing is left held or queued.
    #[error("lock {name:?}: not acquired within {waited:?}")]
    Timeout {
        /// The lock name.
        name: String,
        /// How long the caller waited.
        waited: Duration,
    },
    /// `try_lock` found the lock held by another owner (or promised to a queued waiter).
    #[error("lock {name:?} is held by another owner")]
    WouldBlock {
        /// The lock name.
        name: String,
        /// The holder's remaining lease, when the server reported one.
        retry_after: Option<Duration>,
    },
    /// The server has no record of this hold although the local lease had not run out:
    /// the key was deleted or expired early (for example a server clock jump).
    #[error("lock {name:?}: the server has no record of this hold")]
    NotHeld {
        /// The lock name.
        name: String,
    },
    /// The lease had already ended by local reckoning (expired, or the watchdog saw it go):
    /// work done under this guard since then was not protected.
    #[error("lock {name:?}: the lease was lost")]
    LeaseLost {
        /// The lock name.
        name: String,
    },
    /// The connection failed after the command was sent and a read-only probe could not
    /// tell whether it ran. For an acquire, a background task releases the attempt's hold
    /// (if any) so no lock stays held that nobody will release before its TTL.
    #[error("lock {name:?}: outcome of {operation} unknown after a connection failure")]
    Ambiguous {
        /// The lock name.
        name: String,
        /// `"acquire"`, `"release"` or `"extend"`.
        operation: &'static str,
        /// The last transport error.
        #[source]
        source: RedisError,
    },
    /// The owner asked for a read-write lock's write hold while it holds read holds of
    /// the same lock: the writer would wait for its own readers forever. Release the read
    /// holds first (the opposite direction, write -> read, is a supported downgrade).
    #[error("lock {name:?}: this owner holds read locks; upgrading to write would deadlock")]
    UpgradeRefused {
        /// The lock name.
        name: String,
    },
    /// A key of this lock holds a value of another type (something else uses the name).
    #[error("lock {name:?}: a key of this lock holds a value of the wrong type")]
    WrongType {
        /// The lock name.
        name: String,
        /// The server's error.
        #[source]
        source: RedisError,
    },
    /// The server answered a script with a reply of an unexpected shape.
    #[error("lock {name:?}: unexpected reply from {script}: {reply}")]
    Protocol {
        /// The lock name.
        name: String,
        /// The script whose reply was malformed.
        script: &'static str,
        /// The reply, rendered for the log.
        reply: String,
    },
    /// Any other backend failure (connection refused, server error, ...).
    #[error("lock {name:?}: backend error")]
    Backend {
        /// The lock name (empty for client-level operations such as connecting).
        name: String,
        /// The underlying error.
        #[source]
        source: RedisError,
    },
}

/// True when `err` may have been raised after the command reached the server, so the
/// command may or may not have run (lost connection, response timeout).
pub(crate) fn is_ambiguous(err: &RedisError) -> bool {
    err.is_io_error() || err.is_timeout() || err.is_connection_dropped()
}

/// True when the server refused to run the command for now: `LOADING` (loading its
/// dataset after a restart), `BUSY` (a long script is running), `MASTERDOWN` (a replica cut
/// from its master). Nothing ran, and the same command may succeed moments later, so the
/// callers retry it like a lost connection instead of failing.
pub(crate) fn is_refused(err: &RedisError) -> bool {
    matches!(err.code(), Some("LOADING" | "BUSY" | "MASTERDOWN"))
}

/// Maps a definite (non-ambiguous) backend failure to the caller-facing variant.
pub(crate) fn from_backend(name: &str, err: RedisError) -> Error {
    // Redis 7 keeps the error code of a failed `redis.call` inside a script; older servers
    // wrap it in a generic ERR whose text still names WRONGTYPE.
    let wrong_type = err.code() == Some("WRONGTYPE") || err.to_string().contains("WRONGTYPE");
    if wrong_type {
        Error::WrongType {
            name: name.to_owned(),
            source: err,
        }
    } else {
        Error::Backend {
            name: name.to_owned(),
            source: err,
        }
    }
}
