//! The classic lock designs under the simulator: each design's client runs and is granted
//! the lock, and the checker finds each design's documented weakness under the fault that
//! exposes it, beside the run without that fault (or the design without that weakness)
//! where it finds nothing of the kind. One seed per cell: these are smoke cells; the main
//! job's matrix (`leasehold-sim designs`) runs every design under every fault class.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use leasehold_sim::checker::{Hold, ProblemKind, read_timeline};
use leasehold_sim::report::designs::{Outcome, Row, find_class, run_matrix};
use leasehold_sim::scenario::run::{self, RunResult};
use leasehold_sim::workload::designs::Design;
use leasehold_sim::world::history::Access;

fn run_cell(design: Design, class: &str, seed: u64) -> RunResult {
    let spec = find_class(class)
        .unwrap()
        .spec(&Row::Other(design), seed)
        .unwrap();
    assert_eq!(spec.workload.design, Some(design));
    run::run(&spec).unwrap()
}

fn kinds(result: &RunResult) -> Vec<ProblemKind> {
    result.findings.problems.iter().map(|p| p.kind).collect()
}

fn broken(result: &RunResult) -> bool {
    kinds(result).iter().any(|k| {
        matches!(
            k,
            ProblemKind::Overlap | ProblemKind::LeaseGone | ProblemKind::LeaseOutlived
        )
    })
}

/// Without a fault, every design's clients are granted the lock again and again, and,
/// but for `setnx-getset`'s key with no expiry, nothing is found (the read-write designs'
/// write holds carry no token, and are not judged for one).
#[test]
fn every_design_takes_the_lock_and_is_clean_without_a_fault() {
    for design in Design::ALL {
        let result = run_cell(design, "none", 0);
        assert!(
            result.findings.acquisitions > 10,
            "{}: {} acquisitions",
            design.name(),
            result.findings.acquisitions
        );
        let expected: Vec<ProblemKind> = match design {
            Design::SetnxGetset => vec![ProblemKind::KeyLeftBehind],
            _ => Vec::new(),
        };
        let mut found = kinds(&result);
        found.dedup();
        assert_eq!(found, expected, "{}", design.name());
    }
}

/// `setnx-getset` trusts its clients' clocks: a waiter whose clock jumps ahead takes the
/// lock from a live holder. The same run without the jump breaks nothing.
#[test]
fn a_client_clock_jump_breaks_setnx_getset() {
    let jumped = run_cell(Design::SetnxGetset, "client-clock-jump", 0);
    assert!(!jumped.fault_log.is_empty(), "the jump landed");
    assert!(broken(&jumped), "{:?}", kinds(&jumped));
    assert!(!broken(&run_cell(Design::SetnxGetset, "none", 0)));
    // A design whose lease lives on the server is not moved by a client's clock.
    assert!(!broken(&run_cell(
        Design::SetNxPxCad,
        "client-clock-jump",
        0
    )));
}

/// A release that deletes without comparing frees a lock another client holds: under a
/// slow link, a client's late `DEL` lands after its lease ended and the next holder's
/// began. The compare-and-delete release does not, on the same runs.
#[test]
fn a_release_without_its_comparison_frees_another_clients_lock() {
    let del = run_cell(Design::SetNxPxDel, "network-delay", 0);
    assert!(!del.fault_log.is_empty(), "the slow link landed");
    assert!(broken(&del), "{:?}", kinds(&del));
    let cad = run_cell(Design::SetNxPxCad, "network-delay", 0);
    assert!(!broken(&cad), "{:?}", kinds(&cad));
}

/// A lost reply between `SETNX` and its `PEXPIRE` leaves the lock key with no expiry:
/// stranded for good. `SET NX PX` sets both at once, so the same losses strand nothing.
#[test]
fn a_lost_reply_strands_setnx_then_expire() {
    let result = run_cell(Design::SetnxThenExpire, "ambiguous-reply", 0);
    assert!(result.stats.losses > 0, "messages were lost");
    assert!(
        kinds(&result).contains(&ProblemKind::KeyLeftBehind)
            || kinds(&result).contains(&ProblemKind::Starvation),
        "{:?}",
        kinds(&result)
    );
    let atomic = run_cell(Design::SetNxPxCad, "ambiguous-reply", 0);
    assert!(atomic.stats.losses > 0);
    assert!(!kinds(&atomic).contains(&ProblemKind::KeyLeftBehind));
}

/// Holds longer than the lease: a design that renews (`hash-watchdog`) or stops believing
/// at its validity's end (`redlock-no-drift`) stays safe; one that does neither is broken.
#[test]
fn holds_past_the_lease_break_only_the_designs_that_neither_renew_nor_watch() {
    assert!(broken(&run_cell(Design::SetNxPxCad, "long-holds", 0)));
    for design in [Design::HashWatchdog, Design::RedlockNoDrift] {
        let result = run_cell(design, "long-holds", 0);
        assert!(!broken(&result), "{}: {:?}", design.name(), kinds(&result));
    }
}

