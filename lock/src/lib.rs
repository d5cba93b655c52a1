//! Leasehold: Redis distributed locks you can trust and measure.
//!
//! ```no_run
//! # async fn demo() -> leasehold::Result<()> {
//! let client = leasehold::Client::connect("redis://127.0.0.1:6379").await?;
//! let guard = client.mutex("orders:42").lock().await?;
//! // Pass guard.fencing_token() with every write to the protected resource.
//! guard.unlock().await?;
//! # Ok(())
//! # }
//! ```
//!
//! A lock is a *lease*: it ends after its TTL unless renewed (the watchdog renews it every
//! TTL/3 while the guard lives). The client trusts a lease only until `send time of the
//! granting command + TTL − drift margin` by its own clock; [`Guard::lost`] fires then at
//! the latest. Fencing tokens grow strictly per lock name, so a resource that rejects stale
//! tokens stays safe even when a paused holder wakes up after its lease ended.
//!
//! Lock families: [`Client::mutex`], [`Client::rwlock`] (shared readers with leases of
//! their own, exclusive fenced writer, one fair line of readers and writers, downgrade) and
//! [`Client::semaphore`] (each permit a lease), all on one client's backend;
//! [`RedLock`] over N independent masters (one [`Client`] each). Deployments:
//! [`RedisBackend`] (one node), [`ClusterBackend`] and [`SentinelBackend`] (via
//! [`ClientBuilder::cluster`] and [`ClientBuilder::sentinel`]).
//!
//! # Acquiring: one naming scheme
//!
//! Every lock kind acquires in the same three ways; waiting for at most `t` reads
//! `…_within(t)`, and the [`acquire_timeout`](Mutex::acquire_timeout) setting is the
//! deadline of the plain waiting call (none by default):
//!
//! | kind | wait (until the acquire timeout, if set) | wait at most `t` | one attempt |
//! |---|---|---|---|
//! | [`Mutex`] | [`lock()`](Mutex::lock) | [`lock_within(t)`](Mutex::lock_within) | [`try_lock()`](Mutex::try_lock) |
//! | [`RwLock`], shared | [`read()`](RwLock::read) | [`read_within(t)`](RwLock::read_within) | [`try_read()`](RwLock::try_read) |
//! | [`RwLock`], exclusive | [`write()`](RwLock::write) | [`write_within(t)`](RwLock::write_within) | [`try_write()`](RwLock::try_write) |
//! | [`Semaphore`] | [`acquire()`](Semaphore::acquire) | [`acquire_within(t)`](Semaphore::acquire_within) | [`try_acquire()`](Semaphore::try_acquire) |
//! | [`RedLock`] | [`lock()`](RedLock::lock) | [`lock_within(t)`](RedLock::lock_within) | [`try_lock()`](RedLock::try_lock) |
//!
//! A wait that runs out fails with [`Error::Timeout`], a failed attempt with
//! [`Error::WouldBlock`]; neither leaves anything held or queued.
//!
//! # Connecting
//!
//! [`Client::connect`] and the [`ClientBuilder`]'s `connect`, `cluster` and `sentinel`
//! fail with [`Error::Connect`], naming the URL (password replaced by `***`) and the
//! cause: at once when the server refuses, after the
//! [connect timeout](ClientBuilder::connect_timeout) ([`DEFAULT_CONNECT_TIMEOUT`]) when it
//! does not answer. A URL that does not parse, or names a scheme the client does not speak
//! (`http://`), fails at once with [`Error::InvalidClientConfig`] instead, naming the
//! offending part: retrying cannot fix a typo.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! // Nothing listens on port 1: refused at once, the password kept out of the message.
//! let err = leasehold::Client::connect("redis://app:secret@127.0.0.1:1")
//!     .await
//!     .unwrap_err();
//! assert!(matches!(err, leasehold::Error::Connect { .. }));
//! assert!(err.to_string().starts_with("cannot connect to redis://app:***@127.0.0.1:1: "));
//! # }
//! ```
//!
//! ```no_run
//! # async fn demo() -> leasehold::Result<()> {
//! use std::time::Duration;
//!
//! let client = leasehold::Client::builder()
//!     .connect_timeout(Duration::from_millis(500))
//!     .connect("redis://127.0.0.1:6379")
//!     .await?;
//! let mutex = client.mutex("reports:nightly");
//! match mutex.lock_within(Duration::from_secs(2)).await {
//!     Ok(guard) => guard.unlock().await?,
//!     Err(leasehold::Error::Timeout { .. }) => { /* someone else is running it */ }
//!     Err(other) => return Err(other),
//! }
//! # Ok(())
//! # }
//! ```
//!
//! # Your own connection, and TLS
//!
//! [`ClientBuilder::redis_client`] builds a single-node client over a `redis::Client` you
//! configured (credentials, RESP3, a database, TLS certificates), and
//! [`ClientBuilder::redis_client_with`] also takes your
//! `redis::aio::ConnectionManagerConfig`. `rediss://` URLs need one of the crate features
//! `tls-rustls` (rustls with the `ring` provider, trusting only the Mozilla roots built in:
//! the platform's certificate store is not read, and `SSL_CERT_FILE` is ignored) or
//! `tls-native-tls` (the platform's TLS library and its store). For a private CA, pass
//! `redis::Client::build_with_tls(url, certificates)` (redis-rs' `TlsCertificates`, with
//! the CA as `root_cert`) to `redis_client`. A certificate the client does not trust fails
//! the connect with [`Error::Connect`].
//!
//! ```no_run
//! # #[cfg(any(feature = "tls-rustls", feature = "tls-native-tls"))]
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use leasehold::redis::{Client, TlsCertificates};
//!
//! let ca = std::fs::read("/etc/redis/ca.pem")?;
//! let redis = Client::build_with_tls(
//!     "rediss://cache.internal:6380",
//!     TlsCertificates { client_tls: None, root_cert: Some(ca) },
//! )?;
//! let client = leasehold::Client::builder().redis_client(redis).await?;
//! # drop(client);
//! # Ok(())
//! # }
//! ```
//!
//! # Features
//!
//! `cluster` ([`ClientBuilder::cluster`], [`ClusterBackend`]) and `sentinel`
//! ([`ClientBuilder::sentinel`], [`SentinelBackend`]) are on by default; `tls-rustls`,
//! `tls-native-tls`, `serde` (`Serialize` for the [`inspect`] types and [`FencingToken`])
//! and `cli` (the `leasehold` ops binary) are off. The library itself
//! needs only tokio's `rt`, `macros`, `time` and `sync`.
//!
//! # Requirements
//!
//! Requires Redis 7.0 or newer, or Valkey: the scripts call `TIME` before writing, which
//! Redis allows only with script effects replication, the default and only mode since 7.0.
//! The harness tests against Redis 7.0.15; CI also runs the script-level tests (mutex, fair
//! queue, fencing, re-entry, read-write lock, semaphore) against Valkey 9.1.2.
//!
//! # Stability
//!
//! The documented items are the API, covered by semver. A few more are public only so the
//! workspace's simulator (`leasehold-sim`) and harness can drive this very code: the
//! `backend`, `runtime` and `script` seams (all Redis traffic, all time and spawning, and
//! the Lua scripts), the Sentinel master lookup, the key layout and the internal tuning
//! divisors. They are `#[doc(hidden)]` and may change in any release. Hiding them, rather
//! than gating them behind a cargo feature, keeps one build of the crate for everyone:
//! `--all-features` builds, docs.rs and the simulator all compile the same code.

