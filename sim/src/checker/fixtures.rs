//! Hand-made histories for the verdicts' unit tests: events at whole milliseconds on the
//! lock the tests share, and the kinds of problem the whole checker finds in them.

use std::time::Duration;

use crate::world::calls::{Family, LockOp, LockReply, OpKind};
use crate::world::history::{Access, FaultMark, HistEvent, HistKind};
use crate::world::net::{ProcId, Target};

use super::{CheckConfig, Nodes, ProblemKind, check, linear};

/// The key of the tests' lock `l`.
pub const KEY: &str = "leasehold:{l}";

/// The holds of each family a per-hold verdict judges, on lock `l`: the access a belief
/// has, the family whose script renews it, and the key its calls name (a write hold's
/// renewals run the mutex's script on the read-write lock's key).
pub const FAMILIES: [(Access, Family, &str); 4] = [
    (Access::Exclusive, Family::Mutex, KEY),
    (Access::Exclusive, Family::Mutex, "leasehold:{l}:rw"),
    (Access::Shared, Family::Read, "leasehold:{l}:rw:readers"),
    (
        Access::Permit { permits: 2 },
        Family::Permit,
        "leasehold:{l}:sem",
    ),
];

/// An event of process `proc` on `lock` (a lock name, or a key for calls) at `at_ms`.
pub fn ev(at_ms: u64, proc: ProcId, lock: &str, kind: HistKind) -> HistEvent {
    HistEvent {
        at: at_ms * 1_000_000,
        proc,
        incarnation: 0,
        lock: lock.into(),
        kind,
    }
}

/// The kinds of problem the checker finds in `h` under `faults`, judged until `end_ms`:
/// 1 s leases, a 10 s liveness bound, and FairQueue entries of `entry_timeout` if any.
pub fn kinds(
    h: &[HistEvent],
    faults: &[FaultMark],
    entry_timeout: Option<Duration>,
    end_ms: u64,
) -> Vec<ProblemKind> {
    let found = judged(h, faults, &config(entry_timeout), end_ms);
    found.into_iter().map(|(kind, _)| kind).collect()
}

/// The tests' checker parameters: 1 s leases, a 10 s liveness bound, FairQueue entries of
/// `entry_timeout` if any, and no read-write lock or semaphore rules.
pub fn config(entry_timeout: Option<Duration>) -> CheckConfig {
    CheckConfig {
        liveness_bound: Duration::from_secs(10),
        lease_ttl: Duration::from_secs(1),
        shared_owner: false,
        fair_entry_timeout: entry_timeout,
        writer_intent: None,
        permit_wake: None,
        unfenced: false,
    }
}

/// The problems the checker finds in `h` under `faults` and `config`, judged until
/// `end_ms`, each with whether it was excused.
pub fn judged(
    h: &[HistEvent],
    faults: &[FaultMark],
    config: &CheckConfig,
    end_ms: u64,
) -> Vec<(ProblemKind, bool)> {
    let f = check(h, (faults, &Nodes::default()), config, end_ms * 1_000_000);
    f.problems.iter().map(|p| (p.kind, p.excused)).collect()
}

/// A watchdog's renewal of `hold` for a 1 s lease, by `family`'s script.
pub fn renewal(family: Family, hold: u64) -> LockOp {
    LockOp {
        family,
        kind: OpKind::Renew,
        hold,
        owner: 0,
        ttl_ms: 1_000,
        queued: false,
        entry_ms: 0,
    }
}

/// A call of `family`'s `kind` script for `hold` of `owner`, asking `ttl_ms` (acquire and
/// renew), `queued` if an acquire waits in a line.
pub fn op(
    family: Family,
    kind: OpKind,
    (hold, owner): (u64, u64),
    ttl_ms: u64,
    queued: bool,
) -> LockOp {
    LockOp {
        family,
        kind,
        hold,
        owner,
        ttl_ms,
        queued,
        entry_ms: 0,
    }
}

/// A history of lock-script calls on one node, for the sequential specs' tests.
#[derive(Default)]
pub struct Calls(Vec<HistEvent>);

impl Calls {
    /// `proc` sends `op` on `key` at `sent_ms`, answered at `answer.0` ms (`None`: never).
    pub fn call(
        mut self,
        (proc, key): (ProcId, &str),
        op: LockOp,
        sent_ms: u64,
        answer: Option<(u64, LockReply)>,
    ) -> Self {
        let id = self.0.len() as u64;
        let target = Target::Node(0);
        self.0
            .push(ev(sent_ms, proc, key, HistKind::Call { id, target, op }));
        if let Some((at, reply)) = answer {
            self.0
                .push(ev(at, proc, key, HistKind::Return { id, reply }));
        }
        self.0.sort_by_key(|e| e.at);
        self
    }

    /// The call sent last ran on node `node` when it was sent, its clock reading
    /// `clock_ms`, with the reply its client was given (the simulator's witness).
    pub fn ran_on(self, node: usize, clock_ms: u64) -> Self {
        let last = self.0.iter().filter_map(|e| match e.kind {
            HistKind::Call { id, .. } => Some((id, e.at, e.proc, e.lock.clone())),
            _ => None,
        });
        let Some((id, at, proc, lock)) = last.max_by_key(|c| c.0) else {
            return self;
        };
        let reply = self.0.iter().find_map(|e| match e.kind {
            HistKind::Return { id: of, reply } if of == id => Some(reply),
            _ => None,
        });
        let kind = HistKind::Ran {
            id,
            reply,
            node,
            clock_ms,
            fence: None,
        };
        self.event(HistEvent {
            at,
            proc,
            incarnation: 0,
            lock,
            kind,
        })
    }

    /// `event` added (in time order).
    pub fn event(mut self, event: HistEvent) -> Self {
        self.0.push(event);
        self.0.sort_by_key(|e| e.at);
        self
    }

    /// What the linearizability check finds, described.
    pub fn findings(&self) -> Vec<String> {
        linear::check(&self.0, &[], linear::AMBIGUOUS_WINDOW_NS)
            .findings
            .into_iter()
            .map(|f| f.detail)
            .collect()
    }

    /// How far the linearizability check reached.
    pub fn reach(&self) -> linear::Reach {
        linear::check(&self.0, &[], linear::AMBIGUOUS_WINDOW_NS).reach
    }
}
