//! The checker room: the judge.
//!
//! Judges a history: mutual exclusion, server truth, fencing tokens and liveness, each
//! finding with the faults that touched it.
//!
//! Invariant: the verdict depends only on the history and the fault log in true (virtual)
//! time.
//! - *Exclusion* is over the intervals clients *believed* they held, by each lock's access
//!   rule (one exclusive hold, readers together, at most N permits). Beliefs that conflict
//!   break exclusion, whatever the resource did about it.
//! - *Server truth*: a belief the oracle saw outlive the hold on its granting nodes breaks
//!   exclusion too, with or without a second holder.
//! - *Fencing*: every grant's token exceeds every earlier grant's (the running maximum, the
//!   same process's grants included), a re-entry gets its epoch's token, and no token is
//!   accepted from two holders; otherwise fencing protects nothing: a violation. A run
//!   whose clients use a lock design that issues no token at all ([`CheckConfig::unfenced`],
//!   set from the workload, never for Leasehold's clients) has no token order to judge:
//!   its holds are judged by exclusion and server truth alone.
//! - *Liveness*: a waiter that sees the lock free for longer than the bound, while nothing
//!   hampers it, starved.
//! - *Per waiter and per hold*: a FairQueue line is served in order ([`fifo`]), a waiting
//!   writer is not overtaken by later readers ([`writers`]), a semaphore's waiters ask
//!   again soon after a permit frees ([`capacity`]), a belief ends once a renewal is
//!   answered "not held" ([`reaction`]), and the lost signal does not fire between a
//!   confirmed renewal and the next ([`spurious_lost`]).
//! - *Stranded state* ([`stranded`]): no node keeps a hold or a lock key past what the
//!   clients' requests permit, judged on the keyspace each script call left.
//! - *Linearizability* ([`linear`]): each lock key's script calls, ambiguous ones included,
//!   have a linearization under a TTL lock's sequential spec; otherwise the servers
//!   answered as no correct lock could (exclusion broken, never excused).
//!
//! Each problem lists the kinds of fault that touched it ([`causes`]) and whether one of
//! them can explain a lease outliving its key; the verdict itself does not excuse anything
//! (a scenario expects "exclusion broken" under a pause), exploration does.
//!
//! May import: engine, model, world.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::world::faults::Fault;
use crate::world::history::{FaultMark, HistEvent};

mod abandon;
mod capacity;
pub mod causes;
mod effects;
mod entry_lease;
mod evictions;
mod exclusion;
mod false_busy;
mod fifo;
#[cfg(test)]
mod fixtures;
mod hygiene;
mod issuers;
mod lease_spec;
mod line;
pub mod linear;
mod liveness;
mod permit_spec;
mod problems;
mod reaction;
mod reentries;
mod renewals;
mod rw_spec;
mod seq_spec;
mod serving;
mod sizes;
mod spurious_lost;
mod stranded;
mod timeline;
mod tokens;
mod writers;

pub use exclusion::Overlap;
pub use issuers::{FENCE_EVICTED, FENCE_EXPIRED, Nodes, OTHER_NODE, STATE_LOST};
pub use problems::{FAULT_TOUCHED, Problem, ProblemCount, ProblemKind, Scope, Verdict};
pub use timeline::{Hold, Timeline, read as read_timeline};

use problems::{Judge, Reach};

