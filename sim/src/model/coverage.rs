//! Which lines of the lock scripts a run, or a whole exploration, reached: the branches
//! taken and the `redis.call` sites.
//!
//! Exploration draws faults at random, and a random draw can miss a branch of a script for
//! ever: a verdict of "0 unexpected findings" says nothing about code no seed ran. The
//! nodes record every branch a script takes ([`crate::model::branch_marks`]), so the
//! exploration report can list each branch ([`crate::model::branches`]) with the first
//! seed that took it, and the line of every `redis.call`/`redis.pcall` a script makes, for
//! the call sites no seed reached.
//!
//! A line alone saturates: every seed runs the grant and the release. So each call site is
//! also recorded paired with the verdict-relevant states ([`crate::model::verdict_states`]) the
//! script run that reached it ran in, e.g. `release.lua:107` in a release with a dead
//! sibling.
//!
//! Invariant: recording observes only — a run's trace and verdict are the same with it on
//! or off — and the union over seeds does not depend on the order seeds finish in.

use std::collections::{BTreeMap, BTreeSet};

use leasehold::script::LuaScript;
use serde::{Deserialize, Serialize};

use crate::model::verdict_states::VerdictState;

/// Every script in `lock/scripts/`: those lock operations run ([`Scripts::all`]) and
/// `semaphore_resize.lua`, which only an operator's call runs, so that coverage shows it
/// unreached rather than not at all.
///
/// [`Scripts::all`]: leasehold::script::Scripts::all
pub fn lock_scripts() -> Vec<&'static LuaScript> {
    let scripts = leasehold::script::scripts();
    let mut all = scripts.all().to_vec();
    all.push(&scripts.semaphore_resize);
    all
}

/// A set of script lines, as bits: small, and cheap to merge from run to run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LineSet {
    words: Vec<u64>,
}

impl LineSet {
    /// Adds `line`.
    pub fn insert(&mut self, line: u32) {
        let (word, bit) = (line as usize / 64, line % 64);
        if word >= self.words.len() {
            self.words.resize(word + 1, 0);
        }
        self.words[word] |= 1 << bit;
    }

    /// Whether `line` is in the set.
    pub fn contains(&self, line: u32) -> bool {
        self.words
            .get(line as usize / 64)
            .is_some_and(|word| word & (1 << (line % 64)) != 0)
    }

    /// Adds every line of `lines`.
    pub fn extend(&mut self, lines: impl IntoIterator<Item = u32>) {
        for line in lines {
            self.insert(line);
        }
    }

    /// Adds every line of `other`.
    pub fn union(&mut self, other: &LineSet) {
        if other.words.len() > self.words.len() {
            self.words.resize(other.words.len(), 0);
        }
        for (mine, theirs) in self.words.iter_mut().zip(&other.words) {
            *mine |= theirs;
        }
    }
}

/// Branches taken (by line) and call-site lines reached, the latter alone and paired with the states
/// their run was in, by the SHA of the script that ran.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Coverage {
    branches: BTreeMap<String, LineSet>,
    lines: BTreeMap<String, BTreeSet<u32>>,
    states: BTreeMap<String, BTreeSet<(u32, VerdictState)>>,
}

impl Coverage {
    /// Records that script `sha` ran and took the branches on `lines` (none, if it failed
    /// before its first).
    pub fn add_branches(&mut self, sha: &str, lines: &LineSet) {
        if let Some(known) = self.branches.get_mut(sha) {
            known.union(lines);
        } else {
            self.branches.insert(sha.to_owned(), lines.clone());
        }
    }

    /// The lines of the branches script `sha` took, if it ran at all.
    pub fn branches(&self, sha: &str) -> Option<&LineSet> {
        self.branches.get(sha)
    }

    /// Records that script `sha` made calls on `lines`.
    pub fn add(&mut self, sha: &str, lines: &BTreeSet<u32>) {
        if lines.is_empty() {
            return;
        }
        if let Some(known) = self.lines.get_mut(sha) {
            known.extend(lines);
        } else {
            self.lines.insert(sha.to_owned(), lines.clone());
        }
    }

