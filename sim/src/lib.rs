//! Leasehold's deterministic simulator: the production `leasehold` client, many
//! processes of it, run against an in-memory Redis model on a seeded single-threaded
//! executor with virtual time, under injected faults, with a checker on the history.
//!
//! Map (one concept per module):
//! - the Redis model — [`model`] (keyspace, commands by data type, Lua scripting, nodes),
//!   [`resp`]
//! - the machine — [`executor`] (tasks, virtual time), [`timer`], [`net`] (links, messages),
//!   [`clock`] (skew/drift/jumps), [`process`] and [`backend`] (the `leasehold` seams),
//!   [`discovery`] (the simulated Sentinels under the production Sentinel backend),
//!   [`world`] (the driver: nodes and replication, client processes, faults), [`rng`],
//!   [`trace`], [`calls`] (lock-script calls read off the wire for the history)
//! - the experiment — [`workload`] (what clients are asked to do), [`client`] (the lock
//!   loop over the lock [`family`]), [`faults`], [`history`], [`checker`], [`run`],
//!   [`scenario`] (docs/DESIGN.md §5 catalogue, and a builder for scenarios written in
//!   code), [`duration_text`] (durations in spec files as `"1500ms"`), [`explore`]
//!   (swarm + shrink) with [`operations`] (its draw of try, cancel, re-entry and WAIT),
//!   [`node_clocks`] (its draw of node clock drift and replica offsets),
//!   [`lookups`] (its draw of Sentinel cuts and lagging Sentinel views),
//!   [`parallel`], [`report`], [`coverage`] (the script call sites runs reach, alone and
//!   paired with the [`verdict_states`] they ran in) and
//!   [`client_marks`] (the client paths they take), [`steer`] (the share of exploration
//!   spent near runs that reached rare code or rare states) with [`lineage`] (a steered
//!   run's id and how it derives its spec),
//!   [`bench`](mod@bench), [`picture`] (an SVG timeline of a run: beliefs, server truth,
//!   faults and problems)
//! - the jobs front ends run — [`jobs`] (scenario table, exploration, benchmark, their files)
//!
//! Invariant: the same `RunSpec` (seed included) always yields the same trace, byte for
//! byte, and the lock code under test is the code users run, through its public seams.

pub mod backend;
pub mod bench;
pub mod calls;
pub mod checker;
pub mod client;
pub mod client_marks;
pub mod clock;
pub mod coverage;
pub mod discovery;
pub mod drawn;
pub mod duration_text;
pub mod executor;
pub mod explore;
pub mod family;
pub mod faults;
pub mod groups;
pub mod history;
pub mod jobs;
pub mod judged;
pub mod lineage;
pub mod links;
pub mod lookups;
pub mod memory;
pub mod model;
pub mod net;
pub mod node_clocks;
pub mod operations;
pub mod parallel;
pub mod params;
pub mod picture;
pub mod process;
pub mod report;
pub mod resp;
pub mod rng;
pub mod run;
pub mod scenario;
pub mod steer;
pub mod timer;
pub mod trace;
pub mod truth;
pub mod verdict_states;
pub mod workload;
pub mod world;
