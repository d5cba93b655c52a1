//! Which Redis deployment to talk to (`--url`, `--sentinel`/`--service`, `--cluster`), and
//! plain connections to the right master in each.
//!
//! Every command ends up on one master: the one node, the master Sentinel names, or, on a
//! Cluster, the master serving the lock's slot (all of a lock's keys share one hash tag, so
//! one slot). Connecting straight to that node, instead of through a cluster client, keeps
//! `TIME` and a lock's reads on the same server in one `MULTI`, and lets `list` SCAN each
//! master with its own cursor. Every connection has a timeout, so a dead address fails
//! with its URL instead of hanging.

use std::time::Duration;

use clap::Args;
use leasehold::inspect::LockState;
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, ConnectionAddr, RedisError, Value};

use crate::error::{CliError, CliResult};

/// Default single-node URL: a local redis-server on its standard port.
const DEFAULT_URL: &str = "redis://127.0.0.1:6379";

/// Environment variable read for the single-node URL when `--url` is not given: a URL with a
/// password then stays out of shell history and `ps`.
const URL_ENV: &str = "LEASEHOLD_URL";

/// Bound on opening a connection: far above a healthy connect on a LAN, short enough that
/// an operator is not left staring at a hung terminal.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Bound on one reply: every command here is O(keys of one lock) or one SCAN page.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the locks live. Without any of these flags: `--url $LEASEHOLD_URL`, or
/// `--url redis://127.0.0.1:6379` when that is unset.
#[derive(Debug, Args)]
pub struct TargetArgs {
    /// A single Redis node (default: $LEASEHOLD_URL, else redis://127.0.0.1:6379).
    #[arg(long, global = true, value_name = "URL", conflicts_with_all = ["sentinel", "cluster"])]
    url: Option<String>,
    /// Sentinels to ask for the master of `--service` (comma-separated or repeated).
    #[arg(
        long,
        global = true,
        value_name = "URL",
        value_delimiter = ',',
        requires = "service",
        conflicts_with = "cluster"
    )]
    sentinel: Vec<String>,
    /// The master name the Sentinels monitor (with `--sentinel`).
    #[arg(long, global = true, value_name = "NAME", requires = "sentinel")]
    service: Option<String>,
    /// Seed nodes of a Redis Cluster (comma-separated or repeated).
    #[arg(long, global = true, value_name = "URL", value_delimiter = ',')]
    cluster: Vec<String>,
}

/// One master, connected.
pub struct Server {
    /// The node's address (`redis://host:port`, no credentials), for messages.
    pub url: String,
    /// Its host, to complete masters that `CLUSTER SLOTS` announces without an address.
    host: String,
    pub connection: MultiplexedConnection,
}

impl Server {
    /// Runs `cmd`, naming this server and `action` if it fails.
    pub async fn query<T: redis::FromRedisValue>(
        &mut self,
        cmd: &redis::Cmd,
        action: &'static str,
    ) -> CliResult<T> {
        cmd.query_async(&mut self.connection)
            .await
            .map_err(|source| self.failed(action, source))
    }

    /// Reads every family's state of lock `name` in one transaction (the library's
    /// [`leasehold::inspect::read`]).
    pub async fn state(&mut self, name: &str) -> CliResult<LockState> {
        let state = leasehold::inspect::read(&mut self.connection, name).await;
        state.map_err(|source| self.read_failed(source))
    }

    /// Reads as [`Server::state`] but in a plain pipeline, for use between `WATCH` and
    /// `MULTI` ([`leasehold::inspect::read_watched`]).
    pub async fn state_watched(&mut self, name: &str) -> CliResult<LockState> {
        let state = leasehold::inspect::read_watched(&mut self.connection, name).await;
        state.map_err(|source| self.read_failed(source))
    }

    fn read_failed(&self, source: leasehold::Error) -> CliError {
        CliError::Read {
            server: self.url.clone(),
            source,
        }
    }

    /// Wraps a Redis error with this server's URL.
    pub fn failed(&self, action: &'static str, source: RedisError) -> CliError {
        CliError::Redis {
            server: self.url.clone(),
            action,
            source,
        }
    }
}

impl TargetArgs {
    /// The master holding the keys of the lock whose mutex key is `key`.
    pub async fn server_for(&self, key: &str) -> CliResult<Server> {
        if !self.cluster.is_empty() {
            let (mut seed, masters) = cluster_masters(&self.cluster).await?;
            let slot: u16 = seed
                .query(
                    redis::cmd("CLUSTER").arg("KEYSLOT").arg(key),
                    "CLUSTER KEYSLOT",
                )
                .await?;
            let url = masters
                .into_iter()
                .find(|m| m.first <= slot && slot <= m.last)
                .map(|m| m.url)
                .ok_or_else(|| CliError::Topology(format!("no master serves slot {slot}")))?;
            return connect(&url).await;
        }
        self.single().await
    }