    /// Records that a run of script `sha` which made calls on `lines` ran in `states`.
    pub fn add_states(&mut self, sha: &str, lines: &BTreeSet<u32>, states: &[VerdictState]) {
        if states.is_empty() || lines.is_empty() {
            return;
        }
        let known = self.states.entry(sha.to_owned()).or_default();
        for state in states {
            known.extend(lines.iter().map(|line| (*line, *state)));
        }
    }

    /// Adds everything `other` reached.
    pub fn merge(&mut self, other: &Coverage) {
        for (sha, lines) in &other.branches {
            self.add_branches(sha, lines);
        }
        for (sha, lines) in &other.lines {
            self.add(sha, lines);
        }
        for (sha, pairs) in &other.states {
            self.states
                .entry(sha.clone())
                .or_default()
                .extend(pairs.iter().copied());
        }
    }

    /// Every (call site, state) pair reached, as script file, line and state.
    pub fn state_sites(&self) -> Vec<(String, u32, VerdictState)> {
        leasehold::script::scripts()
            .all()
            .into_iter()
            .filter_map(|script| Some((script.name(), self.states.get(script.sha())?)))
            .flat_map(|(name, pairs)| {
                pairs
                    .iter()
                    .map(move |(line, state)| (format!("{name}.lua"), *line, *state))
            })
            .collect()
    }

    /// The states some script run was in.
    pub fn states(&self) -> BTreeSet<VerdictState> {
        self.states
            .values()
            .flat_map(|pairs| pairs.iter().map(|(_, state)| *state))
            .collect()
    }

    /// Whether line `line` of the script named `script` (its file stem) made a call.
    pub fn reached(&self, script: &str, line: u32) -> bool {
        leasehold::script::scripts()
            .all()
            .into_iter()
            .find(|s| s.name() == script)
            .and_then(|s| self.lines.get(s.sha()))
            .is_some_and(|lines| lines.contains(&line))
    }

    /// Every call site reached, as its script file and line, e.g. `("release.lua", 107)`.
    pub fn sites(&self) -> Vec<(String, u32)> {
        leasehold::script::scripts()
            .all()
            .into_iter()
            .filter_map(|script| Some((script.name(), self.lines.get(script.sha())?)))
            .flat_map(|(name, lines)| lines.iter().map(move |line| (format!("{name}.lua"), *line)))
            .collect()
    }

    /// Per lock script, its call sites and which of them were reached.
    pub fn by_script(&self) -> Vec<ScriptCoverage> {
        let none = BTreeSet::new();
        lock_scripts()
            .into_iter()
            .map(|script| {
                let reached = self.lines.get(script.sha()).unwrap_or(&none);
                let sites = call_sites(script.source());
                let missed = sites
                    .iter()
                    .filter(|(line, _)| !reached.contains(line))
                    .map(|(line, code)| Missed {
                        line: *line,
                        code: code.clone(),
                    })
                    .collect::<Vec<_>>();
                ScriptCoverage {
                    script: format!("{}.lua", script.name()),
                    sites: sites.len(),
                    reached: sites.len() - missed.len(),
                    missed,
                }
            })
            .collect()
    }
}

/// One script's call sites as the exploration reached them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScriptCoverage {
    /// The file, e.g. `release.lua`.
    pub script: String,
    /// Lines that call `redis.call` or `redis.pcall`.
    pub sites: usize,
    /// How many of them some run reached.
    pub reached: usize,
    /// The ones no run reached.
    pub missed: Vec<Missed>,
}

impl ScriptCoverage {
    /// Adds what `other`, the same script's call sites over other runs, reached: a site
    /// stays missed only when both missed it.
    pub fn add(&mut self, other: &Self) {
        self.missed
            .retain(|m| other.missed.iter().any(|theirs| theirs.line == m.line));
        self.reached = self.sites - self.missed.len();
    }
}

/// A call site no run reached.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Missed {
    /// 1-based line in the script file.
    pub line: u32,
    /// The line's code, trimmed.
    pub code: String,
}

