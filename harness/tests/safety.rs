//! A fast subset of the real-fault catalogue against containers, each asserting the verdict
//! the design promises, the evidence that its fault landed, and (where the simulator has the
//! scenario) agreement with its expectation. The whole table is `leasehold-harness safety`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use leasehold_harness::safety::report::{Agreement, CellReport};
use leasehold_harness::safety::run::{Plan, run};
use leasehold_harness::safety::scenario::find;
use leasehold_harness::safety::subject::Subject;
use leasehold_sim::checker::Verdict;
use leasehold_sim::report::designs::Outcome;
use leasehold_sim::workload::Strategy;
use leasehold_sim::workload::designs::Design;

/// Tries per cell here: two, enough for the evidence and the verdict, quicker than the table's.
const TRIES: u64 = 2;

async fn cells(scenario: &str, strategy: Strategy, peers: bool) -> Vec<CellReport> {
    let plan = Plan {
        scenarios: vec![find(scenario).unwrap()],
        strategies: vec![strategy],
        // Expectations only: the simulator's own tests run its cells.
        sim_seeds: 0,
        tries: TRIES,
        peers,
        designs: Vec::new(),
        worker_exe: Some(PathBuf::from(env!("CARGO_BIN_EXE_leasehold-harness"))),
    };
    let report = run(&plan, &mut |_| {}).await.unwrap();
    for c in &report.cells {
        assert_eq!(c.tries.len() as u64, TRIES, "{c:#?}");
    }
    report.cells
}

async fn cell(scenario: &str, strategy: Strategy) -> CellReport {
    let mut cells = cells(scenario, strategy, false).await;
    assert_eq!(cells.len(), 1);
    cells.remove(0)
}

/// Errors other than the run's own end.
fn real_errors(cell: &CellReport) -> Vec<&(String, u64)> {
    cell.tries
        .iter()
        .flat_map(|t| &t.errors)
        .filter(|(e, _)| e != "run ended")
        .collect()
}

