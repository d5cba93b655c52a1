//! One shard of an exploration split over machines (`explore --shard I/N`): which plain
//! seeds it runs, and the record its `sim-explore.json` carries so that `merge`
//! ([`crate::report::merge`]) can put the N reports back together as one.
//!
//! Steering does not split: a steered round is scheduled from the merge of every run
//! before it, which no shard holds. So a shard runs plain seeds only (`--steer 0`), and the
//! N shards of `--start S --seeds K` run exactly the seeds `explore --start S --seeds K
//! --steer 0` runs, each once; merged, their report is that run's, wall-clock time aside.
//!
//! Invariant: the record names the whole exploration (its start, seeds, flags and shrink
//! setting) as well as the shard, so `merge` can refuse shards of different explorations.

use std::io;
use std::ops::Range;
use std::path::Path;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::explore::shard::Shard;
use crate::explore::steer::{self, Budget, PlainReach};
use crate::report::ExploreSummary;
use crate::report::jobs::{self, ExploreFiles, SwarmArgs};
use crate::world::SimError;

/// Which plain seeds one shard of an exploration runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardPlan {
    /// The shard.
    pub shard: Shard,
    /// The whole exploration's first seed.
    pub start: u64,
    /// The whole exploration's plain seeds.
    pub seeds: u64,
}

impl ShardPlan {
    /// Shard `shard` of the exploration of `seeds` runs from `start` with `steer` of them
    /// steered; refused unless `steer` is 0 (see the module's doc).
    pub fn new(shard: Shard, start: u64, seeds: u64, steer: f64) -> Result<Self, SimError> {
        if steer != 0.0 {
            return Err(SimError::ShardSteered(steer));
        }
        Ok(Self {
            shard,
            start,
            seeds,
        })
    }

    /// The seeds this shard runs.
    pub fn range(&self) -> Range<u64> {
        self.shard.seeds(self.start, self.seeds)
    }

    /// How many runs this shard makes (one tick of progress each).
    pub fn runs(&self) -> u64 {
        let range = self.range();
        range.end - range.start
    }
}

/// What a shard's `sim-explore.json` carries beside its summary, under `shard`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardRecord {
    /// Which shard.
    pub shard: Shard,
    /// The whole exploration's first seed.
    pub start: u64,
    /// The whole exploration's plain seeds.
    pub seeds: u64,
    /// Whether failures were shrunk (`explore` without `--no-shrink`).
    pub shrink: bool,
    /// The flags the runs were drawn under, which the replay commands repeat.
    pub swarm: SwarmArgs,
    /// What this shard's plain seeds reached, from which `merge` rebuilds the steering
    /// report's reach, corpus and rare features.
    pub reach: PlainReach,
}

/// A shard's summary and its record.
#[derive(Debug, Clone)]
pub struct ShardRun {
    /// The summary of this shard's seeds, as `explore` reports any seeds.
    pub summary: ExploreSummary,
    /// What `merge` needs beside it.
    pub record: ShardRecord,
}

/// A shard's `sim-explore.json`: its summary with the record beside.
#[derive(Serialize)]
struct ShardJson<'a> {
    #[serde(flatten)]
    summary: &'a ExploreSummary,
    shard: &'a ShardRecord,
}

/// Runs the shard `plan` names on `jobs` threads (`tick` after each run), shrinking
/// failures when `shrink_failures`.
pub fn run_shard(
    plan: &ShardPlan,
    swarm: &SwarmArgs,
    shrink_failures: bool,
    jobs: usize,
    tick: impl Fn() + Sync,
) -> Result<ShardRun, SimError> {
    let options = swarm.options()?;
    let range = plan.range();
    let budget = Budget {
        plain: plan.runs(),
        steered: 0,
    };
    let started = Instant::now();
    let (explored, steering) =
        steer::explore(range.start, budget, &options, shrink_failures, jobs, tick)?;
    let wall_secs = started.elapsed().as_secs_f64();
    let record = ShardRecord {
        shard: plan.shard,
        start: plan.start,
        seeds: plan.seeds,
        shrink: shrink_failures,
        swarm: swarm.clone(),
        reach: PlainReach::of(&explored),
    };
    let summary = jobs::summarize(range.start, options, explored, steering, wall_secs);
    Ok(ShardRun { summary, record })
}

/// Writes the shard's `sim-explore.md`, its `sim-explore.json` (the summary with the
/// record under `shard`), its failures' shrunk specs and pictures into `dir`.
pub fn write_shard(run: &ShardRun, dir: &Path) -> io::Result<ExploreFiles> {
    let json = ShardJson {
        summary: &run.summary,
        shard: &run.record,
    };
    let reports = jobs::write_explore_reports(&run.summary, &run.record.swarm, &json, dir)?;
    jobs::write_failures(&run.summary, reports, dir)
}