    /// Every master: one for a node or Sentinel, each master of a Cluster.
    pub async fn masters(&self) -> CliResult<Vec<Server>> {
        if self.cluster.is_empty() {
            return Ok(vec![self.single().await?]);
        }
        let (_, masters) = cluster_masters(&self.cluster).await?;
        let mut urls: Vec<String> = masters.into_iter().map(|m| m.url).collect();
        urls.sort();
        urls.dedup();
        let mut servers = Vec::with_capacity(urls.len());
        for url in urls {
            servers.push(connect(&url).await?);
        }
        Ok(servers)
    }

    /// The node of `--url`, or the master the Sentinels name.
    async fn single(&self) -> CliResult<Server> {
        if self.sentinel.is_empty() {
            let from_env = || {
                std::env::var(URL_ENV)
                    .ok()
                    .filter(|url| !url.trim().is_empty())
            };
            let url = self.url.clone().or_else(from_env);
            return connect(url.as_deref().unwrap_or(DEFAULT_URL)).await;
        }
        let service = self.service.as_deref().unwrap_or_default();
        let sentinels = self.sentinel.join(", ");
        let mut sentinel = redis::sentinel::Sentinel::build(self.sentinel.clone())
            .map_err(|err| CliError::InvalidArgument(format!("--sentinel {sentinels}: {err}")))?;
        let client =
            tokio::time::timeout(CONNECT_TIMEOUT, sentinel.async_master_for(service, None))
                .await
                .map_err(|_| connect_timeout(&sentinels))?
                .map_err(|source| CliError::Connect {
                    url: format!("the master {service:?} through Sentinel {sentinels}"),
                    source,
                })?;
        open(client, None).await
    }
}

/// Connects to one node given by URL.
pub async fn connect(url: &str) -> CliResult<Server> {
    let client = Client::open(url)
        .map_err(|err| CliError::InvalidArgument(format!("invalid Redis URL {url:?}: {err}")))?;
    open(client, Some(url)).await
}

/// Connects `client`; a failure names `given` (the URL as the user typed it) if any.
async fn open(client: Client, given: Option<&str>) -> CliResult<Server> {
    let (url, host) = match client.get_connection_info().addr() {
        ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
            (format!("redis://{host}:{port}"), host.clone())
        }
        other => (other.to_string(), String::new()),
    };
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(CONNECT_TIMEOUT))
        .set_response_timeout(Some(RESPONSE_TIMEOUT));
    let connection = client
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .map_err(|source| CliError::Connect {
            // A URL with credentials is named by its address only.
            url: given
                .filter(|given| !given.contains('@'))
                .map_or_else(|| url.clone(), str::to_owned),
            source,
        })?;
    Ok(Server {
        url,
        host,
        connection,
    })
}

fn connect_timeout(url: &str) -> CliError {
    CliError::Connect {
        url: url.to_owned(),
        source: RedisError::from(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("no answer within {CONNECT_TIMEOUT:?}"),
        )),
    }
}

/// A master and the slot range it serves.
struct SlotRange {
    first: u16,
    last: u16,
    url: String,
}

/// The first reachable seed and the masters it reports in `CLUSTER SLOTS`.
async fn cluster_masters(seeds: &[String]) -> CliResult<(Server, Vec<SlotRange>)> {
    let mut last_error = None;
    for seed in seeds {
        match connect(seed).await {
            Ok(mut server) => {
                let slots: Vec<Value> = server
                    .query(redis::cmd("CLUSTER").arg("SLOTS"), "CLUSTER SLOTS")
                    .await?;
                let ranges = slots
                    .into_iter()
                    .map(|entry| slot_range(entry, &server.host))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| {
                        CliError::Topology(format!("{seed}: unexpected CLUSTER SLOTS reply"))
                    })?;
                return Ok((server, ranges));
            }
            Err(err @ CliError::InvalidArgument(_)) => return Err(err),
            Err(err) => last_error = Some(err),
        }
    }
    Err(last_error
        .unwrap_or_else(|| CliError::InvalidArgument("--cluster needs at least one URL".into())))
}

/// One `CLUSTER SLOTS` entry: `[first, last, [ip, port, id, ...], replicas...]`. An empty
/// ip means "the node you asked" (Redis' documented convention).
fn slot_range(entry: Value, asked: &str) -> Option<SlotRange> {
    let Value::Array(items) = entry else {
        return None;
    };
    let mut items = items.into_iter();
    let first = as_int(items.next()?)?;
    let last = as_int(items.next()?)?;
    let Value::Array(master) = items.next()? else {
        return None;
    };
    let mut master = master.into_iter();
    let ip: String = redis::from_redis_value(master.next()?).ok()?;
    let port = as_int(master.next()?)?;
    let host = if ip.is_empty() || ip == "?" {
        asked.to_owned()
    } else {
        ip
    };
    Some(SlotRange {
        first: u16::try_from(first).ok()?,
        last: u16::try_from(last).ok()?,
        url: format!("redis://{host}:{port}"),
    })
}

fn as_int(value: Value) -> Option<i64> {
    redis::from_redis_value(value).ok()
}
