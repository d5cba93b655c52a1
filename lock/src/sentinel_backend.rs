//! The production [`Backend`] for a Sentinel-managed master: it asks the Sentinels where the
//! master is, talks to it over one auto-reconnecting connection, and asks again after a
//! failover.
//!
//! Invariant: a failure that may mean "the master moved" (connection lost or refused,
//! timeout, `READONLY` from a demoted master) drops the cached master, so the next command
//! re-resolves it through the Sentinels; the failure itself is reported as a transport
//! error, which the lock code already treats as "may or may not have run" and resolves.
//! Sentinel failover is asynchronous replication: a lock acknowledged by the old master can
//! be lost in the switch (docs/DESIGN.md §5, scenario 6). `WAIT` narrows that window; nothing closes it.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::sentinel::Sentinel;
use redis::{Cmd, RedisError, RedisResult, Value};

use crate::backend::{Backend, BoxFuture, ReplicaWait, Subscription};
use crate::connect::{DEFAULT_CONNECT_TIMEOUT, connection_manager, within};
use crate::redis_backend::{pubsub_subscription, run_wait, wait_connection};
use tokio::sync::OnceCell;

/// The former bound on connecting to the master, now the connect timeout of every
/// backend.
#[deprecated(note = "use DEFAULT_CONNECT_TIMEOUT or ClientBuilder::connect_timeout")]
pub const SENTINEL_CONNECT_TIMEOUT: Duration = DEFAULT_CONNECT_TIMEOUT;

/// Response timeout of the master connection: redis-rs' connection-manager default, a
/// backstop only (the lock code applies its own deadlines).
pub const SENTINEL_RESPONSE_TIMEOUT: Duration = Duration::from_millis(500);

/// The master currently in use and its connection.
#[derive(Clone)]
struct Master {
    client: redis::Client,
    connection: ConnectionManager,
    /// This master's `WAIT` connection, opened on first use (`WAIT` blocks its connection).
    waits: Arc<OnceCell<ConnectionManager>>,
    /// Bumped on each resolution, so a stale failure cannot drop a newer master.
    epoch: u64,
}

/// A master found through Sentinels, followed across failovers.
pub struct SentinelBackend {
    sentinel: tokio::sync::Mutex<Sentinel>,
    service: String,
    current: Mutex<Option<Master>>,
    /// Serialises re-resolutions so a burst of failures asks the Sentinels once.
    resolving: tokio::sync::Mutex<u64>,
    /// Bound on one resolution (Sentinel lookup plus master connect). Sentinel keeps naming
    /// a dead master until its `down-after-milliseconds` have passed, and each
    /// re-resolution meanwhile costs one such attempt, so it must stay short.
    connect_timeout: Duration,
}

impl std::fmt::Debug for SentinelBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let master = lock(&self.current)
            .as_ref()
            .map(|m| m.client.get_connection_info().addr().to_string());
        f.debug_struct("SentinelBackend")
            .field("service", &self.service)
            .field("master", &master)
            .finish_non_exhaustive()
    }
}

/// Locks the cache, recovering it from a poisoned lock: it is only ever replaced whole.
fn lock(current: &Mutex<Option<Master>>) -> MutexGuard<'_, Option<Master>> {
    current.lock().unwrap_or_else(PoisonError::into_inner)
}

impl SentinelBackend {
    /// Connects through the Sentinels at `urls` to the master they monitor as `service`
    /// (e.g. `"mymaster"`) within [`DEFAULT_CONNECT_TIMEOUT`].
    pub async fn connect<S: AsRef<str>>(urls: &[S], service: &str) -> RedisResult<Self> {
        Self::connect_with(urls, service, DEFAULT_CONNECT_TIMEOUT).await
    }

