//! The production [`Backend`] for Redis Cluster: commands through redis-rs' cluster client,
//! notifications through one plain pub/sub connection to any node, and `WAIT` through a
//! second cluster connection of its own (opened on first use), since `WAIT` blocks the
//! node connection it runs on.
//!
//! Why this is enough: every key of one lock shares the `{name}` hash tag, so each script
//! runs on the one node owning that slot; the cluster client routes `EVALSHA`/`EVAL` by
//! their first key and follows `MOVED`/`ASK` redirects (refreshing its slot map), and a
//! `NOSCRIPT` retry lands on the same slot. Classic `PUBLISH` is broadcast to every node
//! over the cluster bus, so one subscription on any node hears every lock's messages.
//!
//! ## redis-rs re-sends commands by itself (checked against redis 1.8.1, issue 34)
//! The cluster client retries a request up to `ClusterClientBuilder::retries` times
//! (default 16), waiting `min_retry_wait`..`max_retry_wait` ms between attempts (defaults
//! 1280 and 655360, shaped by `retry_wait_formula`, factor 10, base 2), as
//! `RedisError::retry_method` decides (`cluster_handling/async_connection/request.rs`,
//! `choose_response`): `MOVED`/`ASK` (redirect), `READONLY` (refresh slots), `TRYAGAIN`,
//! `CLUSTERDOWN`, `MASTERDOWN`, `LOADING` (sleep, then retry) — replies of a script that did
//! not run, so re-sending is safe — and I/O errors: a dropped connection (reconnect and
//! re-send) or any other I/O error (re-send at once). Those are the cases where the
//! `EVALSHA` may already have run: redis-rs then sends it a second time, with the same
//! hold id. No per-attempt `response_timeout` is set by default, so a slow reply does not
//! cause one.
//!
//! It cannot re-send after the lock code gave up: the lock code bounds every call by
//! dropping its future (`protocol::within`), which closes the request's reply channel, and
//! redis-rs checks `sender.is_closed()` before starting every attempt (`Request::poll`,
//! and `dispatch_pending` for queued retries); an attempt is a lazy future, so nothing is
//! written after that check fails. What remains is an attempt started before the drop,
//! which is exactly the lock code's own retry after a lost reply: `acquire.lua` treats a
//! hold id it already granted as "already ours" (idempotent, no second count), so a
//! duplicate that runs before the release changes nothing, and the release, sent later on
//! the same node connection, runs after it. Only a duplicate held back by the server on a
//! dropped connection, while the release went ahead on a new one, can run after the release
//! and re-create the hold; nobody renews it, so it ends with its TTL — as on a single node,
//! where the lock code's own retry after an I/O error has the same window. Setting
//! `retries(0)` would not close that window (the lock code retries anyway) and would
//! surface every `MOVED` as an error, so the defaults are kept.

use std::sync::Arc;
use std::time::Duration;

use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{MultipleNodeRoutingInfo, RoutingInfo};
use redis::{Cmd, Pipeline, RedisResult, Value};
use tokio::sync::OnceCell;

use crate::backend::{Backend, BoxFuture, ReplicaWait, Subscription};
use crate::connect::{DEFAULT_CONNECT_TIMEOUT, within};
use crate::redis_backend::pubsub_subscription;

/// A Redis Cluster: lock commands go to the master of the lock name's slot (every key of a
/// name shares the hash tag `{name}`, so one slot), over redis-rs' async cluster client.
///
/// Built by [`ClientBuilder::cluster`](crate::ClientBuilder::cluster), which is how a user
/// gets one:
///
/// ```no_run
/// # async fn demo() -> leasehold::Result<()> {
/// let client = leasehold::Client::builder()
///     .cluster(&["redis://10.0.0.1:7000", "redis://10.0.0.2:7000"])
///     .await?;
/// let guard = client.mutex("orders:42").lock().await?;
/// guard.unlock().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
#[cfg_attr(docsrs, doc(cfg(feature = "cluster")))]
pub struct ClusterBackend {
    client: ClusterClient,
    connection: ClusterConnection,
    /// The `WAIT` connection, opened on first use and shared by clones.
    waits: Arc<OnceCell<ClusterConnection>>,
    /// Every seed node, tried in order for the subscription connection.
    seeds: Vec<redis::Client>,
}

