//! How far each per-waiter and per-hold verdict reached in one run: the cases it judged,
//! the cases a fault left it unable to judge, and whether the run switched it off whole.
//!
//! Why it exists: a verdict that is skipped wherever it would be inconvenient passes every
//! run and says nothing. Each rule counts, case by case (a freeing release with waiters in
//! line, a grant past a waiter, a refused renewal, a lost signal, a hand-off, a freed
//! permit, a wait), whether it judged the case or let a fault's effect leave it open, so
//! exploration can report the share of runs in which each verdict judged nothing it could
//! have judged.
//!
//! Invariant: a case is counted once, as judged or as skipped, by the rule that owns it; a
//! case the rule's own invariant puts out of its reach by design (RedLock's quorum renewals,
//! a lost signal the oracle saw coming) is neither. A verdict whose run configuration leaves
//! it nothing to judge (no fair line, no writer intents, no semaphore) is not listed.

use std::collections::BTreeMap;

use serde::Serialize;

use super::problems::ProblemKind;

/// One verdict's reach in a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Scope {
    /// The verdict.
    pub kind: ProblemKind,
    /// Why the run switched it off whole (`None`: it judged what it met).
    pub off: Option<&'static str>,
    /// Cases judged.
    pub judged: u64,
    /// Cases a fault's effect left unjudged.
    pub skipped: u64,
}

impl Scope {
    /// Whether the run judged nothing the verdict could have judged: switched off whole,
    /// or every case it met skipped.
    pub fn switched_off(&self) -> bool {
        self.off.is_some() || (self.judged == 0 && self.skipped > 0)
    }
}

/// The cases each verdict judged and skipped so far: (judged, skipped).
#[derive(Debug, Default)]
pub(super) struct Tally(BTreeMap<ProblemKind, (u64, u64)>);

impl Tally {
    /// Counts a case of `kind`, judged or skipped.
    pub(super) fn case(&mut self, kind: ProblemKind, judged: bool) {
        let entry = self.0.entry(kind).or_default();
        if judged {
            entry.0 += 1;
        } else {
            entry.1 += 1;
        }
    }

    /// The scopes of the verdicts `applies` lists (none switched off whole: a run's
    /// configuration alone never does, the exploration that set it may).
    pub(super) fn scopes(&self, applies: &[ProblemKind]) -> Vec<Scope> {
        applies
            .iter()
            .map(|&kind| {
                let (judged, skipped) = self.0.get(&kind).copied().unwrap_or_default();
                Scope {
                    kind,
                    off: None,
                    judged,
                    skipped,
                }
            })
            .collect()
    }
}