#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod acquire;
// Seam for the simulator and harness, not covered by semver (see "Stability").
#[doc(hidden)]
pub mod backend;
mod backoff;
mod client;
mod client_state;
#[cfg(feature = "cluster")]
mod cluster_backend;
mod config;
mod connect;
mod error;
mod events;
mod eviction;
mod fencing;
mod guard;
mod handle;
mod hold;
pub mod inspect;
mod keys;
mod lease;
pub mod metrics;
mod mutex;
mod notify;
mod owner;
mod pending;
mod protocol;
mod redis_backend;
mod redlock;
mod replication;
// Seam for the simulator and harness, not covered by semver (see "Stability").
#[doc(hidden)]
pub mod runtime;
mod rwlock;
mod scoped;
// Seam for the simulator and harness, not covered by semver (see "Stability").
#[doc(hidden)]
pub mod script;
mod semaphore;
#[cfg(feature = "sentinel")]
mod sentinel_backend;
#[cfg(feature = "sentinel")]
mod sentinel_master;
mod sync;
mod wait;
mod waiters;
mod watchdog;

/// The redis-rs crate this one is built on, re-exported so that its types can be named
/// without a dependency of your own.
///
/// The public API takes and returns redis-rs types: [`ClientBuilder::redis_client`] takes a
/// [`redis::Client`] (and [`ClientBuilder::redis_client_with`] a
/// [`redis::aio::ConnectionManagerConfig`]), [`inspect::read`] reads over any
/// [`redis::aio::ConnectionLike`], and [`Error`]'s `Backend`, `Connect`, `Ambiguous` and
/// `WrongType` variants carry a [`redis::RedisError`]. This release builds on redis-rs 1.8
/// (1.8.1 in the workspace's lockfile): if you depend on `redis` yourself to build those
/// values, depend on a semver-compatible version (`redis = "1.8"`, which cargo unifies with
/// this crate's), or use `leasehold::redis` and need none.
pub use redis;

