//! Safety under real faults: the DESIGN §5 scenarios that containers can produce (pauses,
//! partitions, kills with and without persistence, failover, script flushes, dropped
//! connections), run against real Redis with several clients and a fenced resource, judged
//! by the simulator's checker and compared with the simulator's expected verdicts.
//!
//! Map: [`scenario`] (catalogue) → [`run`] (topologies, fault injection, judging) over
//! [`worker`] (one client's lock loop), [`resource`] (the fenced store), [`recorder`]
//! (the history), [`link`] (a cuttable per-client connection), [`monitor`] (server-side
//! lease end) → [`report`] (`safety.md`, `safety.json`).

pub mod link;
pub mod monitor;
pub mod recorder;
pub mod report;
pub mod resource;
pub mod run;
pub mod scenario;
pub mod worker;
