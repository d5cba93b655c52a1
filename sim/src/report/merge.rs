//! `merge`: the reports of the N shards of one exploration ([`crate::report::shard`]) put
//! back together as the report of the whole.
//!
//! Every table of the summary is a sum over runs, a first plain seed, or a set reached by
//! some run, so each adds up from the shards' tables; steering's corpus and rare features
//! come from the reach each shard records. The shards are added in shard order, which is
//! seed order, so "first" means what it means in one run.
//!
//! Invariant: the merged summary of the N shards of `explore --start S --seeds K --steer 0`
//! is that run's summary, but for its wall-clock time (the shards' times summed). Shards
//! of different explorations (flags, options, start, seeds, shard count or shrinking), a
//! shard given twice and a shard missing are refused, naming the directory.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::explore::drawn::{ApiDraws, DrawnTally};
use crate::explore::lineage::RunId;
use crate::explore::{ExploreOptions, FailureReport};
use crate::model::coverage::ScriptCoverage;
use crate::report::ExploreSummary;
use crate::report::branches::{self, ScriptBranches};
use crate::report::jobs::{self, ExploreFiles, FAILURES_DIR, SwarmArgs};
use crate::report::judged::Judged;
use crate::report::scopes::{self, ScopeTally};
use crate::report::shard::ShardRecord;
use crate::workload::client_marks::MarkCount;
use crate::world::SimError;

/// The report file a shard's directory must hold.
const SUMMARY_FILE: &str = "sim-explore.json";

/// A shard's `sim-explore.json` as `merge` reads it: the summary's tables it adds up (the
/// steering report is rebuilt from `shard.reach` instead) and the shard's record.
#[derive(Debug, Deserialize)]
struct ShardFile {
    start: u64,
    seeds: u64,
    options: ExploreOptions,
    verdicts: [u64; 5],
    failures: Vec<FailureReport>,
    wall_secs: f64,
    coverage: Vec<ScriptCoverage>,
    branches: Vec<ScriptBranches>,
    client_marks: Vec<Mark>,
    judged: Judged,
    scopes: Vec<ScopeTally>,
    drawn: DrawnTally,
    api_draws: ApiDraws,
    shard: Option<ShardRecord>,
}

/// A client mark's count as a report writes it ([`MarkCount`]).
#[derive(Debug, Deserialize)]
struct Mark {
    mark: String,
    runs: u64,
}

/// A shard read from its directory.
#[derive(Debug)]
struct ShardDir {
    dir: PathBuf,
    file: ShardFile,
    record: ShardRecord,
}

/// The merged exploration: its summary, the flags its replay commands repeat, and where
/// each failure's files are.
#[derive(Debug)]
pub struct Merged {
    /// The summary of the whole exploration.
    pub summary: ExploreSummary,
    /// The flags it ran with.
    pub swarm: SwarmArgs,
    /// Per failure, the directory of the shard that ran it.
    sources: Vec<(RunId, PathBuf)>,
}

/// Reads the shards in `dirs` and merges them; refuses shards that are not every shard of
/// one exploration exactly once.
pub fn merge(dirs: &[PathBuf]) -> Result<Merged, SimError> {
    let shards = dirs
        .iter()
        .map(|dir| read(dir))
        .collect::<Result<Vec<_>, _>>()?;
    let mut ordered = check(shards)?.into_iter();
    let first = ordered.next().ok_or(SimError::NoShards)?;
    combine(first, ordered)
}

/// The shard in `dir`.
fn read(dir: &Path) -> Result<ShardDir, SimError> {
    let not_a_shard = |why: String| SimError::NotAShard {
        dir: dir.to_owned(),
        why,
    };
    let path = dir.join(SUMMARY_FILE);
    let text = std::fs::read_to_string(&path)
        .map_err(|err| not_a_shard(format!("cannot read {SUMMARY_FILE}: {err}")))?;
    let mut file: ShardFile = serde_json::from_str(&text)
        .map_err(|err| not_a_shard(format!("{SUMMARY_FILE} is no exploration report: {err}")))?;
    let record = file
        .shard
        .take()
        .ok_or_else(|| not_a_shard("its exploration ran without --shard".to_owned()))?;
    let range = record.shard.seeds(record.start, record.seeds);
    if (file.start, file.seeds) != (range.start, range.end - range.start) {
        return Err(not_a_shard(format!(
            "shard {} of seeds {}..{} should have run seeds {}..{}, not {}..{}",
            record.shard,
            record.start,
            record.start + record.seeds,
            range.start,
            range.end,
            file.start,
            file.start + file.seeds
        )));
    }
    Ok(ShardDir {
        dir: dir.to_owned(),
        file,
        record,
    })
}

