//! The one error type of the crate, and the classification of backend failures.
//!
//! Every variant names a failure the caller can act on and carries what it concerns: the
//! lock name, or for a connect failure the (password-free) URL. Every message stands on its
//! own: it names its subject and, for a server or transport failure, the cause, and it stays
//! short even for an absurd name ([`ShownName`]). The invariant: a reply lost in transit
//! (the command may or may not have run) is never reported as a plain failure — it is
//! either resolved or surfaced as [`Error::Ambiguous`].

use std::fmt;
use std::time::Duration;

use redis::RedisError;

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What can go wrong with a lock operation, one variant per failure a caller can act on;
/// every message names the lock (or, for a connect failure, the password-free URL).
///
/// The usual split: [`Timeout`](Error::Timeout) and [`WouldBlock`](Error::WouldBlock) mean
/// someone else holds the lock (nothing of yours is left held or queued);
/// [`LeaseLost`](Error::LeaseLost) and [`NotHeld`](Error::NotHeld) mean your critical
/// section may have overlapped another holder's; [`Ambiguous`](Error::Ambiguous) means a
/// reply was lost and the outcome is unknown (a background release follows); the `Invalid…`
/// variants are mistakes in the call that retrying cannot fix.
///
/// ```no_run
/// # async fn demo(client: leasehold::Client) -> leasehold::Result<()> {
/// use leasehold::Error;
///
/// match client.mutex("reports:nightly").try_lock().await {
///     Ok(guard) => guard.unlock().await?,
///     Err(Error::WouldBlock { .. }) => { /* another instance runs it */ }
///     Err(err @ Error::Ambiguous { .. }) => eprintln!("outcome unknown: {err}"),
///     Err(other) => return Err(other),
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The lock name is empty, too long, or contains a brace (which would break the
    /// cluster hash tag shared by all of the lock's keys).
    #[error("invalid lock name {}: {reason}", ShownName(.name))]
    InvalidName {
        /// The rejected name.
        name: String,
        /// Why it was rejected.
        reason: &'static str,
    },
    /// The lease TTL is outside [`MIN_TTL`](crate::MIN_TTL)..=[`MAX_TTL`](crate::MAX_TTL).
    #[error("lock {}: invalid lease TTL {ttl:?} (allowed {min:?}..={max:?})", ShownName(.name))]
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
    #[error("lock {}: invalid configuration: {reason}", ShownName(.name))]
    InvalidConfig {
        /// The lock name.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// The lock was not acquired before the acquire deadline; nothing is left held or queued.
    #[error("lock {}: not acquired within {waited:?}", ShownName(.name))]
    Timeout {
        /// The lock name.
        name: String,
        /// How long the caller waited.
        waited: Duration,
    },
    /// `try_lock` found the lock held by another owner (or promised to a queued waiter).
    #[error("lock {} is held by another owner", ShownName(.name))]
    WouldBlock {
        /// The lock name.
        name: String,
        /// The holder's remaining lease (for a free lock promised to a queued waiter, that
        /// waiter's remaining queue entry), when the server reported one.
        retry_after: Option<Duration>,
    },
    /// The server has no record of this hold although the local lease had not run out:
    /// the key was deleted or expired early (for example a server clock jump).
    #[error("lock {}: the server has no record of this hold", ShownName(.name))]
    NotHeld {
        /// The lock name.
        name: String,
    },
    /// The lease had already ended by local reckoning (expired, or the watchdog saw it go):
    /// work done under this guard since then was not protected.
    #[error("lock {}: the lease was lost", ShownName(.name))]
    LeaseLost {
        /// The lock name.
        name: String,
    },
    /// The connection failed after the command was sent and a read-only probe could not
    /// tell whether it ran. For an acquire, a background task releases the attempt's hold
    /// (if any) so no lock stays held that nobody will release before its TTL.
    #[error(
        "lock {}: outcome of {operation} unknown after a connection failure: {source}",
        ShownName(.name)
    )]
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
    #[error("lock {}: this owner holds read locks; upgrading to write would deadlock", ShownName(.name))]
    UpgradeRefused {
        /// The lock name.
        name: String,
    },
    /// A key of this lock holds a value of another type (something else uses the name).
    #[error(
        "lock {}: a key of this lock holds a value of the wrong type: {source}",
        ShownName(.name)
    )]
    WrongType {
        /// The lock name.
        name: String,
        /// The server's error.
        #[source]
        source: RedisError,
    },
    /// The semaphore's size stored on the server (at its first use, or by
    /// [`Semaphore::resize`](crate::Semaphore::resize)) differs from this handle's: two
    /// deployments disagree on it. Nothing was taken or queued.
    #[error(
        "semaphore {}: the server stores {stored} permits but this handle asks for {requested}; every user must pass the same number (to change it on purpose, call Semaphore::resize({requested}))",
        ShownName(.name)
    )]
    PermitsMismatch {
        /// The semaphore name.
        name: String,
        /// The number of permits stored on the server.
        stored: u32,
        /// The number this handle passed.
        requested: u32,
    },
    /// The lock was granted, but fewer replicas acknowledged it within the `WAIT` timeout
    /// than [`Mutex::require_replicas`](crate::Mutex::require_replicas) demands; the grant
    /// was released (in line, or in the background if the server did not answer in time)
    /// and nothing is held. Retry later, or check the replicas' link to the master
    /// (`INFO replication`).
    #[error(
        "lock {}: only {acknowledged} of {required} required replicas acknowledged the grant; it was released",
        ShownName(.name)
    )]
    ReplicasShort {
        /// The lock name.
        name: String,
        /// Replicas that acknowledged the grant (0 when `WAIT` failed or did not answer).
        acknowledged: u32,
        /// Replicas required.
        required: u32,
    },
    /// RedLock's `try_lock` got the lock from too few masters, in time, for a quorum, and
    /// no master said it is held: the others did not answer within the node timeout, or
    /// the grants came too late to leave any validity. The lock may well be free; every
    /// master's grant was released. Retry, or check the masters that did not answer.
    #[error(
        "lock {}: no quorum: {granted} of the {needed} masters needed granted it in time, and none said it is held",
        ShownName(.name)
    )]
    NoQuorum {
        /// The lock name.
        name: String,
        /// Masters that granted it.
        granted: usize,
        /// Masters a quorum needs.
        needed: usize,
    },
    /// The server answered a script with a reply of an unexpected shape.
    #[error("lock {}: unexpected reply from {script}: {reply}", ShownName(.name))]
    Protocol {
        /// The lock name.
        name: String,
        /// The script whose reply was malformed.
        script: &'static str,
        /// The reply, rendered for the log.
        reply: String,
    },
    /// Any other backend failure of a lock operation (connection refused, server error, ...).
    #[error("lock {}: backend error: {source}", ShownName(.name))]
    Backend {
        /// The lock name.
        name: String,
        /// The underlying error.
        #[source]
        source: RedisError,
    },
    /// Connecting to the deployment failed: nothing listens at the address, the handshake
    /// failed (authentication, TLS, a Sentinel that does not know the service), or it did
    /// not finish within the connect timeout
    /// ([`ClientBuilder::connect_timeout`](crate::ClientBuilder::connect_timeout); then
    /// `source.is_timeout()` is true).
    #[error("cannot connect to {target}: {source}")]
    Connect {
        /// What was dialled: the URL(s), passwords replaced by `***`.
        target: String,
        /// Why it failed.
        #[source]
        source: RedisError,
    },
    /// The client was built with
    /// [`ClientBuilder::refuse_eviction`](crate::ClientBuilder::refuse_eviction) and a server
    /// may evict live locks (`maxmemory` set, `maxmemory-policy` not `noeviction`), or
    /// would not say (`CONFIG GET` refused): see [`EvictionRisk`](crate::EvictionRisk).
    #[error(
        "refusing {target}: maxmemory-policy {policy} may evict live locks; run `CONFIG SET \
         maxmemory-policy noeviction` there (and persist it), or connect without refuse_eviction"
    )]
    EvictionPolicy {
        /// What was connected to, passwords replaced by `***`.
        target: String,
        /// The policy found, or `unknown (<why>)`.
        policy: String,
    },
    /// A client-level setting is missing or out of range (no backend, zero connect timeout),
    /// or a URL does not parse or names a scheme redis-rs does not speak; the message names
    /// the offending part, passwords replaced by `***`. Retrying cannot help.
    #[error("invalid client configuration: {reason}")]
    InvalidClientConfig {
        /// What is wrong.
        reason: String,
    },
}

