//! The verdict matrix of lock designs: every design (Leasehold's strategies and the
//! classic ones of [`crate::workload::designs`]) against every fault class of
//! docs/DESIGN.md §5, each cell run over the same seeds, the same fault and the same
//! checker, in `designs.md` / `designs.json` with a picture of each failing cell's first
//! failing seed.
//!
//! A cell says what the worst of its runs was — safe, stranded (a key or hold kept past
//! what the requests permit, or left without an expiry), starved, or exclusion broken —
//! how many of its runs did so, its first such seed, and how many runs the fault landed in
//! (a "safe" cell whose fault never landed is "not reached", not safe). Each failing cell
//! names its first problem as the checker described it, with the rule and evidence that
//! excused it when a rule did: "excused" there means the judge tied the anomaly to the
//! cell's fault by its size, place and window, so the fault broke the design; an
//! unexcused one broke it without the fault's help.
//!
//! Invariant: a cell's runs are the catalogue's runs of its fault class (or the base run,
//! for "none"), with only the clients' design changed, so rows differ in the design alone;
//! and every fault class's holds are the base run's (well within one lease), so a design
//! that cannot hold past its lease fails there for the fault, not for its hold times. The
//! "holds past the lease" column holds for half a lease to one and a half, with no fault:
//! a design that neither renews nor watches its lease fails there alone.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::checker::{Problem, ProblemKind, Verdict};
use crate::explore::parallel;
use crate::report::{self, jobs};
use crate::scenario::run::{self, RunResult, RunSpec};
use crate::scenario::{self, base};
use crate::workload::Strategy;
use crate::workload::designs::Design;
use crate::workload::designs::file::DesignFile;
use crate::world::faults::{Fault, ScheduledFault};
use crate::world::{RunEnd, SimError};

/// Seeds per cell in the main job's matrix.
pub const DEFAULT_DESIGN_SEEDS: u64 = 4;

/// The directory (under the report directory) of the failing cells' pictures.
pub const PICTURES_DIR: &str = "designs";

/// A row: Leasehold with one of its strategies, or another design.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Row {
    /// Leasehold's client with this wait strategy.
    Leasehold(Strategy),
    /// A built-in design's client.
    Other(Design),
    /// The client of a design described by a file.
    File(Arc<DesignFile>),
}

impl Row {
    /// Every row, Leasehold's first.
    pub fn all() -> Vec<Row> {
        Strategy::ALL
            .iter()
            .map(|s| Row::Leasehold(*s))
            .chain(Design::ALL.iter().map(|d| Row::Other(*d)))
            .collect()
    }

    /// The table label.
    pub fn label(&self) -> String {
        match self {
            Row::Leasehold(strategy) => format!("leasehold {}", strategy.name()),
            Row::Other(design) => design.name().to_owned(),
            Row::File(file) => file.name.clone(),
        }
    }

    fn strategy(&self) -> Strategy {
        match self {
            Row::Leasehold(strategy) => *strategy,
            Row::Other(design) => design.strategy(),
            Row::File(_) => Strategy::Spin,
        }
    }
}

/// A fault class: a column.
#[derive(Debug, Clone, Copy)]
pub struct FaultClass {
    /// The command-line name (`replay SEED --class NAME`).
    pub name: &'static str,
    /// The column label.
    pub label: &'static str,
    /// Where its runs come from.
    source: Source,
}

