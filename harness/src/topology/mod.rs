//! Real Redis topologies in containers.
mod builder;
pub(crate) mod clock_library;
pub mod cluster;
pub(crate) mod docker;
pub mod image;
pub mod leftovers;
pub mod masters;
pub mod network;
pub mod node;
pub(crate) mod node_clock;
pub mod node_options;
pub mod pair;
pub mod persistence;
pub mod sentinel;
pub mod single;
pub(crate) mod site;
pub mod tls;
pub(crate) mod wait;
