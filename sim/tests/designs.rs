//! The classic lock designs under the simulator: each design's client runs and is granted
//! the lock, and the checker finds each design's documented weakness under the fault that
//! exposes it, beside the run without that fault (or the design without that weakness)
//! where it finds nothing of the kind. One seed per cell: these are smoke cells; the main
//! job's matrix (`leasehold-sim designs`) runs every design under every fault class.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use leasehold_sim::checker::ProblemKind;
use leasehold_sim::report::designs::{Outcome, Row, find_class, run_matrix};
use leasehold_sim::scenario::run::{self, RunResult};
use leasehold_sim::workload::designs::Design;

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
/// but for `setnx-getset`'s key with no expiry, nothing is found.
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