fn no_token_problems(c: &CellReport) -> bool {
    c.tries.iter().all(|t| t.token_problems.is_empty())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holder_pause_stale_write_is_rejected_by_fencing() {
    let c = cell("holder-pause", Strategy::PubSub).await;
    // The paused holder's hold overlapped the next grants (exclusion broken: a real run
    // has no fault log to excuse it with) and its late write was stale, so the fence
    // rejected it and the tokens stayed sound.
    assert!(c.landed >= 1, "{c:#?}");
    assert!(c.total(|t| t.overlaps) >= 1, "{c:#?}");
    assert!(c.total(|t| t.stale_rejected) >= 1, "{c:#?}");
    assert!(no_token_problems(&c), "{c:#?}");
    assert_eq!(c.real, Verdict::ExclusionBroken, "{c:#?}");
    assert_eq!(c.agreement, Agreement::Agree, "{c:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigstopped_holder_process_breaks_exclusion_and_fencing_holds() {
    let c = cell("holder-freeze", Strategy::Spin).await;
    // The kernel reported c0's process stopped while it held, in every try.
    assert_eq!(c.landed, TRIES, "{c:#?}");
    assert!(
        c.tries
            .iter()
            .all(|t| t.fault.evidence.contains("stopped (T)")),
        "{c:#?}"
    );
    assert_eq!(c.real, Verdict::ExclusionBroken, "{c:#?}");
    assert!(c.total(|t| t.stale_rejected) >= 1, "{c:#?}");
    assert!(no_token_problems(&c), "{c:#?}");
    assert_eq!(c.agreement, Agreement::Agree, "{c:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_pause_past_ttl_is_safe_and_lost_fires_before_ttl_end() {
    let c = cell("node-pause", Strategy::Spin).await;
    assert!(c.landed >= 1, "{c:#?}");
    assert_eq!(c.total(|t| t.overlaps), 0, "{c:#?}");
    assert_eq!(c.real, Verdict::Safe, "{c:#?}");
    for t in &c.tries {
        if let Some(margin) = t.lost_before_ttl_end_ms {
            assert!(
                margin > 0.0,
                "lost() fired {margin} ms after the TTL end: {c:#?}"
            );
        }
    }
    assert!(
        c.tries.iter().all(|t| t.recovery_ms.is_some()),
        "no grant after the node came back: {c:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_restart_without_persistence_keeps_fencing_sound() {
    let c = cell("crash-restart-no-persistence", Strategy::PubSub).await;
    // Holds may overlap (the lock vanished with the node: exclusion broken), but tokens
    // come from server time, so they still grow and no stale write gets through the fence.
    assert!(c.landed >= 1, "{c:#?}");
    assert!(no_token_problems(&c), "{c:#?}");
    assert!(c.real <= Verdict::ExclusionBroken, "{c:#?}");
    assert!(c.tries.iter().all(|t| t.recovery_ms.is_some()), "{c:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn script_flush_is_transparent() {
    let c = cell("script-flush", Strategy::Spin).await;
    // Some flush found the scripts cached, so EVALSHA really met NOSCRIPT.
    assert!(c.landed >= 1, "{c:#?}");
    // A flush must surface as no error at all. A Spin waiter that gave up is no sign of
    // one: Spin is not fair, and on a loaded 2-core CI box (CI's nextest runs test binaries
    // side by side) one waiter may lose every retry for its 3 s deadline.
    let flush_errors: Vec<_> = real_errors(&c)
        .into_iter()
        .filter(|(e, _)| !e.contains("not acquired within"))
        .collect();
    assert!(flush_errors.is_empty(), "{flush_errors:?}");
    assert!(c.total(|t| t.acquisitions) >= 10, "{c:#?}");
    assert_eq!(c.real, Verdict::Safe, "{c:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_rwlock_holder_breaks_exclusion_without_breaking_fencing() {
    let c = cell("rwlock-holder-pause", Strategy::PubSub).await;
    assert!(c.landed >= 1, "{c:#?}");
    assert_eq!(c.real, Verdict::ExclusionBroken, "{c:#?}");
    assert!(no_token_problems(&c), "{c:#?}");
    assert_eq!(c.agreement, Agreement::Agree, "{c:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rslock_under_a_holder_pause_is_judged_on_overlaps_only() {
    let cells = cells("holder-pause", Strategy::Spin, true).await;
    let rslock = cells
        .iter()
        .find(|c| c.subject == Subject::Rslock { redlock: false })
        .unwrap();
    // No token: nothing is written to the fence, and the paused holder's overlap is all
    // the checker can see.
    assert!(rslock.landed >= 1, "{rslock:#?}");
    assert_eq!(rslock.total(|t| t.stale_rejected), 0, "{rslock:#?}");
    assert!(rslock.total(|t| t.overlaps) >= 1, "{rslock:#?}");
    assert_eq!(rslock.real, Verdict::ExclusionBroken, "{rslock:#?}");
    assert_eq!(rslock.agreement, Agreement::Peer, "{rslock:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn classic_designs_on_real_redis_are_set_beside_their_simulator_cells() {
    let plan = Plan {
        scenarios: vec![find("node-clock-jump").unwrap()],
        strategies: vec![Strategy::Spin],
        sim_seeds: 1,
        tries: TRIES,
        peers: false,
        designs: vec![Design::SetnxThenExpire, Design::SetnxGetset],
        worker_exe: None,
    };
    let report = run(&plan, &mut |_| {}).await.unwrap();
    let row = |design| {
        report
            .cells
            .iter()
            .find(|c| c.subject == Subject::Design(design))
            .unwrap()
    };
    // The jump expires the SETNX lock's key under its holder, who goes on
    // believing: another client takes it, as the simulator's cell finds.
    // (setnx-then-expire: every real try overlapped in both full tables; set-nx-px-cad's
    // waiters retry by a backoff that overlapped in only 1 of 3 tries in one of them.)
    let expire = row(Design::SetnxThenExpire);
    assert!(expire.landed >= 1, "{expire:#?}");
    assert!(expire.total(|t| t.overlaps) >= 1, "{expire:#?}");
    assert_eq!(expire.outcome, Outcome::ExclusionBroken, "{expire:#?}");
    let sim = expire.design_sim.as_ref().unwrap();
    assert_eq!(sim.worst, Outcome::ExclusionBroken, "{expire:#?}");
    assert_eq!(expire.agreement, Agreement::Agree, "{expire:#?}");
    // SETNX-GETSET's key never has an expiry, and the server shows it: stranded at least,
    // whatever the jump (which has no TTL to act on) did.
    let getset = row(Design::SetnxGetset);
    assert!(
        getset.tries.iter().any(|t| t.no_expiry_ms.is_some()),
        "{getset:#?}"
    );
    assert!(getset.outcome >= Outcome::Stranded, "{getset:#?}");
}
