//! Real Redis topologies in containers, for Leasehold's tests, benchmarks and safety checks.
//!
//! Each topology runs on its own Docker network and is torn down when its handle drops:
//! [`SingleNode`], [`IndependentMasters`] (RedLock), [`ReplicaPair`] (one master, one
//! replica), [`SentinelTopology`] and [`ClusterTopology`]. Every server is a [`Node`] with a
//! stable `redis://ip:port` URL and fault injection (pause, kill/restart, network cut);
//! [`TlsNode`] is a single node that also speaks TLS. Every builder takes the data nodes' [`NodeOptions`] (persistence, extra server
//! arguments). The image comes from [`redis_image`].
//! On top: [`bench`](mod@bench), [`safety`], their [`report`]s, and the [`index`] of a whole run.

pub mod bench;
pub mod design_client;
pub mod error;
pub mod index;
pub mod profile;
pub mod report;
mod report_file;
pub mod safety;
pub mod sim_parts;
pub mod topology;

pub use error::{Error, Result};
pub use topology::cluster::ClusterTopology;
pub use topology::image::{RedisImage, redis_image};
pub use topology::masters::IndependentMasters;
pub use topology::node::Node;
pub use topology::node_options::NodeOptions;
pub use topology::pair::ReplicaPair;
pub use topology::persistence::Persistence;
pub use topology::sentinel::SentinelTopology;
pub use topology::single::SingleNode;
pub use topology::tls::TlsNode;
