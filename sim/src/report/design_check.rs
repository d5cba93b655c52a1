//! `leasehold-sim design check FILE`: a team's own lock design (a design file, see
//! [`crate::workload::designs::file`]) against every fault class of the verdict matrix and
//! under plain exploration, judged by the simulator's checker; the matrix row, each
//! failure's spec (which replays it: it carries the design), its picture, a markdown report
//! and JUnit XML for CI systems.
//!
//! What fails the check is what the file lists under `must_survive`: a fault class whose
//! cell is not safe in every run (or whose fault landed in none: survival not shown), and
//! `exploration` when plain exploration found an *unexpected* failure — one the checker's
//! rules tie to no fault (a fault sized and placed to cause it), so the design itself is
//! wrong. A correct lease lock still loses exclusion under a long enough pause; that is a
//! fault class's cell, not an exploration failure.
//!
//! Invariant: the exploration's runs are the swarm's plain seeds on a single node (the
//! deployment a file design runs on), with the clients' design replaced and the lock kind
//! a mutex, so the same seeds give the same runs for every design; a design that does not
//! renew is explored with its holds cut to half its lease (its users must finish within
//! the lease; holding past it is the `long-holds` class's question, not exploration's).

use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::explore::{self, ExploreOptions, Failure, SHRINK_BUDGET, parallel, run_and_classify};
use crate::report::designs::{Cell, FAULT_CLASSES, Outcome, Row, run_matrix, slug};
use crate::report::{self, jobs};
use crate::scenario::run::{self, RunSpec};
use crate::workload::designs::file::{DesignFile, EXPLORATION};
use crate::workload::{LockKind, Strategy};
use crate::world::SimError;

/// Plain exploration seeds a check runs unless told otherwise.
pub const DEFAULT_CHECK_EXPLORE_SEEDS: u64 = 200;

/// What plain exploration found.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Exploration {
    /// Seeds run.
    pub seeds: u64,
    /// Runs with an unexpected failure.
    pub failing: u64,
    /// Runs whose failures were all expected (a rule tied each to its fault).
    pub expected: u64,
    /// The first failing seed, its failure and the checker's description.
    pub first: Option<(u64, Failure, String)>,
    /// The first failure, shrunk.
    #[serde(skip)]
    pub shrunk: Option<RunSpec>,
}

/// One item of `must_survive` and whether the design did.
#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    /// The fault class, or `exploration`.
    pub name: String,
    /// Whether the design must survive it.
    pub must_survive: bool,
    /// `None` when it survived; else what happened.
    pub failure: Option<String>,
}

/// A design's check.
#[derive(Debug, Clone, Serialize)]
pub struct DesignCheck {
    /// The design's name.
    pub design: String,
    /// Its file.
    pub file: PathBuf,
    /// Seeds per fault class.
    pub seeds: u64,
    /// The fault classes' cells.
    pub cells: Vec<Cell>,
    /// Plain exploration.
    pub exploration: Exploration,
    /// Per fault class and exploration: whether it must be survived, and what happened.
    pub verdicts: Vec<Verdict>,
    /// Wall time, s.
    pub wall_s: f64,
}

impl Exploration {
    /// What failed, when a seed found the design broken with no fault to explain it.
    pub fn failure(&self) -> Option<String> {
        self.first.as_ref().map(|(seed, failure, detail)| {
            format!(
                "{failure:?} in {}/{} plain seeds with no fault to explain it (first seed {seed}): {detail}",
                self.failing, self.seeds
            )
        })
    }
}

impl DesignCheck {
    /// Whether every item under `must_survive` was survived.
    pub fn passed(&self) -> bool {
        self.verdicts
            .iter()
            .all(|v| !v.must_survive || v.failure.is_none())
    }
}

/// Runs `design` (loaded from `file`) against every fault class over seeds `0..seeds`
/// and plain exploration over seeds `0..explore_seeds`, on `jobs` threads.
pub fn run_check(
    design: &DesignFile,
    file: &Path,
    seeds: u64,
    explore_seeds: u64,
    jobs: usize,
    tick: impl Fn() + Sync,
) -> Result<DesignCheck, SimError> {
    let started = std::time::Instant::now();
    let exploration = explore_design(design, 0..explore_seeds, jobs, &tick)?;
    let exploration = shrink_first(design, exploration)?;
    assemble(design, file, seeds, exploration, jobs, &tick, started)
}

