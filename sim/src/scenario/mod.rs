//! The scenario room: one run of a spec ([`run`]: world, clients, checker) and the
//! catalogue of named fault scenarios below.
//!
//! The named fault scenarios of docs/DESIGN.md §5, each with the verdict expected per
//! strategy, gathered from their groups into one catalogue; and [`Scenario::builder`] for
//! scenarios written outside it.
//!
//! Invariant: an expectation is either a verdict argued from the algorithm (and checked by
//! a test over several seeds) or explicitly `Pending` with the reason (see [`Expect`]).
//! RedLock runs on [`crate::scenario::run::REDLOCK_MASTERS`] masters; the scenarios whose point is
//! "a second quorum" first give the holder a bare quorum, as in Kleppmann's example.
//!
//! May import: engine, model, world, workload, checker.

pub mod run;

mod builder;
mod cell;
mod family_faults;
mod hand_off;
mod node_faults;
mod operations;
mod process_faults;
mod sentinel_faults;
mod shape;

pub use builder::ScenarioBuilder;
pub use cell::{Cell, run_cell};
pub use shape::{DEFAULT_SEEDS, Expect, Scenario, base, kind_bound, liveness_bound, with_kind};

/// The catalogue's groups, in table order.
const GROUPS: [&[Scenario]; 6] = [
    process_faults::SCENARIOS,
    node_faults::SCENARIOS,
    sentinel_faults::SCENARIOS,
    operations::SCENARIOS,
    family_faults::SCENARIOS,
    hand_off::SCENARIOS,
];

/// Every scenario, in table order.
pub fn scenarios() -> impl Iterator<Item = &'static Scenario> {
    GROUPS.iter().flat_map(|group| group.iter())
}

/// Looks a scenario up by name.
pub fn find(name: &str) -> Option<&'static Scenario> {
    scenarios().find(|s| s.name == name)
}
