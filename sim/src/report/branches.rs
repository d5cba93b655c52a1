//! The branch table of the exploration report: every branch of every lock script
//! ([`crate::model::branches`]) with the first plain seed whose run ran it.
//!
//! A verdict says nothing about code no run ran, and call sites alone hide the arms and
//! early returns that call nothing; this table lists them all, scripts no run called
//! included, so what the verdicts cover can be read off it.
//!
//! Invariant: the table depends only on which runs took which branches, in run order,
//! never on the order the runs finished in: "first" is the lowest plain seed.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::explore::lineage::RunId;
use crate::model::branches::{self, Branch};
use crate::model::coverage::{Coverage, lock_scripts};
use crate::report::unreached::why;

/// One script's branches as the exploration ran them. Its labels are owned, so that a
/// table read back (`merge`) keeps them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScriptBranches {
    /// The file, e.g. `release.lua`.
    pub script: String,
    /// Whether some run ran the script at all.
    pub called: bool,
    /// Why its source could not be read as Lua blocks, if it could not (no branches then).
    pub unreadable: Option<String>,
    /// Every branch, in line order.
    pub branches: Vec<BranchReach>,
}

impl ScriptBranches {
    /// How many branches some plain seed ran.
    pub fn plain_reached(&self) -> usize {
        self.branches
            .iter()
            .filter(|b| b.first_plain.is_some())
            .count()
    }
}

/// One branch and the runs that took it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BranchReach {
    /// 1-based line of the arm's first statement or of the `return`.
    pub line: u32,
    /// What starts there: `if`, `elseif`, `else`, `return` (an arm that returns is both).
    pub kinds: Vec<String>,
    /// The line's code, trimmed.
    pub code: String,
    /// Whether a second branch starts on its line, so the line's mark does not show that
    /// one was taken (no lock script has one today).
    pub shares_line: bool,
    /// The first plain seed whose run took the branch.
    pub first_plain: Option<String>,
    /// Plain seeds whose run took the branch.
    pub plain_runs: u64,
    /// The first steered run that took the branch, if any did.
    pub first_steered: Option<String>,
    /// Why no plain seed is expected to take it, where that is stated
    /// ([`crate::report::unreached`]).
    pub unreached_why: Option<String>,
}

/// The branches of every lock script, reached by `runs` (given in run order: plain seeds
/// by seed, then steered runs as scheduled).
pub fn tally<'a>(
    runs: impl IntoIterator<Item = (&'a RunId, &'a Coverage)> + Clone,
) -> Vec<ScriptBranches> {
    lock_scripts()
        .into_iter()
        .map(|script| {
            let (found, unreadable) = match branches::branches(script.source()) {
                Ok(found) => (found, None),
                Err(err) => (Vec::new(), Some(err.to_string())),
            };
            let file = format!("{}.lua", script.name());
            let mut reach: Vec<BranchReach> = found
                .iter()
                .map(|b| unreached(&file, script.source(), b))
                .collect();
            let mut called = false;
            for (id, coverage) in runs.clone() {
                let Some(ran) = coverage.branches(script.sha()) else {
                    continue;
                };
                called = true;
                for branch in reach.iter_mut().filter(|b| ran.contains(b.line)) {
                    if id.is_plain() {
                        branch.plain_runs += 1;
                        branch.first_plain.get_or_insert_with(|| id.to_string());
                    } else {
                        branch.first_steered.get_or_insert_with(|| id.to_string());
                    }
                }
            }
            ScriptBranches {
                script: file,
                called,
                unreadable,
                branches: reach,
            }
        })
        .collect()
}

/// Adds `later`, the table of plain seeds after those of `table`, to it: what [`tally`]
/// would find over both sets of runs (the first plain seed that took a branch is
/// `table`'s if it has one). Returns whether `later` has the same scripts and branches;
/// when not, `table` is left as it was.
pub fn add(table: &mut [ScriptBranches], later: &[ScriptBranches]) -> bool {
    let same_shape = table.len() == later.len()
        && table.iter().zip(later).all(|(mine, theirs)| {
            mine.script == theirs.script
                && mine.branches.len() == theirs.branches.len()
                && mine
                    .branches
                    .iter()
                    .zip(&theirs.branches)
                    .all(|(a, b)| a.line == b.line)
        });
    if !same_shape {
        return false;
    }
    for (mine, theirs) in table.iter_mut().zip(later) {
        mine.called |= theirs.called;
        for (a, b) in mine.branches.iter_mut().zip(&theirs.branches) {
            a.plain_runs += b.plain_runs;
            if a.first_plain.is_none() {
                a.first_plain.clone_from(&b.first_plain);
            }
            if a.first_steered.is_none() {
                a.first_steered.clone_from(&b.first_steered);
            }
        }
    }
    true
}

/// `branch` of `source`, before any run.
fn unreached(file: &str, source: &str, branch: &Branch) -> BranchReach {
    BranchReach {
        line: branch.line,
        kinds: branch.kinds.iter().map(|k| k.name().to_owned()).collect(),
        code: branches::code_line(source, branch.line).unwrap_or_default(),
        shares_line: branch.shares_line,
        first_plain: None,
        plain_runs: 0,
        first_steered: None,
        unreached_why: why(file, source, branch.line).map(str::to_owned),
    }
}