/// The check of `design` from its exploration: runs the fault classes' cells over seeds
/// `0..seeds` and judges every item against `must_survive`.
pub(crate) fn assemble(
    design: &DesignFile,
    file: &Path,
    seeds: u64,
    exploration: Exploration,
    jobs: usize,
    tick: &(impl Fn() + Sync),
    started: std::time::Instant,
) -> Result<DesignCheck, SimError> {
    let row = Row::File(Arc::new(design.clone()));
    let matrix = run_matrix(std::slice::from_ref(&row), seeds, jobs, tick)?;
    let must = |name: &str| design.must_survive.iter().any(|m| m == name);
    let mut verdicts: Vec<Verdict> = matrix
        .cells
        .iter()
        .zip(FAULT_CLASSES.iter())
        .map(|(cell, class)| Verdict {
            name: class.name.to_owned(),
            must_survive: must(class.name),
            failure: match (cell.worst, cell.landed) {
                (_, 0) => Some("its fault landed in no run: survival not shown".to_owned()),
                (Outcome::Safe, _) => None,
                (worst, _) => Some(format!(
                    "{} in {}/{} runs (first seed {}): {}",
                    worst.word(),
                    cell.worst_runs,
                    cell.runs,
                    cell.first_seed.map_or("-".to_owned(), |s| s.to_string()),
                    cell.problem.as_deref().unwrap_or("no progress")
                )),
            },
        })
        .collect();
    verdicts.push(Verdict {
        name: EXPLORATION.to_owned(),
        must_survive: must(EXPLORATION),
        failure: exploration.failure(),
    });
    Ok(DesignCheck {
        design: design.name.clone(),
        file: file.to_owned(),
        seeds,
        cells: matrix.cells,
        exploration,
        verdicts,
        wall_s: started.elapsed().as_secs_f64(),
    })
}

/// The swarm's plain seed `seed`, on one node, run by `design`'s clients.
pub fn exploration_spec(design: &DesignFile, seed: u64) -> RunSpec {
    let options = ExploreOptions {
        strategies: vec![Strategy::Spin],
        ..ExploreOptions::default()
    };
    let mut spec = explore::swarm_spec(seed, &options);
    spec.workload.kind = LockKind::Mutex;
    spec.workload.reentry = None;
    if design.renew.is_none() {
        let most = spec.workload.ttl / 2;
        let (lo, hi) = spec.workload.hold;
        spec.workload.hold = (lo.min(most), hi.min(most));
    }
    spec.design_file = Some(design.clone());
    spec
}

/// Plain exploration of `design` over `seeds` (not shrunk).
pub(crate) fn explore_design(
    design: &DesignFile,
    seeds: Range<u64>,
    jobs: usize,
    tick: &(impl Fn() + Sync),
) -> Result<Exploration, SimError> {
    let items: Vec<u64> = seeds.collect();
    let found = parallel::map(
        &items,
        jobs,
        |seed| run_and_classify(&exploration_spec(design, *seed)).map(|(_, findings)| findings),
        tick,
    );
    let mut exploration = Exploration {
        seeds: items.len() as u64,
        failing: 0,
        expected: 0,
        first: None,
        shrunk: None,
    };
    for (seed, findings) in items.iter().zip(found) {
        let findings = findings?;
        match findings.iter().find(|f| f.known_limitation.is_none()) {
            Some(unexpected) => {
                exploration.failing += 1;
                if exploration.first.is_none() {
                    exploration.first =
                        Some((*seed, unexpected.failure, unexpected.detail.clone()));
                }
            }
            None if !findings.is_empty() => exploration.expected += 1,
            None => {}
        }
    }
    Ok(exploration)
}

/// `exploration` with its first failure shrunk.
pub(crate) fn shrink_first(
    design: &DesignFile,
    mut exploration: Exploration,
) -> Result<Exploration, SimError> {
    if let Some((seed, failure, _)) = &exploration.first {
        let spec = exploration_spec(design, *seed);
        let target = (*failure, None);
        exploration.shrunk = Some(explore::shrink(&spec, target, SHRINK_BUDGET)?.0);
    }
    Ok(exploration)
}

/// Where a check writes: `design-check-<name>/` under the report directory.
pub(crate) fn dir_of(check: &DesignCheck, out: &Path) -> PathBuf {
    out.join(format!("design-check-{}", slug(&check.design)))
}