/// The code of call site `line` of `script` (a file such as `acquire.lua`), trimmed.
pub fn code_at(script: &str, line: u32) -> Option<String> {
    let script = lock_scripts()
        .into_iter()
        .find(|s| format!("{}.lua", s.name()) == script)?;
    call_sites(script.source())
        .into_iter()
        .find(|(at, _)| *at == line)
        .map(|(_, code)| code)
}

/// The lines of `source` that call Redis, with their trimmed code (comments excluded).
fn call_sites(source: &str) -> Vec<(u32, String)> {
    source
        .lines()
        .zip(1..)
        .filter_map(|(text, line)| {
            let code = text.split("--").next().unwrap_or_default().trim();
            (code.contains("redis.call(") || code.contains("redis.pcall("))
                .then(|| (line, code.to_owned()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_sites_are_the_lines_that_call_redis() {
        let source = "local a = 1\n-- redis.call('GET', k) in a comment\nlocal t = redis.call('TIME')\nif x then return redis.pcall('GET', k) end\n";
        assert_eq!(
            call_sites(source),
            vec![
                (3, "local t = redis.call('TIME')".to_owned()),
                (4, "if x then return redis.pcall('GET', k) end".to_owned()),
            ]
        );
    }

    #[test]
    fn a_site_is_missed_until_a_run_reaches_it() {
        let acquire = &leasehold::script::scripts().acquire;
        let first = call_sites(acquire.source())[0].0;
        let mut sites = Coverage::default();
        let before = sites.by_script();
        assert_eq!(before[0].script, "acquire.lua");
        assert_eq!(before[0].reached, 0);
        assert!(!sites.reached("acquire", first));
        sites.add(acquire.sha(), &BTreeSet::from([first]));
        let after = sites.by_script();
        assert_eq!(after[0].reached, 1);
        assert_eq!(after[0].missed.len(), before[0].missed.len() - 1);
        assert!(sites.reached("acquire", first));
        assert_eq!(sites.sites(), vec![("acquire.lua".to_owned(), first)]);
        assert_eq!(
            code_at("acquire.lua", first),
            Some(call_sites(acquire.source())[0].1.clone())
        );
        assert_eq!(code_at("acquire.lua", 0), None);
    }

    #[test]
    #[allow(clippy::unwrap_used)]
    fn branches_taken_merge_by_script_and_a_run_without_any_still_counts_as_a_run() {
        let renew = leasehold::script::scripts().renew.sha();
        let (mut one, mut two) = (Coverage::default(), Coverage::default());
        let mut lines = LineSet::default();
        lines.extend([3, 130]);
        one.add_branches(renew, &lines);
        two.add_branches(renew, &LineSet::default());
        assert!(two.branches(renew).is_some(), "the script ran");
        assert!(two.branches("no such script").is_none());
        let mut more = LineSet::default();
        more.insert(64);
        two.add_branches(renew, &more);
        two.merge(&one);
        let taken = two.branches(renew).unwrap();
        let found: Vec<u32> = (0..200).filter(|l| taken.contains(*l)).collect();
        assert_eq!(found, [3, 64, 130]);
    }

    #[test]
    fn a_state_is_paired_with_every_site_its_run_reached_and_merges() {
        let release = &leasehold::script::scripts().release;
        let lines = BTreeSet::from([4, 9]);
        let mut one = Coverage::default();
        one.add_states(release.sha(), &lines, &[]);
        one.add_states(release.sha(), &BTreeSet::new(), &[VerdictState::Reentry]);
        assert!(one.states().is_empty(), "nothing ran in a state");
        one.add_states(
            release.sha(),
            &lines,
            &[VerdictState::ReleaseWithDeadSibling],
        );
        let dead = VerdictState::ReleaseWithDeadSibling;
        assert_eq!(
            one.state_sites(),
            vec![
                ("release.lua".to_owned(), 4, dead),
                ("release.lua".to_owned(), 9, dead)
            ]
        );
        let mut two = Coverage::default();
        two.add_states(
            release.sha(),
            &BTreeSet::from([4]),
            &[VerdictState::HandOffLeaseCut],
        );
        two.merge(&one);
        assert_eq!(two.state_sites().len(), 3);
        assert_eq!(
            two.states(),
            BTreeSet::from([dead, VerdictState::HandOffLeaseCut])
        );
    }
}
