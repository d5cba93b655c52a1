//! The production [`Backend`] for one Redis node: one auto-reconnecting multiplexed
//! connection for every command, one more (opened on first use) for `WAIT`, which blocks
//! its connection, plus one pub/sub connection per subscription.
//!
//! Invariant: commands never open a connection each (a peer defect, docs/DESIGN.md §2); a lost
//! connection surfaces as an I/O error, which the lock code treats as ambiguous. A named
//! client's command and `WAIT` connections carry its name after every reconnect
//! ([`ConnectionName`]). Cluster
//! deployments get their own `Backend` impl beside this one; a Sentinel deployment's master
//! is one of these, followed across failovers by `sentinel_backend`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::StreamExt;
use redis::aio::{ConnectionManager, ConnectionManagerConfig, PubSub, PubSubSink};
use redis::{Cmd, Pipeline, RedisResult, Value};
use tokio::sync::OnceCell;

use crate::backend::{
    Backend, BoxFuture, Notification, ReplicaWait, Subscription, SubscriptionControl,
};
use crate::connect::{DEFAULT_CONNECT_TIMEOUT, connection_manager};

/// A single Redis node.
#[derive(Clone)]
pub struct RedisBackend {
    client: redis::Client,
    connection: ConnectionManager,
    /// The `WAIT` connection, opened on first use and shared by clones.
    waits: Arc<OnceCell<ConnectionManager>>,
    /// The client's name on `connection` and on the `WAIT` connection, when it has one.
    names: Option<Arc<[ConnectionName; 2]>>,
}

impl std::fmt::Debug for RedisBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisBackend")
            .field("server", &self.address())
            .finish_non_exhaustive()
    }
}

impl RedisBackend {
    /// Connects to `url` (`redis://host:port/db`) within [`DEFAULT_CONNECT_TIMEOUT`].
    pub async fn connect(url: &str) -> RedisResult<Self> {
        Self::connect_with(url, DEFAULT_CONNECT_TIMEOUT).await
    }

    /// Connects to `url` within `timeout`, failing at once if the server refuses. Uses
    /// redis-rs' connection manager with its defaults otherwise (reconnect with backoff,
    /// each attempt bounded by `timeout`; 500 ms response timeout as a backstop — the lock
    /// code applies its own deadlines through the runtime).
    pub async fn connect_with(url: &str, timeout: Duration) -> RedisResult<Self> {
        let client = redis::Client::open(url)?;
        Self::connect_client(client, ConnectionManagerConfig::new(), timeout).await
    }

    /// Connects to `client`'s server with `config` within `timeout` (the Sentinel
    /// backend's master connection is one of these).
    pub(crate) async fn connect_client(
        client: redis::Client,
        config: ConnectionManagerConfig,
        timeout: Duration,
    ) -> RedisResult<Self> {
        let connection = connection_manager(&client, config, timeout).await?;
        Ok(Self {
            client,
            connection,
            waits: Arc::new(OnceCell::new()),
            names: None,
        })
    }

    /// Names this backend's connections `name` (`CLIENT SETNAME`): sent before the next
    /// command on each of them, and again after each reconnect.
    pub(crate) fn named(mut self, name: &str) -> Self {
        self.names = Some(Arc::new([
            ConnectionName::new(name),
            ConnectionName::new(name),
        ]));
        self
    }

    async fn name_commands(&self, connection: &mut ConnectionManager) {
        if let Some([commands, _]) = self.names.as_deref() {
            commands.apply(connection).await;
        }
    }

    fn saw_commands<T>(&self, reply: &RedisResult<T>) {
        if let Some([commands, _]) = self.names.as_deref() {
            commands.saw(reply);
        }
    }

    /// The server's address, for logs.
    pub(crate) fn address(&self) -> String {
        self.client.get_connection_info().addr().to_string()
    }
}

/// A connection for `WAIT` alone: no response timeout of its own, since `WAIT` answers only
/// after its timeout; the caller bounds the call (see `replication.rs`).
async fn wait_connection(client: &redis::Client) -> RedisResult<ConnectionManager> {
    let config = ConnectionManagerConfig::new().set_response_timeout(None);
    ConnectionManager::new_with_config(client.clone(), config).await
}

/// Runs `wait`'s pipeline on `connection`: the `WAIT` reply.
async fn run_wait(connection: &mut ConnectionManager, wait: &ReplicaWait) -> RedisResult<Value> {
    let (reply,): (Value,) = wait.pipeline().query_async(connection).await?;
    Ok(reply)
}

impl Backend for RedisBackend {
    fn query<'a>(&'a self, cmd: &'a Cmd) -> BoxFuture<'a, RedisResult<Value>> {
        // Cloning the manager is cheap: every clone multiplexes over the same connection.
        let mut connection = self.connection.clone();
        Box::pin(async move {
            self.name_commands(&mut connection).await;
            let reply = cmd.query_async(&mut connection).await;
            self.saw_commands(&reply);
            reply
        })
    }

