//! The CLI's failures and the exit code each maps to.
//!
//! Invariant: a mistake in the command line (including a lock name the library rejects or
//! a malformed URL) exits 2, like clap's own usage errors; anything that went wrong while
//! talking to Redis or the terminal exits 1, and its message names the server it concerns.

use std::process::ExitCode;

/// Exit code of a runtime failure (connection refused, Redis error, unreadable stdin).
const RUNTIME_FAILURE: u8 = 1;

/// Exit code of a usage error: the same value clap uses for its own.
const USAGE_ERROR: u8 = 2;

/// Everything the CLI can fail with.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The lock name fails `LockKeys::new` validation; the library's message says why.
    #[error(transparent)]
    InvalidName(leasehold::Error),
    /// An argument clap cannot check by itself (a URL, a pattern).
    #[error("{0}")]
    InvalidArgument(String),
    /// A server could not be reached or refused the connection.
    #[error("cannot connect to {url}: {source}")]
    Connect {
        url: String,
        #[source]
        source: redis::RedisError,
    },
    /// A command failed on a server we are connected to.
    #[error("{server}: {action} failed: {source}")]
    Redis {
        server: String,
        action: &'static str,
        #[source]
        source: redis::RedisError,
    },
    /// Reading a lock's keys failed on a server we are connected to.
    #[error("{server}: reading the lock's keys failed: {source}")]
    Read {
        server: String,
        #[source]
        source: leasehold::Error,
    },
    /// The topology did not look as expected (no master for a slot, odd reply).
    #[error("{0}")]
    Topology(String),
    /// The lock changed between the confirmation and the delete; nothing was removed.
    #[error(
        "lock {name:?} changed since it was shown (new holder or waiter); nothing removed, run again"
    )]
    Changed { name: String },
    /// Reading the confirmation or writing the output failed.
    #[error("terminal: {0}")]
    Io(#[from] std::io::Error),
}

impl CliError {
    /// The process exit code for this failure.
    pub fn exit_code(&self) -> ExitCode {
        match self {
            Self::InvalidName(_) | Self::InvalidArgument(_) => ExitCode::from(USAGE_ERROR),
            _ => ExitCode::from(RUNTIME_FAILURE),
        }
    }
}

/// Shorthand for the CLI's results.
pub type CliResult<T> = Result<T, CliError>;
