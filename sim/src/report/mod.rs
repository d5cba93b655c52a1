//! The report room, at the top: the jobs front ends run ([`jobs`]: scenario table,
//! exploration, benchmark; an exploration split into [`shard`]s and their [`merge`]), what the checker judged across an exploration ([`judged`]) and where its
//! per-waiter verdicts reached ([`scopes`]),
//! which script branches the exploration's seeds reached ([`branches`]),
//! the sim's own benchmark ([`bench`](mod@bench)), a run's picture ([`picture`]) and the
//! report files below.
//!
//! Reports: the scenario verdict table, exploration results and the benchmark, as
//! markdown for people and JSON for tools, under one output directory.
//!
//! Invariant: every file written is listed in the returned paths, so the CLI can print
//! exactly where it wrote.
//!
//! May import: engine, model, world, workload, checker, scenario, explore.

pub mod bench;
pub mod branches;
pub mod design_check;
pub mod design_shard;
pub mod designs;
pub mod jobs;
pub mod judged;
pub mod merge;
pub mod picture;
pub mod scopes;
pub mod shard;
pub mod unreached;

use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::explore::FailureReport;
use crate::explore::drawn::{ApiDraws, DrawnTally};
use crate::explore::lineage::RunId;
use crate::explore::steer::{RARE_SHARE, SteerReport};
use crate::model::coverage::ScriptCoverage;
use crate::report::branches::ScriptBranches;
use crate::report::judged::Judged;
use crate::report::scopes::ScopeTally;
use crate::scenario::{Cell, Expect, Scenario, scenarios};
use crate::workload::Strategy;
use crate::workload::client_marks::MarkCount;

/// Writes `value` as pretty JSON to `dir/name`.
pub fn write_json<T: Serialize>(dir: &Path, name: &str, value: &T) -> io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join(name);
    let text = serde_json::to_string_pretty(value).map_err(io::Error::other)?;
    std::fs::write(&path, text + "\n")?;
    Ok(path)
}

/// Writes `text` to `dir/name`.
pub fn write_text(dir: &Path, name: &str, text: &str) -> io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join(name);
    std::fs::write(&path, text)?;
    Ok(path)
}

/// The scenario × strategy table in markdown.
pub fn verdict_table(cells: &[Cell], seeds: u64) -> String {
    let strategies: Vec<Strategy> = Strategy::ALL
        .iter()
        .copied()
        .filter(|s| cells.iter().any(|c| c.strategy == *s))
        .collect();
    let mut md = String::new();
    let _ = writeln!(md, "# Simulated fault scenarios (docs/DESIGN.md §5)\n");
    let _ = writeln!(
        md,
        "Each cell: worst verdict over {seeds} seeds (expected in brackets; ✅ met, ❌ not met). \
         Verdicts: *safe*; *safe with fencing* (no beliefs conflicted; a late write arrived and the fenced resource rejected it); \
         *exclusion broken* (two clients believed they held the lock at once, or one believed it held a lock its nodes no longer held; \
         fencing may still have kept the resource safe); *starvation*; *VIOLATION* (fencing failed: a token out of order or reused). \
         A cell with a broken exclusion that no fault touching the hold explains is never met (\"unexcused\"). \
         \"keys unchecked\" counts lock keys the linearizability check gave up on (its search outgrew its budget); \
         a cell with any is never met either.\n"
    );
    let _ = write!(md, "| scenario | §5 |");
    for s in &strategies {
        let _ = write!(md, " {} |", s.name());
    }
    let _ = write!(md, "\n|---|---|");
    for _ in &strategies {
        let _ = write!(md, "---|");
    }
    md.push('\n');
    for sc in scenarios() {
        if !cells.iter().any(|c| c.scenario == sc.name) {
            continue;
        }
        let _ = write!(md, "| `{}` | {} |", sc.name, item_label(sc));
        for s in &strategies {
            let text = match cells
                .iter()
                .find(|c| c.scenario == sc.name && c.strategy == *s)
            {
                None => "–".to_owned(),
                Some(Cell {
                    expected: Expect::Pending(why),
                    ..
                }) => format!("pending: {why}"),
                Some(cell) => {
                    let worst = cell.worst.map_or("–".to_owned(), |w| w.to_string());
                    let mark = if cell.met { "✅" } else { "❌" };
                    let margin = cell
                        .lost_margin_ms
                        .map(|m| format!(", lost-signal margin ≥ {m:.0} ms"))
                        .unwrap_or_default();
                    let unexcused = match cell.unexcused {
                        0 => String::new(),
                        n => format!(", **{n} unexcused**"),
                    };
                    let unchecked = match cell.unchecked {
                        0 => String::new(),
                        n => format!(", **{n} keys unchecked**"),
                    };
                    format!(
                        "{mark} {worst} [{}]{unexcused}{unchecked}{margin}",
                        cell.expected
                    )
                }
            };
            let _ = write!(md, " {text} |");
        }
        md.push('\n');
    }
    let _ = writeln!(md, "\n## Scenarios\n");
    for sc in scenarios() {
        let _ = writeln!(md, "- `{}` ({}): {}", sc.name, item_label(sc), sc.summary);
    }
    md
}

