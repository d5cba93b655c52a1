//! The containers of one safety scenario: the topology its strategy needs (one node, the
//! RedLock masters, or a Sentinel group), the data nodes its faults apply to, and where the
//! workers connect.
//!
//! A RedLock cell runs on [`REDLOCK_MASTERS`] independent masters with the scenario's
//! persistence; every other strategy runs on the scenario's own topology.

use std::time::Duration;

use leasehold_sim::workload::Strategy;

use crate::error::{Error, Result};
use crate::safety::behaviour::RedisTarget;
use crate::safety::link::Link;
use crate::safety::scenario::{REDLOCK_MASTERS, Topology};
use crate::topology::masters::IndependentMasters;
use crate::topology::node::Node;
use crate::topology::node_options::NodeOptions;
use crate::topology::sentinel::SentinelTopology;
use crate::topology::single::SingleNode;

/// The containers of one scenario.
pub(super) enum Infra {
    Single(SingleNode),
    Masters(IndependentMasters),
    Sentinel(SentinelTopology),
}

impl Infra {
    /// Starts what `topology` needs for `strategy`.
    pub(super) async fn start(topology: Topology, strategy: Strategy) -> Result<Self> {
        let options = match topology {
            Topology::Single(p) => NodeOptions::default().persistence(p),
            Topology::Sentinel => NodeOptions::default(),
            Topology::ClockedSingle | Topology::ClockedSentinel => {
                NodeOptions::default().clock_control(true)
            }
        };
        Ok(match (topology, strategy) {
            (Topology::Single(_) | Topology::ClockedSingle, Strategy::RedLock) => Infra::Masters(
                IndependentMasters::builder()
                    .count(REDLOCK_MASTERS)
                    .node_options(options)
                    .start()
                    .await?,
            ),
            (Topology::Single(_) | Topology::ClockedSingle, _) => {
                Infra::Single(SingleNode::builder().node_options(options).start().await?)
            }
            (Topology::Sentinel | Topology::ClockedSentinel, _) => Infra::Sentinel(
                SentinelTopology::builder()
                    .node_options(options)
                    .start()
                    .await?,
            ),
        })
    }

    pub(super) fn is_masters(&self) -> bool {
        matches!(self, Infra::Masters(_))
    }

    /// The data nodes faults apply to.
    pub(super) fn nodes(&self) -> Vec<&Node> {
        match self {
            Infra::Single(s) => vec![s.node()],
            Infra::Masters(m) => m.nodes().iter().collect(),
            Infra::Sentinel(s) => s.data_nodes().collect(),
        }
    }

    /// The node holding the lock key: the single node, the first RedLock master, or whichever
    /// node the Sentinels name now.
    pub(super) async fn master(&self) -> Result<&Node> {
        match self {
            Infra::Single(s) => Ok(s.node()),
            Infra::Masters(m) => m.nodes().first().ok_or_else(|| Error::Timeout {
                what: "a RedLock master".to_owned(),
                after: Duration::ZERO,
            }),
            Infra::Sentinel(s) => {
                let addr = s.master_addr().await?;
                s.node_at(addr).ok_or_else(|| Error::UnexpectedReply {
                    addr: addr.to_string(),
                    reply: "Sentinel names a master that is not a topology node".to_owned(),
                })
            }
        }
    }

    /// Where a worker connects: through its own `link` if it has one, else to the topology.
    pub(super) fn target(&self, link: Option<&Link>) -> RedisTarget {
        match (self, link) {
            (_, Some(link)) => RedisTarget::Single(link.url()),
            (Infra::Single(s), None) => RedisTarget::Single(s.url()),
            (Infra::Masters(m), None) => RedisTarget::Masters(m.urls()),
            (Infra::Sentinel(s), None) => {
                RedisTarget::Sentinel(s.sentinel_urls(), s.master_name().to_owned())
            }
        }
    }

    /// Starts every data node that does not answer PING, e.g. the master a failover killed
    /// (it rejoins as a replica), and sets every movable clock back to real time (no offset,
    /// no drift), so the next cell finds the topology whole.
    pub(super) async fn restart_stopped_nodes(&self) -> Result<()> {
        for node in self.nodes() {
            if node.query::<String>(&redis::cmd("PING")).await.is_err() {
                node.start().await?;
            }
            if node.clock_offset() != 0 || node.clock_drift_ppm() != 0 {
                node.reset_clock()?;
            }
        }
        Ok(())
    }
}
