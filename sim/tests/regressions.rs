//! Shrunk failures of fixed bugs (of the lock, or of the simulator's model of a deployment),
//! kept as replayable specs: every JSON `RunSpec` under `tests/regressions/` must now run
//! clean (no violation, overlap, starvation or livelock).
//!
//! To add one, copy the spec that `explore` wrote under `reports/sim-failures/` here with a
//! name that says what broke. Under `tests/regressions/expected/` are runs of a deployment
//! hazard the checker once failed to explain: each must fail only as a known limitation,
//! every finding with the rule that explains it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use leasehold_sim::explore;
use leasehold_sim::scenario::run::RunSpec;

/// The JSON specs directly under `dir` (relative to the crate), in name order.
fn specs_in(dir: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut specs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|err| panic!("reading {}: {err}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    specs.sort();
    specs
}

#[test]
fn shrunk_regressions_replay_clean() {
    let specs = specs_in("tests/regressions");
    assert!(!specs.is_empty(), "no regression specs found");
    let mut failed = Vec::new();
    for path in &specs {
        let text = std::fs::read_to_string(path).unwrap();
        let spec: RunSpec = serde_json::from_str(&text)
            .unwrap_or_else(|err| panic!("{} is not a RunSpec: {err}", path.display()));
        let (result, findings) = explore::run_and_classify(&spec).unwrap();
        if !findings.is_empty() {
            failed.push(format!(
                "{} (seed {}): {findings:?}\n  {}",
                path.display(),
                spec.seed,
                explore::details(&result).join("\n  ")
            ));
        }
    }
    assert!(
        failed.is_empty(),
        "regressions failed:\n{}",
        failed.join("\n")
    );
}

/// The first regression: RedLock reused one hold id per master across the retries of a
/// `lock()` call, so an earlier attempt's background release deleted a later grant.
#[test]
fn redlock_stale_background_release_is_fenced() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/regressions/redlock-stale-background-release.json");
    let spec: RunSpec = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let (result, findings) = explore::run_and_classify(&spec).unwrap();
    assert!(
        findings.is_empty(),
        "{}",
        explore::details(&result).join("\n")
    );
    assert!(result.stats.acquisitions > 0, "the run must acquire at all");
}

/// A split whose promoted master was itself failed over before the heal: the zombie must
/// rejoin the group's master of that moment. It rejoined the master promoted for the split,
/// a replica by then, so the model refused and left two masters, and the near client, which
/// kept the zombie, was granted there beside everyone else (overlaps seconds after the last
/// fault).
#[test]
fn a_healed_split_rejoins_the_current_master() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/regressions/split-heal-rejoins-the-current-master.json");
    let mut spec: RunSpec = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    spec.trace = true;
    let (result, findings) = explore::run_and_classify(&spec).unwrap();
    assert!(
        result.trace.contains("n2 promoted")
            && result.trace.contains("n0 rejoins as a replica of n2"),
        "the second failover promoted n2 and the zombie n0 rejoined it"
    );
    assert!(findings.is_empty(), "{findings:?}");
}

/// Runs whose tokens went backwards because a full node evicted the lock's fence key (its
/// clock behind): once unexplained, because the rule did not know evictions, and because a
/// later call of the same epoch stood in for the grant. Each must fail only as expected.
#[test]
fn fence_key_evictions_are_explained() {
    let specs = specs_in("tests/regressions/expected");
    assert!(
        !specs.is_empty(),
        "no specs under tests/regressions/expected"
    );
    for path in specs {
        let text = std::fs::read_to_string(&path).unwrap();
        let spec: RunSpec = serde_json::from_str(&text).unwrap();
        let (result, findings) = explore::run_and_classify(&spec).unwrap();
        assert!(
            !findings.is_empty(),
            "{}: the hazard must show",
            path.display()
        );
        for finding in &findings {
            assert!(
                finding.known_limitation.is_some() && finding.evidence.is_some(),
                "{}: {finding:?}\n  {}",
                path.display(),
                explore::details(&result).join("\n  ")
            );
        }
    }
}
