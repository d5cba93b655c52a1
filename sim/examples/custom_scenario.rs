//! A scenario written in code: the lock holder stops (a stop-the-world GC pause) for three
//! times its lease, runs on every wait strategy over a few seeds, and is judged by the
//! simulator's checker.
//!
//! Run it with `cargo run --release -p leasehold-sim --example custom_scenario`.
//!
//! The lease runs out during the pause, so another client is granted the lock while the
//! paused holder still believes it holds it: mutual exclusion is broken by design, and the
//! fenced resource rejects the holder's late write. The expectation says so; the example
//! exits non-zero if any strategy does otherwise.

use std::process::ExitCode;

use leasehold_sim::checker::Verdict;
use leasehold_sim::scenario::run::RunSpec;
use leasehold_sim::scenario::{self, Expect, Scenario};
use leasehold_sim::workload::Strategy;
use leasehold_sim::world::faults::{Fault, ProcSel, ScheduledFault};

/// When the pause starts: two virtual seconds in, when the clients have settled into
/// taking turns.
const PAUSE_AT_MS: u64 = 2_000;

/// How long the holder stops: three times the base run's 1 s lease.
const PAUSE_MS: u64 = 3_000;

/// Seeds per strategy (each seed draws other delays and hold times).
const SEEDS: u64 = 4;

/// The run for one strategy and seed: the catalogue's common shape (3 clients, one lock,
/// 1 s leases, 12 virtual seconds) with the pause added.
fn holder_pause(strategy: Strategy, seed: u64) -> RunSpec {
    let mut spec = scenario::base(strategy, seed);
    spec.faults = vec![ScheduledFault {
        at_ms: PAUSE_AT_MS,
        fault: Fault::Pause {
            who: ProcSel::Holder,
            ms: PAUSE_MS,
        },
    }];
    spec
}

fn main() -> ExitCode {
    let scenario = Scenario::builder("gc-pause-past-ttl")
        .summary("The holder pauses for 3 s with a 1 s lease; another client is granted the lock meanwhile, and fencing rejects the holder's late write.")
        .run(holder_pause)
        .expect_all(Expect::Exactly(Verdict::ExclusionBroken))
        .build();
    println!("{}: {}", scenario.name, scenario.summary);
    let mut all_met = true;
    for strategy in Strategy::ALL {
        let cell = match scenario::run_cell(&scenario, strategy, SEEDS) {
            Ok(cell) => cell,
            Err(err) => {
                eprintln!("{}: the simulation failed: {err}", strategy.name());
                return ExitCode::from(2);
            }
        };
        let worst = cell.worst.map_or("none".to_owned(), |v| v.to_string());
        println!(
            "{:<9} worst verdict over {SEEDS} seeds: {worst} (expected {}; {}), stale writes fenced: {}",
            strategy.name(),
            cell.expected,
            if cell.met { "met" } else { "NOT met" },
            cell.stale_rejected,
        );
        all_met &= cell.met;
    }
    if all_met {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
