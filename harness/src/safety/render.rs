//! Renders the safety report as `safety.md` (and stores it as `safety.json`): the table of
//! cells with their per-verdict try counts and landed faults, then every cell that fails the
//! job, the rows without a simulator verdict, and each try's fault evidence.
//!
//! Invariant: every cell that fails the job is listed by name above the details, so a
//! reader never has to scan the table for it.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::error::Result;
use crate::report_file;
use crate::safety::agreement::{DESIGN_SIM_SEEDS, tally};
use crate::safety::report::{Agreement, CellReport, SafetyReport, TryReport, kind_label};
use crate::safety::scenario::FAMILY_CLIENTS;
use crate::safety::subject::Subject;

fn opt_ms(v: Option<f64>) -> String {
    v.map_or("–".to_owned(), |v| format!("{v:.0}"))
}

/// "exclusion broken ×2, safe ×1".
fn verdict_counts(cell: &CellReport) -> String {
    cell.verdicts
        .iter()
        .map(|(v, n)| format!("{v} ×{n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The smallest of an optional measure over the tries.
fn min_over(cell: &CellReport, measure: fn(&TryReport) -> Option<f64>) -> Option<f64> {
    cell.tries.iter().filter_map(measure).reduce(f64::min)
}

/// The largest of an optional measure over the tries.
fn max_over(cell: &CellReport, measure: fn(&TryReport) -> Option<f64>) -> Option<f64> {
    cell.tries.iter().filter_map(measure).reduce(f64::max)
}

fn is_design(cell: &CellReport) -> bool {
    matches!(cell.subject, Subject::Design(_))
}

/// "exclusion broken ×1, safe ×2", in the design matrix's words.
fn outcome_counts(cell: &CellReport) -> String {
    tally(cell.tries.iter().map(|t| t.outcome))
        .iter()
        .map(|(o, n)| format!("{} ×{n}", o.word()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The classic designs' rows: each beside the simulator's design-matrix cell for the same
/// design and fault class, outcome against outcome, and the rows that do not agree.
fn design_rows(md: &mut String, report: &SafetyReport) {
    let rows: Vec<&CellReport> = report.cells.iter().filter(|c| is_design(c)).collect();
    if rows.is_empty() {
        return;
    }
    let mismatches = report.design_mismatches();
    let _ = writeln!(
        md,
        "\n## Other lock designs on real Redis\n\n\
         The classic designs of `reports/designs.md`, their clients the simulator's own design \
         code (`leasehold_sim::workload::designs::DesignLock`) over real connections, in every \
         scenario above whose simulator scenario is a column of the design matrix (mutex \
         scenarios on one node or the masters; not the in-process holder pause, which would \
         leave a design's own renewal task running: the holder freeze stops the process). \
         Each try is judged by the same checker and read in the matrix's words: *stranded* \
         also when two polls in a row found the lock's key with no expiry. *sim* is the \
         design matrix's cell for the same design and fault class over {} seeds. **{} of {} \
         design rows do not agree** (listed below the table; they do not fail the job).\n",
        DESIGN_SIM_SEEDS,
        mismatches.len(),
        rows.len()
    );
    let _ = writeln!(
        md,
        "| scenario | design | real | tries | landed | sim (class: worst, runs) | sim's first seed | agree | acq | failed | overlaps | key without expiry (ms) |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|---|---|---|---|");
    for c in rows {
        let sim = c.design_sim.as_ref().map_or("–".to_owned(), |s| {
            format!(
                "{}: {} {}/{}",
                s.class,
                s.worst.word(),
                s.worst_runs,
                s.runs
            )
        });
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {}/{} | {} | {} | {} | {} | {} | {} | {} |",
            c.scenario,
            c.label(),
            c.outcome.word(),
            outcome_counts(c),
            c.landed,
            c.tries.len(),
            sim,
            c.design_sim
                .as_ref()
                .and_then(|s| s.first_seed)
                .map_or("–".to_owned(), |s| s.to_string()),
            c.agreement.cell(),
            c.total(|t| t.acquisitions),
            c.total(|t| t.failed_acquires),
            c.total(|t| t.overlaps),
            opt_ms(max_over(c, |t| t.no_expiry_ms)),
        );
    }
    if !mismatches.is_empty() {
        let _ = writeln!(md, "\n### Design rows that do not agree\n");
        for m in &mismatches {
            let _ = writeln!(md, "- {m}");
        }
    }
}

/// Renders the Markdown report.
pub fn markdown(report: &SafetyReport) -> String {
    let mut md = String::new();
    // Writing to a String cannot fail; the results are ignored for that reason.
    let _ = writeln!(md, "# Safety under real faults\n");
    let _ = writeln!(
        md,
        "Real Redis 7.0.15 containers; {} seeded tries per cell, side by side on one topology \
         (each try its own lock and clients: {} for the mutex, {} for the read-write lock and \
         the semaphore); lease TTL {} ms unless the row says otherwise; a fenced resource; \
         every try judged by the simulator's checker (`leasehold_sim::checker`). *real* is the \
         worst verdict over the tries, *landed* how many tries' faults the evidence shows \
         happened. The simulator columns are the matching `leasehold_sim::scenario` cell: its \
         expectation and its worst verdict over {} seeds. A cell fails the job when it \
         disagrees with the simulator, when the simulator finds the scenario unsafe and no \
         try reproduced it, or when no try's fault landed. rslock rows (no fencing token) are \
         judged on overlaps only. Generated by `leasehold-harness safety` in {:.0} s.\n",
        report.tries,
        report.clients,
        FAMILY_CLIENTS,
        report.ttl_ms,
        report.sim_seeds,
        report.elapsed_s
    );
    let problems = report.problems();
    let _ = writeln!(
        md,
        "**{} of {} cells fail** (disagreement, not reproduced, inconclusive).\n",
        problems.len(),
        report.cells.iter().filter(|c| !is_design(c)).count()
    );
    let _ = writeln!(
        md,
        "| scenario | lock | client | TTL (ms) | real | tries | landed | sim expects | sim saw | agree | acq | failed | overlaps | stale rejected | lost | lost→TTL end (ms) | lost→next grant (ms) | recovery (ms) | leftover PTTL |"
    );
    let _ = writeln!(
        md,
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for c in report.cells.iter().filter(|c| !is_design(c)) {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {}/{} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            c.scenario,
            kind_label(c.kind),
            c.label(),
            c.ttl_ms,
            c.real,
            verdict_counts(c),
            c.landed,
            c.tries.len(),
            c.sim_expected.as_deref().unwrap_or("–"),
            c.sim_observed.map_or("–".to_owned(), |v| v.to_string()),
            c.agreement.cell(),
            c.total(|t| t.acquisitions),
            c.total(|t| t.failed_acquires),
            c.total(|t| t.overlaps),
            c.total(|t| t.stale_rejected),
            c.total(|t| t.lost_signals),
            opt_ms(min_over(c, |t| t.lost_before_ttl_end_ms)),
            opt_ms(min_over(c, |t| t.lost_before_next_grant_ms)),
            opt_ms(max_over(c, |t| t.recovery_ms)),
            c.tries
                .iter()
                .filter_map(|t| t.leftover_pttl_ms.filter(|p| *p >= 0))
                .max()
                .map_or("–".to_owned(), |p| p.to_string()),
        );
    }
    if !problems.is_empty() {
        let _ = writeln!(md, "\n## Cells that fail\n");
        for p in &problems {
            let _ = writeln!(md, "- {p}");
        }
    }
    let no_sim: Vec<&CellReport> = report
        .cells
        .iter()
        .filter(|c| c.agreement == Agreement::NoSim)
        .collect();
    if !no_sim.is_empty() {
        let _ = writeln!(md, "\n## Rows without a simulator verdict\n");
        for c in no_sim {
            let _ = writeln!(
                md,
                "- {} × {} × {}: real {} ({})",
                c.scenario,
                kind_label(c.kind),
                c.label(),
                c.real,
                verdict_counts(c)
            );
        }
    }
    design_rows(&mut md, report);
    findings(&mut md, report);
    let _ = writeln!(md, "\n## Faults, per try\n");
    for c in &report.cells {
        for t in &c.tries {
            let _ = writeln!(
                md,
                "- {} × {} × {} (seed {}): {}, at {:.0}–{:.0} ms; {}: {} → {}",
                c.scenario,
                kind_label(c.kind),
                c.label(),
                t.seed,
                t.fault.note,
                t.fault.start_ms,
                t.fault.end_ms,
                if t.fault.landed {
                    "landed"
                } else {
                    "NOT landed"
                },
                t.fault.evidence,
                t.real
            );
        }
    }
    let _ = writeln!(
        md,
        "\nColumns: *overlaps* are pairs of believed holds that conflicted in real time by the \
         lock's access rule (summed over tries); *stale rejected* are writes the fenced resource \
         refused (each one a write an unfenced resource would have accepted); *lost→TTL end* is \
         how long before the server-side lease end (PTTL monitor) the lost-lease signal fired \
         (smallest over tries); *recovery* is fault end → next grant (largest over tries); \
         *leftover PTTL* is a lease still on the server after every client unlocked."
    );
    md
}

/// Token problems, starvations and acquire errors of the cells that have them.
fn findings(md: &mut String, report: &SafetyReport) {
    let with: Vec<&CellReport> = report
        .cells
        .iter()
        .filter(|c| {
            c.tries
                .iter()
                .any(|t| !t.token_problems.is_empty() || !t.starvations.is_empty())
        })
        .collect();
    if with.is_empty() {
        return;
    }
    let _ = writeln!(md, "\n## Findings\n");
    for c in with {
        let _ = writeln!(
            md,
            "### {} × {} × {}\n",
            c.scenario,
            kind_label(c.kind),
            c.label()
        );
        for t in &c.tries {
            for p in t.token_problems.iter().chain(&t.starvations) {
                let _ = writeln!(md, "- seed {}: {p}", t.seed);
            }
            for (e, n) in &t.errors {
                let _ = writeln!(md, "- seed {}: acquire error ×{n}: {e}", t.seed);
            }
        }
        let _ = writeln!(md);
    }
}

/// Writes `safety.md` and `safety.json` into `dir`; returns their paths.
pub fn write(report: &SafetyReport, dir: &Path) -> Result<Vec<PathBuf>> {
    report_file::create_dir(dir)?;
    let md_path = dir.join("safety.md");
    report_file::write_text(&md_path, markdown(report))?;
    let json_path = dir.join("safety.json");
    report_file::write_json(&json_path, report)?;
    Ok(vec![md_path, json_path])
}
