//! Real Redis topologies in containers, for Leasehold's tests, benchmarks and safety checks.
//!
//! Each topology runs on its own Docker network and is torn down when its handle drops:
//! [`SingleNode`], [`IndependentMasters`] (RedLock), [`ReplicaPair`] (one master, one
//! replica), [`SentinelTopology`] and [`ClusterTopology`]. Every server is a [`Node`] with a
//! stable `redis://ip:port` URL and fault injection (pause, kill/restart, network cut);
//! [`TlsNode`] is a single node that also speaks TLS. Every builder takes the data nodes' [`NodeOptions`] (persistence, extra server
//! arguments). The image comes from [`redis_image`].
//! On top: [`bench`](mod@bench), [`safety`], their [`report`]s, and the [`index`] of a whole run.

mod builder;
mod clock_library;
mod docker;
mod wait;

pub mod bench;
pub mod cluster;
pub mod error;
pub mod image;
pub mod index;
pub mod leftovers;
pub mod masters;
pub mod network;
pub mod node;
mod node_clock;
pub mod node_options;
pub mod pair;
pub mod persistence;
pub mod profile;
pub mod report;
mod report_file;
pub mod safety;
pub mod sentinel;
pub mod single;
mod site;
pub mod tls;

pub use cluster::ClusterTopology;
pub use error::{Error, Result};
pub use image::{RedisImage, redis_image};
pub use masters::IndependentMasters;
pub use node::Node;
pub use node_options::NodeOptions;
pub use pair::ReplicaPair;
pub use persistence::Persistence;
pub use sentinel::SentinelTopology;
pub use single::SingleNode;
pub use tls::TlsNode;
