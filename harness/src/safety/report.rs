//! The safety report's data: one cell per scenario × subject with its seeded tries (each
//! with its verdict, its fault's evidence and the measures of docs/DESIGN.md §3/§5), their
//! worst verdict beside the simulator's expectation and observation; rendered by
//! [`render`](crate::safety::render) as `safety.md` and stored as `safety.json`.
//!
//! Invariant: verdicts are the simulator's [`Verdict`] computed by the simulator's checker,
//! so "agree" means the same judgement of the same kind of history, not a look-alike.

use leasehold_sim::checker::{ProblemKind, Verdict};
use leasehold_sim::report::designs::Outcome;
use leasehold_sim::workload::LockKind;
use serde::{Deserialize, Serialize};

use crate::safety::subject::Subject;

/// When the fault happened in one try, in run time, and whether it landed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FaultTiming {
    /// First injection (ms since the run started).
    pub start_ms: f64,
    /// End of the fault: node back, link restored, last injection (ms).
    pub end_ms: f64,
    /// What was done, for the reader.
    pub note: String,
    /// Whether the evidence shows the fault did what the row names (the holder frozen
    /// while holding, the node silent while a lease was held, the grant lost, …).
    #[serde(default)]
    pub landed: bool,
    /// The evidence read from the system, for the reader.
    #[serde(default)]
    pub evidence: String,
}

/// How the real verdicts relate to the simulator's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Agreement {
    /// The worst real verdict meets the simulator scenario's expectation, and where the
    /// simulator finds the scenario unsafe, real Redis reproduced it.
    Agree,
    /// The simulator finds the scenario unsafe (exclusion broken or worse) and no real try
    /// reproduced that: the real check has not shown it can fail. Fails the job.
    NotReproduced(String),
    /// The real verdict exceeds the simulator's bound, or misses its exact verdict from
    /// the other side; the text says how. Fails the job.
    Disagree(String),
    /// No try's fault landed (the evidence says why): nothing was tested. Fails the job.
    Inconclusive(String),
    /// The simulator has no verdict for this cell yet (its reason).
    SimPending(String),
    /// No simulator scenario has this fault shape.
    NoSim,
    /// A peer library's row: judged by the same checker, compared with no simulator cell.
    Peer,
}

impl Agreement {
    /// The table cell.
    pub fn cell(&self) -> &'static str {
        match self {
            Agreement::Agree => "yes",
            Agreement::NotReproduced(_) => "**NOT REPRODUCED**",
            Agreement::Disagree(_) => "**NO**",
            Agreement::Inconclusive(_) => "**INCONCLUSIVE**",
            Agreement::SimPending(_) => "sim pending",
            Agreement::NoSim => "**no sim verdict**",
            Agreement::Peer => "peer",
        }
    }

    /// Whether this cell fails the job.
    pub fn fails(&self) -> bool {
        matches!(
            self,
            Agreement::NotReproduced(_) | Agreement::Disagree(_) | Agreement::Inconclusive(_)
        )
    }
}

/// One seeded try of a cell: its own lock and clients, judged on its own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TryReport {
    /// Seed of the clients' hold, think and read/write draws.
    pub seed: u64,
    /// Verdict of the simulator's checker on the try's history.
    pub real: Verdict,
    /// The try in the design matrix's words (what a design row is compared by).
    pub outcome: Outcome,
    /// The longest span (ms) over which two polls in a row found the lock's key with no
    /// expiry, if any did.
    pub no_expiry_ms: Option<f64>,
    /// The fault, with its evidence.
    pub fault: FaultTiming,
    /// Successful acquisitions.
    pub acquisitions: u64,
    /// Acquire calls that failed (timeout, error).
    pub failed_acquires: u64,
    /// Overlapping believed holds (by the lock's access rule).
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