/// Summary of an exploration.
#[derive(Debug, Clone, Serialize)]
pub struct ExploreSummary {
    /// First seed.
    pub start: u64,
    /// Runs in all: plain seeds and steered runs (`steering` says how many of each).
    pub seeds: u64,
    /// Options used.
    pub options: crate::explore::ExploreOptions,
    /// Runs per verdict: safe, safe with fencing, exclusion broken, starvation, violation.
    pub verdicts: [u64; 5],
    /// Failures (shrunk).
    pub failures: Vec<FailureReport>,
    /// Wall-clock seconds.
    pub wall_secs: f64,
    /// Per lock script, the call sites the runs reached (shrinking runs not counted).
    pub coverage: Vec<ScriptCoverage>,
    /// Per lock script, every branch and the first plain seed that ran it.
    pub branches: Vec<ScriptBranches>,
    /// The client paths the runs took, with how many runs took each.
    pub client_marks: Vec<MarkCount>,
    /// How the runs split between plain seeds and steered runs, and what steering added.
    pub steering: SteerReport,
    /// Every problem the runs had, excused ones included, by cause; and the reach of the
    /// linearizability check.
    pub judged: Judged,
    /// How far each per-waiter and per-hold verdict reached over the plain seeds.
    pub scopes: Vec<ScopeTally>,
    /// How the runs spread over the parameters and fault kinds.
    pub drawn: DrawnTally,
    /// The public API paths the plain runs drew, and where each landed.
    pub api_draws: ApiDraws,
}

impl ExploreSummary {
    /// Failures no catalogued known limitation explains.
    pub fn unexpected(&self) -> impl Iterator<Item = &FailureReport> {
        self.failures
            .iter()
            .filter(|f| f.known_limitation.is_none())
    }

    /// Failures a catalogued scenario documents as a known limitation.
    pub fn expected(&self) -> impl Iterator<Item = &FailureReport> {
        self.failures
            .iter()
            .filter(|f| f.known_limitation.is_some())
    }
}

/// The exploration report in markdown; `replay` renders the replay command of a run, and
/// `picture` the relative link to a failure's picture, if it has one.
pub fn explore_markdown(
    summary: &ExploreSummary,
    replay: &dyn Fn(&RunId) -> String,
    picture: &dyn Fn(&FailureReport) -> Option<String>,
) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# Swarm exploration\n");
    let steering = &summary.steering;
    let steered = match steering.steered {
        0 => String::new(),
        n => format!(" and {n} steered runs derived from them"),
    };
    let _ = writeln!(
        md,
        "Seeds {}..{}{steered} ({} runs of {:?} virtual time each) in {:.1} s wall.\n",
        summary.start,
        summary.start + steering.plain,
        summary.seeds,
        summary.options.horizon,
        summary.wall_secs
    );
    let [safe, fenced, broken, starved, violated] = summary.verdicts;
    let _ = writeln!(
        md,
        "| safe | safe with fencing | exclusion broken | starvation | violation |\n|---|---|---|---|---|\n| {safe} | {fenced} | {broken} | {starved} | {violated} |\n"
    );
    let _ = writeln!(
        md,
        "A run's verdict is its worst problem. A broken exclusion is a failure unless the faults that acted on the belief can cause an overrun as large as the one seen (a pause of the holder, by its length; its clock slow, or a serving node's fast, beyond the drift margin, by rate times the time it ran; a forward jump of a node that ran the hold's calls, by its size; a crash, failover or eviction of that node, without bound; each inside the hold's window from its granting request's send: docs/DESIGN.md §5); a call no linearization explains, and a belief kept past \"not held\", never are; a token out of order is expected only when the node that issued it explains it (its clock read at or below the earlier token, and its fence key lacked that token: the rule and its evidence are listed with the failure), a token reused never is, and other fencing failures and starvation are expected only when a scenario documents them for the strategy and every fault kind of its signature touched the holds or the wait involved. Each failure is classified on its own.\n"
    );
    let unexpected: Vec<&FailureReport> = summary.unexpected().collect();
    let expected: Vec<&FailureReport> = summary.expected().collect();
    let _ = writeln!(
        md,
        "Failing seeds: **{} unexpected** (a failure no fault explains or no scenario documents), {} expected (every failure a known limitation).\n",
        unexpected.len(),
        expected.len()
    );
    let _ = writeln!(md, "## Unexpected failures\n");
    if unexpected.is_empty() {
        let _ = writeln!(md, "None.\n");
    }
    for f in unexpected {
        failure_section(&mut md, f, replay, picture);
    }
    let _ = writeln!(md, "## Expected failures (known limitations)\n");
    if expected.is_empty() {
        let _ = writeln!(md, "None.\n");
    }
    for f in expected {
        failure_section(&mut md, f, replay, picture);
    }
    md.push_str(&summary.judged.markdown(summary.seeds));
    scopes::section(&mut md, &summary.scopes);
    md.push_str(&summary.drawn.markdown());
    md.push_str(&summary.api_draws.markdown());
    coverage_section(&mut md, &summary.coverage);
    branches::section(&mut md, &summary.branches);
    marks_section(&mut md, &summary.client_marks, summary.seeds);
    steering_section(&mut md, steering);
    states_section(&mut md, steering);
    md
}

