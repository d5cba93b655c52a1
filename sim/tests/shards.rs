//! An exploration split into shards (`explore --shard I/N`) and merged (`merge`) reports
//! what one run of the same seeds reports: the same verdict tallies, the same failing
//! seeds with the same files, and the same report, wall-clock time aside.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use leasehold_sim::explore::shard::Shard;
use leasehold_sim::explore::steer::Budget;
use leasehold_sim::report::ExploreSummary;
use leasehold_sim::report::jobs::{self, FAILURES_DIR, SwarmArgs};
use leasehold_sim::report::merge;
use leasehold_sim::report::shard::{self, ShardPlan};

/// Seeds and virtual seconds per run: small enough to run both ways in seconds, and
/// seeds 0..40 at 10 s include failing runs, so their order and files are compared too.
const SEEDS: u64 = 40;
const HORIZON_SECS: u64 = 10;
const SHARDS: u32 = 4;
const THREADS: usize = 2;

fn out_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("leasehold-shards-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// `summary` with its wall-clock time, the one figure that differs run to run, zeroed.
fn timeless(mut summary: ExploreSummary) -> ExploreSummary {
    summary.wall_secs = 0.0;
    summary
}

/// The files under `dir`'s failures directory, by name, with their contents.
fn failure_files(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir.join(FAILURES_DIR))
        .map(|entries| {
            entries
                .map(|e| {
                    let e = e.unwrap();
                    let name = e.file_name().to_string_lossy().into_owned();
                    (name, std::fs::read(e.path()).unwrap())
                })
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

#[test]
fn four_shards_merged_report_what_one_run_of_their_seeds_reports() {
    let swarm = SwarmArgs {
        horizon_secs: HORIZON_SECS,
        ..SwarmArgs::default()
    };
    let start = 0;
    let whole = jobs::run_explore_steered(
        start,
        Budget::new(SEEDS, 0.0).unwrap(),
        &swarm,
        true,
        THREADS,
        || (),
    )
    .unwrap();
    let whole_dir = out_dir("whole");
    jobs::write_explore(&whole, &swarm, &whole_dir).unwrap();

    // In reverse order: merge puts them back in shard order.
    let shard_dirs: Vec<PathBuf> = (1..=SHARDS)
        .rev()
        .map(|index| {
            let shard = Shard {
                index,
                count: SHARDS,
            };
            let plan = ShardPlan::new(shard, start, SEEDS, 0.0).unwrap();
            let run = shard::run_shard(&plan, &swarm, true, THREADS, || ()).unwrap();
            assert_eq!(run.summary.seeds, SEEDS / u64::from(SHARDS));
            let dir = out_dir(&format!("shard-{index}"));
            shard::write_shard(&run, &dir).unwrap();
            dir
        })
        .collect();
    let merged = merge::merge(&shard_dirs).unwrap();
    let merged_dir = out_dir("merged");
    let files = merge::write_merged(&merged, &merged_dir).unwrap();

    let failing = |s: &ExploreSummary| s.failures.iter().map(|f| f.run_id()).collect::<Vec<_>>();
    assert!(
        !whole.failures.is_empty(),
        "no failing seed among these: the failures' merge would go unchecked"
    );
    assert_eq!(merged.summary.verdicts, whole.verdicts);
    assert_eq!(failing(&merged.summary), failing(&whole));
    assert_eq!(
        files
            .failures
            .iter()
            .map(|(id, _)| id.clone())
            .collect::<Vec<_>>(),
        failing(&whole)
    );
    assert_eq!(
        merged.summary.unexpected().count(),
        whole.unexpected().count()
    );
    assert_eq!(merged.swarm, swarm);
    let (merged, whole) = (timeless(merged.summary), timeless(whole));
    assert_eq!(
        jobs::explore_markdown(&merged, &swarm),
        jobs::explore_markdown(&whole, &swarm)
    );
    assert_eq!(
        serde_json::to_string_pretty(&merged).unwrap(),
        serde_json::to_string_pretty(&whole).unwrap()
    );
    assert_eq!(failure_files(&merged_dir), failure_files(&whole_dir));
    for dir in shard_dirs.iter().chain([&whole_dir, &merged_dir]) {
        let _ = std::fs::remove_dir_all(dir);
    }
}
