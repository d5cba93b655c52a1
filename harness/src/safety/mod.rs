//! Safety under real faults: the docs/DESIGN.md §5 scenarios that containers can produce (pauses,
//! partitions, kills with and without persistence, failover, lost grants, clock jumps,
//! script flushes, dropped connections), run against real Redis with several clients and a
//! fenced resource, judged by the simulator's checker and compared with the simulator's
//! expected verdicts.
//!
//! Map: [`scenario`] (catalogue) → [`run`] (the table: one topology per scenario, from
//! `infra`) → `cell` (one scenario × strategy: workers, `inject` for the fault, with
//! `clock_faults` and `lost_grant` for clock jumps and forced lost grants, both aimed by
//! `fault_aim`; `judge` for the verdict) over [`worker`] (one client's lock loop),
//! [`resource`] (the fenced store), [`run_history`] (the history and its clock), [`link`]
//! (a cuttable per-client connection), [`monitor`] (server-side lease end) → [`report`]
//! (`safety.md`, `safety.json`).

mod cell;
mod clock_faults;
mod fault_aim;
mod infra;
mod inject;
mod judge;
pub mod link;
mod lost_grant;
pub mod monitor;
pub mod report;
pub mod resource;
pub mod run;
pub mod run_history;
pub mod scenario;
pub mod worker;