/// Checker parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckConfig {
    /// Longest a waiter may see the lock free (by beliefs) without acquiring it.
    #[serde(with = "crate::engine::duration_text")]
    pub liveness_bound: Duration,
    /// The longest lease a hold is granted (the workload's TTL; a run raises it to a
    /// re-entering workload's inner or sibling TTL when longer). A client's every lease
    /// was counted from a request sent before its hold left the servers, so its belief
    /// must end within this much after that, whatever took the hold away.
    #[serde(with = "crate::engine::duration_text")]
    pub lease_ttl: Duration,
    /// Whether each process's holds share one owner (re-entry workloads), so that a
    /// process may be granted its own epoch's token again: by a re-entry while one of its
    /// holds is still live on the server, even one it never saw granted (a fair hand-off to
    /// an acquire it had abandoned, whose release is still on its way). The run sets it
    /// from its workload; whether that epoch could still be live is the linearizability
    /// check's to judge.
    #[serde(default)]
    pub shared_owner: bool,
    /// The fair waiters' queue entry timeout, when the clients wait in a FairQueue line
    /// (`None` otherwise): the fair line's hand-off is judged only then.
    #[serde(default, with = "crate::engine::duration_text::option")]
    pub fair_entry_timeout: Option<Duration>,
    /// The writers' intent timeout, when the clients take a read-write lock and wait for
    /// it by intents, not in its fair line (`None` otherwise): writer preference is judged
    /// only then, and without re-entry (a fair line's order is judged by [`fifo`]).
    #[serde(default, with = "crate::engine::duration_text::option")]
    pub writer_intent: Option<Duration>,
    /// When the clients take a semaphore (`None` otherwise): how soon a waiter told "busy"
    /// asks again, at the latest, once a permit is free on the server (the wait strategy's
    /// wake-up and the messages that carry it); capacity is judged only then.
    #[serde(default, with = "crate::engine::duration_text::option")]
    pub permit_wake: Option<Duration>,
    /// Whether the clients run a lock design that issues no fencing token
    /// ([`crate::workload::Workload::design`]): its write holds all carry token 0, which
    /// says "no token", not "token 0", so the token-order rule judges none of them
    /// (exclusion and server truth still judge every hold). The run sets it from its
    /// workload; Leasehold's clients always issue tokens, and leave it unset.
    #[serde(default)]
    pub unfenced: bool,
}

/// What the checker found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Findings {
    /// Successful acquisitions.
    pub acquisitions: u64,
    /// Acquire attempts that failed.
    pub failed_acquires: u64,
    /// Holds ended by the lost-lease signal.
    pub lost: u64,
    /// Writes at the resource.
    pub writes: u64,
    /// Writes the fenced resource rejected (an unfenced one would have accepted them).
    pub stale_rejected: u64,
    /// Conflicting believed holds (first few).
    pub overlaps: Vec<Overlap>,
    /// Number of conflicting pairs.
    pub overlap_count: u64,
    /// Beliefs the oracle saw outlive their hold on the servers.
    pub lease_gone: u64,
    /// Lock-script calls the linearizability check ordered.
    pub linear_calls: u64,
    /// Lock keys the linearizability check did not check exactly: unchecked (its search
    /// outgrew its budget; not passed) or widened.
    pub linear_reach: linear::Reach,
    /// Problems with their causes: every classification (lock, kind, causes, excuse)
    /// found, the first few of each in full.
    pub problems: Vec<Problem>,
    /// Every problem found, counted by kind, causes and excuse (stored in full or not).
    pub problem_counts: Vec<ProblemCount>,
    /// Smallest gap between a lost-lease signal and the next holder's grant, in ms
    /// (how early the signal came); `None` if no lost signal preceded another grant.
    pub lost_margin_ms: Option<f64>,
    /// How far each per-waiter and per-hold verdict this run's configuration calls for
    /// reached ([`Scope`]).
    pub scopes: Vec<Scope>,
    /// The verdict.
    pub verdict: Verdict,
}

impl Findings {
    /// The problems of `kinds`, described.
    pub fn described(&self, kinds: &[ProblemKind]) -> Vec<String> {
        self.problems
            .iter()
            .filter(|p| kinds.contains(&p.kind))
            .map(|p| p.detail.clone())
            .collect()
    }
}

