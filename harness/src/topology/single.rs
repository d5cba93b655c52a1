//! Topology 1: one standalone Redis node, the default backend of the lock and the target of
//! the crash-restart scenarios (hence configurable persistence).

use crate::Node;
use crate::error::Result;
use crate::topology::builder::setters;
use crate::topology::node_options::NodeOptions;
use crate::topology::site::Site;

/// One Redis node on its own network.
#[derive(Debug)]
pub struct SingleNode {
    node: Node,
}

/// Options for [`SingleNode`]; default [`NodeOptions`] (no persistence, no
/// extra arguments).
#[derive(Debug, Clone, Default)]
pub struct SingleNodeBuilder {
    node_options: NodeOptions,
}

impl SingleNodeBuilder {
    setters! {
        /// Persistence and extra server arguments of the node.
        node_options: NodeOptions,
    }

    /// Starts the node and returns once it accepts connections.
    pub async fn start(self) -> Result<SingleNode> {
        let site = Site::prepare("single").await?;
        let node = site
            .launch(self.node_options.data_node("node".to_owned(), []))
            .await?;
        Ok(SingleNode { node })
    }
}

impl SingleNode {
    /// Options with documented defaults.
    pub fn builder() -> SingleNodeBuilder {
        SingleNodeBuilder::default()
    }

    /// A node without persistence.
    pub async fn start() -> Result<SingleNode> {
        Self::builder().start().await
    }

    /// The node, for connections and fault injection.
    pub fn node(&self) -> &Node {
        &self.node
    }

    /// `redis://ip:port`.
    pub fn url(&self) -> String {
        self.node.url()
    }
}
