//! Topology 2: N independent Redis masters that know nothing of each other, the substrate of
//! RedLock (quorum N/2+1). Each node can fail on its own; they share one network only so that
//! one handle cleans everything up.

use futures::future::try_join_all;

use crate::Node;
use crate::error::Result;
use crate::topology::builder::setters;
use crate::topology::node_options::NodeOptions;
use crate::topology::site::Site;

/// RedLock's classic deployment size.
pub const DEFAULT_MASTERS: usize = 5;

/// N standalone masters.
#[derive(Debug)]
pub struct IndependentMasters {
    nodes: Vec<Node>,
}

/// Options for [`IndependentMasters`]; defaults: [`DEFAULT_MASTERS`] nodes,
/// default [`NodeOptions`] (no persistence).
#[derive(Debug, Clone)]
pub struct IndependentMastersBuilder {
    count: usize,
    node_options: NodeOptions,
}

impl Default for IndependentMastersBuilder {
    fn default() -> Self {
        IndependentMastersBuilder {
            count: DEFAULT_MASTERS,
            node_options: NodeOptions::default(),
        }
    }
}

impl IndependentMastersBuilder {
    setters! {
        /// Number of masters.
        count: usize,
        /// Persistence and extra server arguments of every master.
        node_options: NodeOptions,
    }

    /// Starts all masters concurrently.
    pub async fn start(self) -> Result<IndependentMasters> {
        let site = Site::prepare("masters").await?;
        let launches = (0..self.count).map(|index| {
            let spec = self.node_options.data_node(format!("master{index}"), []);
            site.launch(spec)
        });
        let nodes = try_join_all(launches).await?;
        Ok(IndependentMasters { nodes })
    }
}

impl IndependentMasters {
    /// Options with documented defaults.
    pub fn builder() -> IndependentMastersBuilder {
        IndependentMastersBuilder::default()
    }

    /// `count` masters without persistence.
    pub async fn start(count: usize) -> Result<IndependentMasters> {
        Self::builder().count(count).start().await
    }

    /// The masters, in start order.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// `redis://ip:port` of every master.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(Node::url).collect()
    }
}
