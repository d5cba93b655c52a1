//! Leasehold's deterministic simulator: the production `leasehold` client, many
//! processes of it, run against an in-memory Redis model on a seeded single-threaded
//! executor with virtual time, under injected faults, with a checker on the history.
//!
//! The rooms, bottom to top; each may import only the rooms below it (its `mod.rs` names
//! which, and `.ci/import-cycles` checks it):
//! - [`engine`]: virtual time, clocks with skew, drift and jumps, timers, the seeded random
//!   source and the trace. Knows nothing of Redis or locks.
//! - [`model`]: the in-memory Redis model (keyspace, commands by data type, Lua scripting,
//!   whole nodes), RESP replies, and what the nodes record of the scripts they run (call
//!   sites reached, verdict-relevant states).
//! - [`world`]: the simulated deployment: the network, the executor that runs processes
//!   over it, the production client's seams (backend, process, Sentinel discovery), the
//!   nodes with replication and failover, fault injection, the server-truth oracle and the
//!   history every event is recorded in.
//! - [`workload`]: what the clients are asked to do and the lock loop that does it through
//!   the production lock family.
//! - [`checker`]: the judge: the history against the lock's specification and the
//!   server's truth. Knows nothing of workloads, scenarios or exploration.
//! - [`scenario`]: one run of a spec (world, clients, checker) and the docs/DESIGN.md §5
//!   catalogue of named fault scenarios.
//! - [`explore`]: swarm exploration: the draw of deployments, parameters and faults,
//!   steering towards rare code, lineage of steered runs, shrinking.
//! - [`report`]: the jobs front ends run (scenario table, exploration, benchmark), their
//!   reports and pictures.
//!
//! Invariant: the same `RunSpec` (seed included) always yields the same trace, byte for
//! byte, and the lock code under test is the code users run, through its public seams.

pub mod checker;
pub mod engine;
pub mod explore;
pub mod model;
pub mod report;
pub mod scenario;
pub mod workload;
pub mod world;
