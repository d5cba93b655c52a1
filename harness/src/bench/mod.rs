//! Containerised contention benchmarks: N clients with their own connections contend on one
//! hot lock (or M locks) for a grid of client counts, critical sections and contenders
//! (Leasehold's wait strategies, the rslock peer and the Python peers), measured per
//! docs/DESIGN.md §3.

pub mod access;
pub mod arrivals;
pub mod commandstats;
pub mod contender;
pub mod exclusion;
pub mod floor;
pub mod footprint;
pub mod grid;
pub mod leasehold_client;
pub mod peer_design;
pub mod peer_rslock;
pub mod precise_sleep;
pub mod process_cpu;
pub mod python_peer;
pub mod runner;
pub mod server_counters;
pub mod wait_kind;
pub mod workload;