/// The shards in shard order, once each checked to be of the first one's exploration.
fn check(shards: Vec<ShardDir>) -> Result<Vec<ShardDir>, SimError> {
    let first = shards.first().ok_or(SimError::NoShards)?;
    let (first_dir, want, options) = (
        first.dir.clone(),
        first.record.clone(),
        first.file.options.clone(),
    );
    let mut slots: BTreeMap<u32, ShardDir> = BTreeMap::new();
    for shard in shards {
        let got = &shard.record;
        let differ = if got.swarm != want.swarm || shard.file.options != options {
            Some("exploration options (--strategy, --faults, --horizon-secs, --max-clients)")
        } else if got.shard.count != want.shard.count {
            Some("shard counts (N of --shard I/N)")
        } else if (got.start, got.seeds) != (want.start, want.seeds) {
            Some("seeds (--start, --seeds)")
        } else if got.shrink != want.shrink {
            Some("shrink settings (--no-shrink)")
        } else {
            None
        };
        if let Some(what) = differ {
            return Err(SimError::ShardMismatch {
                dir: shard.dir,
                first: first_dir,
                what,
            });
        }
        if let Some(seen) = slots.get(&got.shard.index) {
            return Err(SimError::DuplicateShard {
                shard: got.shard.to_string(),
                first: seen.dir.clone(),
                second: shard.dir,
            });
        }
        slots.insert(got.shard.index, shard);
    }
    let missing: Vec<String> = (1..=want.shard.count)
        .filter(|index| !slots.contains_key(index))
        .map(|index| index.to_string())
        .collect();
    if !missing.is_empty() {
        return Err(SimError::MissingShards {
            missing: missing.join(", "),
            count: want.shard.count,
        });
    }
    Ok(slots.into_values().collect())
}

/// The tables of `first` and the `rest` of the shards added up, in shard order.
fn combine(first: ShardDir, rest: impl Iterator<Item = ShardDir>) -> Result<Merged, SimError> {
    let first_dir = first.dir.clone();
    let record = first.record;
    let mut sources: Vec<(RunId, PathBuf)> = first
        .file
        .failures
        .iter()
        .map(|f| (f.run_id(), first.dir.clone()))
        .collect();
    let mut all = first.file;
    let mut reach = record.reach.clone();
    let mut marks: BTreeMap<String, u64> = all
        .client_marks
        .drain(..)
        .map(|m| (m.mark, m.runs))
        .collect();
    for shard in rest {
        let file = shard.file;
        sources.extend(
            file.failures
                .iter()
                .map(|f| (f.run_id(), shard.dir.clone())),
        );
        for (mine, theirs) in all.verdicts.iter_mut().zip(file.verdicts) {
            *mine += theirs;
        }
        all.failures.extend(file.failures);
        all.wall_secs += file.wall_secs;
        for (mine, theirs) in all.coverage.iter_mut().zip(&file.coverage) {
            mine.add(theirs);
        }
        if !branches::add(&mut all.branches, &file.branches) {
            return Err(SimError::ShardMismatch {
                dir: shard.dir,
                first: first_dir,
                what: "lock scripts' branches (another build of the simulator)",
            });
        }
        for m in file.client_marks {
            *marks.entry(m.mark).or_default() += m.runs;
        }
        all.judged.add(&file.judged);
        scopes::add(&mut all.scopes, &file.scopes);
        all.drawn.add(&file.drawn);
        all.api_draws.add(&file.api_draws);
        reach.add(&shard.record.reach);
    }
    let summary = ExploreSummary {
        start: record.start,
        seeds: record.seeds,
        options: all.options,
        verdicts: all.verdicts,
        failures: all.failures,
        wall_secs: all.wall_secs,
        coverage: all.coverage,
        branches: all.branches,
        client_marks: marks
            .into_iter()
            .map(|(mark, runs)| MarkCount { mark, runs })
            .collect(),
        steering: reach.report(record.seeds),
        judged: all.judged,
        scopes: all.scopes,
        drawn: all.drawn,
        api_draws: all.api_draws,
    };
    Ok(Merged {
        summary,
        swarm: record.swarm,
        sources,
    })
}

/// Writes the merged `sim-explore.md` and `sim-explore.json` into `dir`, and copies each
/// failure's shrunk spec (and picture, where its shard drew one) from its shard's
/// directory.
pub fn write_merged(merged: &Merged, dir: &Path) -> io::Result<ExploreFiles> {
    let reports =
        jobs::write_explore_reports(&merged.summary, &merged.swarm, &merged.summary, dir)?;
    let into = dir.join(FAILURES_DIR);
    std::fs::create_dir_all(&into)?;
    let mut failures = Vec::new();
    let mut pictures = Vec::new();
    for (run, from) in &merged.sources {
        let stem = format!("seed-{}", run.file_stem());
        let spec = format!("{stem}.json");
        failures.push((run.clone(), copy(&from.join(FAILURES_DIR), &into, &spec)?));
        let picture = format!("{stem}.svg");
        if from.join(FAILURES_DIR).join(&picture).is_file() {
            pictures.push(copy(&from.join(FAILURES_DIR), &into, &picture)?);
        }
    }
    Ok(ExploreFiles {
        reports,
        failures,
        pictures,
    })
}