#[derive(Debug, Clone, Copy)]
enum Source {
    /// The base run, no fault.
    Plain,
    /// The catalogue scenario of this name.
    Scenario(&'static str),
    /// The base run with one client's clock jumping forward.
    ClientClockJump,
    /// The base run with holds from half a lease to one and a half, no fault.
    LongHolds,
}

/// The columns, in table order.
pub const FAULT_CLASSES: [FaultClass; 15] = [
    class("none", "none", Source::Plain),
    class("long-holds", "holds past the lease", Source::LongHolds),
    class(
        "holder-pause",
        "holder pause",
        Source::Scenario("holder-pause"),
    ),
    class(
        "network-delay",
        "network delay",
        Source::Scenario("network-delay"),
    ),
    class(
        "client-clock-drift",
        "client clock drift",
        Source::Scenario("client-clock-drift"),
    ),
    class(
        "client-clock-jump",
        "client clock jump",
        Source::ClientClockJump,
    ),
    class(
        "node-clock-jump",
        "node clock jump",
        Source::Scenario("node-clock-jump"),
    ),
    class(
        "crash-no-persistence",
        "crash, no persistence",
        Source::Scenario("crash-restart-no-persistence"),
    ),
    class(
        "crash-aof-always",
        "crash, AOF always",
        Source::Scenario("crash-restart-aof-always"),
    ),
    class(
        "failover",
        "failover",
        Source::Scenario("failover-async-replication"),
    ),
    class("partition", "partition", Source::Scenario("partition")),
    class(
        "client-crash",
        "client crash",
        Source::Scenario("holder-crash"),
    ),
    class("eviction", "eviction", Source::Scenario("memory-eviction")),
    class(
        "dead-waiter",
        "dead waiter",
        Source::Scenario("dead-waiter"),
    ),
    class(
        "ambiguous-reply",
        "ambiguous reply",
        Source::Scenario("ambiguous-acquire"),
    ),
];

const fn class(name: &'static str, label: &'static str, source: Source) -> FaultClass {
    FaultClass {
        name,
        label,
        source,
    }
}

/// The fault class named `name`.
pub fn find_class(name: &str) -> Result<&'static FaultClass, SimError> {
    FAULT_CLASSES
        .iter()
        .find(|c| c.name == name)
        .ok_or_else(|| SimError::UnknownFaultClass {
            name: name.to_owned(),
            known: FAULT_CLASSES.iter().map(|c| c.name).collect(),
        })
}

/// When the client clock jump lands, and how far: past a whole lease, on the second
/// client (a waiter when it lands, as the first one starts first).
const CLIENT_JUMP: (u64, i64) = (2_000, 1_500);

impl FaultClass {
    /// The run of this class for `row` and `seed`.
    pub fn spec(&self, row: &Row, seed: u64) -> Result<RunSpec, SimError> {
        let strategy = row.strategy();
        let plain = base(strategy, seed);
        let mut spec = match self.source {
            Source::Plain => plain.clone(),
            Source::LongHolds => {
                let mut spec = plain.clone();
                spec.workload.hold = (spec.workload.ttl / 2, spec.workload.ttl * 3 / 2);
                spec
            }
            Source::Scenario(name) => scenario::find(name)
                .ok_or_else(|| SimError::UnknownScenario(name.to_owned()))?
                .spec(strategy, seed),
            Source::ClientClockJump => {
                let mut spec = base(strategy, seed);
                spec.faults = vec![ScheduledFault {
                    at_ms: CLIENT_JUMP.0,
                    fault: Fault::ClientClockJump {
                        proc: 1,
                        by_ms: CLIENT_JUMP.1,
                    },
                }];
                spec
            }
        };
        if !matches!(self.source, Source::LongHolds) {
            spec.workload.hold = plain.workload.hold;
        }
        match row {
            Row::Other(design) => spec.workload.design = Some(*design),
            Row::File(file) => spec.design_file = Some(DesignFile::clone(file)),
            Row::Leasehold(_) => {}
        }
        Ok(spec)
    }

    /// Whether the class injects a fault (every one but "none" and the long holds).
    pub fn has_fault(&self) -> bool {
        !matches!(self.source, Source::Plain | Source::LongHolds)
    }
}

/// What a run (or the worst of a cell's runs) showed, least severe first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Outcome {
    /// Nothing found.
    Safe,
    /// A key or hold kept past its permitted lifetime, or left with no expiry.
    Stranded,
    /// A waiter saw the lock free for longer than the liveness bound, or nobody progressed.
    Starved,
    /// Two clients believed at once, or one believed a hold the servers no longer had.
    ExclusionBroken,
}

