//! The entry point: a [`Client`] bundles one backend, one runtime and one shared
//! subscription, and hands out lock handles. A thin facade: the state lives in
//! [`ClientState`], the lock kinds in their own modules.
//!
//! Invariant: every Redis command, timer, spawn and random draw of the lock code goes
//! through the client's [`Backend`] and [`Runtime`], so the simulator can replace both.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use redis::aio::ConnectionManagerConfig;

use crate::backend::Backend;
use crate::client_state::ClientState;
#[cfg(feature = "cluster")]
use crate::cluster_backend::ClusterBackend;
use crate::config::{Config, lock_options};
#[cfg(any(feature = "cluster", feature = "sentinel"))]
use crate::connect::redact_all;
use crate::connect::{DEFAULT_CONNECT_TIMEOUT, check_urls, redact, within};
use crate::error::{Error, Result};
use crate::events::{LeaseNotice, Listener};
use crate::eviction::{EvictionMonitor, EvictionRisk, assess, config_get};
use crate::handle::Handle;
use crate::keys::INBOX_PREFIX;
use crate::mutex::Mutex;
use crate::notify::Notifier;
use crate::owner::{self, ClientId};
use crate::redis_backend::RedisBackend;
use crate::runtime::Runtime;
use crate::rwlock::RwLock;
use crate::semaphore::Semaphore;
#[cfg(feature = "sentinel")]
use crate::sentinel_backend::SentinelBackend;
use crate::watchdog::Watchdog;

/// A connection to one Redis deployment. Cheap to clone (shared state).
#[derive(Clone)]
pub struct Client {
    state: Arc<ClientState>,
    defaults: Config,
    eviction: Arc<EvictionMonitor>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("id", &self.state.id)
            .field("defaults", &self.defaults)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// Connects to a single Redis node (`redis://host:port/db`) on the current tokio
    /// runtime with default settings.
    pub async fn connect(url: &str) -> Result<Self> {
        Self::builder().connect(url).await
    }

    /// A builder for a client with a custom backend, runtime or mutex defaults.
    pub fn builder() -> ClientBuilder {
        ClientBuilder::default()
    }

    /// This client's id (the prefix of all its owners).
    pub fn id(&self) -> &ClientId {
        &self.state.id
    }

    /// This client's name, if it was built with one ([`ClientBuilder::name`]).
    pub fn name(&self) -> Option<&str> {
        self.state.name.as_deref()
    }

    /// A handle on the lease mutex `name`, with this client's defaults. The name is
    /// validated when the mutex is used (see [`MAX_NAME_LEN`](crate::MAX_NAME_LEN)).
    pub fn mutex(&self, name: impl Into<String>) -> Mutex {
        Mutex::new(self.handle(name.into()))
    }

    /// A handle on the read-write lock `name` (keys disjoint from the mutex of that name),
    /// with this client's defaults.
    pub fn rwlock(&self, name: impl Into<String>) -> RwLock {
        RwLock::new(self.handle(name.into()))
    }

    /// A handle on the semaphore `name` with `permits` permits, with this client's
    /// defaults. Every user of the name must pass the same `permits`: the first acquire
    /// stores it on the server (see [`Semaphore::resize`]).
    pub fn semaphore(&self, name: impl Into<String>, permits: u32) -> Semaphore {
        Semaphore::new(self.handle(name.into()), permits)
    }

    /// The lock name `name` on this client, with this client's defaults.
    fn handle(&self, name: String) -> Handle {
        Handle::new(Arc::clone(&self.state), name, self.defaults.clone())
    }

    /// Whether a server may evict this client's locks under memory pressure, as read at
    /// connect (a Redis Cluster: from every master; Sentinel: from each master resolved,
    /// again after a failover). A single node is read once: redis-rs 1.8's connection
    /// manager offers no hook on reconnect. A client built over a backend of its own
    /// reports [`EvictionRisk::Unknown`]. See
    /// [`ClientBuilder::refuse_eviction`] to refuse such a server instead.
    pub fn eviction_risk(&self) -> EvictionRisk {
        self.eviction.current()
    }

    /// The state shared with this client's locks (RedLock drives one hold per client).
    pub(crate) fn state(&self) -> &Arc<ClientState> {
        &self.state
    }

    /// This client's lock defaults.
    pub(crate) fn defaults(&self) -> &Config {
        &self.defaults
    }
}