pub use backoff::Backoff;
pub use client::{Client, ClientBuilder};
#[cfg(feature = "cluster")]
pub use cluster_backend::ClusterBackend;
pub use config::{DEFAULT_TTL, DEFAULT_WATCHDOG};
pub use connect::DEFAULT_CONNECT_TIMEOUT;
pub use error::{Error, Result};
pub use events::{LEASE_EVENT_BUFFER, LeaseEvent, LeaseEvents, LeaseNotice, LostReason};
pub use eviction::{EVICTION_REMEDY, EvictionRisk, NO_EVICTION};
pub use fencing::{DEFAULT_FENCE_MARGIN, FencingToken, MIN_FENCE_MARGIN};
pub use guard::{Guard, UNLOCK_WAIT};
pub use keys::{KEY_PREFIX, MAX_NAME_LEN, RWLOCK_FAMILY, SEMAPHORE_FAMILY};
pub use lease::{MAX_TTL, MIN_TTL};
pub use mutex::Mutex;
pub use owner::{ClientId, HoldId, MAX_CLIENT_NAME_LEN, MAX_OWNER_LEN, Owner};
pub use redis_backend::RedisBackend;
pub use redlock::{
    DEFAULT_NODE_TIMEOUT, DEFAULT_RETRY_COUNT, DEFAULT_RETRY_DELAY, MIN_NODE_TIMEOUT, RedLock,
    RedLockGuard,
};
pub use rwlock::{DEFAULT_WRITER_INTENT_TIMEOUT, ReadGuard, RwLock, WriteGuard};
pub use scoped::{LeaseAtEnd, Ran};
pub use semaphore::{MAX_PERMITS, Permit, Semaphore};
#[cfg(feature = "sentinel")]
pub use sentinel_backend::{SENTINEL_RESPONSE_TIMEOUT, SentinelBackend};
pub use wait::{DEFAULT_QUEUE_ENTRY_TIMEOUT, WaitStrategy};

// For the simulator and harness only, not covered by semver (see "Stability"): the key
// layout (to inspect or corrupt a lock's keys), the tuning the checker and the explorer
// derive their bounds from, and the Sentinel lookup the simulator replaces.
#[doc(hidden)]
pub use keys::{LockKeys, ReaderKeys};
#[doc(hidden)]
pub use lease::{CLOCK_DRIFT_DIVISOR, CLOCK_DRIFT_FLOOR};
#[doc(hidden)]
pub use protocol::MIN_REPLY_WAIT;
#[doc(hidden)]
pub use redlock::NODE_TIMEOUT_TTL_DIVISOR;
#[cfg(feature = "sentinel")]
#[doc(hidden)]
pub use sentinel_backend::{MasterSource, ResolvedMaster};
#[doc(hidden)]
pub use wait::QUEUE_REFRESHES_PER_TIMEOUT;
#[doc(hidden)]
pub use watchdog::RENEWALS_PER_TTL;

/// The crate README's Rust blocks, compiled by `cargo test --doc` so that its Quick start
/// keeps building against the API it shows.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

/// The in-process cores that the loom models (`tests/loom_*.rs`) exercise; a test seam,
/// not covered by semver.
#[cfg(leasehold_loom)]
#[doc(hidden)]
pub mod loom_models {
    pub use crate::lease::{LeaseCell, LeaseState};
    pub use crate::waiters::{Registry, Ticket};
}
