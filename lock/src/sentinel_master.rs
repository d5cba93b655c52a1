//! The production [`MasterSource`]: redis-rs' `Sentinel` asks the Sentinels for the master,
//! and the master is connected as a single node ([`RedisBackend`]).
//!
//! Why it exists apart from [`crate::sentinel_backend`]: that module decides when to ask
//! (and is what the simulator drives); this one only asks and connects, over real sockets.
//!
//! Each master resolved (at connect and after every failover) has its eviction settings
//! read and recorded (`crate::eviction`): a failover may land on a node configured apart.
//!
//! Invariant: one resolution (Sentinel lookup plus master connect) gives up within the
//! connect timeout, since Sentinel keeps naming a dead master until its
//! `down-after-milliseconds` have passed and each re-resolution meanwhile costs one attempt.

use std::sync::Arc;
use std::time::Duration;

use redis::RedisResult;
use redis::aio::ConnectionManagerConfig;
use redis::sentinel::Sentinel;

use crate::backend::{Backend, BoxFuture};
use crate::connect::{DEFAULT_CONNECT_TIMEOUT, within};
use crate::eviction::{EvictionMonitor, assess, config_get};
use crate::redis_backend::RedisBackend;
use crate::sentinel_backend::{
    MasterSource, ResolvedMaster, SENTINEL_RESPONSE_TIMEOUT, SentinelBackend,
};

/// The Sentinels of one service, asked through redis-rs.
struct SentinelDiscovery {
    sentinel: tokio::sync::Mutex<Sentinel>,
    service: String,
    /// Bound on one resolution.
    connect_timeout: Duration,
    /// Told the eviction settings of every master resolved.
    eviction: Arc<EvictionMonitor>,
}

impl MasterSource for SentinelDiscovery {
    fn service(&self) -> &str {
        &self.service
    }

    fn resolve(&self) -> BoxFuture<'_, RedisResult<ResolvedMaster>> {
        Box::pin(within(self.connect_timeout, async {
            let client = self
                .sentinel
                .lock()
                .await
                .async_master_for(&self.service, None)
                .await?;
            let config = ConnectionManagerConfig::new()
                .set_response_timeout(Some(SENTINEL_RESPONSE_TIMEOUT));
            let master = RedisBackend::connect_client(client, config, self.connect_timeout).await?;
            let reply = master.query(&config_get()).await;
            self.eviction.record([assess(&master.address(), reply)]);
            Ok(ResolvedMaster {
                address: master.address(),
                backend: Arc::new(master) as Arc<dyn Backend>,
            })
        }))
    }
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
        let eviction = Arc::new(EvictionMonitor::default());
        Self::connect_watched(urls, service, timeout, eviction).await
    }

    /// As [`connect_with`](Self::connect_with), recording every resolved master's eviction
    /// settings in `eviction` (the client's).
    pub(crate) async fn connect_watched<S: AsRef<str>>(
        urls: &[S],
        service: &str,
        timeout: Duration,
        eviction: Arc<EvictionMonitor>,
    ) -> RedisResult<Self> {
        let urls: Vec<&str> = urls.iter().map(AsRef::as_ref).collect();
        Self::with_source(SentinelDiscovery {
            sentinel: tokio::sync::Mutex::new(Sentinel::build(urls)?),
            service: service.to_owned(),
            connect_timeout: timeout,
            eviction,
        })
        .await
    }
}