/// Longest prefix of a lock name shown in a message, in bytes: enough to recognise any
/// sensible name (the mutex's keys add about 20 bytes of prefix and suffix to it), short
/// enough that a payload passed as a name by mistake (rejected for exceeding
/// [`MAX_NAME_LEN`], but it may be megabytes long) does not flood a log line.
///
/// [`MAX_NAME_LEN`]: crate::MAX_NAME_LEN
pub(crate) const SHOWN_NAME_BYTES: usize = 64;

/// A lock name as the messages show it: quoted and escaped; a name longer than
/// [`SHOWN_NAME_BYTES`] is cut on a character boundary and followed by its length, as in
/// `"orders:aaaa…" (1048576 bytes)`; an empty name as `<empty>` (a bare `""` reads like a
/// formatting slip). The variants keep the full name in their fields.
pub(crate) struct ShownName<'a>(pub(crate) &'a str);

impl fmt::Display for ShownName<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self.0;
        if name.is_empty() {
            return f.write_str("<empty>");
        }
        if name.len() <= SHOWN_NAME_BYTES {
            return write!(f, "{name:?}");
        }
        // Index 0 is always a boundary, so the search cannot come up empty.
        let cut = (0..=SHOWN_NAME_BYTES)
            .rev()
            .find(|&i| name.is_char_boundary(i))
            .unwrap_or(0);
        write!(
            f,
            "\"{}…\" ({} bytes)",
            name[..cut].escape_debug(),
            name.len()
        )
    }
}

