//! Where a topology's nodes run: the Redis image and the topology's own Docker network,
//! prepared together before the first node, so every builder launches nodes one way.
//!
//! Dropping the site drops only its handle on the network; each [`Node`] keeps the network
//! alive until the last node is gone.

use std::sync::Arc;

use crate::error::Result;
use crate::topology::image::{RedisImage, redis_image};
use crate::topology::network::Network;
use crate::topology::node::{Node, NodeSpec};

/// A topology's image and network.
#[derive(Debug)]
pub(crate) struct Site {
    image: RedisImage,
    network: Arc<Network>,
}

impl Site {
    /// Resolves the image (building it if needed), then creates a network named after
    /// `prefix`.
    pub(crate) async fn prepare(prefix: &str) -> Result<Self> {
        let image = redis_image().await?;
        let network = Arc::new(Network::create(prefix).await?);
        Ok(Self { image, network })
    }

    /// Starts a node on this site and waits for its readiness log line.
    pub(crate) async fn launch(&self, spec: NodeSpec) -> Result<Node> {
        Node::launch(&self.network, &self.image, spec).await
    }
}
