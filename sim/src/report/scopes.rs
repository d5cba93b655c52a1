//! How far each per-waiter and per-hold verdict reached across an exploration's plain
//! seeds: the runs it applied to, the runs that switched it off (whole, or by skipping every
//! case it met), and the cases judged and skipped.
//!
//! Why it exists: a verdict that is off where it would be inconvenient cannot fail there.
//! The share of runs in which each one judged nothing it could have judged is the measure
//! of how much of exploration it speaks for ([`crate::checker::Scope`]).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::checker::{ProblemKind, Scope};

/// One verdict's reach over the runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScopeTally {
    /// The verdict.
    pub kind: ProblemKind,
    /// Runs whose configuration calls for it.
    pub runs: u64,
    /// Runs that switched it off whole, by reason.
    pub off: BTreeMap<String, u64>,
    /// Runs in which it met cases and a fault's effect left every one unjudged.
    pub all_skipped: u64,
    /// Cases judged.
    pub judged: u64,
    /// Cases left unjudged.
    pub skipped: u64,
}

impl ScopeTally {
    /// Runs in which the verdict judged nothing it could have judged.
    pub fn switched_off(&self) -> u64 {
        self.off.values().sum::<u64>() + self.all_skipped
    }
}

/// Tallies the runs' scopes, by verdict.
pub fn tally<'a>(runs: impl IntoIterator<Item = &'a [Scope]>) -> Vec<ScopeTally> {
    let mut by_kind: BTreeMap<ProblemKind, ScopeTally> = BTreeMap::new();
    for scopes in runs {
        for s in scopes {
            let t = by_kind.entry(s.kind).or_insert_with(|| ScopeTally {
                kind: s.kind,
                runs: 0,
                off: BTreeMap::new(),
                all_skipped: 0,
                judged: 0,
                skipped: 0,
            });
            t.runs += 1;
            match s.off {
                Some(reason) => *t.off.entry(reason.to_owned()).or_default() += 1,
                None if s.switched_off() => t.all_skipped += 1,
                None => {}
            }
            t.judged += s.judged;
            t.skipped += s.skipped;
        }
    }
    by_kind.into_values().collect()
}

/// Adds the tallies of `other`, over other runs, to `tallies`: what [`tally`] would count
/// over both sets of runs.
pub fn add(tallies: &mut Vec<ScopeTally>, other: &[ScopeTally]) {
    for theirs in other {
        match tallies.iter_mut().find(|mine| mine.kind == theirs.kind) {
            Some(mine) => {
                mine.runs += theirs.runs;
                for (reason, n) in &theirs.off {
                    *mine.off.entry(reason.clone()).or_default() += n;
                }
                mine.all_skipped += theirs.all_skipped;
                mine.judged += theirs.judged;
                mine.skipped += theirs.skipped;
            }
            None => tallies.push(theirs.clone()),
        }
    }
    tallies.sort_by_key(|t| t.kind);
}

/// The report's section on it.
pub fn section(md: &mut String, tallies: &[ScopeTally]) {
    let _ = writeln!(md, "## Where the per-waiter verdicts judged\n");
    let _ = writeln!(
        md,
        "Plain seeds only. A verdict applies to a run whose configuration calls for it (a fair line, writer intents, a semaphore; the global liveness bound and the renewal verdicts in every run). It is switched off in a run that turned it off whole, or in which a fault's effect left every case it met unjudged. A case is one thing the verdict judges: a wait, a freeing release with waiters in line, a grant past a live waiter, a refused renewal, a lost signal after a confirmed renewal, a hand-off, a semaphore wait with permits free.\n"
    );
    if tallies.is_empty() {
        let _ = writeln!(md, "None.\n");
        return;
    }
    let _ = writeln!(
        md,
        "| verdict | runs it applies to | switched off | why | cases judged | cases skipped |\n|---|---:|---:|---|---:|---:|"
    );
    for t in tallies {
        let share = |n: u64, of: u64| 100.0 * n as f64 / of.max(1) as f64;
        let mut why: Vec<String> = t.off.iter().map(|(r, n)| format!("{r}: {n}")).collect();
        if t.all_skipped > 0 {
            why.push(format!("every case skipped: {}", t.all_skipped));
        }
        let _ = writeln!(
            md,
            "| {:?} | {} | {} ({:.1} %) | {} | {} | {} ({:.1} %) |",
            t.kind,
            t.runs,
            t.switched_off(),
            share(t.switched_off(), t.runs),
            if why.is_empty() {
                "-".to_owned()
            } else {
                why.join("; ")
            },
            t.judged,
            t.skipped,
            share(t.skipped, t.judged + t.skipped),
        );
    }
    md.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(kind: ProblemKind, off: Option<&'static str>, judged: u64, skipped: u64) -> Scope {
        Scope {
            kind,
            off,
            judged,
            skipped,
        }
    }

    #[test]
    fn a_run_that_skipped_every_case_counts_as_switched_off() {
        let a = [scope(ProblemKind::HandOffStalled, None, 0, 3)];
        let b = [scope(ProblemKind::HandOffStalled, None, 2, 1)];
        let c = [scope(ProblemKind::HandOffStalled, Some("re-entry"), 0, 0)];
        let d = [scope(ProblemKind::HandOffStalled, None, 0, 0)];
        let t = tally([&a[..], &b[..], &c[..], &d[..]]);
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].runs, 4);
        assert_eq!(t[0].all_skipped, 1);
        assert_eq!(t[0].off.get("re-entry"), Some(&1));
        assert_eq!(t[0].switched_off(), 2);
        assert_eq!((t[0].judged, t[0].skipped), (2, 4));
        let mut md = String::new();
        section(&mut md, &t);
        assert!(md.contains("| HandOffStalled | 4 | 2 (50.0 %) |"), "{md}");
    }
}