/// Which verdict-relevant states the runs reached, plain and steered apart, and which none
/// did.
fn states_section(md: &mut String, steering: &SteerReport) {
    let _ = writeln!(
        md,
        "## Verdict-relevant states reached
"
    );
    let _ = writeln!(
        md,
        "Each state (`sim/src/model/verdict_states.rs`) is a situation a lock script ran in on a node, observed from the node's keys, the call and its reply: the runs of each kind in which some script ran in it. Paired with the call sites of that script run, they are steering's units beside the call sites: plain seeds reached {} distinct (call site, state) pairs, all runs {}.\n",
        steering.state_sites_plain, steering.state_sites_all
    );
    let _ = writeln!(md, "| state | plain seeds | steered runs |");
    let _ = writeln!(md, "|---|---:|---:|");
    for state in &steering.states {
        let _ = writeln!(
            md,
            "| `{}` | {} | {} |",
            state.state, state.plain_runs, state.steered_runs
        );
    }
    let unreached: Vec<String> = steering.unreached().map(|s| format!("`{s}`")).collect();
    let _ = writeln!(
        md,
        "\nReached by no run: {}.\n",
        if unreached.is_empty() {
            "none".to_owned()
        } else {
            unreached.join(", ")
        }
    );
}

/// How the budget split, and what the steered runs reached that the plain seeds did not
/// (or seldom did).
fn steering_section(md: &mut String, steering: &SteerReport) {
    let _ = writeln!(md, "## Steering\n");
    let runs = steering.plain + steering.steered;
    if steering.steered == 0 {
        let _ = writeln!(
            md,
            "Off: all {runs} runs were plain seeds (`explore --steer` sets the share of steered runs).\n"
        );
        return;
    }
    let _ = writeln!(
        md,
        "Of {runs} runs, {} were plain seeds and {} ({:.0} %) steered runs, in {} rounds, each a mutation (the same draws with a new run seed, one to three draws re-drawn, or every draw from a point on re-drawn) of one of the {} runs that first reached a call site, a call site in a verdict-relevant state or a client path, picked with odds by how rarely the runs before had reached what it reached. A steered run's id (`seed/k/...`: mutation k, counting from 0, of the run the id before the last slash names) is its replay argument.\n",
        steering.plain,
        steering.steered,
        steering.share * 100.0,
        steering.rounds,
        steering.corpus
    );
    let added: Vec<_> = steering.added().collect();
    let sites = added.iter().filter(|f| f.kind == "site").count();
    let _ = writeln!(
        md,
        "Steering added {sites} call site(s), {} (call site, state) pair(s) and {} client path(s) no plain seed reached. Every call site or client path no plain seed reached, or at most {} % of them did, with the runs of each kind that reached it (states: next section):\n",
        steering.state_sites_all - steering.state_sites_plain,
        added.len() - sites,
        RARE_SHARE * 100.0
    );
    if steering.rare.is_empty() {
        let _ = writeln!(md, "None.\n");
        return;
    }
    let _ = writeln!(
        md,
        "| call site or client path | plain seeds | steered runs | first steered run |"
    );
    let _ = writeln!(md, "|---|---:|---:|---|");
    for f in &steering.rare {
        let what = match f.kind {
            "site" => f.what.replace('|', "\\|"),
            _ => format!("`{}`", f.what),
        };
        let _ = writeln!(
            md,
            "| {what} | {} | {} | {} |",
            f.plain_runs,
            f.steered_runs,
            f.first_steered.as_deref().unwrap_or("–")
        );
    }
    let _ = writeln!(md);
}