/// Configures a [`Client`]. Defaults: the tokio runtime the client is built on, a
/// single-node Redis backend (for [`ClientBuilder::connect`]), connecting within
/// [`DEFAULT_CONNECT_TIMEOUT`], and for every lock a [`DEFAULT_TTL`](crate::DEFAULT_TTL)
/// lease, the watchdog on, and the wait strategy
/// [`WaitStrategy::fair_queue()`](crate::WaitStrategy::fair_queue) for every lock kind.
#[derive(Default)]
pub struct ClientBuilder {
    backend: Option<Arc<dyn Backend>>,
    runtime: Option<Runtime>,
    /// `None` means [`DEFAULT_CONNECT_TIMEOUT`].
    connect_timeout: Option<Duration>,
    defaults: Config,
    lease_listener: Option<Listener>,
    /// Refuse a server that may evict locks (see [`ClientBuilder::refuse_eviction`]).
    refuse_eviction: bool,
    /// Filled at connect, shared with a Sentinel backend's re-resolutions.
    eviction: Arc<EvictionMonitor>,
    /// See [`ClientBuilder::name`].
    name: Option<String>,
}

impl std::fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("connect_timeout", &self.connect_timeout)
            .field("defaults", &self.defaults)
            .finish_non_exhaustive()
    }
}

impl ClientBuilder {
    /// Talks to Redis through `backend` (a Cluster or Sentinel backend, or the simulator's).
    /// A seam, outside semver: [`ClientBuilder::cluster`] and [`ClientBuilder::sentinel`]
    /// are the supported ways to reach those deployments.
    #[doc(hidden)]
    pub fn backend(mut self, backend: Arc<dyn Backend>) -> Self {
        self.backend = Some(backend);
        self
    }

    /// Uses `runtime` for time, spawning and randomness (the simulator's, or a test's). A
    /// seam, outside semver.
    #[doc(hidden)]
    pub fn runtime(mut self, runtime: Runtime) -> Self {
        self.runtime = Some(runtime);
        self
    }

