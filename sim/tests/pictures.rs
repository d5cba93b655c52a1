//! A failing run's picture: `replay`'s, drawn from the run it replays, and exploration's,
//! written beside each shrunk failure's spec and linked from `sim-explore.md`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use leasehold_sim::explore::drawn::{ApiDraws, DrawnTally};
use leasehold_sim::explore::steer::SteerReport;
use leasehold_sim::explore::{self, ExploreOptions, Failure, FailureReport};
use leasehold_sim::report::ExploreSummary;
use leasehold_sim::report::jobs::{self, FAILURES_DIR, SwarmArgs};
use leasehold_sim::report::judged::Judged;
use leasehold_sim::scenario;
use leasehold_sim::scenario::run::{RunResult, RunSpec};
use leasehold_sim::workload::Strategy;

/// A fresh directory under the system's temp dir for test `name`.
fn out_dir(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("leasehold-pictures-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// The `holder-pause` scenario's run of seed 0 under Spin: the holder stops for 3 s, its
/// lease expires and another client is granted while it still believes.
fn holder_pause() -> (RunSpec, RunResult) {
    let spec = scenario::find("holder-pause")
        .unwrap()
        .spec(Strategy::Spin, 0);
    let (result, _) = explore::run_and_classify(&spec).unwrap();
    (spec, result)
}

#[test]
fn replaying_a_holder_pause_draws_the_pause_and_names_each_problem_with_its_excuse() {
    let (spec, result) = holder_pause();
    let pause = result.fault_log.first().expect("the pause landed");
    let (victim, incarnation) = pause.proc.expect("it hit the holder");
    assert!(
        !result.findings.problems.is_empty(),
        "the paused holder's lease was given away"
    );
    let dir = out_dir("replay");
    let path =
        jobs::write_picture(&dir, "replay.svg", "holder-pause seed 0", &spec, &result).unwrap();
    let svg = std::fs::read_to_string(&path).unwrap();
    assert!(svg.starts_with("<?xml") && svg.trim_end().ends_with("</svg>"));
    assert!(svg.contains(&format!(">pause c{victim}.{incarnation} 3000 ms<")));
    assert!(svg.contains(&format!(">client c{victim}<")) && svg.contains(">node 0<"));
    for (i, p) in result.findings.problems.iter().enumerate() {
        let excuse = if p.excused {
            format!("excused by {}: a 3000 ms pause", p.rule.unwrap_or_default())
        } else {
            "not excused".to_owned()
        };
        let at = p.at as f64 / 1e9;
        let name = format!(
            "#{} {:?} on {} at {at:.6}s: {excuse}",
            i + 1,
            p.kind,
            p.lock
        );
        assert!(svg.contains(&name), "problem named with its excuse: {name}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

fn report(seed: u64, spec: &RunSpec, shrink_runs: u32) -> FailureReport {
    FailureReport {
        seed,
        steps: Vec::new(),
        strategy: Strategy::Spin,
        failure: Failure::ExclusionBroken,
        known_limitation: None,
        findings: Vec::new(),
        details: Vec::new(),
        shrunk: spec.clone(),
        shrink_runs,
    }
}

#[test]
fn exploration_writes_and_links_the_picture_of_each_shrunk_failure_only() {
    let (spec, _) = holder_pause();
    let summary = ExploreSummary {
        start: 0,
        seeds: 2,
        options: ExploreOptions::default(),
        verdicts: [0, 0, 2, 0, 0],
        failures: vec![report(7, &spec, 12), report(8, &spec, 0)],
        wall_secs: 0.0,
        coverage: Vec::new(),
        branches: Vec::new(),
        client_marks: Vec::new(),
        steering: SteerReport {
            share: 0.0,
            plain: 2,
            steered: 0,
            rounds: 0,
            corpus: 0,
            runs: Vec::new(),
            rare: Vec::new(),
            states: Vec::new(),
            state_sites_plain: 0,
            state_sites_all: 0,
        },
        judged: Judged::default(),
        scopes: Vec::new(),
        drawn: DrawnTally::default(),
        api_draws: ApiDraws::default(),
    };
    let dir = out_dir("explore");
    let files = jobs::write_explore(&summary, &SwarmArgs::default(), &dir).unwrap();
    let shrunk = dir.join(FAILURES_DIR).join("seed-7.svg");
    assert_eq!(
        files.pictures,
        vec![shrunk.clone()],
        "only the shrunk failure"
    );
    assert!(files.all().contains(&shrunk));
    let svg = std::fs::read_to_string(&shrunk).unwrap();
    assert!(svg.contains("seed 7 (Spin, shrunk)") && svg.contains("Overlap on res0"));
    let md = std::fs::read_to_string(dir.join("sim-explore.md")).unwrap();
    assert!(
        md.contains("](sim-failures/seed-7.svg)"),
        "linked relatively"
    );
    assert!(
        !md.contains("seed-8.svg"),
        "an unshrunk failure has no picture"
    );
    assert!(!dir.join(FAILURES_DIR).join("seed-8.svg").exists());
    let _ = std::fs::remove_dir_all(dir);
}