impl Outcome {
    /// The outcome a problem of `kind` gives.
    pub fn of(kind: ProblemKind) -> Self {
        match kind {
            ProblemKind::Stranded | ProblemKind::KeyLeftBehind | ProblemKind::AbandonedHold => {
                Self::Stranded
            }
            _ => match kind.verdict() {
                Verdict::ExclusionBroken | Verdict::Violation => Self::ExclusionBroken,
                Verdict::Starvation => Self::Starved,
                Verdict::Safe | Verdict::SafeWithFencing => Self::Safe,
            },
        }
    }

    /// The worst outcome of `problems`, and the earliest problem that gives it.
    pub fn worst(problems: &[Problem]) -> (Self, Option<&Problem>) {
        let worst = problems
            .iter()
            .max_by_key(|p| (Self::of(p.kind), std::cmp::Reverse(p.at)));
        (worst.map_or(Self::Safe, |p| Self::of(p.kind)), worst)
    }

    /// The table word.
    pub fn word(self) -> &'static str {
        match self {
            Self::Safe => "safe",
            Self::Stranded => "stranded",
            Self::Starved => "starved",
            Self::ExclusionBroken => "exclusion broken",
        }
    }
}

/// A run's outcome and the problem that gave it (the earliest of its worst).
fn judge(result: &RunResult) -> (Outcome, Option<&Problem>) {
    let (outcome, worst) = Outcome::worst(&result.findings.problems);
    if result.end == RunEnd::Livelock && outcome < Outcome::Starved {
        return (Outcome::Starved, None);
    }
    (outcome, worst)
}

/// What one run of a cell showed.
struct Judged {
    outcome: Outcome,
    problem: Option<Problem>,
    /// Whether its fault landed: a fault mark, or a message the loss model lost.
    landed: bool,
    stale_rejected: u64,
}

/// One cell of the matrix.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    /// The row's label.
    pub row: String,
    /// The fault class.
    pub class: &'static str,
    /// The worst outcome of its runs.
    pub worst: Outcome,
    /// How many of its runs had that outcome.
    pub worst_runs: u64,
    /// Its runs.
    pub runs: u64,
    /// Runs in which the class's fault landed (every run for "none").
    pub landed: u64,
    /// Stale writes the fenced resource rejected over its runs (designs with a fencing
    /// token only): a broken exclusion fencing kept from the resource.
    pub stale_rejected: u64,
    /// The first seed with the worst outcome (when it is not safe).
    pub first_seed: Option<u64>,
    /// That run's problem as the checker described it: kind and detail.
    pub problem: Option<String>,
    /// That problem's kind.
    pub problem_kind: Option<ProblemKind>,
    /// The rule that excused it and its evidence, when one did.
    pub excuse: Option<String>,
    /// The picture of that run, relative to the report directory.
    pub picture: Option<String>,
    /// That run's spec (which replays it).
    #[serde(skip)]
    pub spec: Option<RunSpec>,
}

/// The whole matrix.
#[derive(Debug, Clone, Serialize)]
pub struct Matrix {
    /// Seeds per cell.
    pub seeds: u64,
    /// Row labels, in order.
    pub rows: Vec<String>,
    /// Column labels, in order.
    pub classes: Vec<&'static str>,
    /// Cells, row by row.
    pub cells: Vec<Cell>,
    /// Wall time, s.
    pub wall_s: f64,
}

/// Runs every `rows` × [`FAULT_CLASSES`] cell over seeds `0..seeds` on `jobs` threads.
pub fn run_matrix(
    rows: &[Row],
    seeds: u64,
    jobs: usize,
    tick: impl Fn() + Sync,
) -> Result<Matrix, SimError> {
    let started = std::time::Instant::now();
    let items: Vec<(&Row, FaultClass, u64)> = rows
        .iter()
        .flat_map(|row| {
            FAULT_CLASSES
                .iter()
                .flat_map(move |class| (0..seeds).map(move |seed| (row, *class, seed)))
        })
        .collect();
    let runs = parallel::map(
        &items,
        jobs,
        |(row, class, seed)| run_judged(row, class, *seed),
        tick,
    );
    let runs = runs.into_iter().collect::<Result<Vec<_>, _>>()?;
    let mut cells = Vec::new();
    for (chunk, items) in runs
        .chunks(seeds.max(1) as usize)
        .zip(items.chunks(seeds.max(1) as usize))
    {
        let (row, class, _) = items[0];
        let seeds: Vec<u64> = items.iter().map(|item| item.2).collect();
        cells.push(cell_of(row, &class, &seeds, chunk)?);
    }
    Ok(Matrix {
        seeds,
        rows: rows.iter().map(|r| r.label()).collect(),
        classes: FAULT_CLASSES.iter().map(|c| c.label).collect(),
        cells,
        wall_s: started.elapsed().as_secs_f64(),
    })
}