    /// Bound on connecting in [`connect`](Self::connect), [`cluster`](Self::cluster) and
    /// [`sentinel`](Self::sentinel) (default [`DEFAULT_CONNECT_TIMEOUT`]), and on each later
    /// reconnect attempt. A refused connection fails at once; an unreachable address fails
    /// after this long with [`Error::Connect`]. Must be above zero.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = Some(timeout);
        self
    }

    lock_options!((defaults): ttl, wait, watchdog, fence_margin, metrics_label);

    /// Names this client for operators (default: no name), e.g. `"billing@pod-7"`: the
    /// name is carried in every owner id the client makes (`<client id>@<name>:…`, see
    /// [`Owner::client_name`](crate::Owner::client_name)), so
    /// [`Mutex::inspect`](crate::Mutex::inspect) and the `leasehold inspect` command show
    /// who holds and who waits. [`connect`](Self::connect) and
    /// [`redis_client`](Self::redis_client) also send it as `CLIENT SETNAME` on the
    /// command and `WAIT` connections they open, again after each reconnect, so
    /// `CLIENT LIST` shows it; pub/sub connections stay unnamed (redis-rs' RESP2 pub/sub
    /// sends no other command), and a client over a backend you bring
    /// ([`backend`](Self::backend)), a Cluster or Sentinel skips it (the owner ids still
    /// carry the name).
    ///
    /// 1..=[`MAX_CLIENT_NAME_LEN`](crate::MAX_CLIENT_NAME_LEN) bytes of printable ASCII
    /// without space or `:`; any other name fails the build or connect with
    /// [`Error::InvalidClientConfig`], before any connection is made.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Whether [`connect`](Self::connect), [`cluster`](Self::cluster) and
    /// [`sentinel`](Self::sentinel) refuse a server that may evict live locks (default
    /// `false`: they connect, log a warning and count it, see
    /// [`Client::eviction_risk`]). Refused: `maxmemory` set with a `maxmemory-policy` other
    /// than `noeviction`, and also a server that will not answer `CONFIG GET` (ACL, a
    /// managed Redis that renames `CONFIG`), since strict mode promises a checked server;
    /// both fail with [`Error::EvictionPolicy`]. A Sentinel failover to an evicting master
    /// is logged and counted, not refused: the client is in use by then.
    pub fn refuse_eviction(mut self, refuse: bool) -> Self {
        self.refuse_eviction = refuse;
        self
    }

    /// Calls `listener` for every lease event of every guard of this client — renewed,
    /// renewal failed, lost — with the lock name and hold id ([`LeaseNotice`]); a
    /// [`RedLock`](crate::RedLock) reports to its first master's client.
    ///
    /// The listener runs in line, mostly on the watchdog task that renews the lease, so it
    /// must be cheap and must not block: count, log, or `try_send` into a channel of your
    /// own. A listener that blocked would delay the next renewal; one that panics loses
    /// that event (the panic is caught and logged). For one guard's events as a stream,
    /// see [`Guard::events`](crate::Guard::events).
    pub fn on_lease_event(
        mut self,
        listener: impl Fn(&LeaseNotice<'_>) + Send + Sync + 'static,
    ) -> Self {
        self.lease_listener = Some(Arc::new(listener));
        self
    }

    /// Builds the client over a backend given to the builder beforehand (the simulator's
    /// and harness's seam). An application does not call this: [`connect`](Self::connect),
    /// [`redis_client`](Self::redis_client), [`cluster`](Self::cluster) and
    /// [`sentinel`](Self::sentinel) connect and build in one step. Without a backend it fails
    /// with [`Error::InvalidClientConfig`]. It uses the current tokio runtime's clock and
    /// spawner unless given a runtime of its own, and so panics outside a tokio runtime.
    pub fn build(self) -> Result<Client> {
        self.check_name()?;
        let Some(backend) = self.backend else {
            return Err(Error::InvalidClientConfig {
                reason: "no backend: call ClientBuilder::connect, cluster, sentinel or backend"
                    .into(),
            });
        };
        let runtime = self.runtime.unwrap_or_else(Runtime::tokio);
        let id = ClientId::random(runtime.entropy.as_ref());
        let notifier = Notifier::new(
            Arc::clone(&backend),
            runtime.clone(),
            format!("{INBOX_PREFIX}{id}"),
        );
        Ok(Client {
            state: Arc::new(ClientState {
                backend,
                watchdog: Watchdog::new(runtime.clone()),
                runtime,
                id,
                name: self.name,
                notifier: Arc::new(notifier),
                owners: AtomicU64::new(0),
                lease_listener: self.lease_listener,
            }),
            defaults: self.defaults,
            eviction: self.eviction,
        })
    }

    /// Connects to a single Redis node at `url` and builds the client over it; fails with
    /// [`Error::Connect`] within the [connect timeout](Self::connect_timeout), and at once
    /// with [`Error::InvalidClientConfig`] when `url` does not parse or names a scheme
    /// redis-rs does not speak.
    pub async fn connect(self, url: &str) -> Result<Client> {
        check_urls(&[url])?;
        let client = redis::Client::open(url).map_err(|source| Error::InvalidClientConfig {
            reason: format!("URL {}: {source}", redact(url)),
        })?;
        let target = redact(url);
        self.single(client, ConnectionManagerConfig::new(), move || {
            target.clone()
        })
        .await
    }

    /// Builds the client over the single node of `client`, a `redis::Client` you
    /// configured yourself (TLS certificates through `redis::Client::build_with_tls`,
    /// credentials, RESP3, a database, a client name), with redis-rs' default connection
    /// manager settings. Fails like [`connect`](Self::connect): [`Error::Connect`] within
    /// the [connect timeout](Self::connect_timeout), which bounds each attempt.
    pub async fn redis_client(self, client: redis::Client) -> Result<Client> {
        self.redis_client_with(client, ConnectionManagerConfig::new())
            .await
    }

    /// As [`redis_client`](Self::redis_client), with your own connection manager settings
    /// (response timeout, reconnect backoff, push messages). Its connection timeout is
    /// replaced by this builder's [connect timeout](Self::connect_timeout), so that every
    /// connect of the client is bounded alike.
    pub async fn redis_client_with(
        self,
        client: redis::Client,
        config: ConnectionManagerConfig,
    ) -> Result<Client> {
        let target = client.get_connection_info().addr().to_string();
        self.single(client, config, move || target.clone()).await
    }

    /// Connects to `client`'s single node with `config`, reads its eviction policy and
    /// builds the client over it; `target` names the node in errors, without passwords.
    async fn single(
        self,
        client: redis::Client,
        config: ConnectionManagerConfig,
        target: impl Fn() -> String,
    ) -> Result<Client> {
        let timeout = self.checked_connect_timeout()?;
        self.check_name()?;
        let connected = RedisBackend::connect_client(client, config, timeout)
            .await
            .map(|backend| match &self.name {
                Some(name) => backend.named(name),
                None => backend,
            });
        if let Ok(backend) = &connected {
            // Also names the connection (its first command, see `RedisBackend::named`).
            let reply = within(timeout, backend.query(&config_get())).await;
            self.eviction.record([assess(&backend.address(), reply)]);
        }
        self.over(connected, target)
    }

    /// Connects to a Redis Cluster through `urls` (any of its nodes) and builds the client
    /// over a [`ClusterBackend`](crate::ClusterBackend); fails with [`Error::Connect`]
    /// within the [connect timeout](Self::connect_timeout), and at once with
    /// [`Error::InvalidClientConfig`] when one of `urls` is malformed.
    #[cfg(feature = "cluster")]
    #[cfg_attr(docsrs, doc(cfg(feature = "cluster")))]
    pub async fn cluster<S: AsRef<str>>(self, urls: &[S]) -> Result<Client> {
        let timeout = self.checked_connect_timeout()?;
        self.check_name()?;
        check_urls(urls)?;
        let connected = ClusterBackend::connect_with(urls, timeout).await;
        if let Ok(backend) = &connected {
            let replies = within(timeout, backend.on_every_master(&config_get())).await;
            let findings: Vec<EvictionRisk> = match replies {
                Ok(replies) => replies
                    .into_iter()
                    .map(|(node, reply)| assess(&node, Ok(reply)))
                    .collect(),
                Err(err) => vec![assess("the cluster's masters", Err(err))],
            };
            self.eviction.record(findings);
        }
        self.over(connected, || format!("cluster {}", redact_all(urls)))
    }

    /// Connects through the Sentinels at `urls` to the master they monitor as `service`
    /// and builds the client over a [`SentinelBackend`](crate::SentinelBackend), which
    /// follows failovers; fails with [`Error::Connect`] within the
    /// [connect timeout](Self::connect_timeout), which also bounds each later re-resolution,
    /// and at once with [`Error::InvalidClientConfig`] when one of `urls` is malformed.
    #[cfg(feature = "sentinel")]
    #[cfg_attr(docsrs, doc(cfg(feature = "sentinel")))]
    pub async fn sentinel<S: AsRef<str>>(self, urls: &[S], service: &str) -> Result<Client> {
        let timeout = self.checked_connect_timeout()?;
        self.check_name()?;
        check_urls(urls)?;
        let eviction = Arc::clone(&self.eviction);
        let connected = SentinelBackend::connect_watched(urls, service, timeout, eviction).await;
        self.over(connected, || {
            format!("master {service:?} through Sentinel {}", redact_all(urls))
        })
    }

    /// Refuses a client name that [`ClientBuilder::name`] does not accept.
    fn check_name(&self) -> Result<()> {
        match self.name.as_deref().and_then(owner::name_refusal) {
            Some(reason) => Err(Error::InvalidClientConfig { reason }),
            None => Ok(()),
        }
    }

    /// The connect timeout, refused when zero (every connect would time out at once).
    fn checked_connect_timeout(&self) -> Result<Duration> {
        match self.connect_timeout {
            None => Ok(DEFAULT_CONNECT_TIMEOUT),
            Some(timeout) if timeout.is_zero() => Err(Error::InvalidClientConfig {
                reason: "the connect timeout must be above zero".into(),
            }),
            Some(timeout) => Ok(timeout),
        }
    }

    /// Builds the client over a freshly connected backend, or reports why connecting to
    /// `target` (a description without passwords) failed: a setting redis-rs refused
    /// before dialling (a Unix socket URL for a cluster, say) as a configuration error,
    /// anything else as [`Error::Connect`]; with
    /// [`refuse_eviction`](Self::refuse_eviction), a server that may evict locks (as the
    /// connect recorded) as [`Error::EvictionPolicy`].
    fn over(
        mut self,
        connected: redis::RedisResult<impl Backend>,
        target: impl Fn() -> String,
    ) -> Result<Client> {
        let backend = connected.map_err(|source| {
            if matches!(source.kind(), redis::ErrorKind::InvalidClientConfig) {
                Error::InvalidClientConfig {
                    reason: format!("{}: {source}", target()),
                }
            } else {
                Error::Connect {
                    target: target(),
                    source,
                }
            }
        })?;
        if self.refuse_eviction {
            let policy = match self.eviction.current() {
                EvictionRisk::Safe { .. } => None,
                EvictionRisk::Unknown { reason } => Some(format!("unknown ({reason})")),
                risk => Some(risk.policy().to_owned()),
            };
            if let Some(policy) = policy {
                return Err(Error::EvictionPolicy {
                    target: target(),
                    policy,
                });
            }
        }
        self.backend = Some(Arc::new(backend));
        self.build()
    }
}
