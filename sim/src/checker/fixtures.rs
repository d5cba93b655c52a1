//! Hand-made histories for the verdicts' unit tests: events at whole milliseconds on the
//! lock the tests share, and the kinds of problem the whole checker finds in them.

use std::time::Duration;

use crate::calls::{LockOp, OpKind};
use crate::history::{FaultMark, HistEvent, HistKind};
use crate::net::ProcId;

use super::{CheckConfig, Nodes, ProblemKind, check};

/// The key of the tests' lock `l`.
pub const KEY: &str = "leasehold:{l}";

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
    let config = CheckConfig {
        liveness_bound: Duration::from_secs(10),
        lease_ttl: Duration::from_secs(1),
        shared_owner: false,
        fair_entry_timeout: entry_timeout,
    };
    let f = check(h, (faults, &Nodes::default()), &config, end_ms * 1_000_000);
    f.problems.iter().map(|p| p.kind).collect()
}

/// A watchdog's renewal of `hold` for a 1 s lease.
pub fn renewal(hold: u64) -> LockOp {
    LockOp {
        kind: OpKind::Renew,
        hold,
        owner: 0,
        ttl_ms: 1_000,
        queued: false,
    }
}
