//! The server options every topology builder offers for its data nodes — persistence, raw
//! `redis-server` arguments and clock control — and the one place they become a data node's
//! command line.
//!
//! Invariant: every data node of every topology gets the same argument order: the harness's
//! base arguments, then persistence, then what its role needs (cluster mode, `--replicaof`),
//! then the caller's extra arguments last, so a caller's argument wins over any default.

use crate::topology::node::{NodeSpec, REDIS_PORT, REDIS_READY_LOG};
use crate::topology::persistence::Persistence;

/// Options applied to every data node of a topology; defaults: no persistence, no extra
/// arguments.
#[derive(Debug, Clone, Default)]
pub struct NodeOptions {
    persistence: Persistence,
    extra_args: Vec<String>,
    clock_control: bool,
}

impl NodeOptions {
    /// How every data node persists writes across [`Node::kill`](crate::Node::kill) /
    /// [`Node::start`](crate::Node::start).
    pub fn persistence(mut self, persistence: Persistence) -> Self {
        self.persistence = persistence;
        self
    }

    /// Appends raw redis-server arguments given to every data node (e.g.
    /// `["--maxmemory", "10mb"]`).
    pub fn server_args(mut self, args: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.extra_args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Starts every data node with a movable wall clock ([`Node::set_clock_offset`],
    /// [`Node::jump_clock`]): the node runs the locally built image with its clock library
    /// preloaded. Off by default: the server then runs unmodified.
    ///
    /// [`Node::set_clock_offset`]: crate::Node::set_clock_offset
    /// [`Node::jump_clock`]: crate::Node::jump_clock
    pub fn clock_control(mut self, on: bool) -> Self {
        self.clock_control = on;
        self
    }

    /// What to launch for a data node named `role` that also needs `role_args`.
    pub(crate) fn data_node(
        &self,
        role: String,
        role_args: impl IntoIterator<Item = String>,
    ) -> NodeSpec {
        let mut args = base_redis_args();
        args.extend(self.persistence.server_args());
        args.extend(role_args);
        args.extend(self.extra_args.iter().cloned());
        NodeSpec {
            role,
            args,
            port: REDIS_PORT,
            ready_log: REDIS_READY_LOG,
            files: Vec::new(),
            clock_control: self.clock_control,
        }
    }
}

/// Arguments every data node gets: listen on all interfaces without protected mode (the
/// network is private to the topology) on [`REDIS_PORT`]; start a replica's full sync at once
/// (7.0 waits 5 s for more replicas by default, which would dominate start-up).
fn base_redis_args() -> Vec<String> {
    vec![
        "--port".to_owned(),
        REDIS_PORT.to_string(),
        "--bind".to_owned(),
        "0.0.0.0".to_owned(),
        "--protected-mode".to_owned(),
        "no".to_owned(),
        "--repl-diskless-sync-delay".to_owned(),
        "0".to_owned(),
        "--enable-debug-command".to_owned(),
        "yes".to_owned(),
    ]
}
