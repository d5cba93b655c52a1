//! What the checker judged across an exploration: every problem by kind, causes and
//! excuse, and how far the linearizability check reached.
//!
//! Why it exists: an excused problem is still a finding. Exploration fails a run only on
//! unexcused ones, so the excused ones are reported here by cause, where a reader can see
//! which faults excuse how much, instead of vanishing.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::checker::linear::{KeyReach, Reach};
use crate::checker::{ProblemCount, ProblemKind};

/// Problems of one classification across the runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CauseTally {
    /// What.
    pub kind: ProblemKind,
    /// Kinds of the faults that touched them (empty: none did).
    pub causes: Vec<String>,
    /// Whether one of those faults can explain them.
    pub excused: bool,
    /// Problems in all.
    pub problems: u64,
    /// Runs that had at least one.
    pub runs: u64,
}

/// The checker's findings over many runs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Judged {
    /// Problems by classification, most frequent first.
    pub by_cause: Vec<CauseTally>,
    /// Runs with a call no linearization explains that a node fault excused: for those
    /// runs, the linearizability check found something and let it pass.
    pub linear_excused_runs: u64,
    /// Runs with a lock key whose linearizability search outgrew its budget.
    pub linear_unchecked_runs: u64,
    /// Such keys in all.
    pub linear_unchecked_keys: u64,
    /// Runs with a lock key checked over a widened frontier (soundly, more coarsely).
    pub linear_widened_runs: u64,
    /// Such keys in all.
    pub linear_widened_keys: u64,
    /// The mutexes' keys the check searched, widened and gave up, over all runs.
    #[serde(with = "KeyReachDef")]
    pub linear_mutex: KeyReach,
    /// The read-write locks' keys, likewise.
    #[serde(with = "KeyReachDef")]
    pub linear_rwlock: KeyReach,
    /// The semaphores' keys, likewise.
    #[serde(with = "KeyReachDef")]
    pub linear_semaphore: KeyReach,
}

/// The checker's [`KeyReach`] as a report writes it and reads it back (`merge`): the
/// checker itself only ever writes one.
#[derive(Serialize, Deserialize)]
#[serde(remote = "KeyReach")]
struct KeyReachDef {
    keys: u64,
    widened: u64,
    unchecked: u64,
}

/// Problems per classification: (problems, runs) by (kind, causes, excused).
type ByCause = BTreeMap<(ProblemKind, Vec<String>, bool), (u64, u64)>;

/// The tallies of `by_cause`, the most runs first, then the most problems, then in
/// classification order.
fn ranked(by_cause: ByCause) -> Vec<CauseTally> {
    let mut ranked: Vec<CauseTally> = by_cause
        .into_iter()
        .map(|((kind, causes, excused), (problems, runs))| CauseTally {
            kind,
            causes,
            excused,
            problems,
            runs,
        })
        .collect();
    ranked.sort_by(|a, b| b.runs.cmp(&a.runs).then(b.problems.cmp(&a.problems)));
    ranked
}