impl DesignCheck {
    /// Writes each failure's spec (`replay --spec` replays it) and picture, then the
    /// report (`design-check.md`, `.json`) and JUnit XML (`design-check.xml`), under `out`;
    /// the paths written.
    pub fn write(&mut self, out: &Path) -> io::Result<Vec<PathBuf>> {
        let dir = dir_of(self, out);
        let mut written = Vec::new();
        let mut failures: Vec<(String, RunSpec)> = self
            .cells
            .iter()
            .zip(FAULT_CLASSES.iter())
            .filter_map(|(cell, class)| Some((class.name.to_owned(), cell.spec.clone()?)))
            .collect();
        if let Some(spec) = &self.exploration.shrunk {
            failures.push((format!("{EXPLORATION}-shrunk"), spec.clone()));
        }
        for (name, spec) in &failures {
            let stem = format!("{name}-seed-{}", spec.seed);
            written.push(report::write_json(&dir, &format!("{stem}.json"), spec)?);
            let result = run::run(spec).map_err(io::Error::other)?;
            let title = format!("{} under {name}, seed {}", self.design, spec.seed);
            written.push(jobs::write_picture(
                &dir,
                &format!("{stem}.svg"),
                &title,
                spec,
                &result,
            )?);
        }
        written.push(report::write_text(
            &dir,
            "design-check.md",
            &self.markdown(),
        )?);
        written.push(report::write_json(&dir, "design-check.json", self)?);
        written.push(report::write_text(&dir, "design-check.xml", &self.junit())?);
        Ok(written)
    }

    /// The report: the verdict per item, the design's matrix row, exploration.
    pub fn markdown(&self) -> String {
        let mut md = format!(
            "# Design check: {}\n\nFile `{}`; {} seeds per fault class, {} plain exploration seeds; {:.0} s wall. **{}**.\n\n| item | must survive | result |\n|---|---|---|\n",
            self.design,
            self.file.display(),
            self.seeds,
            self.exploration.seeds,
            self.wall_s,
            if self.passed() { "passed" } else { "failed" }
        );
        for v in &self.verdicts {
            md.push_str(&format!(
                "| {} | {} | {} |\n",
                v.name,
                if v.must_survive { "yes" } else { "no" },
                v.failure.as_deref().unwrap_or("survived")
            ));
        }
        md.push_str(&format!(
            "\nExploration: {} of {} seeds failed with no fault to explain it; {} more failed only in ways a catalogued scenario documents (known limitations).\n\nEach failure's spec is beside this file as `<item>-seed-<seed>.json` (replay: `leasehold-sim replay --spec FILE`), with its picture.\n",
            self.exploration.failing, self.exploration.seeds, self.exploration.expected
        ));
        md
    }

    /// JUnit XML: one test case per item; an item the design must survive and did not is
    /// a failure, one it need not survive and did not is skipped with what happened.
    pub fn junit(&self) -> String {
        let failures = self
            .verdicts
            .iter()
            .filter(|v| v.must_survive && v.failure.is_some())
            .count();
        let skipped = self
            .verdicts
            .iter()
            .filter(|v| !v.must_survive && v.failure.is_some())
            .count();
        let mut xml = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n  <testsuite name=\"design check {}\" tests=\"{}\" failures=\"{failures}\" skipped=\"{skipped}\" time=\"{:.3}\">\n",
            xml_escape(&self.design),
            self.verdicts.len(),
            self.wall_s
        );
        for v in &self.verdicts {
            let name = xml_escape(&v.name);
            let design = xml_escape(&self.design);
            match (&v.failure, v.must_survive) {
                (None, _) => xml.push_str(&format!(
                    "    <testcase classname=\"{design}\" name=\"{name}\"/>\n"
                )),
                (Some(why), true) => xml.push_str(&format!(
                    "    <testcase classname=\"{design}\" name=\"{name}\">\n      <failure message=\"{}\"/>\n    </testcase>\n",
                    xml_escape(why)
                )),
                (Some(why), false) => xml.push_str(&format!(
                    "    <testcase classname=\"{design}\" name=\"{name}\">\n      <skipped message=\"not under must_survive: {}\"/>\n    </testcase>\n",
                    xml_escape(why)
                )),
            }
        }
        xml.push_str("  </testsuite>\n</testsuites>\n");
        xml
    }
}

fn xml_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
