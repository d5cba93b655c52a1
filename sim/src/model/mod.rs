//! The model room: the in-memory Redis model — data, commands, Lua scripting, whole nodes
//! ([`node`]), RESP replies ([`resp`]) — and what the nodes record of the scripts they run:
//! the branches taken ([`branch_marks`], against the branches read off each script's source
//! in [`branches`]) and the call sites reached ([`coverage`]), and the verdict-relevant
//! states they ran in ([`verdict_states`]).
//!
//! The in-memory Redis model: data, commands, Lua scripting and whole nodes.
//!
//! Invariant: the model answers the command subset the lock client uses with Redis 7's
//! exact replies, so the simulator tests the client against Redis semantics, not against
//! an idealised store.
//!
//! May import: engine.

pub mod branch_marks;
pub mod branches;
pub mod coverage;
pub mod resp;
pub mod verdict_states;

pub mod commands;
pub mod eviction;
pub mod keyspace;
pub mod node;
pub mod scripting;
pub mod state_watch;

/// Redis 7's reply to a write on a read-only replica.
pub const READONLY_ERROR: &str = "READONLY You can't write against a read only replica.";

/// Redis 7's reply to a write on a master short of good replicas (`min-replicas-to-write`).
pub const NOREPLICAS_ERROR: &str = "NOREPLICAS Not enough good replicas to write.";

/// Redis 7's reply to `EVALSHA` of a script its cache does not hold.
pub const NOSCRIPT_ERROR: &str = "NOSCRIPT No matching script. Please use EVAL.";

pub use keyspace::{Data, Entry, Keyspace};
pub use node::{Executed, LateClock, Node, NodeId, Outcome, Persistence, Role, ServerClock};
pub use scripting::ScriptEngine;
