//! Safety excuses by cause: what a fault can do to *this* belief, how much, and whether
//! that is as large as the anomaly it is asked to explain.
//!
//! Why it exists: a fault somewhere near a broken exclusion explains nothing by itself. A
//! belief outlives its lease on the servers without the lock being at fault only when a
//! fault acted on that hold, inside the hold's window, by at least the amount the belief
//! overran. So each rule below gives a fault's *effect* on one belief: a length of time by
//! which it can make the belief outrun the server's lease, or, for a fault that takes the
//! hold's state away, no bound at all. Effects add up; an anomaly is excused when they
//! cover its size.
//!
//! | fault | effect on a belief | place | window |
//! |---|---|---|---|
//! | pause | its length from the window's start, plus [`BELIEF_SLACK_NS`] | the holder's incarnation | from the granting request's send to the anomaly (the server's conflicting grant, or the oracle's sighting) |
//! | client clock drift (slow) | rate × the time it ran slow while the hold was believed (its lag when the holder decides) | the holder's process | from the granting request's send to the belief's end, ending when the drift ends |
//! | node clock jump forward `j` | `j` of early expiry | a node that ran the hold's calls | the same |
//! | node clock drift (fast) | rate × the time it ran fast inside the window | a node that ran the hold's calls | the same, ending when the drift ends |
//! | node crash or restart | unbounded (the hold's state is gone) | a node that ran the hold's calls | the same |
//! | failover | unbounded | the group of a node that ran the hold's calls | the same |
//! | eviction | unbounded | a key storing that lock's holds (see [`super::evictions`]) | the same |
//!
//! Drifts count only when the slowest holder clock's lag and the fastest serving node
//! clock's lead add up to more than the library's drift margin: below it the margin
//! absorbs them. Nothing else excuses a belief: a slow link or a cut (validity counts from
//! the send), a client clock's forward jump, a backward node jump, a stalled node, a
//! Sentinel fault or a script flush can only make the holder give up sooner. The grantee
//! of a conflicting grant is not the holder: its faults never excuse the holder's belief.
//!
//! Where the history has no server witness (a real server's history has no
//! [`crate::world::history::HistKind::Ran`]), which nodes served a hold is unknown, and
//! every node of the deployment counts as serving it.
//!
//! Invariant: an excuse names each fault it counts, with its size, its target and when it
//! acted, and the anomaly's size it covers.

use crate::model::NodeId;
use crate::world::faults::Fault;
use crate::world::history::FaultMark;

use super::evictions;
use super::issuers::Nodes;
use super::timeline::Who;

/// A belief's overrun a pause may cause beyond its own length: the holder's lost timer
/// fires once it runs again, and its release or lost signal takes up to a round trip of
/// the simulated LAN (0.1-1 ms) and a scheduling hiccup to land.
pub const BELIEF_SLACK_NS: u64 = 2_000_000;

/// The rule that excuses a belief's overrun by faults whose effects cover it.
pub const SIZED: &str = "sized-effect";

/// A client clock running slower than its node's by more than this (ppm) outruns the
/// library's drift margin (1/[`leasehold::CLOCK_DRIFT_DIVISOR`] of the TTL).
pub const DRIFT_MARGIN_PPM: i64 = 1_000_000 / leasehold::CLOCK_DRIFT_DIVISOR as i64;

/// One belief judged against the servers: whose, over which window (from the send of its
/// granting request to the anomaly), on which nodes.
#[derive(Debug, Clone, Copy)]
pub struct Belief<'a> {
    /// The holder.
    pub who: Who,
    /// Window start: the send of the request that granted it (or renewed it, for
    /// [`Overrun::PastLease`]).
    pub from: u64,
    /// Window end: when the anomaly showed.
    pub to: u64,
    /// The hold's own span, from its granting request's send to the belief's end: a slow
    /// holder clock's lag grows over all of it, up to the moment the holder decides.
    pub held: (u64, u64),
    /// The nodes that ran its calls (empty: unknown, every node counts).
    pub nodes: &'a [NodeId],
}

impl Belief<'_> {
    /// Whether `node` ran the belief's calls (every node did, where they are unknown).
    fn served_by(&self, node: NodeId) -> bool {
        self.nodes.is_empty() || self.nodes.contains(&node)
    }
}

