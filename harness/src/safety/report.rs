//! The safety report: one row per scenario × strategy with the verdict from real Redis
//! beside the simulator's expectation and observation, the fault timings and the measures
//! of docs/DESIGN.md §3/§5; rendered as `safety.md` and stored as `safety.json`.
//!
//! Invariant: verdicts are the simulator's [`Verdict`] computed by the simulator's checker,
//! so "agree" means the same judgement of the same kind of history, not a look-alike.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use leasehold_sim::checker::Verdict;
use leasehold_sim::workload::Strategy;
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::report_file;

/// When the fault happened, in run time.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FaultTiming {
    /// First injection (ms since the run started).
    pub start_ms: f64,
    /// End of the fault: node back, link restored, last injection (ms).
    pub end_ms: f64,
    /// What was done, for the reader.
    pub note: String,
}

/// How the real verdict relates to the simulator's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Agreement {
    /// The real verdict meets the simulator scenario's expectation.
    Agree,
    /// The expectation is a worst case over the simulator's seeds (`= v`) and this real run
    /// stayed below it: consistent, but the race that produces `v` was not hit this time.
    NotReproduced(String),
    /// It does not; the text says how.
    Disagree(String),
    /// The simulator has no verdict for this cell yet (its reason).
    SimPending(String),
    /// No simulator scenario has this fault shape.
    NoSim,
}

impl Agreement {
    fn cell(&self) -> &'static str {
        match self {
            Agreement::Agree => "yes",
            Agreement::NotReproduced(_) => "yes (milder)",
            Agreement::Disagree(_) => "**NO**",
            Agreement::SimPending(_) => "sim pending",
            Agreement::NoSim => "–",
        }
    }
}

/// One scenario × strategy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellReport {
    /// Real scenario name.
    pub scenario: String,
    /// Corresponding simulator scenario.
    pub sim_scenario: Option<String>,
    /// docs/DESIGN.md §5 item.
    pub design_item: u8,
    /// Strategy.
    pub strategy: Strategy,
    /// Lease TTL of the run (ms).
    pub ttl_ms: u64,
    /// Verdict of the simulator's checker on the real history.
    pub real: Verdict,
    /// The simulator's expectation for this cell (`= safe`, `<= safe with fencing`, …).
    pub sim_expected: Option<String>,
    /// The simulator's worst verdict over its seeds, if it ran.
    pub sim_observed: Option<Verdict>,
    /// Real vs simulator.
    pub agreement: Agreement,
    /// The fault.
    pub fault: FaultTiming,
    /// Successful acquisitions.
    pub acquisitions: u64,
    /// Acquire calls that failed (timeout, error).
    pub failed_acquires: u64,
    /// Overlapping believed holds.
    pub overlaps: u64,
    /// Stale writes the fenced resource rejected (an unfenced one would have accepted
    /// every one of them).
    pub stale_rejected: u64,
    /// Fencing failures (duplicated or regressing tokens), described.
    pub token_problems: Vec<String>,
    /// Starved waits, described.
    pub starvations: Vec<String>,
    /// Lost-lease signals observed.
    pub lost_signals: u64,
    /// Smallest margin between a lost signal and the server-side lease end (ms; positive =
    /// fired before the TTL ran out), from the PTTL monitor.
    pub lost_before_ttl_end_ms: Option<f64>,
    /// Smallest gap between a lost signal and the next grant (ms), as the simulator reports.
    pub lost_before_next_grant_ms: Option<f64>,
    /// From the end of the fault to the next successful acquisition (ms).
    pub recovery_ms: Option<f64>,
    /// PTTL of the lock key after every worker stopped and unlocked (a leaked lease).
    pub leftover_pttl_ms: Option<i64>,
    /// Distinct acquire errors with counts.
    pub errors: Vec<(String, u64)>,
    /// Run length (s).
    pub run_s: f64,
}

/// The whole table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SafetyReport {
    /// Wall time of the whole run (s).
    pub elapsed_s: f64,
    /// Seeds per simulator cell.
    pub sim_seeds: u64,
    /// Default lease TTL (ms); each row carries its own.
    pub ttl_ms: u64,
    /// Clients per run.
    pub clients: usize,
    /// Rows.
    pub cells: Vec<CellReport>,
}