impl Judged {
    /// Tallies the runs' problem counts and the keys not checked exactly.
    pub fn of<'a>(runs: impl IntoIterator<Item = (&'a [ProblemCount], Reach)>) -> Self {
        let mut tally = ByCause::new();
        let mut judged = Self::default();
        for (counts, reach) in runs {
            for c in counts {
                let entry = tally
                    .entry((c.kind, c.causes.clone(), c.excused))
                    .or_default();
                entry.0 += c.count;
                entry.1 += 1;
            }
            if counts
                .iter()
                .any(|c| c.kind == ProblemKind::NotLinearizable && c.excused)
            {
                judged.linear_excused_runs += 1;
            }
            if reach.unchecked > 0 {
                judged.linear_unchecked_runs += 1;
                judged.linear_unchecked_keys += reach.unchecked;
            }
            if reach.widened > 0 {
                judged.linear_widened_runs += 1;
                judged.linear_widened_keys += reach.widened;
            }
            judged.linear_mutex = judged.linear_mutex.plus(reach.mutex);
            judged.linear_rwlock = judged.linear_rwlock.plus(reach.rwlock);
            judged.linear_semaphore = judged.linear_semaphore.plus(reach.semaphore);
        }
        judged.by_cause = ranked(tally);
        judged
    }

    /// Adds the findings of `other`, over other runs: what [`Judged::of`] would tally over
    /// both sets of runs.
    pub fn add(&mut self, other: &Self) {
        let mut tally = ByCause::new();
        for t in self.by_cause.iter().chain(&other.by_cause) {
            let entry = tally
                .entry((t.kind, t.causes.clone(), t.excused))
                .or_default();
            entry.0 += t.problems;
            entry.1 += t.runs;
        }
        self.by_cause = ranked(tally);
        self.linear_excused_runs += other.linear_excused_runs;
        self.linear_unchecked_runs += other.linear_unchecked_runs;
        self.linear_unchecked_keys += other.linear_unchecked_keys;
        self.linear_widened_runs += other.linear_widened_runs;
        self.linear_widened_keys += other.linear_widened_keys;
        self.linear_mutex = self.linear_mutex.plus(other.linear_mutex);
        self.linear_rwlock = self.linear_rwlock.plus(other.linear_rwlock);
        self.linear_semaphore = self.linear_semaphore.plus(other.linear_semaphore);
    }

    /// The report's section on it, for `runs` runs.
    pub fn markdown(&self, runs: u64) -> String {
        let mut md = String::new();
        let share = |n: u64| 100.0 * n as f64 / runs.max(1) as f64;
        let _ = writeln!(md, "## What the checker judged\n");
        let _ = writeln!(
            md,
            "Linearizability: {} of {runs} runs ({:.1} %) had a call no linearization explains that a node fault excused; {} runs ({:.1} %) left {} lock keys unchecked (their search outgrew its budget); {} runs ({:.1} %) checked {} lock keys over a widened frontier (lost grants' holds merged: sound, coarser).\n",
            self.linear_excused_runs,
            share(self.linear_excused_runs),
            self.linear_unchecked_runs,
            share(self.linear_unchecked_runs),
            self.linear_unchecked_keys,
            self.linear_widened_runs,
            share(self.linear_widened_runs),
            self.linear_widened_keys
        );
        let _ = writeln!(
            md,
            "Linearizability reach by lock family, lock keys over all runs (checked exactly / widened / unchecked): {}.\n",
            [
                ("mutex", self.linear_mutex),
                ("read-write lock", self.linear_rwlock),
                ("semaphore", self.linear_semaphore),
            ]
            .map(|(family, r)| format!(
                "{family} {} / {} / {}",
                r.keys - r.widened - r.unchecked,
                r.widened,
                r.unchecked
            ))
            .join("; ")
        );
        let _ = writeln!(
            md,
            "Every problem found, by kind and by the kinds of fault that touched it. An excused problem is one such a fault can explain; it fails no run, but it is counted here.\n"
        );
        if self.by_cause.is_empty() {
            let _ = writeln!(md, "None.\n");
            return md;
        }
        let _ = writeln!(
            md,
            "| problem | faults that touched it | excused | problems | runs |\n|---|---|---|---:|---:|"
        );
        for t in &self.by_cause {
            let causes = if t.causes.is_empty() {
                "none".to_owned()
            } else {
                t.causes.join(", ")
            };
            let _ = writeln!(
                md,
                "| {:?} | {causes} | {} | {} | {} |",
                t.kind,
                if t.excused { "yes" } else { "**no**" },
                t.problems,
                t.runs
            );
        }
        md.push('\n');
        md
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(kind: ProblemKind, causes: &[&str], excused: bool, count: u64) -> ProblemCount {
        ProblemCount {
            kind,
            causes: causes.iter().map(|c| (*c).to_owned()).collect(),
            excused,
            count,
        }
    }

    #[test]
    fn excused_problems_are_tallied_by_cause_not_dropped() {
        let a = [
            count(ProblemKind::Overlap, &["pause"], true, 7),
            count(ProblemKind::NotLinearizable, &["node-crash"], true, 1),
        ];
        let b = [count(ProblemKind::Overlap, &["pause"], true, 2)];
        let rw = |keys, widened| KeyReach {
            keys,
            widened,
            unchecked: 0,
        };
        let reach = |unchecked, widened| Reach {
            unchecked,
            widened,
            rwlock: rw(4, widened),
            ..Reach::default()
        };
        let j = Judged::of([(&a[..], reach(0, 2)), (&b[..], reach(3, 0))]);
        assert_eq!(j.by_cause[0].problems, 9);
        assert_eq!(j.by_cause[0].runs, 2);
        assert_eq!(j.linear_excused_runs, 1);
        assert_eq!((j.linear_unchecked_runs, j.linear_unchecked_keys), (1, 3));
        assert_eq!((j.linear_widened_runs, j.linear_widened_keys), (1, 2));
        let md = j.markdown(2);
        assert!(md.contains("| Overlap | pause | yes | 9 | 2 |"), "{md}");
        assert!(md.contains("1 of 2 runs (50.0 %)"), "{md}");
        assert!(md.contains("read-write lock 6 / 2 / 0"), "{md}");
    }
}
