//! `index.md`: the map of a report directory written by `leasehold-harness all`. It holds one
//! section per part (benchmark, safety, simulator) with that part's time, its headline numbers
//! and every file it wrote, plus the problems that make the run fail.
//!
//! Invariant: every number here is read from the part's own report data; none is typed in.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use leasehold_sim::report::ExploreSummary;
use leasehold_sim::report::bench::BenchReport as SimBenchReport;
use leasehold_sim::report::designs::{Matrix, Outcome};
use leasehold_sim::report::jobs::ScenarioTable;
use leasehold_sim::scenario::Expect;

use crate::error::Result;
use crate::report::key_ratios;
use crate::report::results::BenchReport;
use crate::report_file;
use crate::safety::report::{Agreement, CellReport, SafetyReport};
use crate::safety::subject::Subject;

/// File name of the index.
pub const INDEX: &str = "index.md";

/// Title of the contention benchmark part.
pub const BENCH: &str = "Contention benchmark";
/// Title of the real-fault safety part.
pub const SAFETY: &str = "Safety under real faults";
/// Title of the simulator's scenario table.
pub const SIM_SCENARIOS: &str = "Simulated scenarios";
/// Title of the simulator's swarm exploration.
pub const SIM_EXPLORE: &str = "Simulated exploration";
/// Title of the simulator's verdict matrix of lock designs.
pub const SIM_DESIGNS: &str = "Lock designs under faults (simulated)";
/// Title of the simulator benchmark.
pub const SIM_BENCH: &str = "Simulator benchmark";

/// One part of the run: what it found and what it wrote.
#[derive(Debug, Clone)]
pub struct Part {
    /// One of the titles above.
    pub title: &'static str,
    /// Wall time of the part (s).
    pub took_s: f64,
    /// The headline numbers, one sentence.
    pub headline: String,
    /// Findings that make the run fail (empty: none).
    pub problems: Vec<String>,
    /// Files written, paths as written.
    pub files: Vec<PathBuf>,
}

impl Part {
    /// A part that could not finish.
    pub fn failed(title: &'static str, took_s: f64, error: &dyn std::fmt::Display) -> Self {
        Part {
            title,
            took_s,
            headline: "did not finish".to_owned(),
            problems: vec![format!("did not finish: {error}")],
            files: Vec::new(),
        }
    }

    /// The contention benchmark: violations, errors and the key ratios against rslock.
    pub fn bench(report: &BenchReport, files: Vec<PathBuf>) -> Self {
        let violations = report.violations();
        let errors: u64 = report.cells.iter().map(|c| c.median.errors).sum();
        let ratios: Vec<String> = key_ratios::key_ratios(report)
            .iter()
            .map(key_ratios::KeyRatio::line)
            .collect();
        Part {
            title: BENCH,
            took_s: 0.0,
            headline: format!(
                "{:?} grid, {} cells: {violations} mutual-exclusion violations, {errors} client errors. \
                 Key ratios (leasehold vs rslock): {}.",
                report.meta.plan.size,
                report.cells.len(),
                ratios.join("; ")
            ),
            problems: if violations > 0 {
                vec![format!("{violations} mutual-exclusion violations")]
            } else {
                Vec::new()
            },
            files,
        }
    }