    fn query_pipeline<'a>(
        &'a self,
        pipeline: &'a Pipeline,
    ) -> BoxFuture<'a, RedisResult<Vec<Value>>> {
        let mut connection = self.connection.clone();
        Box::pin(async move {
            self.name_commands(&mut connection).await;
            let reply = pipeline.query_async(&mut connection).await;
            self.saw_commands(&reply);
            reply
        })
    }

    fn wait_replicas<'a>(&'a self, wait: &'a ReplicaWait) -> BoxFuture<'a, RedisResult<Value>> {
        Box::pin(async move {
            let waits = self.waits.get_or_try_init(|| wait_connection(&self.client));
            let mut connection = waits.await?.clone();
            let Some([_, waits]) = self.names.as_deref() else {
                return run_wait(&mut connection, wait).await;
            };
            waits.apply(&mut connection).await;
            let reply = run_wait(&mut connection, wait).await;
            waits.saw(&reply);
            reply
        })
    }

    fn subscribe(&self) -> BoxFuture<'_, RedisResult<Subscription>> {
        Box::pin(async move { Ok(pubsub_subscription(self.client.get_async_pubsub().await?)) })
    }
}

/// `CLIENT SETNAME` for one connection manager, so that `CLIENT LIST` shows the client's
/// name on it after a reconnect too: redis-rs' `ConnectionManager` reconnects on its own,
/// and its connection info has no client name to set a new connection up with. So the
/// name is sent before the first command, and again before the first command after an
/// error that may have dropped the connection (the manager reconnects on those). A
/// reconnect no command saw fail (a RESP3 manager's own, on a push) goes unnamed until
/// one does. Pub/sub connections are not named: redis-rs' RESP2 `PubSub` sends nothing
/// but (un)subscribe and ping.
struct ConnectionName {
    setname: Cmd,
    /// Whether the manager's connection may lack the name.
    due: AtomicBool,
}

impl ConnectionName {
    fn new(name: &str) -> Self {
        let mut setname = redis::cmd("CLIENT");
        setname.arg("SETNAME").arg(name);
        Self {
            setname,
            due: AtomicBool::new(true),
        }
    }

    /// Sends the name if it is due: one more round trip per connection, not per command.
    async fn apply(&self, connection: &mut ConnectionManager) {
        if !self.due.swap(false, Ordering::AcqRel) {
            return;
        }
        let reply: RedisResult<Value> = self.setname.query_async(connection).await;
        match reply {
            Ok(_) => {}
            Err(err) if may_have_dropped(&err) => self.due.store(true, Ordering::Release),
            // Refused (an ACL without CLIENT): asking again would be refused again. Only
            // `CLIENT LIST` misses the name: the owner ids still carry it.
            Err(err) => tracing::warn!(%err, "CLIENT SETNAME failed; the connection stays unnamed"),
        }
    }

    /// Notes a command's reply: after one that may have dropped the connection, the
    /// reconnected one needs the name again.
    fn saw<T>(&self, reply: &RedisResult<T>) {
        if let Err(err) = reply
            && may_have_dropped(err)
        {
            self.due.store(true, Ordering::Release);
        }
    }
}

/// Whether `err` may have cost the connection (the errors on which redis-rs' connection
/// manager reconnects).
fn may_have_dropped(err: &redis::RedisError) -> bool {
    err.is_io_error() || err.is_connection_dropped() || err.is_unrecoverable_error()
}

/// Wraps a redis-rs pub/sub connection as a [`Subscription`] (shared by the single-node
/// and Cluster backends; the Sentinel backend's master is a single node).
pub(crate) fn pubsub_subscription(pubsub: PubSub) -> Subscription {
    let (sink, stream) = pubsub.split();
    let messages = stream
        .map(|msg| Notification {
            channel: msg.get_channel_name().to_owned(),
            payload: msg.get_payload_bytes().to_vec(),
        })
        .boxed();
    Subscription {
        control: Box::new(PubSubControl(sink)),
        messages,
    }
}

struct PubSubControl(PubSubSink);

impl SubscriptionControl for PubSubControl {
    fn subscribe<'a>(&'a self, channel: &'a str) -> BoxFuture<'a, RedisResult<()>> {
        let mut sink = self.0.clone();
        Box::pin(async move { sink.subscribe(channel).await })
    }

    fn unsubscribe<'a>(&'a self, channel: &'a str) -> BoxFuture<'a, RedisResult<()>> {
        let mut sink = self.0.clone();
        Box::pin(async move { sink.unsubscribe(channel).await })
    }
}
