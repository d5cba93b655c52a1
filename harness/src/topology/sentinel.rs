//! Topology 3: one master, its replicas and three Sentinels watching it. Start-up returns only
//! once the replicas are in sync and every Sentinel knows the replicas and the other
//! Sentinels, so a failover can be triggered immediately and will be agreed on.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use futures::future::try_join_all;

use crate::Node;
use crate::error::{Error, Result};
use crate::topology::builder::setters;
use crate::topology::node::{NodeSpec, REDIS_PORT, SENTINEL_PORT, SENTINEL_READY_LOG};
use crate::topology::node_options::NodeOptions;
use crate::topology::site::Site;
use crate::topology::wait;

/// Name under which the Sentinels monitor the master.
pub const MASTER_NAME: &str = "mymaster";
/// Number of Sentinels: the smallest group that survives losing one.
pub const SENTINELS: usize = 3;
/// Sentinels that must agree the master is down: a majority of [`SENTINELS`].
pub const QUORUM: usize = 2;
/// One replica is enough to fail over to.
pub const DEFAULT_REPLICAS: usize = 1;
/// Sentinel's default is 30 s; 1 s keeps failover tests short while staying far above the
/// sub-millisecond PING latency of the local bridge.
pub const DEFAULT_DOWN_AFTER: Duration = Duration::from_millis(1000);
/// Sentinel's default is 3 min; it also spaces retries after a split vote (2x), so keep it short.
pub const DEFAULT_FAILOVER_TIMEOUT: Duration = Duration::from_millis(3000);
/// Bound for replicas to sync and Sentinels to discover each other (hello messages every 2 s).
const CONVERGE_TIMEOUT: Duration = Duration::from_secs(30);
/// Where the Sentinel config lives in its container; Sentinel rewrites it, so it is a plain
/// file in the container's writable layer.
const SENTINEL_CONF: &str = "/data/sentinel.conf";

/// A master, its replicas and [`SENTINELS`] Sentinels.
#[derive(Debug)]
pub struct SentinelTopology {
    master: Node,
    replicas: Vec<Node>,
    sentinels: Vec<Node>,
}

/// Options for [`SentinelTopology`]; defaults: [`DEFAULT_REPLICAS`], [`DEFAULT_DOWN_AFTER`],
/// [`DEFAULT_FAILOVER_TIMEOUT`], default [`NodeOptions`] (no persistence).
#[derive(Debug, Clone)]
pub struct SentinelTopologyBuilder {
    replicas: usize,
    down_after: Duration,
    failover_timeout: Duration,
    node_options: NodeOptions,
}

impl Default for SentinelTopologyBuilder {
    fn default() -> Self {
        SentinelTopologyBuilder {
            replicas: DEFAULT_REPLICAS,
            down_after: DEFAULT_DOWN_AFTER,
            failover_timeout: DEFAULT_FAILOVER_TIMEOUT,
            node_options: NodeOptions::default(),
        }
    }
}

impl SentinelTopologyBuilder {
    setters! {
        /// Number of replicas of the master.
        replicas: usize,
        /// `down-after-milliseconds`: how long the master must be silent to be considered down.
        down_after: Duration,
        /// `failover-timeout`.
        failover_timeout: Duration,
        /// Persistence and extra server arguments of master and replicas (not the Sentinels).
        node_options: NodeOptions,
    }

    /// Starts master, then replicas, then Sentinels, waiting for each stage to converge.
    pub async fn start(self) -> Result<SentinelTopology> {
        let site = Site::prepare("sentinel").await?;
        let spec = self.node_options.data_node("master".to_owned(), []);
        let master = site.launch(spec).await?;

        let replica_args = [
            "--replicaof".to_owned(),
            master.ip().to_string(),
            REDIS_PORT.to_string(),
        ];
        let replicas = try_join_all((0..self.replicas).map(|index| {
            let spec = self
                .node_options
                .data_node(format!("replica{index}"), replica_args.clone());
            site.launch(spec)
        }))
        .await?;
        // Sentinel learns replicas from the master's INFO, polled every 10 s once it is
        // connected; starting Sentinels after the replicas are attached avoids that wait.
        wait_replicas_online(&master, self.replicas).await?;

        let sentinels = self.launch_sentinels(&site, master.ip()).await?;
        let topology = SentinelTopology {
            master,
            replicas,
            sentinels,
        };
        topology.wait_sentinels_converged(self.replicas).await?;
        Ok(topology)
    }

    async fn launch_sentinels(&self, site: &Site, master: IpAddr) -> Result<Vec<Node>> {
        let config = format!(
            "port {SENTINEL_PORT}\n\
             bind 0.0.0.0\n\
             protected-mode no\n\
             sentinel monitor {MASTER_NAME} {master} {REDIS_PORT} {QUORUM}\n\
             sentinel down-after-milliseconds {MASTER_NAME} {}\n\
             sentinel failover-timeout {MASTER_NAME} {}\n\
             sentinel parallel-syncs {MASTER_NAME} 1\n",
            self.down_after.as_millis(),
            self.failover_timeout.as_millis(),
        );
        try_join_all((0..SENTINELS).map(|index| {
            let spec = NodeSpec {
                role: format!("sentinel{index}"),
                args: vec![SENTINEL_CONF.to_owned(), "--sentinel".to_owned()],
                port: SENTINEL_PORT,
                ready_log: SENTINEL_READY_LOG,
                files: vec![(SENTINEL_CONF.to_owned(), config.clone().into_bytes())],
                clock_control: false,
            };
            site.launch(spec)
        }))
        .await
    }
}

