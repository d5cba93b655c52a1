//! Problems and their excuses: what a rule of the checker found, the faults that touched
//! it, and whether one of them can explain it.
//!
//! Invariant: every problem is classified before anything is dropped. Only the stored
//! detail is capped, per classification (lock, kind, causes, excuse), so a problem that
//! differs from every stored one in what exploration judges by is always kept, and the
//! counts cover every problem found.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::world::history::FaultMark;

use super::timeline::Who;
use super::{causes, evictions};

/// How bad a run was, in increasing severity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Verdict {
    /// No conflicting beliefs, no stale writes, no starvation.
    Safe,
    /// Beliefs never conflicted, but a late write arrived after a newer holder's and the
    /// fenced resource rejected it: an unfenced one would have been corrupted.
    SafeWithFencing,
    /// Mutual exclusion failed: two beliefs conflicted, or a client believed it held a
    /// lock its granting nodes no longer held. Fencing may still have kept the resource
    /// safe (the tokens are checked separately, and rank above this).
    ExclusionBroken,
    /// A waiter saw the lock free for longer than the liveness bound.
    Starvation,
    /// Fencing itself failed: a grant's token did not exceed an earlier grant's, a
    /// re-entry got another epoch's token, or two holders wrote with the same token.
    Violation,
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Safe => "safe",
            Self::SafeWithFencing => "safe with fencing",
            Self::ExclusionBroken => "exclusion broken",
            Self::Starvation => "starvation",
            Self::Violation => "VIOLATION",
        })
    }
}

/// What kind of problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ProblemKind {
    /// Two beliefs conflicted.
    Overlap,
    /// A belief outlived its hold on the servers (the server-truth oracle).
    LeaseGone,
    /// A belief went on for longer than a lease after its hold left the servers: no
    /// lease the client was granted can last that long, so the client trusted something
    /// else (a renewal of a hold it no longer had, say).
    LeaseOutlived,
    /// A grant's token did not exceed the running maximum.
    TokenOrder,
    /// A re-entry got another epoch's token.
    ReentryToken,
    /// Two holders' writes were accepted with one token.
    TokenReuse,
    /// A waiter starved.
    Starvation,
    /// An acquire gave up after an attempt that may have left its hold on the server and
    /// sent no release of it: the lock or the line is stranded with nobody believing.
    AbandonedHold,
    /// A release freed a FairQueue lock with a live waiter in a clean line, and nobody
    /// held the lock soon after: the hand-off went nowhere.
    HandOffStalled,
    /// A release handed a FairQueue lock to the head of its line past that head's entry
    /// deadline, or for longer than the entry had left (see [`super::entry_lease`]).
    HandOffPastEntry,
    /// A FairQueue grant went past a live waiter that joined the line before the grantee's
    /// first attempt (see [`super::fifo`]).
    LineBypassed,
    /// A read-write lock's read grant went past a writer waiting with a live intent that
    /// was recorded before the reader's first attempt (see [`super::writers`]).
    WriterOvertaken,
    /// A semaphore waiter told "busy" slept past the wake bound while a permit was free on
    /// the server (see [`super::capacity`]).
    PermitsIdle,
    /// A client went on believing a hold for longer than a reply wait after a renewal of
    /// it was answered "not held" (see [`super::reaction`]).
    NotHeldIgnored,
    /// The lost-lease signal fired between a renewal the server confirmed and the next
    /// renewal, while nothing hampered the holder (see [`super::spurious_lost`]).
    SpuriousLost,
    /// A try failed with `WouldBlock` though no server answered any of its calls "busy"
    /// (see [`super::false_busy`]): a lock it could not see reported as held.
    FalseBusy,
    /// A node held a lock's key with no expiry, or one living longer than any the protocol
    /// gives, when the run ended (see [`super::hygiene`]).
    KeyLeftBehind,
    /// A node kept a hold, or a lock key, past the deadline the clients' requests permit
    /// it, or kept a hold after its release ran (see [`super::stranded`]).
    Stranded,
    /// A lock key's script calls have no linearization under the TTL lock's sequential
    /// spec (see [`linear`]): the servers answered as no correct lock could.
    NotLinearizable,
}

impl ProblemKind {
    /// Whether a problem of this kind that a rule of the checker excused is an expected
    /// failure, that rule its known limitation: a token out of order or a re-entry's
    /// foreign token its issuing node explains, a writer overtaken, a late wake or a wait
    /// a fault explains by its size and place.
    pub fn expected_when_excused(self) -> bool {
        matches!(
            self,
            Self::TokenOrder
                | Self::ReentryToken
                | Self::WriterOvertaken
                | Self::PermitsIdle
                | Self::Starvation
        )
    }

