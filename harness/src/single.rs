//! Topology 1: one standalone Redis node, the default backend of the lock and the target of
//! the crash-restart scenarios (hence configurable persistence).

use std::sync::Arc;

use crate::Node;
use crate::error::Result;
use crate::image::redis_image;
use crate::network::Network;
use crate::node::{NodeSpec, REDIS_PORT, REDIS_READY_LOG, base_redis_args};
use crate::persistence::Persistence;

/// One Redis node on its own network.
#[derive(Debug)]
pub struct SingleNode {
    node: Node,
}

/// Options for [`SingleNode`]; defaults: no persistence, no extra arguments.
#[derive(Debug, Clone, Default)]
pub struct SingleNodeBuilder {
    persistence: Persistence,
    extra_args: Vec<String>,
}

impl SingleNodeBuilder {
    /// How the node persists writes across [`Node::kill`] / [`Node::start`].
    pub fn persistence(mut self, persistence: Persistence) -> Self {
        self.persistence = persistence;
        self
    }

    /// Appends raw redis-server arguments (e.g. `["--maxmemory", "10mb"]`).
    pub fn server_args(mut self, args: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.extra_args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Starts the node and returns once it accepts connections.
    pub async fn start(self) -> Result<SingleNode> {
        let image = redis_image().await?;
        let network = Arc::new(Network::create("single").await?);
        let mut args = base_redis_args();
        args.extend(self.persistence.server_args());
        args.extend(self.extra_args);
        let spec = NodeSpec {
            role: "node".to_owned(),
            args,
            port: REDIS_PORT,
            ready_log: REDIS_READY_LOG,
            files: Vec::new(),
        };
        let node = Node::launch(&network, &image, spec).await?;
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