/// How many seeds took each client path the library counts.
fn marks_section(md: &mut String, marks: &[MarkCount], seeds: u64) {
    let _ = writeln!(
        md,
        "## Client paths taken
"
    );
    let _ = writeln!(
        md,
        "The lock client's own counters (`leasehold::metrics`, whose table lists every series and label value), counted per seed that took the path at least once, over the {seeds} seeds; a path missing here is one no seed took.\n"
    );
    let _ = writeln!(md, "| client path (counter and labels) | seeds |");
    let _ = writeln!(md, "|---|---:|");
    for mark in marks {
        let _ = writeln!(md, "| `{}` | {} |", mark.mark, mark.runs);
    }
    let _ = writeln!(md);
}

/// Which call sites of each script the seeds reached, and the code of those none did.
fn coverage_section(md: &mut String, coverage: &[ScriptCoverage]) {
    let _ = writeln!(
        md,
        "## Script call sites reached
"
    );
    let _ = writeln!(
        md,
        "A call site is a line of a lock script that calls Redis; a branch no seed reaches is one the verdicts above say nothing about. Reached by at least one seed's run (shrinking runs not counted):
"
    );
    let _ = writeln!(
        md,
        "| script | call sites | reached | not reached (line: code) |"
    );
    let _ = writeln!(md, "|---|---:|---:|---|");
    for script in coverage {
        let missed = script
            .missed
            .iter()
            .map(|m| format!("{}: `{}`", m.line, m.code.replace('|', "\\|")))
            .collect::<Vec<_>>()
            .join("<br>");
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} |",
            script.script, script.sites, script.reached, missed
        );
    }
    let _ = writeln!(md);
}

fn failure_section(
    md: &mut String,
    f: &FailureReport,
    replay: &dyn Fn(&RunId) -> String,
    picture: &dyn Fn(&FailureReport) -> Option<String>,
) {
    let run = f.run_id();
    let known = f
        .known_limitation
        .as_deref()
        .map(|rule| format!(" — expected (known limitation: `{rule}`)"))
        .unwrap_or_default();
    let _ = writeln!(
        md,
        "### seed {run} ({}, {:?}){known}\n",
        f.strategy.name(),
        f.failure
    );
    for finding in &f.findings {
        let class = finding
            .known_limitation
            .as_deref()
            .map_or_else(|| "UNEXPECTED".to_owned(), |sc| format!("expected: `{sc}`"));
        let _ = writeln!(md, "- {:?} ({class}): {}", finding.failure, finding.detail);
        if let Some(evidence) = &finding.evidence {
            let _ = writeln!(md, "  - evidence: {evidence}");
        }
    }
    for d in &f.details {
        let _ = writeln!(md, "  - {d}");
    }
    let _ = writeln!(
        md,
        "\nShrunk in {} runs to {} clients, {} fault(s), {:?}:\n\n```json\n{}\n```\n\nReplay: `{}`\n",
        f.shrink_runs,
        f.shrunk.clients,
        f.shrunk.faults.len(),
        f.shrunk.horizon,
        serde_json::to_string_pretty(&f.shrunk.faults).unwrap_or_default(),
        replay(&run)
    );
    if let Some(link) = picture(f) {
        let _ = writeln!(
            md,
            "Picture (client beliefs, server truth, faults and problems on one timeline): [{link}]({link})\n"
        );
    }
}

/// Where a scenario comes from: its docs/DESIGN.md §5 item, or "lock" for the lock's own
/// invariants (re-entry), which the fault catalogue does not list.
fn item_label(sc: &Scenario) -> String {
    match sc.design_item {
        0 => "lock".to_owned(),
        n => format!("§5.{n}"),
    }
}