    /// The verdict a problem of this kind gives a run.
    pub fn verdict(self) -> Verdict {
        match self {
            Self::Overlap
            | Self::LeaseGone
            | Self::LeaseOutlived
            | Self::NotHeldIgnored
            | Self::NotLinearizable => Verdict::ExclusionBroken,
            Self::TokenOrder | Self::ReentryToken | Self::TokenReuse => Verdict::Violation,
            Self::Starvation
            | Self::AbandonedHold
            | Self::HandOffStalled
            | Self::HandOffPastEntry
            | Self::LineBypassed
            | Self::WriterOvertaken
            | Self::PermitsIdle
            | Self::SpuriousLost
            | Self::FalseBusy
            | Self::KeyLeftBehind
            | Self::Stranded => Verdict::Starvation,
        }
    }
}

/// How many problems of one kind, with one set of causes and one excuse, a run had
/// (stored in full or not).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProblemCount {
    /// What.
    pub kind: ProblemKind,
    /// Kinds of the faults that touched them.
    pub causes: Vec<String>,
    /// Whether one of those faults can explain them.
    pub excused: bool,
    /// How many.
    pub count: u64,
}

/// One finding, with the faults that touched it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Problem {
    /// What.
    pub kind: ProblemKind,
    /// Lock name.
    pub lock: String,
    /// When it showed, virtual ns.
    pub at: u64,
    /// Described for a report.
    pub detail: String,
    /// Kinds of the faults that touched the holds (or the wait) involved.
    pub touched_by: Vec<String>,
    /// Whether it is excused: one of those faults can explain it (see
    /// [`causes::outlive_lease`]), or, for a token out of order, its issuing node does
    /// (see [`super::issuers`]).
    pub excused: bool,
    /// The rule that excused it (`None` when not excused).
    pub rule: Option<&'static str>,
    /// That rule's evidence.
    pub excuse: Option<String>,
}

/// The rule that excuses a problem by a fault of an excusing kind that touched the holds
/// (or the wait) involved; its evidence lists their kinds.
pub const FAULT_TOUCHED: &str = "fault-touched";

/// How many problems of one classification to keep in full per lock.
pub(super) const KEPT_PER_KIND: usize = 5;

/// Which faults may have caused a problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reach {
    /// Those that touched the holds' (or the wait's) windows.
    Windows,
    /// Those, and every node fault before the problem whose effect lasts (a token out of
    /// order or reused, a lock that lingers: see [`causes::lasting`]).
    Lasting,
}

/// Collects problems, with their causes. Every problem is classified (its causes and
/// excuse computed) before anything is capped: only the stored detail is capped, per
/// classification, so a problem unlike every stored one is always kept.
pub(super) struct Judge<'a> {
    faults: &'a [FaultMark],
    problems: Vec<Problem>,
    counts: BTreeMap<(ProblemKind, Vec<String>, bool), u64>,
    tally: Tally,
}

impl<'a> Judge<'a> {
    pub(super) fn new(faults: &'a [FaultMark]) -> Self {
        Self {
            faults,
            problems: Vec::new(),
            counts: BTreeMap::new(),
            tally: Tally::default(),
        }
    }

    /// Counts a case of the verdict `kind` as judged, or as left unjudged by a fault's
    /// effect ([`Scope`]).
    pub(super) fn case(&mut self, kind: ProblemKind, judged: bool) {
        self.tally.case(kind, judged);
    }

    /// The reach of the verdicts `applies` lists ([`Scope`]).
    pub(super) fn scopes(&self, applies: &[ProblemKind]) -> Vec<Scope> {
        self.tally.scopes(applies)
    }

