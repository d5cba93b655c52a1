//! First in, first out: a live FairQueue waiter is never bypassed by a waiter that came
//! after it (between phases, for the read-write lock).
//!
//! Invariant (DESIGN §7 "How `acquire.lua` decides", "Hand-off"): a fair waiter's attempt
//! answered busy put its hold id in the lock's line (or refreshed it there), and the entry
//! lives an entry timeout of server time from the attempt's run. While it lives and its
//! waiter has neither been granted nor given up, no hold whose first attempt was sent after
//! that answer is granted the lock: `acquire.lua` grants fresh only to the line's live head
//! (or with no live head), and `release.lua` hands off to the first live head.
//!
//! The read-write lock's line (`rw_*.lua`) is FIFO between phases: a read is admitted only
//! with no live writer entry ahead of it, a write only at the line's live head, and a
//! release hands off to a live writer head alone or to the run of live readers before the
//! first live writer entry. So the same rule holds with one exception: a read may be
//! granted past a waiting read (readers of one phase share it). Writer past reader, reader
//! past writer and writer past writer are bypasses. The mutex's holds are all writes.
//!
//! A waiter counts as live only on the history's own evidence: every refresh of its entry
//! was answered within half an entry timeout of the previous one's send (an entry lives an
//! entry timeout from its run, after its send; half leaves room for a node clock running
//! fast), the grant came within half an entry timeout of its last refresh's send, and no
//! attempt of its own was in flight (one may have been granted). A waiter whose entry could
//! have lapsed is not live, whatever delayed it. Only node faults make the line itself
//! uncertain: a node that crashed, restarted, failed over or stalled may have lost or
//! replayed the line, and a node clock stepped forward by enough may have lapsed the entry;
//! a bypass they meet is inconclusive and not reported. An owner that holds the lock
//! re-enters it past the line by design (a nested or sibling hold, a downgrade): a grant
//! the keyspace shows to be a re-entry ([`super::reentries`]) bypasses nobody, and every
//! other grant of a re-entering workload is judged like any.
//!
//! Not the semaphore: its line hands out several permits at once, which this rule's one
//! phase at a time does not model; the semaphore's waiters are judged by capacity
//! (`capacity.rs`) instead.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::world::calls::{self, Family, LockReply, OpKind};
use crate::world::faults::Fault;
use crate::world::history::{FaultMark, HistEvent, HistKind};

use super::evictions;
use super::problems::{Judge, ProblemKind, Reach};
use super::reentries::Reentries;
use super::timeline::Who;

/// A hold id standing in a lock's line: whose, whether it waits to read, when the attempt
/// that put it there was sent and answered, the send of its latest answered refresh, and
/// its attempts in flight.
struct InLine {
    who: Who,
    reads: bool,
    joined: (u64, u64),
    refreshed: u64,
    in_flight: u32,
    last_sent: u64,
}

/// An acquire or release call: who sent it, on which lock, for which hold (a read hold or
/// not), and when.
struct Sent {
    who: Who,
    lock: String,
    hold: u64,
    reads: bool,
    kind: OpKind,
    queued: bool,
    at: u64,
}

/// A grant of `hold` on `lock`, made by the server between `from` and `to`.
struct Grant<'a> {
    lock: &'a str,
    hold: u64,
    reads: bool,
    from: u64,
    to: u64,
    how: &'static str,
}