/// Runs one cell, `row` under `class`, over seeds `0..seeds` on this thread: the cell a
/// real-Redis row of the harness is set beside.
pub fn run_cell(row: &Row, class: &FaultClass, seeds: u64) -> Result<Cell, SimError> {
    let seeds: Vec<u64> = (0..seeds).collect();
    let runs = seeds
        .iter()
        .map(|seed| run_judged(row, class, *seed))
        .collect::<Result<Vec<_>, _>>()?;
    cell_of(row, class, &seeds, &runs)
}

/// The fault class whose runs are the catalogue scenario `scenario`'s.
pub fn class_of_scenario(scenario: &str) -> Option<&'static FaultClass> {
    FAULT_CLASSES
        .iter()
        .find(|c| matches!(c.source, Source::Scenario(name) if name == scenario))
}

/// Runs `row` under `class` with `seed` and judges it.
fn run_judged(row: &Row, class: &FaultClass, seed: u64) -> Result<Judged, SimError> {
    let result = run::run(&class.spec(row, seed)?)?;
    let (outcome, problem) = judge(&result);
    Ok(Judged {
        outcome,
        problem: problem.cloned(),
        landed: !result.fault_log.is_empty() || result.stats.losses > 0,
        stale_rejected: result.findings.stale_rejected,
    })
}

/// The cell of `row` under `class` from its runs (one per seed of `seeds`).
fn cell_of(
    row: &Row,
    class: &FaultClass,
    seeds: &[u64],
    runs: &[Judged],
) -> Result<Cell, SimError> {
    let worst = runs
        .iter()
        .map(|r| r.outcome)
        .max()
        .unwrap_or(Outcome::Safe);
    let first = runs
        .iter()
        .zip(seeds)
        .find(|(r, _)| r.outcome == worst && worst != Outcome::Safe);
    Ok(Cell {
        row: row.label(),
        class: class.label,
        worst,
        worst_runs: runs.iter().filter(|r| r.outcome == worst).count() as u64,
        runs: runs.len() as u64,
        landed: if class.has_fault() {
            runs.iter().filter(|r| r.landed).count() as u64
        } else {
            runs.len() as u64
        },
        first_seed: first.map(|(_, seed)| *seed),
        stale_rejected: runs.iter().map(|r| r.stale_rejected).sum(),
        problem: first
            .and_then(|(r, _)| r.problem.as_ref())
            .map(|p| format!("{:?}: {}", p.kind, p.detail)),
        problem_kind: first.and_then(|(r, _)| r.problem.as_ref()).map(|p| p.kind),
        excuse: first.and_then(|(r, _)| r.problem.as_ref()).and_then(|p| {
            p.rule
                .map(|rule| format!("{rule}: {}", p.excuse.as_deref().unwrap_or("")))
        }),
        picture: None,
        spec: first.map(|(_, seed)| class.spec(row, *seed)).transpose()?,
    })
}

/// Runs `cell`'s first failing seed again and writes its picture under `out`; its path
/// relative to `out`.
fn write_cell_picture(out: &Path, cell: &Cell, seed: u64) -> io::Result<Option<String>> {
    let (Some(class), Some(spec)) = (
        FAULT_CLASSES.iter().find(|c| c.label == cell.class),
        &cell.spec,
    ) else {
        return Ok(None);
    };
    let result = run::run(spec).map_err(io::Error::other)?;
    let stem = format!("{}-{}-{seed}.svg", slug(&cell.row), class.name);
    let title = format!(
        "{} under {}, seed {seed}: {}",
        cell.row,
        class.label,
        judge(&result).0.word()
    );
    jobs::write_picture(&out.join(PICTURES_DIR), &stem, &title, spec, &result)?;
    Ok(Some(format!("{PICTURES_DIR}/{stem}")))
}

