//! Safety under real faults: the docs/DESIGN.md §5 scenarios that containers can produce (pauses,
//! process freezes, partitions, kills with and without persistence, failovers that lose a
//! grant, clock jumps and drift, script flushes, dropped connections), run against real Redis
//! with several clients and a fenced resource, for Leasehold's mutex, read-write lock and
//! semaphore and for the rslock peer, judged by the simulator's checker and compared with
//! the simulator's expected verdicts.
//!
//! Map: [`scenario`] (catalogue) → [`run`] (the table: one topology per scenario, from
//! `infra`, one cell per [`subject`]) → `cell` (a cell's seeded tries side by side: workers,
//! `inject` for the fault and its evidence — `node_faults`, `holder_faults`, `clock_faults`,
//! `clock_drift` (timed by `pttl_rate`) and `lost_grant` acting on the cell's
//! `fault_target`, aimed by `fault_aim` — `judge` for each try's verdict, `agreement` for
//! the cell's) over [`worker`] (one client's lock loop from a [`behaviour`], over `held`,
//! the lock kinds; in its own process via [`worker_process`], stopped and continued by
//! `process_signal`), [`resource`] (the fenced store), [`run_history`] (the history and its
//! clock), [`link`] (a cuttable per-client connection), [`monitor`] (server-side lease end)
//! → [`report`] (the data) → [`render`] (`safety.md`, `safety.json`).

mod agreement;
pub mod behaviour;
mod cell;
mod clock_drift;
mod clock_faults;
mod fault_aim;
mod fault_target;
mod held;
mod holder_faults;
mod infra;
mod inject;
mod judge;
pub mod link;
mod lost_grant;
pub mod monitor;
mod node_faults;
mod process_signal;
mod pttl_rate;
pub mod render;
pub mod report;
pub mod resource;
pub mod run;
pub mod run_history;
pub mod scenario;
pub mod subject;
pub mod worker;
pub mod worker_process;