/// The branch section of the exploration report: a summary row per script, then each
/// script's table.
pub fn section(md: &mut String, scripts: &[ScriptBranches]) {
    let _ = writeln!(md, "## Script branches reached\n");
    let _ = writeln!(
        md,
        "A branch is an `if`/`elseif`/`else` arm, named by the line of its first statement, or a `return` statement (`sim/src/model/branches.rs` reads them off each script in `lock/scripts/`); it is reached when a run started its statement (a recording node compiles each script with a mark before every branch, `sim/src/model/branch_marks.rs`; shrinking runs not counted). A branch no plain seed reached is one the verdicts above say nothing about unless a steered run reached it; each such branch states why plain exploration misses it (`sim/src/report/unreached.rs`: what exploration does not draw and where a real-server test drives it, or why no correct client gets there), and one without a stated reason is a gap of the workload.\n"
    );
    let _ = writeln!(
        md,
        "| script | branches | reached by a plain seed | reached by any run | unreached by plain seeds, no reason stated |"
    );
    let _ = writeln!(md, "|---|---:|---:|---:|---:|");
    for script in scripts {
        let any = script
            .branches
            .iter()
            .filter(|b| b.first_plain.is_some() || b.first_steered.is_some())
            .count();
        let unexplained = script
            .branches
            .iter()
            .filter(|b| b.first_plain.is_none() && b.unreached_why.is_none())
            .count();
        let _ = writeln!(
            md,
            "| {} | {} | {} | {any} | {unexplained} |",
            script.script,
            script.branches.len(),
            script.plain_reached()
        );
    }
    let _ = writeln!(md);
    for script in scripts {
        script_table(md, script);
    }
}

fn script_table(md: &mut String, script: &ScriptBranches) {
    let _ = writeln!(md, "### {}\n", script.script);
    if let Some(why) = &script.unreadable {
        let _ = writeln!(md, "Its branches could not be read: {why}.\n");
        return;
    }
    if !script.called {
        let _ = writeln!(
            md,
            "No run called this script: none of its {} branches was reached.\n",
            script.branches.len()
        );
    }
    let _ = writeln!(
        md,
        "| branch | kind | code | first plain seed | plain seeds | first steered run |"
    );
    let _ = writeln!(md, "|---|---|---|---|---:|---|");
    for b in &script.branches {
        let first = match (&b.first_plain, b.shares_line) {
            (Some(seed), false) => seed.clone(),
            (Some(seed), true) => format!("{seed} (inconclusive: another branch shares the line)"),
            (None, _) => match &b.unreached_why {
                Some(why) => format!("not reached: {}", why.replace('|', "\\|")),
                None => "**not reached, no reason stated**".to_owned(),
            },
        };
        let _ = writeln!(
            md,
            "| {}:{} | {} | `{}` | {first} | {} | {} |",
            script.script,
            b.line,
            b.kinds.join(", "),
            b.code.replace('|', "\\|"),
            b.plain_runs,
            b.first_steered.as_deref().unwrap_or("–")
        );
    }
    let _ = writeln!(md);
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::model::coverage::LineSet;

    fn ran(script: &leasehold::script::LuaScript, lines: &[u32]) -> Coverage {
        let mut set = LineSet::default();
        for line in lines {
            set.insert(*line);
        }
        let mut coverage = Coverage::default();
        coverage.add_branches(script.sha(), &set);
        coverage
    }

    #[test]
    fn the_first_plain_seed_is_the_lowest_and_a_script_no_run_called_says_so() {
        let renew = &leasehold::script::scripts().renew;
        let tail = branches::branches(renew.source())
            .unwrap()
            .last()
            .unwrap()
            .line;
        let runs = [
            (RunId::plain(3), ran(renew, &[tail])),
            (RunId::plain(5), ran(renew, &[tail])),
            (RunId::plain(3).child(0), ran(renew, &[tail - 1])),
        ];
        let table = tally(runs.iter().map(|(id, c)| (id, c)));
        let row = table.iter().find(|s| s.script == "renew.lua").unwrap();
        assert!(row.called);
        let last = row.branches.last().unwrap();
        assert_eq!(last.code, "return extend()");
        assert_eq!(last.first_plain.as_deref(), Some("3"));
        assert_eq!(last.plain_runs, 2);
        assert_eq!(last.first_steered, None);
        assert_eq!(row.plain_reached(), 1);
        let resize = table
            .iter()
            .find(|s| s.script == "semaphore_resize.lua")
            .unwrap();
        assert!(!resize.called);
        assert_eq!(resize.plain_reached(), 0);
        let mut md = String::new();
        section(&mut md, &table);
        assert!(md.contains("### semaphore_resize.lua\n\nNo run called this script"));
        assert!(md.contains(&format!(
            "| renew.lua:{tail} | return | `return extend()` | 3 | 2 | – |"
        )));
    }
}