    /// The real-fault table: how its cells relate to the simulator, and the cells that fail
    /// (disagreement, not reproduced, inconclusive).
    pub fn safety(report: &SafetyReport, files: Vec<PathBuf>) -> Self {
        let is_design = |c: &&CellReport| matches!(c.subject, Subject::Design(_));
        let count = |f: fn(&Agreement) -> bool| {
            report
                .cells
                .iter()
                .filter(|c| !is_design(c) && f(&c.agreement))
                .count()
        };
        let designs: Vec<&CellReport> = report.cells.iter().filter(is_design).collect();
        let problems = report.problems();
        Part {
            title: SAFETY,
            took_s: 0.0,
            headline: format!(
                "{} cells × {} tries: {} agree with the simulator, {} disagree, {} not reproduced, \
                 {} inconclusive, {} sim pending, {} without a sim scenario, {} peer rows ({} sim \
                 seeds per cell); {} classic-design rows, {} agreeing with their design-matrix \
                 cell.",
                report.cells.len() - designs.len(),
                report.tries,
                count(|a| matches!(a, Agreement::Agree)),
                count(|a| matches!(a, Agreement::Disagree(_))),
                count(|a| matches!(a, Agreement::NotReproduced(_))),
                count(|a| matches!(a, Agreement::Inconclusive(_))),
                count(|a| matches!(a, Agreement::SimPending(_))),
                count(|a| matches!(a, Agreement::NoSim)),
                count(|a| matches!(a, Agreement::Peer)),
                report.sim_seeds,
                designs.len(),
                designs
                    .iter()
                    .filter(|c| c.agreement == Agreement::Agree)
                    .count(),
            ),
            problems,
            files,
        }
    }

    /// The simulator's verdict table: expectations met.
    pub fn sim_scenarios(table: &ScenarioTable, files: Vec<PathBuf>) -> Self {
        let pending = table
            .cells
            .iter()
            .filter(|c| matches!(c.expected, Expect::Pending(_)))
            .count();
        let unmet = table.unmet();
        let judged = table.cells.len() - pending;
        Part {
            title: SIM_SCENARIOS,
            took_s: 0.0,
            headline: format!(
                "{} of {judged} scenario × strategy cells met their expectation over {} seeds each \
                 ({pending} more pending).",
                judged - unmet.len(),
                table.seeds
            ),
            problems: unmet
                .into_iter()
                .map(|cell| format!("{cell}: expectation not met"))
                .collect(),
            files,
        }
    }

    /// The swarm exploration: verdicts and failures, expected or not.
    pub fn sim_explore(summary: &ExploreSummary, files: Vec<PathBuf>) -> Self {
        let [safe, fenced, broken, starved, violated] = summary.verdicts;
        Part {
            title: SIM_EXPLORE,
            took_s: 0.0,
            headline: format!(
                "{} seeds × {} s virtual time: {safe} safe, {fenced} safe with fencing, \
                 {broken} exclusion broken, {starved} starvation, {violated} violation; \
                 failing seeds: {} expected (known limitations), {} unexpected.",
                summary.seeds,
                summary.options.horizon.as_secs(),
                summary.expected().count(),
                summary.unexpected().count(),
            ),
            problems: summary
                .unexpected()
                .map(|f| {
                    format!(
                        "unexpected failure: seed {} ({}, {:?})",
                        f.seed,
                        f.strategy.name(),
                        f.failure
                    )
                })
                .collect(),
            files,
        }
    }

    /// The verdict matrix of lock designs: how many cells each outcome has, and which
    /// designs stayed safe under every fault that landed. Its findings are the designs'
    /// (the classic ones break by design), so they fail nothing.
    pub fn sim_designs(matrix: &Matrix, files: Vec<PathBuf>) -> Self {
        let count = |o: Outcome| matrix.cells.iter().filter(|c| c.worst == o).count();
        Part {
            title: SIM_DESIGNS,
            took_s: 0.0,
            headline: format!(
                "{} designs × {} fault classes × {} seeds: {} cells safe, {} stranded, {} starved, \
                 {} exclusion broken.",
                matrix.rows.len(),
                matrix.classes.len(),
                matrix.seeds,
                count(Outcome::Safe),
                count(Outcome::Stranded),
                count(Outcome::Starved),
                count(Outcome::ExclusionBroken),
            ),
            problems: Vec::new(),
            files,
        }
    }

