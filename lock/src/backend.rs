//! The seam between the lock algorithms and a Redis deployment.
//!
//! Everything the client needs from Redis goes through [`Backend`]: one command at a time
//! and one shared subscription. Production implementations talk to real servers; the
//! simulator (`leasehold-sim`) implements the same trait over an in-memory model, so the
//! lock code it checks is byte-for-byte the code users run. Replies and errors are
//! `redis` crate types so that every backend is classified (NOSCRIPT, WRONGTYPE, dropped
//! connection, timeout) by the same code.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use futures::stream::BoxStream;
use redis::{Cmd, ErrorKind, Pipeline, RedisResult, Value};

/// A boxed, sendable future: the seams are object-safe so one client type serves every backend.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A message published on a channel the client subscribed to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notification {
    /// The channel the message was published on.
    pub channel: String,
    /// The message body, as published.
    pub payload: Vec<u8>,
}

/// What a Redis deployment must offer the lock client.
pub trait Backend: Send + Sync + 'static {
    /// Sends one command and returns its reply.
    ///
    /// A server error reply (for example `NOSCRIPT` or `WRONGTYPE`) is returned as `Err`
    /// with the server's error kind; a connection lost after the command was written is an
    /// I/O error (`is_io_error()` / `is_connection_dropped()`), which callers must treat as
    /// "may or may not have run".
    fn query<'a>(&'a self, cmd: &'a Cmd) -> BoxFuture<'a, RedisResult<Value>>;

    /// Sends `pipeline` (all its keys in one hash slot) and returns its replies, one per
    /// command; an atomic pipeline runs as one `MULTI`/`EXEC` (lock inspection reads every
    /// key of a lock name that way).
    ///
    /// The default refuses: a backend that cannot send pipelines (the simulator's) cannot
    /// be inspected, and locks work without it.
    fn query_pipeline<'a>(
        &'a self,
        pipeline: &'a Pipeline,
    ) -> BoxFuture<'a, RedisResult<Vec<Value>>> {
        let _ = pipeline;
        Box::pin(async { Err((ErrorKind::Client, "this backend does not send pipelines").into()) })
    }

    /// Runs `WAIT` as `wait` says on a connection of its own and returns its reply: how
    /// many replicas acknowledged every write that this backend's shared connection had
    /// answered before the call.
    ///
    /// `WAIT` blocks the connection it runs on, and the shared connection carries every
    /// other lock's renewals, so it must not run there. `WAIT` counts only the writes of
    /// its own connection: implementations send [`ReplicaWait::pipeline`], which first
    /// writes a marker key in the lock's hash tag on that connection, putting it after
    /// those writes in the one ordered replication stream.
    fn wait_replicas<'a>(&'a self, wait: &'a ReplicaWait) -> BoxFuture<'a, RedisResult<Value>>;

    /// Opens a subscription connection. A client opens one and multiplexes all its waiters
    /// over it; the stream ends when that connection is lost.
    fn subscribe(&self) -> BoxFuture<'_, RedisResult<Subscription>>;
}

/// How long the marker key of [`ReplicaWait::pipeline`] lives: long enough to be written,
/// short enough that no lock name keeps it.
const MARKER_TTL: Duration = Duration::from_millis(1);

/// One `WAIT` for replicas after an acquire (see [`Backend::wait_replicas`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaWait {
    /// A key in the lock's hash tag, written (and expired at once) before `WAIT`.
    pub marker: String,
    /// Acknowledgements to wait for.
    pub replicas: u32,
    /// How long `WAIT` may block.
    pub timeout: Duration,
}

impl ReplicaWait {
    /// Write the marker, then `WAIT`. On a cluster connection the marker's slot routes
    /// both to the lock's master.
    pub fn pipeline(&self) -> redis::Pipeline {
        let mut pipe = redis::pipe();
        pipe.cmd("SET")
            .arg(&self.marker)
            .arg("")
            .arg("PX")
            .arg(millis(MARKER_TTL))
            .ignore();
        pipe.cmd("WAIT")
            .arg(self.replicas)
            .arg(millis(self.timeout));
        pipe
    }
}

/// Milliseconds of `duration` for a command argument, saturating.
pub(crate) fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// A live subscription: a control half to change channels and the stream of messages.
pub struct Subscription {
    /// Adds and removes channels.
    pub control: Box<dyn SubscriptionControl>,
    /// Every message on every subscribed channel, in arrival order.
    pub messages: BoxStream<'static, Notification>,
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription").finish_non_exhaustive()
    }
}

/// Changes the channel set of a [`Subscription`].
pub trait SubscriptionControl: Send + Sync {
    /// Subscribes to `channel`; resolves once the server has confirmed it.
    fn subscribe<'a>(&'a self, channel: &'a str) -> BoxFuture<'a, RedisResult<()>>;
    /// Unsubscribes from `channel`.
    fn unsubscribe<'a>(&'a self, channel: &'a str) -> BoxFuture<'a, RedisResult<()>>;
}
