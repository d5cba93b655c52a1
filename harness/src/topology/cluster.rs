//! Topology 4: a Redis Cluster (default 3 masters x 1 replica) formed from Rust the way
//! redis-cli does it — distinct config epochs, MEET, ADDSLOTS, REPLICATE — and returned only
//! when every node reports `cluster_state:ok`, knows every other node and replicas are in sync.

use std::time::Duration;

use futures::future::try_join_all;

use crate::Node;
use crate::error::{Error, Result};
use crate::topology::builder::setters;
use crate::topology::node::{CONNECT_TIMEOUT, RESPONSE_TIMEOUT};
use crate::topology::node_options::NodeOptions;
use crate::topology::site::Site;
use crate::topology::wait;

/// Hash slots of every Redis Cluster.
pub const SLOTS: u16 = 16384;
/// Smallest cluster that keeps a majority of masters when one fails.
pub const DEFAULT_MASTERS: usize = 3;
/// One replica per master lets every shard fail over.
pub const DEFAULT_REPLICAS_PER_MASTER: usize = 1;
/// Redis' default is 15 s; 5 s makes failover tests bearable while a loaded 2-core CI box
/// still does not mistake a slow node for a dead one.
pub const DEFAULT_NODE_TIMEOUT: Duration = Duration::from_millis(5000);
/// Bound for gossip to converge after MEET/REPLICATE (normally 1–3 s).
const CONVERGE_TIMEOUT: Duration = Duration::from_secs(60);

/// A Redis Cluster: `masters` masters, each with `replicas_per_master` replicas.
#[derive(Debug)]
pub struct ClusterTopology {
    nodes: Vec<Node>,
    masters: usize,
}

/// Options for [`ClusterTopology`]; defaults: [`DEFAULT_MASTERS`],
/// [`DEFAULT_REPLICAS_PER_MASTER`], [`DEFAULT_NODE_TIMEOUT`], default [`NodeOptions`] (no
/// persistence).
#[derive(Debug, Clone)]
pub struct ClusterTopologyBuilder {
    masters: usize,
    replicas_per_master: usize,
    node_timeout: Duration,
    node_options: NodeOptions,
}

impl Default for ClusterTopologyBuilder {
    fn default() -> Self {
        ClusterTopologyBuilder {
            masters: DEFAULT_MASTERS,
            replicas_per_master: DEFAULT_REPLICAS_PER_MASTER,
            node_timeout: DEFAULT_NODE_TIMEOUT,
            node_options: NodeOptions::default(),
        }
    }
}

impl ClusterTopologyBuilder {
    /// Number of masters (shards); at least 1.
    pub fn masters(mut self, masters: usize) -> Self {
        self.masters = masters.max(1);
        self
    }

    setters! {
        /// Replicas of each master.
        replicas_per_master: usize,
        /// `cluster-node-timeout`: how long a node may be unreachable before it is failed over.
        node_timeout: Duration,
        /// Persistence and extra server arguments of every node.
        node_options: NodeOptions,
    }

    /// Starts all nodes concurrently, then forms and checks the cluster.
    pub async fn start(self) -> Result<ClusterTopology> {
        let site = Site::prepare("cluster").await?;
        let total = self.masters * (1 + self.replicas_per_master);
        let cluster_args = [
            "--cluster-enabled".to_owned(),
            "yes".to_owned(),
            "--cluster-config-file".to_owned(),
            "nodes.conf".to_owned(),
            "--cluster-node-timeout".to_owned(),
            self.node_timeout.as_millis().to_string(),
        ];
        let nodes = try_join_all((0..total).map(|index| {
            let spec = self
                .node_options
                .data_node(format!("node{index}"), cluster_args.clone());
            site.launch(spec)
        }))
        .await?;
        let topology = ClusterTopology {
            nodes,
            masters: self.masters,
        };
        topology.form(self.replicas_per_master).await?;
        Ok(topology)
    }
}

impl ClusterTopology {
    /// Options with documented defaults.
    pub fn builder() -> ClusterTopologyBuilder {
        ClusterTopologyBuilder::default()
    }

    /// 3 masters with 1 replica each.
    pub async fn start() -> Result<ClusterTopology> {
        Self::builder().start().await
    }

    /// Every node: the initial masters first, then the replicas grouped by master.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// The nodes that were masters at start; master `i` owns the `i`-th equal slot range.
    pub fn masters(&self) -> &[Node] {
        &self.nodes[..self.masters]
    }