/// A label as a file-name part: lower-case letters and digits, runs of anything else one
/// `-`.
pub(crate) fn slug(label: &str) -> String {
    label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect::<String>()
        .split('-')
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join("-")
}

impl Matrix {
    fn cell(&self, row: &str, class: &str) -> Option<&Cell> {
        self.cells.iter().find(|c| c.row == row && c.class == class)
    }

    /// The matrix as markdown: the table, then each failing cell's first problem.
    pub fn markdown(&self) -> String {
        let mut md = format!(
            "# Lock designs under faults (simulator)\n\n{} seeds per cell; each cell's runs are the §5 catalogue's runs of its fault class with only the clients' design changed. A cell gives its worst outcome, in how many runs, and in how many runs its fault landed; a cell whose fault never landed is *not reached*. Wall time {:.0} s.\n\n",
            self.seeds, self.wall_s
        );
        md.push_str("| design |");
        for class in &self.classes {
            md.push_str(&format!(" {class} |"));
        }
        md.push_str("\n|---|");
        md.push_str(&"---|".repeat(self.classes.len()));
        md.push('\n');
        for row in &self.rows {
            md.push_str(&format!("| {row} |"));
            for class in &self.classes {
                let text = self.cell(row, class).map_or(String::new(), cell_text);
                md.push_str(&format!(" {text} |"));
            }
            md.push('\n');
        }
        md.push_str("\n## Failing cells\n\nEach: the first failing seed, its problem as the checker described it, and, when a rule of the checker excused it, the rule and its evidence (the fault, sized and placed, produced it).\n\n");
        for cell in self.cells.iter().filter(|c| c.worst != Outcome::Safe) {
            md.push_str(&format!(
                "- **{}** under {} ({} in {}/{} runs, seed {}): {}{}{}\n",
                cell.row,
                cell.class,
                cell.worst.word(),
                cell.worst_runs,
                cell.runs,
                cell.first_seed.map_or("-".to_owned(), |s| s.to_string()),
                cell.problem.as_deref().unwrap_or("no progress (livelock)"),
                cell.excuse
                    .as_ref()
                    .map_or(" — not excused".to_owned(), |e| format!(
                        " — excused by {e}"
                    )),
                cell.picture
                    .as_ref()
                    .map_or(String::new(), |p| format!(" [picture]({p})")),
            ));
        }
        md
    }

    /// Writes each failing cell's picture under `dir`/[`PICTURES_DIR`], then `designs.md`
    /// and `designs.json`, which link them.
    pub fn write(&mut self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        for cell in &mut self.cells {
            if let Some(seed) = cell.first_seed {
                cell.picture = write_cell_picture(dir, cell, seed)?;
            }
        }
        Ok(vec![
            report::write_text(dir, "designs.md", &self.markdown())?,
            report::write_json(dir, "designs.json", self)?,
        ])
    }
}

/// A cell as the table shows it.
fn cell_text(cell: &Cell) -> String {
    if cell.landed == 0 {
        return "not reached".to_owned();
    }
    let mut landed = if cell.landed < cell.runs {
        format!(", landed {}/{}", cell.landed, cell.runs)
    } else {
        String::new()
    };
    if cell.worst == Outcome::ExclusionBroken && cell.stale_rejected > 0 {
        landed.push_str(&format!(
            ", fencing rejected {} stale writes",
            cell.stale_rejected
        ));
    }
    match (cell.worst, &cell.picture) {
        (Outcome::Safe, _) => format!("safe{landed}"),
        (worst, Some(picture)) => format!(
            "[{} {}/{}]({picture}){landed}",
            worst.word(),
            cell.worst_runs,
            cell.runs
        ),
        (worst, None) => format!("{} {}/{}{landed}", worst.word(), cell.worst_runs, cell.runs),
    }
}