/// Grants that went past a live waiter that had joined the line before the grantee's first
/// attempt. `entry_timeout` is the fair waiters' entry timeout.
pub(super) fn order(
    history: &[HistEvent],
    (faults, reentries): (&[FaultMark], &Reentries),
    entry_timeout: Duration,
    judge: &mut Judge<'_>,
) {
    let half = u64::try_from(entry_timeout.as_nanos()).unwrap_or(u64::MAX) / 2;
    let mut lines: BTreeMap<String, BTreeMap<u64, InLine>> = BTreeMap::new();
    let mut sent: BTreeMap<u64, Sent> = BTreeMap::new();
    // Each hold's first attempt: who sent it, when, and whether it reads.
    let mut first: BTreeMap<u64, First> = BTreeMap::new();
    // Each hold's latest grant seen (a hand-off, or a grant answered): an attempt sent
    // before it and answered busy after it stood in a line the grant has since consumed.
    let mut granted: BTreeMap<u64, u64> = BTreeMap::new();
    let judged = Judged {
        faults,
        entry_timeout,
        half,
    };
    for ev in history {
        let who = (ev.proc, ev.incarnation);
        match &ev.kind {
            // A write hold's renewals and probes run the mutex's scripts, which this rule
            // does not read.
            HistKind::Call { id, op, .. } if op.family != Family::Permit => {
                let lock = calls::lock_name(&ev.lock).to_owned();
                let line = lines.entry(lock.clone()).or_default();
                let reads = op.family == Family::Read;
                match op.kind {
                    OpKind::Acquire => {
                        first.entry(op.hold).or_insert(First {
                            who,
                            at: ev.at,
                            reads,
                        });
                        if let Some(w) = line.get_mut(&op.hold) {
                            w.in_flight += 1;
                            w.last_sent = ev.at;
                        }
                    }
                    // A release of a waiting hold takes it out of the line (giving up).
                    OpKind::Release => {
                        line.remove(&op.hold);
                    }
                    OpKind::Renew | OpKind::Probe => {}
                }
                let call = Sent {
                    who,
                    lock,
                    hold: op.hold,
                    reads,
                    kind: op.kind,
                    queued: op.queued,
                    at: ev.at,
                };
                sent.insert(*id, call);
            }
            HistKind::Return { id, reply } => {
                let Some(call) = sent.remove(id) else {
                    continue;
                };
                if call.kind != OpKind::Acquire {
                    continue;
                }
                let line = lines.entry(call.lock.clone()).or_default();
                // Another attempt of the hold still unanswered may have run and been
                // granted (its waiter then left the line): the position starts anew.
                let mut unresolved = false;
                if let Some(w) = line.get_mut(&call.hold) {
                    unresolved = w.in_flight > 1;
                    // A connection delivers in order: the latest attempt's answer settles
                    // the earlier ones (run before it, or never).
                    w.in_flight = if call.at >= w.last_sent {
                        0
                    } else {
                        w.in_flight.saturating_sub(1)
                    };
                }
                match reply {
                    LockReply::Denied
                        if call.queued && granted.get(&call.hold).is_none_or(|&g| g < call.at) =>
                    {
                        let live = !unresolved
                            && line
                                .get(&call.hold)
                                .is_some_and(|w| ev.at < w.refreshed.saturating_add(half));
                        match line.get_mut(&call.hold) {
                            Some(w) if live => w.refreshed = call.at,
                            _ => {
                                let in_line = InLine {
                                    who: call.who,
                                    reads: call.reads,
                                    joined: (call.at, ev.at),
                                    refreshed: call.at,
                                    in_flight: 0,
                                    last_sent: call.at,
                                };
                                line.insert(call.hold, in_line);
                            }
                        }
                    }
                    // An "already ours" answer to a hold a hand-off granted is that grant,
                    // judged when it was made.
                    LockReply::Granted { .. } if !granted.contains_key(&call.hold) => {
                        let grant = Grant {
                            lock: &call.lock,
                            hold: call.hold,
                            reads: call.reads,
                            from: call.at,
                            to: ev.at,
                            how: "an acquire",
                        };
                        // An owner that holds the lock re-enters it past the line.
                        if !reentries.contains(*id) {
                            judged.bypass(&grant, line, &first, judge);
                        }
                        line.remove(&call.hold);
                        granted.insert(call.hold, call.at);
                    }
                    _ => {}
                }
            }
            HistKind::HandedOff { hold, .. } => {
                let lock = calls::lock_name(&ev.lock).to_owned();
                let line = lines.entry(lock.clone()).or_default();
                // The grantee's own attempts say whether it reads (a hand-off names only
                // its hold).
                let grant = Grant {
                    lock: &lock,
                    hold: *hold,
                    reads: first.get(hold).is_some_and(|f| f.reads),
                    from: ev.at,
                    to: ev.at,
                    how: "a hand-off",
                };
                judged.bypass(&grant, line, &first, judge);
                line.remove(hold);
                granted.insert(*hold, ev.at);
            }
            // A waiter that was granted, gave up or died is out of the line.
            HistKind::Acquired { .. } | HistKind::AcquireFailed { .. } => {
                if let Some(line) = lines.get_mut(&ev.lock) {
                    line.retain(|_, w| w.who != who);
                }
            }
            HistKind::Crashed => {
                for line in lines.values_mut() {
                    line.retain(|_, w| w.who != who);
                }
            }
            _ => {}
        }
    }
}

/// A hold's first attempt: who sent it, when, and whether it asked to read.
#[derive(Clone, Copy)]
struct First {
    who: Who,
    at: u64,
    reads: bool,
}

/// What a bypass is judged against.
struct Judged<'a> {
    faults: &'a [FaultMark],
    entry_timeout: Duration,
    half: u64,
}