    /// The faults of the run.
    pub(super) fn faults(&self) -> &'a [FaultMark] {
        self.faults
    }

    /// The problems kept in full, and the count of every problem by classification.
    pub(super) fn finish(self) -> (Vec<Problem>, Vec<ProblemCount>) {
        let counts = self
            .counts
            .into_iter()
            .map(|((kind, causes, excused), count)| ProblemCount {
                kind,
                causes,
                excused,
                count,
            })
            .collect();
        (self.problems, counts)
    }

    /// Records a problem of `kind` on `lock`, shown at `at`, involving `windows` (whose
    /// windows, as (process, from, to)), caused by what `reach` says, excused when one of
    /// those faults can explain it.
    pub(super) fn add(
        &mut self,
        kind: ProblemKind,
        lock: &str,
        at: u64,
        (windows, reach): (&[(Who, u64, u64)], Reach),
        detail: String,
    ) {
        let touched = self.touched(windows, reach, at, lock);
        let excuses = |marks: &[&FaultMark]| causes::outlive_lease(marks);
        let touched_by = causes::kinds(touched.iter().copied());
        let excuse = if !excuses(&touched) {
            None
        } else if excuses(&evictions::others(&touched)) {
            Some((FAULT_TOUCHED, touched_by.join(", ")))
        } else {
            Some((evictions::EVICTED, evictions::evidence(&touched, lock)))
        };
        self.record(kind, lock, at, (touched_by, excuse), detail);
    }

    /// Records a problem as [`Judge::add`] does, but excused only by `excuse`, a rule of
    /// its own with its evidence (the faults are still listed for the report).
    pub(super) fn add_explained(
        &mut self,
        kind: ProblemKind,
        lock: &str,
        at: u64,
        (windows, reach): (&[(Who, u64, u64)], Reach),
        (detail, excuse): (String, Option<(&'static str, String)>),
    ) {
        let touched_by = causes::kinds(self.touched(windows, reach, at, lock).into_iter());
        self.record(kind, lock, at, (touched_by, excuse), detail);
    }

    /// The faults that touched `windows` of `lock` (an eviction only if it took that
    /// lock's key), and, for [`Reach::Lasting`], the lasting node faults before `at`.
    fn touched(
        &self,
        windows: &[(Who, u64, u64)],
        reach: Reach,
        at: u64,
        lock: &str,
    ) -> Vec<&'a FaultMark> {
        let faults = self.faults;
        let mut touched: Vec<&FaultMark> = windows
            .iter()
            .flat_map(|&(who, from, to)| causes::touching(faults, who, (from, to)))
            .filter(|m| evictions::concerns(m, lock))
            .collect();
        if reach == Reach::Lasting {
            touched.extend(causes::lasting(faults, at));
        }
        touched
    }

    /// Counts a classified problem, and keeps its detail if fewer than [`KEPT_PER_KIND`]
    /// problems of the same classification (lock, kind, causes and excuse) are kept.
    fn record(
        &mut self,
        kind: ProblemKind,
        lock: &str,
        at: u64,
        (touched_by, excuse): (Vec<String>, Option<(&'static str, String)>),
        detail: String,
    ) {
        let excused = excuse.is_some();
        *self
            .counts
            .entry((kind, touched_by.clone(), excused))
            .or_default() += 1;
        let alike = self
            .problems
            .iter()
            .filter(|p| {
                p.kind == kind
                    && p.lock == lock
                    && p.excused == excused
                    && p.touched_by == touched_by
            })
            .count();
        if alike < KEPT_PER_KIND {
            self.problems.push(Problem {
                kind,
                lock: lock.to_owned(),
                at,
                detail: format!("{lock}: {detail}"),
                touched_by,
                excused,
                rule: excuse.as_ref().map(|e| e.0),
                excuse: excuse.map(|e| e.1),
            });
        }
    }
}

// How far each per-waiter and per-hold verdict reached in one run: the cases it judged, the
// cases a fault left it unable to judge, and whether the run switched it off whole. A
// verdict that is skipped wherever it would be inconvenient passes every run and says
// nothing, so each rule counts, case by case (a freeing release with waiters in line, a
// grant past a waiter, a refused renewal, a lost signal, a hand-off, a freed permit, a
// wait), whether it judged the case or let a fault's effect leave it open. A case is
// counted once, by the rule that owns it; one the rule's own invariant puts out of its
// reach by design (RedLock's quorum renewals, a lost signal the oracle saw coming) is
// neither. A verdict whose run configuration leaves it nothing to judge is not listed.

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
struct Tally(BTreeMap<ProblemKind, (u64, u64)>);

impl Tally {
    /// Counts a case of `kind`, judged or skipped.
    fn case(&mut self, kind: ProblemKind, judged: bool) {
        let entry = self.0.entry(kind).or_default();
        if judged {
            entry.0 += 1;
        } else {
            entry.1 += 1;
        }
    }

    /// The scopes of the verdicts `applies` lists (none switched off whole: a run's
    /// configuration alone never does, the exploration that set it may).
    fn scopes(&self, applies: &[ProblemKind]) -> Vec<Scope> {
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
