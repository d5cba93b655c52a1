//! Topology 5: one master and one replica, no Sentinels — the smallest deployment with
//! replication, where `WAIT` and replicated script effects can be compared with the
//! simulator's (`tests/differential/pair.rs`).
//!
//! Invariant: start-up returns only once the replica is online (its full sync done), so the
//! first write is streamed to it and the first `WAIT` counts it.

use crate::Node;
use crate::error::Result;
use crate::topology::builder::setters;
use crate::topology::node::REDIS_PORT;
use crate::topology::node_options::NodeOptions;
use crate::topology::sentinel::wait_replicas_online;
use crate::topology::site::Site;

/// A master and its replica on their own network.
#[derive(Debug)]
pub struct ReplicaPair {
    master: Node,
    replica: Node,
}

/// Options for [`ReplicaPair`]; default [`NodeOptions`] (no persistence, no extra
/// arguments) for both nodes.
#[derive(Debug, Clone, Default)]
pub struct ReplicaPairBuilder {
    node_options: NodeOptions,
}

impl ReplicaPairBuilder {
    setters! {
        /// Persistence and extra server arguments of master and replica.
        node_options: NodeOptions,
    }

    /// Starts the master, then the replica, and waits until the replica is online.
    pub async fn start(self) -> Result<ReplicaPair> {
        let site = Site::prepare("pair").await?;
        let master = site
            .launch(self.node_options.data_node("master".to_owned(), []))
            .await?;
        let replica_args = [
            "--replicaof".to_owned(),
            master.ip().to_string(),
            REDIS_PORT.to_string(),
        ];
        let replica = site
            .launch(
                self.node_options
                    .data_node("replica".to_owned(), replica_args),
            )
            .await?;
        wait_replicas_online(&master, 1).await?;
        Ok(ReplicaPair { master, replica })
    }
}

impl ReplicaPair {
    /// Options with documented defaults.
    pub fn builder() -> ReplicaPairBuilder {
        ReplicaPairBuilder::default()
    }

    /// A master and a replica without persistence.
    pub async fn start() -> Result<ReplicaPair> {
        Self::builder().start().await
    }

    /// The master.
    pub fn master(&self) -> &Node {
        &self.master
    }

    /// The replica.
    pub fn replica(&self) -> &Node {
        &self.replica
    }
}