/// Copies `from/name` to `into/name`; returns the copy's path.
fn copy(from: &Path, into: &Path, name: &str) -> io::Result<PathBuf> {
    let (source, to) = (from.join(name), into.join(name));
    std::fs::copy(&source, &to)
        .map_err(|err| io::Error::new(err.kind(), format!("{}: {err}", source.display())))?;
    Ok(to)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::explore::shard::Shard;
    use crate::report::shard::{self, ShardPlan};

    /// A fresh directory for this test's reports.
    fn out_dir(test: &str, name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "leasehold-merge-{}-{test}-{name}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    fn remove(dirs: &[PathBuf]) {
        for dir in dirs {
            let _ = std::fs::remove_dir_all(dir);
        }
    }

    /// Writes shard `index`/`count` of an exploration of no seeds (nothing to run, so
    /// only the record and the empty tables) under `swarm` into a fresh directory.
    fn shard(test: &str, index: u32, count: u32, swarm: &SwarmArgs) -> PathBuf {
        let plan = ShardPlan::new(Shard { index, count }, 0, 0, 0.0).unwrap();
        let run = shard::run_shard(&plan, swarm, false, 1, || ()).unwrap();
        let dir = out_dir(test, &format!("{index}-of-{count}"));
        shard::write_shard(&run, &dir).unwrap();
        dir
    }

    #[test]
    fn every_shard_once_merges() {
        let swarm = SwarmArgs::default();
        let dirs = [shard("once", 2, 2, &swarm), shard("once", 1, 2, &swarm)];
        let merged = merge(&dirs).unwrap();
        assert_eq!((merged.summary.start, merged.summary.seeds), (0, 0));
        assert_eq!(merged.swarm, swarm);
        remove(&dirs);
    }

    #[test]
    fn shards_of_other_options_are_refused_naming_the_directory() {
        let short = SwarmArgs {
            horizon_secs: 5,
            ..SwarmArgs::default()
        };
        let dirs = [
            shard("options", 1, 2, &SwarmArgs::default()),
            shard("options", 2, 2, &short),
        ];
        match merge(&dirs) {
            Err(err @ SimError::ShardMismatch { what, .. }) => {
                assert!(what.contains("options"), "{what}");
                assert!(err.to_string().contains(&*dirs[1].to_string_lossy()));
            }
            other => panic!("{other:?}"),
        }
        let other_count = [
            shard("count", 1, 2, &SwarmArgs::default()),
            shard("count", 2, 3, &SwarmArgs::default()),
        ];
        assert!(matches!(
            merge(&other_count),
            Err(SimError::ShardMismatch { what, .. }) if what.contains("shard counts")
        ));
        remove(&dirs);
        remove(&other_count);
    }

    #[test]
    fn a_missing_or_repeated_shard_is_refused() {
        let swarm = SwarmArgs::default();
        let one = shard("missing", 1, 3, &swarm);
        let three = shard("missing", 3, 3, &swarm);
        match merge(&[three.clone(), one.clone()]) {
            Err(err @ SimError::MissingShards { .. }) => {
                assert_eq!(
                    err.to_string(),
                    "shard(s) 2 of 3 missing: merge needs every shard once"
                );
            }
            other => panic!("{other:?}"),
        }
        let again = out_dir("missing", "1-again");
        std::fs::create_dir_all(&again).unwrap();
        std::fs::copy(one.join(SUMMARY_FILE), again.join(SUMMARY_FILE)).unwrap();
        match merge(&[one.clone(), three.clone(), again.clone()]) {
            Err(SimError::DuplicateShard {
                shard,
                first,
                second,
            }) => assert_eq!((shard.as_str(), &first, &second), ("1/3", &one, &again)),
            other => panic!("{other:?}"),
        }
        remove(&[one, three, again]);
    }

    #[test]
    fn a_directory_without_a_shard_report_is_refused() {
        let empty = out_dir("not-a-shard", "empty");
        assert!(matches!(
            merge(std::slice::from_ref(&empty)),
            Err(SimError::NotAShard { dir, .. }) if dir == empty
        ));
        let whole = out_dir("not-a-shard", "whole");
        let summary = crate::report::jobs::run_explore_steered(
            0,
            crate::explore::steer::Budget::new(0, 0.0).unwrap(),
            &SwarmArgs::default(),
            false,
            1,
            || (),
        )
        .unwrap();
        jobs::write_explore(&summary, &SwarmArgs::default(), &whole).unwrap();
        match merge(std::slice::from_ref(&whole)) {
            Err(err @ SimError::NotAShard { .. }) => {
                assert!(err.to_string().contains("without --shard"), "{err}");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(merge(&[]), Err(SimError::NoShards)));
        remove(&[whole]);
    }
}