    /// The nodes that were replicas at start.
    pub fn replicas(&self) -> &[Node] {
        &self.nodes[self.masters..]
    }

    /// `redis://ip:port` of every node (seed list for cluster clients).
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(Node::url).collect()
    }

    /// A redis-rs cluster client seeded with every node, with the harness timeouts.
    pub fn client(&self) -> Result<redis::cluster::ClusterClient> {
        redis::cluster::ClusterClient::builder(self.urls())
            .connection_timeout(CONNECT_TIMEOUT)
            .response_timeout(RESPONSE_TIMEOUT)
            .build()
            .map_err(|err| Error::redis(self.urls().join(","), err))
    }

    /// The slot range `[first, last]` initially assigned to master `index`.
    pub fn slot_range(&self, index: usize) -> (u16, u16) {
        slot_range(index, self.masters)
    }

    async fn form(&self, replicas_per_master: usize) -> Result<()> {
        // Distinct epochs up front spare the cluster its epoch-collision resolution round.
        for (index, node) in self.nodes.iter().enumerate() {
            let _: () = node
                .query(redis::cmd("CLUSTER").arg("SET-CONFIG-EPOCH").arg(index + 1))
                .await?;
        }
        let Some((first, others)) = self.nodes.split_first() else {
            return Ok(());
        };
        for node in others {
            let _: () = first
                .query(
                    redis::cmd("CLUSTER")
                        .arg("MEET")
                        .arg(node.ip().to_string())
                        .arg(node.port()),
                )
                .await?;
        }
        for (index, master) in self.masters().iter().enumerate() {
            let (low, high) = self.slot_range(index);
            let _: () = master
                .query(
                    redis::cmd("CLUSTER")
                        .arg("ADDSLOTS")
                        .arg((low..=high).collect::<Vec<_>>()),
                )
                .await?;
        }
        for (index, master) in self.masters().iter().enumerate() {
            let id: String = master.query(redis::cmd("CLUSTER").arg("MYID")).await?;
            let replicas = self
                .replicas()
                .iter()
                .skip(index * replicas_per_master)
                .take(replicas_per_master);
            for replica in replicas {
                // REPLICATE fails with "Unknown node" until gossip has introduced the master.
                wait::until(
                    &format!("{} to learn of master {id}", replica.name()),
                    CONVERGE_TIMEOUT,
                    || async {
                        let _: () = replica
                            .query(redis::cmd("CLUSTER").arg("REPLICATE").arg(&id))
                            .await?;
                        Ok(Some(()))
                    },
                )
                .await?;
            }
        }
        self.wait_healthy(CONVERGE_TIMEOUT).await
    }

    /// Waits until every node reports `cluster_state:ok`, all slots assigned, every node known,
    /// and every replica's link to its master up.
    pub async fn wait_healthy(&self, limit: Duration) -> Result<()> {
        let known = format!("cluster_known_nodes:{}", self.nodes.len());
        let assigned = format!("cluster_slots_assigned:{SLOTS}");
        for node in &self.nodes {
            wait::until(
                &format!("{} to report a healthy cluster", node.name()),
                limit,
                || async {
                    let info: String = node.query(redis::cmd("CLUSTER").arg("INFO")).await?;
                    let has = |line: &str| info.lines().any(|l| l.trim() == line);
                    if !(has("cluster_state:ok") && has(&known) && has(&assigned)) {
                        return Ok(None);
                    }
                    let replication: String =
                        node.query(redis::cmd("INFO").arg("replication")).await?;
                    let linked = !replication.contains("role:slave")
                        || replication.contains("master_link_status:up");
                    Ok(linked.then_some(()))
                },
            )
            .await?;
        }
        Ok(())
    }
}

/// Equal split of [`SLOTS`] over `masters`, the remainder going to the last ranges' starts.
fn slot_range(index: usize, masters: usize) -> (u16, u16) {
    let slots = usize::from(SLOTS);
    let low = index * slots / masters;
    let high = (index + 1) * slots / masters - 1;
    // Both bounds are < SLOTS = 16384, so they fit a u16.
    (low as u16, high as u16)
}

#[cfg(test)]
mod tests {
    use super::slot_range;

    #[test]
    fn slot_ranges_cover_all_slots_without_overlap() {
        assert_eq!(slot_range(0, 3), (0, 5460));
        assert_eq!(slot_range(1, 3), (5461, 10921));
        assert_eq!(slot_range(2, 3), (10922, 16383));
        assert_eq!(slot_range(0, 1), (0, 16383));
    }
}