impl Judged<'_> {
    /// Reports each live waiter of `line` that `grant` went past.
    fn bypass(
        &self,
        grant: &Grant<'_>,
        line: &BTreeMap<u64, InLine>,
        first: &BTreeMap<u64, First>,
        judge: &mut Judge<'_>,
    ) {
        let (grantee, arrived) = first
            .get(&grant.hold)
            .map_or(((usize::MAX, 0), grant.from), |f| (f.who, f.at));
        // A queue key or hold key evicted before the grant leaves the line unjudged from
        // then on: the line's list and its entries no longer agree.
        let evicted = |grant: &Grant<'_>| {
            self.faults
                .iter()
                .any(|m| m.from <= grant.to && evictions::took_key_of(m, grant.lock))
        };
        // A grant is a case of this rule when another live waiter stood in the line; it is
        // left unjudged when a fault may have changed the line of one it went past.
        let mut met = false;
        let mut uncertain = false;
        for (hold, w) in line {
            let live = w.in_flight == 0
                && w.last_sent < grant.from
                && grant.to < w.refreshed.saturating_add(self.half);
            if *hold == grant.hold || w.who == grantee || !live {
                continue;
            }
            met = true;
            // Readers of one phase share it: a read may pass a waiting read.
            let ahead = w.joined.1 < arrived && !(grant.reads && w.reads);
            if !ahead {
                continue;
            }
            if self.line_uncertain(w, grant.to) || evicted(grant) {
                uncertain = true;
                continue;
            }
            // Only the finding is reported, with no fault window: nothing excuses it.
            judge.add(
                ProblemKind::LineBypassed,
                grant.lock,
                grant.to,
                (&[], Reach::Windows),
                format!(
                    "c{}.{} joined the fair line{} at t={:.3}s and stayed live in it (last refresh sent at t={:.3}s, entry timeout {} ms), but {} granted c{}.{}{}, whose first attempt came at t={:.3}s, at t={:.3}s",
                    w.who.0,
                    w.who.1,
                    phase(w.reads),
                    w.joined.1 as f64 / 1e9,
                    w.refreshed as f64 / 1e9,
                    self.entry_timeout.as_millis(),
                    grant.how,
                    grantee.0,
                    grantee.1,
                    phase(grant.reads),
                    arrived as f64 / 1e9,
                    grant.to as f64 / 1e9,
                ),
            );
        }
        if met {
            judge.case(ProblemKind::LineBypassed, !uncertain);
        }
    }

    /// Whether a node fault may have lost, replayed or lapsed `w`'s entry between its joining
    /// and `until`, or the waiter's process crashed in that time.
    fn line_uncertain(&self, w: &InLine, until: u64) -> bool {
        let expiry = u64::try_from(self.entry_timeout.as_nanos()).unwrap_or(u64::MAX);
        self.faults.iter().any(|m| {
            let meets = m.from <= until && m.until >= w.joined.0;
            match m.fault {
                // A forward step lapses the entry only if it reaches the entry timeout
                // with the node time that passed since the refresh before it: less than
                // half an entry timeout of true time between refreshes (at most 0.55 of
                // one on a clock 10 % fast, the fastest a run draws), so a step of a
                // quarter or more may; after the last refresh, the time since it
                // (doubled for a fast clock) is known.
                Fault::NodeClockJump { by_ms, .. } => {
                    let step = u64::try_from(by_ms).unwrap_or(0).saturating_mul(1_000_000);
                    let since_last = m.from >= w.refreshed
                        && step.saturating_add(2 * (until - w.refreshed)) >= expiry;
                    meets && (since_last || step.saturating_mul(4) >= expiry)
                }
                Fault::NodeCrash { .. }
                | Fault::NodePause { .. }
                | Fault::NodeIsolate { .. }
                | Fault::Failover { .. } => meets,
                // Judged per lock, by the grant (`evictions::took_key_of`).
                Fault::NodeClockDrift { .. } | Fault::ScriptFlush { .. } | Fault::Evict { .. } => {
                    false
                }
                // Requests that run unanswered refresh an entry the waiter cannot see.
                Fault::Crash { .. } | Fault::OneWay { .. } => meets && m.proc == Some(w.who),
                Fault::Pause { .. }
                | Fault::Isolate { .. }
                | Fault::CutFrom { .. }
                | Fault::ReplicaCut { .. }
                // Misrouted by the Sentinels, a refresh runs nowhere (a dead node, a
                // replica's READONLY) or on a zombie whose loss its failover accounts for.
                | Fault::SentinelCut { .. }
                | Fault::SentinelStale { .. }
                | Fault::Slow { .. }
                | Fault::ClientClockDrift { .. }
                | Fault::ClientClockJump { .. } => false,
            }
        })
    }
}

/// How a report names a hold's phase: a read hold's, else nothing (a mutex's hold, or a
/// write hold, whose lock's name says it is a read-write lock).
fn phase(reads: bool) -> &'static str {
    if reads { " to read" } else { "" }
}

#[cfg(test)]
mod tests;