/// Waits until `master` reports `replicas` replicas online (their full sync done).
pub(crate) async fn wait_replicas_online(master: &Node, replicas: usize) -> Result<()> {
    wait::until(
        "replicas to sync with the master",
        CONVERGE_TIMEOUT,
        || async {
            let info: String = master.query(redis::cmd("INFO").arg("replication")).await?;
            let online = info
                .lines()
                .filter(|line| line.starts_with("slave") && line.contains("state=online"))
                .count();
            Ok((online >= replicas).then_some(()))
        },
    )
    .await
}

impl SentinelTopology {
    /// Options with documented defaults.
    pub fn builder() -> SentinelTopologyBuilder {
        SentinelTopologyBuilder::default()
    }

    /// Master, [`DEFAULT_REPLICAS`] replica(s), three Sentinels.
    pub async fn start() -> Result<SentinelTopology> {
        Self::builder().start().await
    }

    /// Name of the monitored master ([`MASTER_NAME`]).
    pub fn master_name(&self) -> &str {
        MASTER_NAME
    }

    /// The node that was master at start (after a failover, ask [`Self::master_addr`]).
    pub fn master(&self) -> &Node {
        &self.master
    }

    /// The nodes that were replicas at start.
    pub fn replicas(&self) -> &[Node] {
        &self.replicas
    }

    /// The Sentinels.
    pub fn sentinels(&self) -> &[Node] {
        &self.sentinels
    }

    /// Master and replicas.
    pub fn data_nodes(&self) -> impl Iterator<Item = &Node> {
        std::iter::once(&self.master).chain(&self.replicas)
    }

    /// The data node at `addr`, e.g. the one a Sentinel names as master.
    pub fn node_at(&self, addr: SocketAddr) -> Option<&Node> {
        self.data_nodes().find(|node| node.addr() == addr)
    }

    /// `redis://ip:26379` of every Sentinel.
    pub fn sentinel_urls(&self) -> Vec<String> {
        self.sentinels.iter().map(Node::url).collect()
    }

    /// A redis-rs Sentinel client over all Sentinels.
    pub fn sentinel_client(&self) -> Result<redis::sentinel::Sentinel> {
        redis::sentinel::Sentinel::build(self.sentinel_urls())
            .map_err(|err| Error::redis(self.sentinel_urls().join(","), err))
    }

    /// The master address according to the first Sentinel that answers.
    pub async fn master_addr(&self) -> Result<SocketAddr> {
        let mut last_error = None;
        for sentinel in &self.sentinels {
            match master_addr_from(sentinel).await {
                Ok(addr) => return Ok(addr),
                Err(err) => last_error = Some(err),
            }
        }
        Err(last_error.unwrap_or_else(|| Error::Timeout {
            what: "any Sentinel to name the master".to_owned(),
            after: Duration::ZERO,
        }))
    }

    /// Waits until every reachable Sentinel names a master other than `old`, and that node
    /// reports itself master; returns its address.
    pub async fn wait_for_new_master(
        &self,
        old: SocketAddr,
        limit: Duration,
    ) -> Result<SocketAddr> {
        wait::until(
            &format!("Sentinels to replace master {old}"),
            limit,
            || async {
                let mut named = Vec::new();
                for sentinel in &self.sentinels {
                    if let Ok(addr) = master_addr_from(sentinel).await {
                        named.push(addr);
                    }
                }
                let Some(&candidate) = named.first() else {
                    return Ok(None);
                };
                if candidate == old || named.iter().any(|addr| *addr != candidate) {
                    return Ok(None);
                }
                let Some(node) = self.node_at(candidate) else {
                    return Ok(None);
                };
                let role: Vec<redis::Value> = node.query(&redis::cmd("ROLE")).await?;
                let is_master =
                    matches!(role.first(), Some(redis::Value::BulkString(r)) if r == b"master");
                Ok(is_master.then_some(candidate))
            },
        )
        .await
    }

    async fn wait_sentinels_converged(&self, replicas: usize) -> Result<()> {
        let others = (SENTINELS - 1).to_string();
        let replicas = replicas.to_string();
        for sentinel in &self.sentinels {
            wait::until(
                &format!(
                    "{} to see {others} Sentinels and {replicas} replicas",
                    sentinel.name()
                ),
                CONVERGE_TIMEOUT,
                || async {
                    let fields: Vec<String> = sentinel
                        .query(redis::cmd("SENTINEL").arg("MASTER").arg(MASTER_NAME))
                        .await?;
                    let field = |key: &str| {
                        fields
                            .chunks(2)
                            .find(|pair| pair[0] == key)
                            .and_then(|pair| pair.get(1).cloned())
                    };
                    let ready = field("num-other-sentinels").as_deref() == Some(others.as_str())
                        && field("num-slaves").as_deref() == Some(replicas.as_str());
                    Ok(ready.then_some(()))
                },
            )
            .await?;
        }
        Ok(())
    }
}

async fn master_addr_from(sentinel: &Node) -> Result<SocketAddr> {
    let reply: Vec<String> = sentinel
        .query(
            redis::cmd("SENTINEL")
                .arg("GET-MASTER-ADDR-BY-NAME")
                .arg(MASTER_NAME),
        )
        .await?;
    let parsed = match reply.as_slice() {
        [ip, port] => format!("{ip}:{port}").parse::<SocketAddr>().ok(),
        _ => None,
    };
    parsed.ok_or_else(|| Error::UnexpectedReply {
        addr: sentinel.url(),
        reply: format!("SENTINEL GET-MASTER-ADDR-BY-NAME -> {reply:?}"),
    })
}
