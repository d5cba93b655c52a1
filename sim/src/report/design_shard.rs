//! `design check FILE --shard I/N` and the merge of its shards (`leasehold-sim merge`): a
//! design's plain exploration split over machines, as `explore --shard` splits the
//! swarm's.
//!
//! A shard runs the I-th of N contiguous, disjoint slices of the exploration's seeds
//! ([`Shard::seeds`]) and writes what it found (`design-check-shard.json`, beside the
//! design file's content, so the merge needs no file). The fault classes' cells are not
//! split: 15 × 4 runs take about a second, so the merge runs them whole. The merge puts
//! the slices back in shard order (the first failing seed is then the unsharded run's),
//! shrinks that seed's failure and judges `must_survive`: its report, JUnit file and exit
//! code are the unsharded check's, wall time aside.
//!
//! Invariant: the merge refuses shards of different checks (another design, another seed
//! count or shard count), a shard given twice, and a missing one.

use std::io;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::explore::shard::Shard;
use crate::report;
use crate::report::design_check::{
    DesignCheck, Exploration, assemble, explore_design, shrink_first,
};
use crate::report::designs::slug;
use crate::workload::designs::file::DesignFile;
use crate::world::SimError;

/// The file a shard writes, in its design's report directory.
pub const SHARD_FILE: &str = "design-check-shard.json";

/// What one shard of a design check found.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CheckShard {
    /// The shard.
    pub shard: Shard,
    /// The design, as its file described it.
    pub design: DesignFile,
    /// The design file's path.
    pub file: PathBuf,
    /// Seeds per fault class (run by the merge).
    pub seeds: u64,
    /// The whole exploration's seeds, `0..explore_seeds`.
    pub explore_seeds: u64,
    /// What this shard's slice of them found (its first failure not shrunk).
    pub exploration: Exploration,
}

/// Runs shard `shard` of `design`'s exploration over `0..explore_seeds` on `jobs` threads.
pub fn run_shard(
    design: &DesignFile,
    file: &Path,
    seeds: u64,
    explore_seeds: u64,
    shard: Shard,
    jobs: usize,
    tick: impl Fn() + Sync,
) -> Result<CheckShard, SimError> {
    let exploration = explore_design(design, shard.seeds(0, explore_seeds), jobs, &tick)?;
    Ok(CheckShard {
        shard,
        design: design.clone(),
        file: file.to_owned(),
        seeds,
        explore_seeds,
        exploration,
    })
}

impl CheckShard {
    /// Writes the shard's record under `out` (in its design's report directory); its path.
    pub fn write(&self, out: &Path) -> io::Result<PathBuf> {
        let dir = out.join(format!("design-check-{}", slug(&self.design.name)));
        report::write_json(&dir, SHARD_FILE, self)
    }
}

/// Whether `dir` holds a design check's shard (directly, or in one design's directory
/// under it).
pub fn is_shard_dir(dir: &Path) -> bool {
    find(dir).is_ok()
}

/// The shard record in `dir`, or in the one `design-check-*` directory under it.
fn find(dir: &Path) -> Result<PathBuf, String> {
    let direct = dir.join(SHARD_FILE);
    if direct.is_file() {
        return Ok(direct);
    }
    let entries = std::fs::read_dir(dir).map_err(|err| format!("cannot read it: {err}"))?;
    let found: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path().join(SHARD_FILE))
        .filter(|p| p.is_file())
        .collect();
    match found.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(format!("no {SHARD_FILE} in it or a directory under it")),
        _ => Err(format!(
            "{} design checks' shards under it; name each design's directory",
            found.len()
        )),
    }
}

fn read(dir: &Path) -> Result<CheckShard, SimError> {
    let not_a_shard = |why: String| SimError::NotAShard {
        dir: dir.to_owned(),
        why,
    };
    let path = find(dir).map_err(not_a_shard)?;
    let text = std::fs::read_to_string(&path)
        .map_err(|err| not_a_shard(format!("cannot read {}: {err}", path.display())))?;
    serde_json::from_str(&text)
        .map_err(|err| not_a_shard(format!("{SHARD_FILE} is no design check shard: {err}")))
}

/// Merges the shards in `dirs` (any order) into the check one unsharded run would have
/// made, on `jobs` threads.
pub fn merge(dirs: &[PathBuf], jobs: usize) -> Result<DesignCheck, SimError> {
    let started = Instant::now();
    let mut shards: Vec<(PathBuf, CheckShard)> = dirs
        .iter()
        .map(|dir| Ok((dir.clone(), read(dir)?)))
        .collect::<Result<_, SimError>>()?;
    shards.sort_by_key(|(_, s)| s.shard.index);
    let (_, first) = shards.first().ok_or(SimError::NoShards)?;
    let count = first.shard.count;
    for (i, (dir, shard)) in shards.iter().enumerate() {
        let differs = |why: String| SimError::NotAShard {
            dir: dir.clone(),
            why,
        };
        if (
            &shard.design,
            shard.seeds,
            shard.explore_seeds,
            shard.shard.count,
        ) != (&first.design, first.seeds, first.explore_seeds, count)
        {
            return Err(differs(format!(
                "shard {} is of another check than shard {} (design, seeds or shard count)",
                shard.shard, first.shard
            )));
        }
        let want = u32::try_from(i + 1).unwrap_or(u32::MAX);
        if shard.shard.index != want {
            return Err(differs(format!(
                "shard {want}/{count} is missing or shard {} is given twice",
                shard.shard
            )));
        }
    }
    if shards.len() != count as usize {
        return Err(SimError::NotAShard {
            dir: shards.last().map(|(d, _)| d.clone()).unwrap_or_default(),
            why: format!("{} of {count} shards given", shards.len()),
        });
    }
    let mut exploration = Exploration {
        seeds: 0,
        failing: 0,
        expected: 0,
        first: None,
        shrunk: None,
    };
    for (_, shard) in &shards {
        let part = &shard.exploration;
        exploration.seeds += part.seeds;
        exploration.failing += part.failing;
        exploration.expected += part.expected;
        if exploration.first.is_none() {
            exploration.first.clone_from(&part.first);
        }
    }
    let exploration = shrink_first(&first.design, exploration)?;
    assemble(
        &first.design,
        &first.file,
        first.seeds,
        exploration,
        jobs,
        &|| {},
        started,
    )
}
