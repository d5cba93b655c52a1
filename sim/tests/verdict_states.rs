//! Verdict-relevant states: watching for them changes nothing about a run (same trace,
//! same verdict), and swarm runs do reach them, paired with the call sites of the script
//! runs that found them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;

use leasehold_sim::explore::{ExploreOptions, swarm_spec};
use leasehold_sim::model::verdict_states::VerdictState;
use leasehold_sim::scenario::run::{run, run_covered};

/// Swarm seeds tried; enough for several states to show up (1,000 plain seeds reach 20 of
/// the 22).
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

/// A script refused with `NOSCRIPT` ran nowhere: the state it would have run in is paired
/// with no call site, not with the lines of the script run before it.
#[test]
fn a_script_refused_with_noscript_files_no_state() {
    use leasehold_sim::engine::clock::ClockModel;
    use leasehold_sim::model::node::NODE_CLOCK_BASE;
    use leasehold_sim::model::{Node, Persistence};

    let release = &leasehold::script::scripts().semaphore_release;
    let mut node = Node::new(
        0,
        Persistence::None,
        ClockModel::new(NODE_CLOCK_BASE, false),
    )
    .unwrap();
    node.record_coverage().unwrap();
    let t = 1_000_000;
    // A permit whose lease ended long ago (score: node ms), still in the set.
    node.execute(
        &[
            b"ZADD".to_vec(),
            b"p".to_vec(),
            b"1".to_vec(),
            b"h".to_vec(),
        ],
        t,
    );
    let release_permit = |script: &[u8], how: &str| {
        let mut words = vec![how.as_bytes().to_vec(), script.to_vec(), b"4".to_vec()];
        words.extend(["p", "q", "w", "s", "h", "2", "ch", "in"].map(|w| w.as_bytes().to_vec()));
        words
    };
    // Another script runs first, so there are lines to pair with.
    let other = [
        b"EVAL".to_vec(),
        b"return redis.call('TIME')".to_vec(),
        b"0".to_vec(),
    ];
    node.execute(&other, t);
    node.execute(&release_permit(release.sha().as_bytes(), "EVALSHA"), t);
    assert!(
        node.coverage().states().is_empty(),
        "{:?}",
        node.coverage().state_sites()
    );
    // Loaded and run, the same call does find the state.
    node.execute(&release_permit(release.source().as_bytes(), "EVAL"), t);
    assert_eq!(
        node.coverage().states(),
        BTreeSet::from([VerdictState::ReleaseOfLapsedPermit])
    );
}
