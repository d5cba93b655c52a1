//! The faults that can fail, on containers: a node's clock jump and a failover that really
//! loses a grant. Each test first asserts from the fault log that the fault landed (the key
//! expired by the jump; the replica lacked the lost grant's token), then the verdict, over
//! at most [`TRIES`] tries where the outcome is a race.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use leasehold_harness::safety::report::CellReport;
use leasehold_harness::safety::run::{Plan, run};
use leasehold_harness::safety::scenario::find;
use leasehold_sim::checker::Verdict;
use leasehold_sim::workload::Strategy;

/// Tries of a racy cell: the "at least 1 of 3".
const TRIES: usize = 3;

async fn cell(scenario: &str, strategy: Strategy) -> CellReport {
    let plan = Plan {
        scenarios: vec![find(scenario).unwrap()],
        strategies: vec![strategy],
        sim_seeds: 0,
    };
    let report = run(&plan, &mut |_| {}).await.unwrap();
    report.cells.into_iter().next().unwrap()
}

/// The two tokens of a lost-grant fault log: the master's last token and the replica's.
fn lost_grant_tokens(note: &str) -> (u64, u64) {
    let after = |label: &str| -> u64 {
        let rest = &note[note.find(label).unwrap() + label.len()..];
        rest.split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    (after("last token on master "), after(", on replica "))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clock_jump_expires_the_held_key_and_fencing_holds_on_one_node() {
    let c = cell("node-clock-jump", Strategy::Spin).await;
    assert!(c.fault.note.contains("→ -2 ms"), "{c:#?}");
    assert!(c.token_problems.is_empty(), "{c:#?}");
    assert!(c.real <= Verdict::ExclusionBroken, "{c:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redlock_master_clock_jump_breaks_redlock() {
    let mut tries = Vec::new();
    for _ in 0..TRIES {
        let c = cell("node-clock-jump", Strategy::RedLock).await;
        // Landed: the holder had the bare quorum and the jump expired its key on n0 (a try
        // where the lock was between holders at that moment is inconclusive).
        let landed =
            c.fault.note.contains("held on {n0, n1, n2}") && c.fault.note.contains("→ -2 ms");
        tries.push((landed, c.real, c.fault.note.clone()));
        if landed && c.real == Verdict::Violation {
            return;
        }
    }
    panic!("no violation after a landed jump in {TRIES} tries: {tries:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_loses_a_grant_and_the_fence_rejects_the_stale_write() {
    let mut seen = Vec::new();
    for _ in 0..TRIES {
        let c = cell("failover-lost-grant", Strategy::Spin).await;
        let (master, replica) = lost_grant_tokens(&c.fault.note);
        assert!(replica < master, "the replica had the grant: {c:#?}");
        // Tokens are server µs and the replica's clock is right: the fence stays sound.
        assert!(c.token_problems.is_empty(), "{c:#?}");
        seen.push((c.overlaps, c.stale_rejected));
        if c.overlaps >= 1 && c.stale_rejected >= 1 {
            assert_eq!(c.real, Verdict::ExclusionBroken, "{c:#?}");
            return;
        }
    }
    panic!("no second holder with a rejected stale write in {TRIES} tries: {seen:?}");
}