impl std::fmt::Debug for ClusterBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let seeds: Vec<String> = self
            .seeds
            .iter()
            .map(|seed| seed.get_connection_info().addr().to_string())
            .collect();
        f.debug_struct("ClusterBackend")
            .field("seeds", &seeds)
            .finish_non_exhaustive()
    }
}

impl ClusterBackend {
    /// Connects to the cluster through `urls` (any subset of its nodes) within
    /// [`DEFAULT_CONNECT_TIMEOUT`].
    pub async fn connect<S: AsRef<str>>(urls: &[S]) -> RedisResult<Self> {
        Self::connect_with(urls, DEFAULT_CONNECT_TIMEOUT).await
    }

    /// Connects to the cluster through `urls` within `timeout` (which also bounds every
    /// later connection attempt to a node), with redis-rs' cluster defaults otherwise
    /// (retries with backoff on redirects and connection errors).
    pub async fn connect_with<S: AsRef<str>>(urls: &[S], timeout: Duration) -> RedisResult<Self> {
        let urls: Vec<&str> = urls.iter().map(AsRef::as_ref).collect();
        let client = ClusterClientBuilder::new(urls.clone())
            .connection_timeout(timeout)
            .build()?;
        within(timeout, Self::with_client(&client, &urls)).await
    }

    /// Uses a configured cluster client (timeouts, TLS, credentials); `seeds` are the node
    /// URLs to try, in order, for the subscription connection. Connecting is bounded only
    /// by the client's own settings.
    pub async fn with_client<S: AsRef<str>>(
        client: &ClusterClient,
        seeds: &[S],
    ) -> RedisResult<Self> {
        let seeds = seeds
            .iter()
            .map(|url| redis::Client::open(url.as_ref()))
            .collect::<RedisResult<Vec<_>>>()?;
        let connection = client.get_async_connection().await?;
        Ok(Self {
            client: client.clone(),
            connection,
            waits: Arc::new(OnceCell::new()),
            seeds,
        })
    }
}

impl ClusterBackend {
    /// Runs `cmd` on every master: each master's address and reply.
    pub(crate) async fn on_every_master(&self, cmd: &Cmd) -> RedisResult<Vec<(String, Value)>> {
        let mut connection = self.connection.clone();
        let routing = RoutingInfo::MultiNode((MultipleNodeRoutingInfo::AllMasters, None));
        let replies = connection.route_command(cmd.clone(), routing).await?;
        Ok(redis::from_redis_value(replies)?)
    }
}

impl Backend for ClusterBackend {
    fn query<'a>(&'a self, cmd: &'a Cmd) -> BoxFuture<'a, RedisResult<Value>> {
        // Clones share the cluster connection's node connections and slot map.
        let mut connection = self.connection.clone();
        Box::pin(async move { cmd.query_async(&mut connection).await })
    }

    fn query_pipeline<'a>(
        &'a self,
        pipeline: &'a Pipeline,
    ) -> BoxFuture<'a, RedisResult<Vec<Value>>> {
        let mut connection = self.connection.clone();
        Box::pin(async move { pipeline.query_async(&mut connection).await })
    }

    fn wait_replicas<'a>(&'a self, wait: &'a ReplicaWait) -> BoxFuture<'a, RedisResult<Value>> {
        Box::pin(async move {
            let waits = self
                .waits
                .get_or_try_init(|| self.client.get_async_connection());
            let mut connection = waits.await?.clone();
            // The marker's slot routes the whole pipeline to the lock's master.
            let (reply,): (Value,) = wait.pipeline().query_async(&mut connection).await?;
            Ok(reply)
        })
    }

    fn subscribe(&self) -> BoxFuture<'_, RedisResult<Subscription>> {
        Box::pin(async move {
            let mut last = None;
            for seed in &self.seeds {
                match seed.get_async_pubsub().await {
                    Ok(pubsub) => return Ok(pubsub_subscription(pubsub)),
                    Err(err) => {
                        tracing::debug!(error = %err, "cluster node refused the subscription");
                        last = Some(err);
                    }
                }
            }
            Err(last.unwrap_or_else(|| {
                redis::RedisError::from((
                    redis::ErrorKind::InvalidClientConfig,
                    "no cluster seed node to subscribe on",
                ))
            }))
        })
    }
}
