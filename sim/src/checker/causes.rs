//! Which faults touched a hold or a wait: the causal rule that decides what a finding may
//! be excused by.
//!
//! Why it exists: a fault somewhere in a run explains nothing by itself. A lease can
//! outlive its server key without a bug only when something acted on *that* hold while it
//! was held: its process froze, its clock ran slow against a granting node's by more than
//! the drift margin (the two clocks' errors add up: a slow client and a fast node), or a
//! node that grants the lock jumped its clock forward, lost its data or failed over,
//! inside the hold's window. A slow link never does (validity counts from the request's
//! send), and neither do a client crash, a partition, a forward jump of a client's
//! monotonic clock, a stalled or cut-off node, a script flush, or a client cut from the
//! Sentinels or told a stale master by them: each of those can only make the client give
//! up sooner (or send it to a node whose grants the failover behind the stale answer
//! explains).
//!
//! Node state is different: tokens and expiries come from node clocks, so a node clock
//! that jumped or drifts, or a failover to a replica with its own clock, displaces every
//! token issued and every expiry set after it. For a token out of order or reused and for
//! a lock that lingers (starvation), such a fault counts however long before it was.
//!
//! Invariant: a fault touches a hold when its stretch of time meets the hold's window, from
//! the request that got it to its end, and, for a process fault, it hit the holder's
//! incarnation; every node fault counts for every hold, since every node of a deployment
//! grants its locks (the single node with its replicas, or RedLock's masters).

use crate::world::faults::Fault;
use crate::world::history::FaultMark;
use crate::world::net::ProcId;

use super::effects::DRIFT_MARGIN_PPM;

/// The faults that touched `who`'s window `[from, to]`, in log order.
pub fn touching(
    marks: &[FaultMark],
    who: (ProcId, u32),
    (from, to): (u64, u64),
) -> impl Iterator<Item = &FaultMark> {
    marks.iter().filter(move |m| {
        let meets = m.from <= to && m.until >= from;
        let aimed = match m.fault {
            Fault::Pause { .. }
            | Fault::Crash { .. }
            | Fault::Isolate { .. }
            | Fault::CutFrom { .. }
            | Fault::OneWay { .. }
            | Fault::SentinelCut { .. }
            | Fault::Slow { .. } => m.proc == Some(who),
            // A clock belongs to the process, across its incarnations.
            Fault::ClientClockDrift { proc, .. } | Fault::ClientClockJump { proc, .. } => {
                proc == who.0
            }
            Fault::NodeClockJump { .. }
            | Fault::NodeClockDrift { .. }
            | Fault::NodeCrash { .. }
            | Fault::NodePause { .. }
            | Fault::NodeIsolate { .. }
            | Fault::Failover { .. }
            | Fault::ScriptFlush { .. }
            | Fault::ReplicaCut { .. }
            // A lagging Sentinel may misroute any client of the group: listed, and
            // excusing nothing (`outlives_lease`).
            | Fault::SentinelStale { .. }
            // Only its own lock's (`evictions::concerns`, applied by the judge).
            | Fault::Evict { .. } => true,
        };
        meets && aimed
    })
}

/// The node faults before `at` whose effect on node state lasts: a node clock jump or
/// drift (the node's clock stays moved, and with it its tokens and the expiries it sets)
/// or a failover (the promoted replica's clock and replicated state are not the old
/// master's).
pub fn lasting(marks: &[FaultMark], at: u64) -> impl Iterator<Item = &FaultMark> {
    marks.iter().filter(move |m| {
        m.from <= at
            && matches!(
                m.fault,
                Fault::NodeClockJump { .. } | Fault::NodeClockDrift { .. } | Fault::Failover { .. }
            )
    })
}

/// Whether `marks`, having touched a hold, can make its belief outlive its lease on the
/// servers (and so let a second holder in) without the lock being at fault: one of them
/// does on its own, or the clocks among them drift apart beyond the margin.
pub fn outlive_lease(marks: &[&FaultMark]) -> bool {
    marks.iter().any(|m| outlives_lease(m)) || drift_beyond_margin(marks)
}

/// Whether the clock drifts among `marks` add up to more than the drift margin: the
/// slowest holder clock's lag plus the fastest node clock's lead (a lease counted on the
/// one and expired on the other; `c + n` bounds the exact `c + n·(1 − margin)`).
fn drift_beyond_margin(marks: &[&FaultMark]) -> bool {
    let (mut client_slow, mut node_fast) = (0, 0);
    for m in marks {
        match m.fault {
            Fault::ClientClockDrift { ppm, .. } => client_slow = client_slow.max(-ppm),
            Fault::NodeClockDrift { ppm, .. } => node_fast = node_fast.max(ppm),
            _ => {}
        }
    }
    client_slow + node_fast > DRIFT_MARGIN_PPM
}

/// Whether `mark` alone, having touched a hold, can make its belief outlive its lease.
fn outlives_lease(mark: &FaultMark) -> bool {
    match &mark.fault {
        Fault::Pause { .. } | Fault::NodeCrash { .. } | Fault::Failover { .. } => true,
        // The key of a live hold went (see `evictions`).
        Fault::Evict { evicted, .. } => !evicted.is_empty(),
        Fault::NodeClockJump { by_ms, .. } => *by_ms > 0,
        // Counted together (`drift_beyond_margin`).
        Fault::ClientClockDrift { .. } | Fault::NodeClockDrift { .. } => false,
        // A stalled or cut-off node only delays replies: validity counts from the send,
        // and the node's clock (hence its expiries) runs on through the stall.
        Fault::Crash { .. }
        | Fault::Isolate { .. }
        | Fault::CutFrom { .. }
        | Fault::OneWay { .. }
        | Fault::Slow { .. }
        | Fault::ClientClockJump { .. }
        | Fault::NodePause { .. }
        // A replica behind its master loses writes only through a failover, excused as such.
        | Fault::ReplicaCut { .. }
        // Client-side routing: a client that cannot ask, or is told a stale master, fails
        // and retries (a dead node, a replica's READONLY) or reaches a cut-off zombie,
        // whose grants the failover that left it behind already explains.
        | Fault::SentinelCut { .. }
        | Fault::SentinelStale { .. }
        | Fault::NodeIsolate { .. }
        | Fault::ScriptFlush { .. } => false,
    }
}

/// The distinct fault kinds among `marks`, sorted.
pub fn kinds<'a>(marks: impl Iterator<Item = &'a FaultMark>) -> Vec<String> {
    let mut kinds: Vec<String> = marks.map(|m| m.fault.kind().to_owned()).collect();
    kinds.sort();
    kinds.dedup();
    kinds
}
