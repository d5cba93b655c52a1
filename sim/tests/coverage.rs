//! Script call-site coverage and client marks: a run records the lines of the lock scripts
//! that called Redis and the client paths the library counts, recording changes nothing
//! about the run, and a branch or path shows up exactly when a run takes it (the fair hand-off's grant only under a fair queue, the write lock's
//! re-entry only when the workload re-enters, as exploration now draws it to).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::line_of;
use std::time::Duration;

use leasehold_sim::checker::Verdict;
use leasehold_sim::scenario::run::{run, run_covered};
use leasehold_sim::scenario::{self, with_kind};
use leasehold_sim::workload::{LockKind, Reentry, Strategy};

#[test]
fn lone_hold_lossy_takes_every_path_of_the_lone_hold_form() {
    let grant = line_of("acquire", "redis.call('SET', lock, hold, 'PXAT', deadline)");
    let rewrite = line_of(
        "acquire",
        "redis.call('HSET', lock, string.sub(lone, 18), 1",
    );
    // The line after the owner check is the release's DEL of its own string.
    let release = line_of("release", "if lone == hold then") + 1;
    let probe = line_of(
        "probe",
        "return {1, redis.call('GET', KEYS[2]) or '', pttl}",
    );
    let sc = scenario::find("lone-hold-lossy").unwrap();
    let mut probed = false;
    for strategy in [Strategy::Spin, Strategy::PubSub, Strategy::FairQueue] {
        let mut reached = leasehold_sim::model::coverage::Coverage::default();
        for seed in 0..16 {
            reached.merge(&run_covered(&sc.spec(strategy, seed)).unwrap().coverage);
        }
        assert!(reached.reached("acquire", grant), "{strategy:?}");
        assert!(reached.reached("release", release), "{strategy:?}");
        // An ambiguous acquire is probed (FairQueue's retries find their hold instead).
        probed |= reached.reached("probe", probe);
        // A Spin retry is refused by the string as it stands; a listener or a queued waiter
        // needs its flag, so rewrites it.
        let spin = matches!(strategy, Strategy::Spin);
        assert_eq!(reached.reached("acquire", rewrite), !spin, "{strategy:?}");
    }
    assert!(probed, "no lone hold was probed");
}

#[test]
fn the_hand_off_grant_is_reached_only_under_a_fair_queue() {
    let clock = line_of("acquire", "redis.call('TIME')");
    let grant = line_of("release", "redis.call('PUBLISH', ARGV[4]");
    for strategy in Strategy::ALL {
        let mut spec = scenario::base(strategy, 1);
        spec.trace = true;
        let covered = run_covered(&spec).unwrap();
        let plain = run(&spec).unwrap();
        assert_eq!(covered.trace, plain.trace, "{strategy:?}");
        assert!(!plain.coverage.reached("acquire", clock), "{strategy:?}");
        let sites = covered.coverage;
        assert!(sites.reached("acquire", clock), "{strategy:?}");
        let fair = matches!(strategy, Strategy::FairQueue);
        assert_eq!(sites.reached("release", grant), fair, "{strategy:?}");
        let marks = &covered.client_marks;
        assert!(
            marks.contains("leasehold_acquisitions_total"),
            "{strategy:?}: {marks:?}"
        );
        assert_eq!(
            marks.contains("leasehold_handoffs_total"),
            fair,
            "{strategy:?}: {marks:?}"
        );
        assert!(plain.client_marks.is_empty(), "{strategy:?}");
    }
}

#[test]
fn write_holds_re_enter_when_the_workload_re_enters() {
    let reenter = line_of("rw_write_acquire", "redis.call('HINCRBY', write, owner, 1)");
    for strategy in [Strategy::Spin, Strategy::PubSub] {
        let plain = with_kind(
            scenario::base(strategy, 2),
            LockKind::ReadWrite { read_percent: 30 },
        );
        let mut nested = plain.clone();
        nested.workload.reentry = Some(Reentry::Nested {
            ttl: Duration::from_millis(500),
            work: Duration::ZERO,
        });
        let without = run_covered(&plain).unwrap();
        let with = run_covered(&nested).unwrap();
        assert!(
            !without.coverage.reached("rw_write_acquire", reenter),
            "{strategy:?}"
        );
        assert!(
            with.coverage.reached("rw_write_acquire", reenter),
            "{strategy:?}"
        );
        assert_eq!(with.verdict(), Verdict::Safe, "{strategy:?}");
    }
}

/// `rwlock-writers-give-up` drives the write release's give-up path: a fair waiter that
/// gives up while no writer holds hands the line on (the hand-off reads the new head's
/// entry), and only under a fair queue, whose waiters stand in the line.
#[test]
fn rwlock_writers_give_up_hands_the_line_on_only_under_a_fair_queue() {
    let hand_on = line_of(
        "rw_write_release",
        "hand_off(head, redis.call('HGET', waiters, head), last)",
    );
    let sc = scenario::find("rwlock-writers-give-up").unwrap();
    for strategy in [Strategy::Spin, Strategy::PubSub, Strategy::FairQueue] {
        let mut reached = leasehold_sim::model::coverage::Coverage::default();
        for seed in 0..8 {
            reached.merge(&run_covered(&sc.spec(strategy, seed)).unwrap().coverage);
        }
        assert_eq!(
            reached.reached("rw_write_release", hand_on),
            strategy == Strategy::FairQueue,
            "{strategy:?}"
        );
    }
}

/// Branches are recorded whether or not they call Redis: a busy lock's refusal is a bare
/// `return`, which no call site shows, and a plain run records nothing.
#[test]
fn a_covered_run_records_the_branches_it_took_even_those_that_call_nothing() {
    let acquire = leasehold::script::scripts().acquire.sha();
    let busy = line_of("acquire", "return {0, math.max(expires - now_ms, 0)}");
    let wrongtype = line_of("acquire", "return redis.error_reply('WRONGTYPE");
    let spec = scenario::base(Strategy::Spin, 1);
    let covered = run_covered(&spec).unwrap();
    let taken = covered.coverage.branches(acquire).unwrap();
    assert!(taken.contains(busy), "contended clients are refused");
    assert!(!taken.contains(wrongtype), "no foreign key is in the way");
    assert!(!covered.coverage.reached("acquire", busy), "no call site");
    assert!(run(&spec).unwrap().coverage.branches(acquire).is_none());
}