fn opt_ms(v: Option<f64>) -> String {
    v.map_or("–".to_owned(), |v| format!("{v:.0}"))
}

/// Renders the Markdown report.
pub fn markdown(report: &SafetyReport) -> String {
    let mut md = String::new();
    // Writing to a String cannot fail; the results are ignored for that reason.
    let _ = writeln!(md, "# Safety under real faults\n");
    let _ = writeln!(
        md,
        "Real Redis 7.0.15 containers, {} clients per run, lease TTL {} ms unless the row says otherwise, a fenced resource \
         judged by the simulator's checker (`leasehold_sim::checker`). The simulator columns \
         are the matching `leasehold_sim::scenario` cell: its expectation and its worst verdict \
         over {} seeds. Generated by `leasehold-harness safety` in {:.0} s.\n",
        report.clients, report.ttl_ms, report.sim_seeds, report.elapsed_s
    );
    let _ = writeln!(
        md,
        "| scenario | strategy | TTL (ms) | real | sim expects | sim saw | agree | fault at / until (ms) | acq | failed | overlaps | stale rejected | lost | lost→TTL end (ms) | lost→next grant (ms) | recovery (ms) | leftover PTTL |"
    );
    let _ = writeln!(
        md,
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for c in &report.cells {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {:.0} / {:.0} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            c.scenario,
            c.strategy.name(),
            c.ttl_ms,
            c.real,
            c.sim_expected.as_deref().unwrap_or("–"),
            c.sim_observed.map_or("–".to_owned(), |v| v.to_string()),
            c.agreement.cell(),
            c.fault.start_ms,
            c.fault.end_ms,
            c.acquisitions,
            c.failed_acquires,
            c.overlaps,
            c.stale_rejected,
            c.lost_signals,
            opt_ms(c.lost_before_ttl_end_ms),
            opt_ms(c.lost_before_next_grant_ms),
            opt_ms(c.recovery_ms),
            c.leftover_pttl_ms
                .filter(|p| *p >= 0)
                .map_or("–".to_owned(), |p| p.to_string()),
        );
    }
    let _ = writeln!(md, "\n## Faults\n");
    for c in &report.cells {
        let _ = writeln!(
            md,
            "- {} / {}: {}",
            c.scenario,
            c.strategy.name(),
            c.fault.note
        );
    }
    let problems: Vec<&CellReport> = report
        .cells
        .iter()
        .filter(|c| {
            matches!(
                c.agreement,
                Agreement::Disagree(_) | Agreement::NotReproduced(_)
            ) || !c.token_problems.is_empty()
                || !c.starvations.is_empty()
        })
        .collect();
    if !problems.is_empty() {
        let _ = writeln!(md, "\n## Disagreements and findings\n");
        for c in problems {
            let _ = writeln!(md, "### {} / {}\n", c.scenario, c.strategy.name());
            match &c.agreement {
                Agreement::Disagree(why) => {
                    let _ = writeln!(md, "- disagreement: {why}");
                }
                Agreement::NotReproduced(why) => {
                    let _ = writeln!(md, "- not reproduced: {why}");
                }
                _ => {}
            }
            for p in c.token_problems.iter().chain(&c.starvations) {
                let _ = writeln!(md, "- {p}");
            }
            for (e, n) in &c.errors {
                let _ = writeln!(md, "- acquire error ×{n}: {e}");
            }
            let _ = writeln!(md);
        }
    }
    let _ = writeln!(
        md,
        "\nColumns: *overlaps* are pairs of believed holds that intersected in real time; \
         *stale rejected* are writes the fenced resource refused (each one a write an unfenced \
         resource would have accepted); *lost→TTL end* is how long before the server-side \
         lease end (PTTL monitor) the lost-lease signal fired; *recovery* is fault end → next \
         grant; *leftover PTTL* is a lease still on the server after every client unlocked."
    );
    md
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