    /// The simulator benchmark: throughput in lock operations and seeds.
    pub fn sim_bench(report: &SimBenchReport, files: Vec<PathBuf>) -> Self {
        Part {
            title: SIM_BENCH,
            took_s: 0.0,
            headline: format!(
                "{}{:.0} lock acquisitions / wall s, {:.0} Redis commands / wall s, {:.0} seeds / wall min \
                 ({} seeds × {:.0} s virtual time, {} threads, {} build).",
                report
                    .seeds_per_cpu_min
                    .map_or_else(String::new, |rate| format!("{rate:.0} seeds / CPU min; ")),
                report.lock_ops_per_sec,
                report.commands_per_sec,
                report.seeds_per_min,
                report.seeds,
                report.virtual_secs_per_seed,
                report.jobs,
                report.profile,
            ),
            problems: Vec::new(),
            files,
        }
    }
}

/// What a file is, from its name.
fn kind(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()) {
        Some("md") => "report",
        Some("svg" | "png") => "plot",
        Some("json")
            if path
                .parent()
                .and_then(Path::file_name)
                .is_some_and(|d| d == leasehold_sim::report::jobs::FAILURES_DIR) =>
        {
            "failing run spec, shrunk when unexpected (`leasehold-sim replay --spec` it)"
        }
        Some("json") => "raw data",
        _ => "file",
    }
}

/// Renders the index of `dir`; `run` says how the run was made (e.g. "quick").
pub fn render(parts: &[Part], dir: &Path, run: &str) -> String {
    let total_s: f64 = parts.iter().map(|p| p.took_s).sum();
    let problems: usize = parts.iter().map(|p| p.problems.len()).sum();
    let mut md = String::new();
    let _ = writeln!(md, "# Leasehold reports\n");
    let _ = writeln!(
        md,
        "Written by `leasehold-harness all` ({run}) in {total_s:.0} s: {} parts, {problems} problem(s).\n",
        parts.len()
    );
    let _ = writeln!(md, "| part | took (s) | headline |\n|---|---:|---|");
    for p in parts {
        let _ = writeln!(md, "| {} | {:.0} | {} |", p.title, p.took_s, p.headline);
    }
    let _ = writeln!(md, "\n## Problems\n");
    if problems == 0 {
        let _ = writeln!(md, "None.");
    }
    for p in parts {
        for problem in &p.problems {
            let _ = writeln!(md, "- {}: {problem}", p.title);
        }
    }
    let _ = writeln!(md, "\n## Files");
    for p in parts {
        let _ = writeln!(md, "\n### {}\n", p.title);
        if p.files.is_empty() {
            let _ = writeln!(md, "None written.");
        }
        for file in &p.files {
            let rel = file.strip_prefix(dir).unwrap_or(file).display().to_string();
            let _ = writeln!(md, "- [{rel}]({rel}): {}", kind(file));
        }
    }
    md
}

/// Writes `index.md` into `dir`; returns its path.
pub fn write(parts: &[Part], dir: &Path, run: &str) -> Result<PathBuf> {
    report_file::create_dir(dir)?;
    let path = dir.join(INDEX);
    report_file::write_text(&path, render(parts, dir, run))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_part_is_a_problem_and_files_are_listed_relative_to_the_directory() {
        let dir = Path::new("out");
        let parts = [
            Part::failed(BENCH, 3.0, &"no Docker"),
            Part {
                title: SIM_EXPLORE,
                took_s: 60.0,
                headline: "fine".to_owned(),
                problems: Vec::new(),
                files: vec![
                    dir.join("sim-explore.md"),
                    dir.join("sim-failures/seed-7.json"),
                ],
            },
        ];
        let md = render(&parts, dir, "quick");
        assert!(md.contains("2 parts, 1 problem(s)"), "{md}");
        assert!(
            md.contains("- Contention benchmark: did not finish: no Docker"),
            "{md}"
        );
        assert!(
            md.contains("- [sim-explore.md](sim-explore.md): report"),
            "{md}"
        );
        assert!(
            md.contains("[sim-failures/seed-7.json](sim-failures/seed-7.json): failing run spec"),
            "{md}"
        );
    }
}