/// True when `err` may have been raised after the command reached the server, so the
/// command may or may not have run (lost connection, response timeout).
pub(crate) fn is_ambiguous(err: &RedisError) -> bool {
    err.is_io_error() || err.is_timeout() || err.is_connection_dropped()
}

/// True when the server refused to run the command for now ([`refusal`]). Nothing ran,
/// and the same command may succeed moments later, so the callers retry it like a lost
/// connection instead of failing.
pub(crate) fn is_refused(err: &RedisError) -> bool {
    refusal(err).is_some()
}

/// Why the server refused to run the command for now, as a metric label: `loading` (it is
/// loading its dataset after a restart), `busy` (a long script is running), `masterdown` (a
/// replica cut from its master), `noreplicas` (a master under `min-replicas-to-write` with
/// too few replicas acknowledging; a script is refused at its first write, so it wrote
/// nothing). `None` for any other error.
pub(crate) fn refusal(err: &RedisError) -> Option<&'static str> {
    match err.code()? {
        "LOADING" => Some("loading"),
        "BUSY" => Some("busy"),
        "MASTERDOWN" => Some("masterdown"),
        "NOREPLICAS" => Some("noreplicas"),
        _ => None,
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn io(kind: std::io::ErrorKind, message: &str) -> RedisError {
        RedisError::from(std::io::Error::new(kind, message))
    }

    /// One value of every variant, each with an empty lock name where it has one (the worst
    /// case for a message that must name its subject).
    fn every_variant() -> Vec<Error> {
        let name = String::new;
        let refused = || io(std::io::ErrorKind::ConnectionRefused, "connection refused");
        vec![
            Error::InvalidName {
                name: name(),
                reason: "must not be empty",
            },
            Error::InvalidTtl {
                name: name(),
                ttl: Duration::ZERO,
                min: Duration::from_millis(1),
                max: Duration::from_secs(1),
            },
            Error::InvalidConfig {
                name: name(),
                reason: "owner id must be 1..=64 bytes".into(),
            },
            Error::Timeout {
                name: name(),
                waited: Duration::from_secs(1),
            },
            Error::WouldBlock {
                name: name(),
                retry_after: None,
            },
            Error::NotHeld { name: name() },
            Error::LeaseLost { name: name() },
            Error::Ambiguous {
                name: name(),
                operation: "acquire",
                source: refused(),
            },
            Error::UpgradeRefused { name: name() },
            Error::WrongType {
                name: name(),
                source: refused(),
            },
            Error::PermitsMismatch {
                name: name(),
                stored: 3,
                requested: 5,
            },
            Error::ReplicasShort {
                name: name(),
                acknowledged: 0,
                required: 1,
            },
            Error::NoQuorum {
                name: name(),
                granted: 1,
                needed: 2,
            },
            Error::Protocol {
                name: name(),
                script: "acquire",
                reply: "nil".into(),
            },
            Error::Backend {
                name: name(),
                source: refused(),
            },
            Error::Connect {
                target: "redis://127.0.0.1:1".into(),
                source: refused(),
            },
            Error::EvictionPolicy {
                target: "redis://127.0.0.1:1".into(),
                policy: "volatile-ttl".into(),
            },
            Error::InvalidClientConfig {
                reason: "no backend".into(),
            },
        ]
    }

    /// Fails to compile when a variant is added without a case in [`every_variant`].
    fn covered(err: &Error) -> &'static str {
        match err {
            Error::InvalidName { .. } => "InvalidName",
            Error::InvalidTtl { .. } => "InvalidTtl",
            Error::InvalidConfig { .. } => "InvalidConfig",
            Error::Timeout { .. } => "Timeout",
            Error::WouldBlock { .. } => "WouldBlock",
            Error::NotHeld { .. } => "NotHeld",
            Error::LeaseLost { .. } => "LeaseLost",
            Error::Ambiguous { .. } => "Ambiguous",
            Error::UpgradeRefused { .. } => "UpgradeRefused",
            Error::WrongType { .. } => "WrongType",
            Error::PermitsMismatch { .. } => "PermitsMismatch",
            Error::ReplicasShort { .. } => "ReplicasShort",
            Error::NoQuorum { .. } => "NoQuorum",
            Error::Protocol { .. } => "Protocol",
            Error::Backend { .. } => "Backend",
            Error::Connect { .. } => "Connect",
            Error::EvictionPolicy { .. } => "EvictionPolicy",
            Error::InvalidClientConfig { .. } => "InvalidClientConfig",
        }
    }

    #[test]
    fn every_message_stands_on_its_own() {
        let all = every_variant();
        let kinds: std::collections::BTreeSet<_> = all.iter().map(covered).collect();
        assert_eq!(kinds.len(), all.len(), "one value per variant");
        for err in &all {
            let message = err.to_string();
            assert!(!message.is_empty(), "{err:?}");
            assert!(!message.contains("lock \"\""), "{message}");
            if std::error::Error::source(err).is_some() {
                assert!(message.contains("connection refused"), "cause: {message}");
            }
        }
    }

    #[test]
    fn a_permits_mismatch_says_both_counts_and_the_way_out() {
        let message = Error::PermitsMismatch {
            name: "jobs".into(),
            stored: 3,
            requested: 5,
        }
        .to_string();
        for part in [
            "semaphore \"jobs\"",
            "stores 3 permits",
            "asks for 5",
            "resize(5)",
        ] {
            assert!(message.contains(part), "{part} missing: {message}");
        }
    }

    #[test]
    fn long_names_are_cut_on_a_char_boundary_with_their_length() {
        assert_eq!(ShownName("orders:42").to_string(), "\"orders:42\"");
        assert_eq!(ShownName("").to_string(), "<empty>");
        let exact = "n".repeat(SHOWN_NAME_BYTES);
        assert_eq!(ShownName(&exact).to_string(), format!("\"{exact}\""));
        // "é" is 2 bytes: byte SHOWN_NAME_BYTES falls inside a character.
        let name = format!("x{}", "é".repeat(SHOWN_NAME_BYTES));
        let shown = ShownName(&name).to_string();
        let prefix = format!("x{}", "é".repeat((SHOWN_NAME_BYTES - 1) / 2));
        assert_eq!(
            shown,
            format!("\"{prefix}…\" ({} bytes)", name.len()),
            "{shown}"
        );
        let huge = format!("order:{}", "a".repeat(1 << 20));
        let message = Error::Timeout {
            name: huge.clone(),
            waited: Duration::from_secs(1),
        }
        .to_string();
        assert!(message.len() < 300, "{} bytes", message.len());
        assert!(
            message.contains(&format!("({} bytes)", huge.len())),
            "{message}"
        );
    }

    #[test]
    fn quotes_and_control_characters_are_escaped() {
        let name = format!("a\"b\n{}", "c".repeat(SHOWN_NAME_BYTES));
        let shown = ShownName(&name).to_string();
        assert!(shown.starts_with("\"a\\\"b\\n"), "{shown}");
    }
}
