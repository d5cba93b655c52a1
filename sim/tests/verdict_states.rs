//! Verdict-relevant states: watching for them changes nothing about a run (same trace,
//! same verdict), and swarm runs do reach them, paired with the call sites of the script
//! runs that found them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;

use leasehold_sim::explore::{ExploreOptions, swarm_spec};
use leasehold_sim::run::{run, run_covered};
use leasehold_sim::verdict_states::VerdictState;

/// Swarm seeds tried; enough for several states to show up (1,000 plain seeds reach 20 of
/// the 23).
const SEEDS: u64 = 24;

#[test]
fn watching_states_leaves_every_run_as_it_was_and_states_are_reached() {
    let options = ExploreOptions::default();
    let mut reached = BTreeSet::new();
    for seed in 0..SEEDS {
        let mut spec = swarm_spec(seed, &options);
        spec.trace = true;
        let watched = run_covered(&spec).unwrap();
        let plain = run(&spec).unwrap();
        assert_eq!(watched.trace, plain.trace, "seed {seed}");
        assert_eq!(watched.verdict(), plain.verdict(), "seed {seed}");
        assert!(plain.coverage.states().is_empty(), "seed {seed}");
        let states = watched.coverage.states();
        // Every state is paired with a call site its script run reached.
        let paired: BTreeSet<VerdictState> = watched
            .coverage
            .state_sites()
            .into_iter()
            .map(|(script, line, state)| {
                let sites = watched.coverage.sites();
                assert!(sites.contains(&(script, line)), "seed {seed}: {state:?}");
                state
            })
            .collect();
        assert_eq!(paired, states, "seed {seed}");
        reached.extend(states);
    }
    // Evidence the watch fires at all: common states show up in a few dozen seeds.
    assert!(reached.len() >= 5, "{reached:?}");
    assert!(
        reached.contains(&VerdictState::ClaimOfGrantedHold),
        "{reached:?}"
    );
}