/// What a belief did wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overrun {
    /// It went on past its hold's expiry on the servers (a conflicting grant, or the
    /// oracle's sighting): node faults that end the hold early count, as do the holder's.
    PastExpiry,
    /// It went on for longer than any lease after its hold left the servers: only the
    /// holder's own faults (a freeze, a slow clock) can keep it going.
    PastLease,
}

/// One fault's effect on a belief.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Effect {
    /// Up to this many ns of overrun.
    By(u64),
    /// The hold's state is gone: any overrun.
    Unbounded,
}

/// The excuse for a belief's overrun of `size_ns` on `lock`: the faults among `marks` that
/// acted on it and, together, can cause that much, with their evidence; `None` when they
/// cannot.
pub fn excuse(
    marks: &[FaultMark],
    nodes: &Nodes,
    lock: &str,
    (belief, overrun): (&Belief<'_>, Overrun),
    size_ns: u64,
) -> Option<(&'static str, String)> {
    let drifts_count = drift_beyond_margin(marks, belief, overrun);
    let mut total = 0u64;
    let mut unbounded = false;
    // Whether every fault that acts is an eviction (the excuse is then the eviction rule's).
    let mut only_evictions = true;
    let mut named = Vec::new();
    for mark in marks {
        let Some(effect) = effect((mark, marks), nodes, lock, (belief, overrun), drifts_count)
        else {
            continue;
        };
        if effect != Effect::By(0) {
            only_evictions &= matches!(mark.fault, Fault::Evict { .. });
        }
        match effect {
            Effect::By(0) => continue,
            Effect::By(ns) => {
                total = total.saturating_add(ns);
                named.push(format!("{} (up to {})", describe(mark), ms(ns)));
            }
            Effect::Unbounded => {
                unbounded = true;
                named.push(format!("{} (its state gone)", describe(mark)));
            }
        }
    }
    if !(unbounded || (total > 0 && total >= size_ns)) {
        return None;
    }
    let rule = if only_evictions {
        evictions::EVICTED
    } else {
        SIZED
    };
    Some((
        rule,
        format!(
            "{} on c{}.{}'s hold cover its overrun of {}",
            named.join(" + "),
            belief.who.0,
            belief.who.1,
            ms(size_ns)
        ),
    ))
}

/// The effect of `mark` on `belief`, or `None` when it did not act on it.
fn effect(
    (mark, marks): (&FaultMark, &[FaultMark]),
    nodes: &Nodes,
    lock: &str,
    (belief, overrun): (&Belief<'_>, Overrun),
    drifts_count: bool,
) -> Option<Effect> {
    let window = (belief.from, belief.to);
    let meets = mark.from <= belief.to && mark.until >= belief.from;
    let by_rate =
        |ppm: i64, until: u64| Effect::By(rate_of(ppm, overlap((mark.from, until), window)));
    match &mark.fault {
        // A freeze that began before the anomaly holds the belief for all of its length
        // from the window's start, whether or not it ended by then.
        Fault::Pause { .. }
            if mark.proc == Some(belief.who)
                && mark.from < belief.to
                && mark.until > belief.from =>
        {
            Some(Effect::By(
                mark.until - mark.from.max(belief.from) + BELIEF_SLACK_NS,
            ))
        }
        Fault::ClientClockDrift { proc, ppm }
            if *proc == belief.who.0 && *ppm < 0 && drifts_count =>
        {
            let ran = overlap((mark.from, drift_end(mark, marks)), belief.held);
            Some(Effect::By(rate_of(*ppm, ran)))
        }
        _ if overrun == Overrun::PastLease => None,
        Fault::NodeClockJump { node, by_ms }
            if *by_ms > 0
                && belief.served_by(*node)
                && mark.from >= belief.from
                && mark.from <= belief.to =>
        {
            Some(Effect::By(by_ms.unsigned_abs().saturating_mul(1_000_000)))
        }
        Fault::NodeClockDrift { node, ppm }
            if *ppm > 0 && belief.served_by(*node) && drifts_count =>
        {
            Some(by_rate(*ppm, drift_end(mark, marks)))
        }
        Fault::NodeCrash { node, .. } if meets && belief.served_by(*node) => {
            Some(Effect::Unbounded)
        }
        Fault::Failover { group, .. } if meets && group_serves(nodes, *group, belief) => {
            Some(Effect::Unbounded)
        }
        Fault::Evict { node, .. }
            if meets && belief.served_by(*node) && evictions::concerns(mark, lock) =>
        {
            Some(Effect::Unbounded)
        }
        _ => None,
    }
}

/// Whether replication group `group` holds a node that ran `belief`'s calls (every group
/// does when those nodes, or the groups, are unknown).
fn group_serves(nodes: &Nodes, group: usize, belief: &Belief<'_>) -> bool {
    match nodes.groups.get(group) {
        Some(members) if !belief.nodes.is_empty() => {
            members.iter().any(|n| belief.nodes.contains(n))
        }
        _ => true,
    }
}

/// When the drift of `mark` ends: at the next rate change of the same clock, or with the
/// mark.
fn drift_end(mark: &FaultMark, marks: &[FaultMark]) -> u64 {
    let same_clock = |other: &FaultMark| match (&mark.fault, &other.fault) {
        (Fault::ClientClockDrift { proc: a, .. }, Fault::ClientClockDrift { proc: b, .. }) => {
            a == b
        }
        (Fault::NodeClockDrift { node: a, .. }, Fault::NodeClockDrift { node: b, .. }) => a == b,
        _ => false,
    };
    marks
        .iter()
        .filter(|m| m.from > mark.from && same_clock(m))
        .map(|m| m.from)
        .min()
        .unwrap_or(mark.until)
        .min(mark.until)
}

/// Whether the drifts acting on `belief` add up to more than the drift margin: the
/// slowest holder clock's lag plus (for an overrun past expiry) the fastest serving node
/// clock's lead.
fn drift_beyond_margin(marks: &[FaultMark], belief: &Belief<'_>, overrun: Overrun) -> bool {
    let (mut client_slow, mut node_fast) = (0, 0);
    for m in marks {
        let acts = |(from, to): (u64, u64)| m.from <= to && drift_end(m, marks) >= from;
        match m.fault {
            Fault::ClientClockDrift { proc, ppm } if proc == belief.who.0 && acts(belief.held) => {
                client_slow = client_slow.max(-ppm);
            }
            Fault::NodeClockDrift { node, ppm }
                if overrun == Overrun::PastExpiry
                    && acts((belief.from, belief.to))
                    && belief.served_by(node) =>
            {
                node_fast = node_fast.max(ppm);
            }
            _ => {}
        }
    }
    client_slow + node_fast > DRIFT_MARGIN_PPM
}

/// How far a clock off by `ppm` drifts in `ns`.
fn rate_of(ppm: i64, ns: u64) -> u64 {
    u64::try_from(u128::from(ns) * u128::from(ppm.unsigned_abs()) / 1_000_000).unwrap_or(u64::MAX)
}

/// The length of the intersection of two stretches.
fn overlap((a, b): (u64, u64), (c, d): (u64, u64)) -> u64 {
    b.min(d).saturating_sub(a.max(c))
}

/// A fault as the excuse names it: kind, target, size and when it began.
fn describe(mark: &FaultMark) -> String {
    let at = format!("t={:.3}s", mark.from as f64 / 1e9);
    match &mark.fault {
        Fault::Pause { ms, .. } => format!("a {ms} ms pause at {at}"),
        Fault::ClientClockDrift { proc, ppm } => {
            format!("c{proc}'s clock drifting {ppm} ppm from {at}")
        }
        Fault::NodeClockJump { node, by_ms } => {
            format!("node {node}'s clock jumping {by_ms:+} ms at {at}")
        }
        Fault::NodeClockDrift { node, ppm } => {
            format!("node {node}'s clock drifting {ppm:+} ppm from {at}")
        }
        Fault::NodeCrash { node, .. } => format!("node {node} crashing at {at}"),
        Fault::Failover { group, .. } => format!("group {group} failing over at {at}"),
        Fault::Evict { node, .. } => format!("node {node} evicting the lock's key at {at}"),
        other => format!("{} at {at}", other.kind()),
    }
}

/// `ns` as milliseconds for an excuse.
fn ms(ns: u64) -> String {
    format!("{:.1} ms", ns as f64 / 1e6)
}

#[cfg(test)]
mod tests;