/// One scenario × subject: its tries and their worst verdict beside the simulator's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellReport {
    /// Real scenario name.
    pub scenario: String,
    /// Corresponding simulator scenario.
    pub sim_scenario: Option<String>,
    /// docs/DESIGN.md §5 item.
    pub design_item: u8,
    /// Client library and strategy.
    pub subject: Subject,
    /// The member of the lock family.
    pub kind: LockKind,
    /// Lease TTL of the run (ms).
    pub ttl_ms: u64,
    /// Worst verdict over the tries.
    pub real: Verdict,
    /// How many tries gave each verdict, worst first.
    pub verdicts: Vec<(Verdict, u64)>,
    /// Tries whose fault landed.
    pub landed: u64,
    /// The simulator's expectation for this cell (`= safe`, `<= safe with fencing`, …).
    pub sim_expected: Option<String>,
    /// The simulator's worst verdict over its seeds, if it ran.
    pub sim_observed: Option<Verdict>,
    /// Real vs simulator.
    pub agreement: Agreement,
    /// The worst try in the design matrix's words.
    pub outcome: Outcome,
    /// For a design row: the simulator's design-matrix cell it is set beside.
    pub design_sim: Option<DesignSim>,
    /// Every try.
    pub tries: Vec<TryReport>,
}

/// The simulator's design-matrix cell (`leasehold_sim::report::designs`) a design row of
/// the real table is set beside: the same design under the fault class whose runs are the
/// row's simulator scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DesignSim {
    /// The fault class's column label.
    pub class: String,
    /// Its worst outcome over its runs.
    pub worst: Outcome,
    /// Runs with that outcome.
    pub worst_runs: u64,
    /// Its runs.
    pub runs: u64,
    /// Runs its fault landed in.
    pub landed: u64,
    /// The first seed with the worst outcome, when it is not safe.
    pub first_seed: Option<u64>,
    /// That run's problem as the checker described it.
    pub problem: Option<String>,
    /// That problem's kind.
    #[serde(default)]
    pub problem_kind: Option<ProblemKind>,
}

impl CellReport {
    /// The subject's table label.
    pub fn label(&self) -> &'static str {
        self.subject.label()
    }

    /// Sum of a count over the tries.
    pub fn total(&self, count: fn(&TryReport) -> u64) -> u64 {
        self.tries.iter().map(count).sum()
    }
}

/// The lock kind's table name.
pub fn kind_label(kind: LockKind) -> &'static str {
    match kind {
        LockKind::Mutex => "mutex",
        LockKind::ReadWrite { .. } => "rwlock",
        LockKind::Semaphore { .. } => "semaphore",
    }
}

/// The whole table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SafetyReport {
    /// Wall time of the whole run (s).
    pub elapsed_s: f64,
    /// Seeds per simulator cell.
    pub sim_seeds: u64,
    /// Seeded tries per real cell.
    pub tries: u64,
    /// Default lease TTL (ms); each row carries its own.
    pub ttl_ms: u64,
    /// Clients per run of the mutex (the read-write lock and the semaphore have
    /// [`FAMILY_CLIENTS`](crate::safety::scenario::FAMILY_CLIENTS)).
    pub clients: usize,
    /// Rows.
    pub cells: Vec<CellReport>,
}

impl SafetyReport {
    /// The cells that fail the job (disagreement, not reproduced, inconclusive), each
    /// with its reason: Leasehold's and rslock's rows. The design rows' are
    /// [`SafetyReport::design_mismatches`].
    pub fn problems(&self) -> Vec<String> {
        self.mismatches(false)
    }

    /// The design rows that do not agree with their simulator cell, each with its
    /// reason: listed beside the table, not failing the job (a design is the subject under
    /// test there, not Leasehold's claims).
    pub fn design_mismatches(&self) -> Vec<String> {
        self.mismatches(true)
    }

    fn mismatches(&self, designs: bool) -> Vec<String> {
        self.cells
            .iter()
            .filter(|c| matches!(c.subject, Subject::Design(_)) == designs)
            .filter_map(|c| {
                let why = match &c.agreement {
                    Agreement::Disagree(why) => format!("disagrees with the simulator: {why}"),
                    Agreement::NotReproduced(why) => format!("not reproduced: {why}"),
                    Agreement::Inconclusive(why) => format!("inconclusive: {why}"),
                    _ => return None,
                };
                Some(format!(
                    "{} × {} × {}: {why}",
                    c.scenario,
                    kind_label(c.kind),
                    c.label()
                ))
            })
            .collect()
    }
}