/// Checks `history` of a run that ended at virtual time `end`, with the faults that landed
/// and the nodes that granted its locks (their clocks and groups: who issued each token).
pub fn check(
    history: &[HistEvent],
    (faults, nodes): (&[FaultMark], &Nodes),
    config: &CheckConfig,
    end: u64,
) -> Findings {
    let mut t = timeline::read(history, end);
    sizes::Sizes::read(history).bound(&mut t.holds);
    let mut f = Findings {
        acquisitions: t.holds.values().map(|l| l.len() as u64).sum(),
        failed_acquires: t.failed_acquires,
        lost: t.lost,
        writes: t.writes,
        stale_rejected: t.stale_rejected,
        overlaps: Vec::new(),
        overlap_count: 0,
        lease_gone: t.gone.len() as u64,
        linear_calls: 0,
        linear_reach: linear::Reach::default(),
        problems: Vec::new(),
        problem_counts: Vec::new(),
        lost_margin_ms: None,
        scopes: Vec::new(),
        verdict: Verdict::Safe,
    };
    let mut judge = Judge::new(faults);
    let issuers = issuers::Issuers::read(history);
    let mut excl = exclusion::Exclusion::default();
    for (lock, list) in &mut t.holds {
        list.sort_by_key(|h| (h.start, h.proc, h.incarnation));
        exclusion::exclusion(lock, list, (nodes, &t.written), &mut judge, &mut excl);
        if !config.unfenced {
            tokens::tokens(
                lock,
                list,
                config.shared_owner,
                (nodes, &issuers),
                &mut judge,
            );
        }
    }
    f.overlaps = excl.overlaps;
    f.overlap_count = excl.overlap_count;
    f.lost_margin_ms = excl.lost_margin_ms;
    exclusion::server_truth(&t, nodes, config.lease_ttl, &mut judge);
    tokens::fencing(&t, (nodes, &issuers), &mut judge);
    liveness::liveness(&t, nodes, config.liveness_bound, &mut judge);
    abandon::abandoned(history, &t, faults, end, &mut judge);
    let reentries = reentries::Reentries::read(history);
    if let Some(entry_timeout) = config.fair_entry_timeout {
        line::hand_offs(history, &t, faults, entry_timeout, &mut judge);
        fifo::order(history, (faults, &reentries), entry_timeout, &mut judge);
        entry_lease::hand_off_leases(history, nodes, faults, entry_timeout, &mut judge);
    }
    let read = (&renewals::read(history), &renewals::Targets::read(history));
    reaction::not_held(read, &t, &mut judge);
    spurious_lost::spurious(read, &t, (nodes, faults), config.lease_ttl, &mut judge);
    if let Some(intent) = config.writer_intent {
        writers::preference(history, (nodes, faults, &reentries), intent, &mut judge);
    }
    if let Some(wake) = config.permit_wake {
        let lease = config
            .lease_ttl
            .max(config.fair_entry_timeout.unwrap_or_default());
        capacity::idle_permits(history, &t, (nodes, faults), (wake, lease), &mut judge);
    }
    stranded::stranded(history, &mut judge);
    false_busy::false_busy(history, &mut judge);
    hygiene::keys_left(nodes, end, &mut judge);
    linearizable(history, &mut judge, &mut f);
    f.scopes = judge.scopes(&applies(config));
    (f.problems, f.problem_counts) = judge.finish();
    f.verdict = f
        .problems
        .iter()
        .map(|p| p.kind.verdict())
        .max()
        .unwrap_or(Verdict::Safe)
        .max(if f.stale_rejected > 0 {
            Verdict::SafeWithFencing
        } else {
            Verdict::Safe
        });
    f
}

/// The per-waiter and per-hold verdicts `config` calls for ([`Scope`]).
fn applies(config: &CheckConfig) -> Vec<ProblemKind> {
    let mut applies = vec![
        ProblemKind::Starvation,
        ProblemKind::NotHeldIgnored,
        ProblemKind::SpuriousLost,
        ProblemKind::FalseBusy,
    ];
    if config.fair_entry_timeout.is_some() {
        applies.extend([
            ProblemKind::HandOffStalled,
            ProblemKind::LineBypassed,
            ProblemKind::HandOffPastEntry,
        ]);
    }
    if config.writer_intent.is_some() {
        applies.push(ProblemKind::WriterOvertaken);
    }
    if config.permit_wake.is_some() {
        applies.push(ProblemKind::PermitsIdle);
    }
    applies
}

/// Script calls no linearization explains: each is a problem over the window from the
/// state it contradicts to its answer, listing the faults in it and excused by none.
fn linearizable(history: &[HistEvent], judge: &mut Judge<'_>, f: &mut Findings) {
    // A paused node runs the requests it held when it wakes, however late.
    let stall_ns = judge
        .faults()
        .iter()
        .filter_map(|m| match m.fault {
            Fault::NodePause { ms, .. } => Some(ms.saturating_mul(1_000_000)),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    let report = linear::check(
        history,
        judge.faults(),
        linear::AMBIGUOUS_WINDOW_NS + stall_ns,
    );
    f.linear_calls = report.calls;
    f.linear_reach = report.reach;
    // Never excused: the spec is judged on each node's own clock at the instant it ran the
    // call, and a key whose state a fault may have lost starts afresh ([`linear`]), so no
    // fault leaves a correct server's answers unexplained.
    for finding in report.findings {
        judge.add_explained(
            ProblemKind::NotLinearizable,
            &finding.lock,
            finding.at,
            (&[(finding.who, finding.since, finding.at)], Reach::Windows),
            (finding.detail, None),
        );
    }
}

#[cfg(test)]
mod tests;