/// The matrix reports a cell's worst outcome, where it first happened and whether its
/// fault landed, and writes no picture until asked to write the report.
#[test]
fn the_matrix_names_each_cells_worst_outcome_and_its_first_seed() {
    let matrix = run_matrix(&[Row::Other(Design::SetnxGetset)], 1, 2, || {}).unwrap();
    let cell = |class: &str| {
        matrix
            .cells
            .iter()
            .find(|c| c.class == find_class(class).unwrap().label)
            .unwrap()
    };
    let jump = cell("client-clock-jump");
    assert_eq!(jump.worst, Outcome::ExclusionBroken);
    assert_eq!((jump.first_seed, jump.landed, jump.runs), (Some(0), 1, 1));
    assert!(jump.problem.is_some() && jump.picture.is_none());
    assert_eq!(cell("none").worst, Outcome::Stranded);
    assert!(matrix.markdown().contains("| setnx-getset |"));
}

/// Every believed hold of the run, in grant order.
fn holds(result: &RunResult) -> Vec<Hold> {
    let end = result.history.last().map_or(0, |e| e.at);
    read_timeline(&result.history, end)
        .holds
        .into_values()
        .flatten()
        .collect()
}

/// A waiter that dies in the `zset-queue` line keeps its entry, which heads the line and
/// refuses every other waiter while the lock is free, until the entry is stale: starved.
/// The same dead waiter costs a plain `SET NX PX` lock nothing, and the line without one
/// starves nobody.
#[test]
fn a_dead_waiters_entry_heads_the_zset_queue_and_starves_the_line() {
    let dead = run_cell(Design::ZsetQueue, "dead-waiter", 0);
    assert!(!dead.fault_log.is_empty(), "the waiter died");
    assert!(
        kinds(&dead).contains(&ProblemKind::Starvation),
        "{:?}",
        kinds(&dead)
    );
    let plain = run_cell(Design::SetNxPxCad, "dead-waiter", 0);
    assert!(!plain.fault_log.is_empty());
    assert!(!kinds(&plain).contains(&ProblemKind::Starvation));
    assert!(!kinds(&run_cell(Design::ZsetQueue, "none", 0)).contains(&ProblemKind::Starvation));
}

/// How often a wait of `proc` was overtaken: another process started waiting more than a
/// round trip later and was granted first.
fn overtaken(result: &RunResult, proc: usize) -> usize {
    let started = |h: &Hold| h.requested;
    let all = holds(result);
    all.iter()
        .filter(|mine| mine.proc == proc)
        .map(|mine| {
            all.iter()
                .filter(|other| {
                    other.proc != proc
                        && started(other) > started(mine) + ROUND_TRIP_NS
                        && other.start < mine.start
                })
                .count()
        })
        .sum()
}

/// More than a round trip of the simulated network, ns: two waits that start further
/// apart than this joined the line in that order.
const ROUND_TRIP_NS: u64 = 20_000_000;

/// `zset-queue` orders its line by the waiters' own clocks: once client 1's clock jumps
/// 1.5 s ahead, its entries score behind waiters that came after it, and they are served
/// first. The checker has no rule for a design's line order, so it finds nothing, and the
/// lock key, a server-side lease, keeps exclusion: the weakness shows in the history, as
/// waits overtaken, and only with the jump.
#[test]
fn a_client_clock_jump_reorders_the_zset_queue() {
    let jumped = run_cell(Design::ZsetQueue, "client-clock-jump", 0);
    assert!(!jumped.fault_log.is_empty(), "the jump landed");
    assert!(!broken(&jumped), "{:?}", kinds(&jumped));
    let plain = run_cell(Design::ZsetQueue, "none", 0);
    assert_eq!(overtaken(&plain, 1), 0);
    assert!(overtaken(&jumped, 1) > 0);
}

/// Readers of the read-write designs hold together: without a fault, read holds overlap
/// one another and nothing is found.
#[test]
fn readers_of_the_read_write_designs_hold_together() {
    for design in [Design::RwTwoKeys, Design::RwHash] {
        let result = run_cell(design, "none", 0);
        assert!(result.findings.problems.is_empty(), "{:?}", kinds(&result));
        let reads: Vec<Hold> = holds(&result)
            .into_iter()
            .filter(|h| h.access == Access::Shared)
            .collect();
        let together = reads.iter().any(|a| {
            reads
                .iter()
                .any(|b| a.proc != b.proc && a.start < b.start && b.start < a.end)
        });
        assert!(together, "{}: no two reads overlapped", design.name());
        assert!(
            holds(&result).iter().any(|h| h.access == Access::Exclusive),
            "{} wrote too",
            design.name()
        );
    }
}

/// Neither read-write design renews: a reader that holds past its lease lets a writer in
/// (or a writer lets a reader in) while it still believes. Holds within the lease overlap
/// nothing.
#[test]
fn a_hold_past_its_lease_lets_a_reader_and_a_writer_overlap() {
    for design in [Design::RwTwoKeys, Design::RwHash] {
        let long = run_cell(design, "long-holds", 0);
        let mixed = long.findings.overlaps.iter().any(|o| {
            let modes = [o.first.access, o.second.access];
            modes.contains(&Access::Shared) && modes.contains(&Access::Exclusive)
        });
        assert!(mixed, "{}: {:?}", design.name(), long.findings.overlaps);
        let plain = run_cell(design, "none", 0);
        assert_eq!(plain.findings.overlap_count, 0, "{}", design.name());
    }
}