    /// Connects through the Sentinels at `urls` to the master of `service`; `timeout`
    /// bounds this and every later resolution (Sentinel lookup plus master connect).
    pub async fn connect_with<S: AsRef<str>>(
        urls: &[S],
        service: &str,
        timeout: Duration,
    ) -> RedisResult<Self> {
        let urls: Vec<&str> = urls.iter().map(AsRef::as_ref).collect();
        let backend = Self {
            sentinel: tokio::sync::Mutex::new(Sentinel::build(urls)?),
            service: service.to_owned(),
            current: Mutex::new(None),
            resolving: tokio::sync::Mutex::new(0),
            connect_timeout: timeout,
        };
        backend.master().await?;
        Ok(backend)
    }

    /// The cached master, or a fresh one from the Sentinels.
    async fn master(&self) -> RedisResult<Master> {
        if let Some(master) = lock(&self.current).clone() {
            return Ok(master);
        }
        let mut epoch = self.resolving.lock().await;
        if let Some(master) = lock(&self.current).clone() {
            return Ok(master);
        }
        let timeout = self.connect_timeout;
        let (client, connection) = within(timeout, async {
            let client = self
                .sentinel
                .lock()
                .await
                .async_master_for(&self.service, None)
                .await?;
            let config = ConnectionManagerConfig::new()
                .set_response_timeout(Some(SENTINEL_RESPONSE_TIMEOUT));
            let connection = connection_manager(&client, config, timeout).await?;
            Ok((client, connection))
        })
        .await?;
        *epoch += 1;
        tracing::info!(
            service = %self.service,
            master = %client.get_connection_info().addr(),
            "resolved the master through Sentinel"
        );
        let master = Master {
            client,
            connection,
            waits: Arc::new(OnceCell::new()),
            epoch: *epoch,
        };
        *lock(&self.current) = Some(master.clone());
        Ok(master)
    }

    /// Drops the cached master after a failure that may mean it moved; returns the error
    /// as the lock code should see it.
    fn failed(&self, epoch: u64, err: RedisError) -> RedisError {
        let demoted = err.code() == Some("READONLY") || err.to_string().contains("READONLY");
        if !(demoted || err.is_io_error() || err.is_timeout() || err.is_connection_dropped()) {
            return err;
        }
        let mut current = lock(&self.current);
        if current.as_ref().is_some_and(|m| m.epoch == epoch) {
            tracing::warn!(error = %err, "master unreachable or demoted; re-resolving");
            *current = None;
        }
        if demoted {
            // The command did not run, but the lock code only needs to know it must
            // retry against the new master: a transport error says exactly that.
            RedisError::from(std::io::Error::new(
                std::io::ErrorKind::ConnectionReset,
                format!("master demoted by a failover: {err}"),
            ))
        } else {
            err
        }
    }
}

impl Backend for SentinelBackend {
    fn query<'a>(&'a self, cmd: &'a Cmd) -> BoxFuture<'a, RedisResult<Value>> {
        Box::pin(async move {
            let master = self.master().await?;
            let mut connection = master.connection.clone();
            cmd.query_async(&mut connection)
                .await
                .map_err(|err| self.failed(master.epoch, err))
        })
    }

    fn wait_replicas<'a>(&'a self, wait: &'a ReplicaWait) -> BoxFuture<'a, RedisResult<Value>> {
        Box::pin(async move {
            let master = self.master().await?;
            let waits = master
                .waits
                .get_or_try_init(|| wait_connection(&master.client));
            let mut connection = waits
                .await
                .map_err(|err| self.failed(master.epoch, err))?
                .clone();
            run_wait(&mut connection, wait)
                .await
                .map_err(|err| self.failed(master.epoch, err))
        })
    }

    fn subscribe(&self) -> BoxFuture<'_, RedisResult<Subscription>> {
        Box::pin(async move {
            let master = self.master().await?;
            match master.client.get_async_pubsub().await {
                Ok(pubsub) => Ok(pubsub_subscription(pubsub)),
                Err(err) => Err(self.failed(master.epoch, err)),
            }
        })
    }
}
