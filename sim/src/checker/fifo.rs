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
//! a bypass they meet is inconclusive and not reported. Re-entering workloads are not
//! judged (an owner's second hold goes past the line by design, as does a downgrade).
//!
//! Not the semaphore: its line hands out several permits at once, which this rule's one
//! phase at a time does not model; the semaphore's waiters are judged by capacity
//! (`capacity.rs`) instead.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::calls::{self, Family, LockReply, OpKind};
use crate::faults::Fault;
use crate::history::{FaultMark, HistEvent, HistKind};

use super::evictions;
use super::problems::{Judge, ProblemKind, Reach};
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
    faults: &[FaultMark],
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
                        judged.bypass(&grant, line, &first, judge);
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
        for (hold, w) in line {
            // Readers of one phase share it: a read may pass a waiting read.
            let ahead = *hold != grant.hold
                && w.who != grantee
                && w.joined.1 < arrived
                && !(grant.reads && w.reads);
            let live = w.in_flight == 0
                && w.last_sent < grant.from
                && grant.to < w.refreshed.saturating_add(self.half);
            if !ahead || !live || self.line_uncertain(w, grant.to) || evicted(grant) {
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
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::super::ProblemKind;
    use super::super::fixtures::{self, KEY, ev};
    use crate::calls::{Family, LockOp, LockReply, OpKind};
    use crate::faults::Fault;
    use crate::history::{Access, FaultMark, HistEvent, HistKind};
    use crate::net::{ProcId, Target};
    use std::time::Duration;

    /// The read-write lock's acquire calls name its write hash.
    const RW_KEY: &str = "leasehold:{l}:rw";

    /// A queued acquire of `hold` by `family`'s script: the mutex's on [`KEY`], a read or
    /// write hold's on [`RW_KEY`].
    fn attempt_by(family: Family, at_ms: u64, proc: ProcId, (id, hold): (u64, u64)) -> HistEvent {
        let op = LockOp {
            family,
            kind: OpKind::Acquire,
            hold,
            owner: hold,
            ttl_ms: 1_000,
            queued: true,
        };
        let target = Target::Node(0);
        ev(at_ms, proc, key(family), HistKind::Call { id, target, op })
    }

    fn key(family: Family) -> &'static str {
        if family == Family::Mutex { KEY } else { RW_KEY }
    }

    fn attempt(at_ms: u64, proc: ProcId, id: u64, hold: u64) -> HistEvent {
        attempt_by(Family::Mutex, at_ms, proc, (id, hold))
    }

    fn answer(at_ms: u64, proc: ProcId, id: u64, reply: LockReply) -> HistEvent {
        ev(at_ms, proc, KEY, HistKind::Return { id, reply })
    }

    /// c0 holds the lock; c1 joins the line at 10 ms and refreshes at 400 ms (a third of
    /// its entry timeout later, as a fair waiter does); c2 joins after it, at 20 ms; at
    /// 800 ms c0's release hands the lock to `grantee`'s hold.
    fn line(grantee: (ProcId, u64)) -> Vec<HistEvent> {
        let access = Access::Exclusive;
        vec![
            ev(0, 0, "l", HistKind::Acquired { token: 1, access }),
            ev(5, 1, "l", HistKind::WaitStart),
            attempt(10, 1, 0, 11),
            answer(11, 1, 0, LockReply::Denied),
            ev(15, 2, "l", HistKind::WaitStart),
            attempt(20, 2, 1, 12),
            answer(21, 2, 1, LockReply::Denied),
            attempt(400, 1, 2, 11),
            answer(401, 1, 2, LockReply::Denied),
            ev(799, 0, "l", HistKind::Released),
            ev(
                800,
                0,
                KEY,
                HistKind::HandedOff {
                    hold: grantee.1,
                    lease_ms: 1_000,
                    node: 0,
                },
            ),
            ev(801, grantee.0, "l", HistKind::Acquired { token: 2, access }),
        ]
    }

    fn kinds(h: &[HistEvent], faults: &[FaultMark]) -> Vec<ProblemKind> {
        fixtures::kinds(h, faults, Some(Duration::from_secs(1)), 1_000)
    }

    #[test]
    fn a_hand_off_past_a_live_waiter_that_queued_first_bypasses_it() {
        assert!(kinds(&line((1, 11)), &[]).is_empty());
        assert_eq!(kinds(&line((2, 12)), &[]), vec![ProblemKind::LineBypassed]);
    }

    #[test]
    fn a_waiter_whose_entry_may_have_lapsed_is_not_bypassed() {
        // Without the refresh at 400 ms, c1's entry (1 s from its run) may be gone by 800 ms
        // on a fast node clock: c2 may rightly go first.
        let mut h = line((2, 12));
        h.drain(7..9);
        assert!(kinds(&h, &[]).is_empty());
    }

    #[test]
    fn only_a_node_fault_large_enough_to_lapse_the_entry_makes_the_line_uncertain() {
        let jump = |by_ms| FaultMark {
            fault: Fault::NodeClockJump { node: 0, by_ms },
            proc: None,
            from: 700_000_000,
            until: u64::MAX,
        };
        // 700 ms forward, 300 ms after the refresh: the entry may have lapsed.
        assert!(kinds(&line((2, 12)), &[jump(700)]).is_empty());
        // A 5 ms step explains nothing; nor does a pause of the bypassing client.
        let pause = FaultMark {
            fault: Fault::Pause {
                who: crate::faults::ProcSel::Id(2),
                ms: 50,
            },
            proc: Some((2, 0)),
            from: 100_000_000,
            until: 150_000_000,
        };
        assert_eq!(
            kinds(&line((2, 12)), &[jump(5), pause]),
            vec![ProblemKind::LineBypassed]
        );
    }

    /// A read-write lock's line: c0 holds the write lock; c1 joins the line at 10 ms (to
    /// read if `first` is [`Family::Read`], else to write) and refreshes at 400 ms; c2
    /// joins after it at 20 ms, as `second`; at 800 ms c0's release hands the lock to c2's
    /// hold (a read hand-off also to c1's, after it, as a run of readers is granted).
    fn rw_line(first: Family, second: Family) -> Vec<HistEvent> {
        let access = |family| {
            if family == Family::Read {
                Access::Shared
            } else {
                Access::Exclusive
            }
        };
        let answer =
            |at_ms, proc, id, reply| ev(at_ms, proc, RW_KEY, HistKind::Return { id, reply });
        let handed = |hold| HistKind::HandedOff {
            hold,
            lease_ms: 1_000,
            node: 0,
        };
        let mut h = vec![
            ev(
                0,
                0,
                "l",
                HistKind::Acquired {
                    token: 1,
                    access: Access::Exclusive,
                },
            ),
            ev(5, 1, "l", HistKind::WaitStart),
            attempt_by(first, 10, 1, (0, 11)),
            answer(11, 1, 0, LockReply::Denied),
            ev(15, 2, "l", HistKind::WaitStart),
            attempt_by(second, 20, 2, (1, 12)),
            answer(21, 2, 1, LockReply::Denied),
            attempt_by(first, 400, 1, (2, 11)),
            answer(401, 1, 2, LockReply::Denied),
            ev(799, 0, "l", HistKind::Released),
            ev(800, 0, RW_KEY, handed(12)),
        ];
        let both_read = first == Family::Read && second == Family::Read;
        if both_read {
            h.push(ev(800, 0, RW_KEY, handed(11)));
        }
        let token = 2;
        h.push(ev(
            801,
            2,
            "l",
            HistKind::Acquired {
                token,
                access: access(second),
            },
        ));
        if both_read {
            h.push(ev(
                801,
                1,
                "l",
                HistKind::Acquired {
                    token,
                    access: access(first),
                },
            ));
        }
        h
    }

    #[test]
    fn readers_of_one_phase_pass_each_other_but_no_phase_passes_another() {
        assert!(kinds(&rw_line(Family::Read, Family::Read), &[]).is_empty());
        let bypassed = vec![ProblemKind::LineBypassed];
        // A reader past a queued writer (writer preference), a writer past a queued reader,
        // a writer past a queued writer.
        assert_eq!(kinds(&rw_line(Family::Write, Family::Read), &[]), bypassed);
        assert_eq!(kinds(&rw_line(Family::Read, Family::Write), &[]), bypassed);
        assert_eq!(kinds(&rw_line(Family::Write, Family::Write), &[]), bypassed);
    }

    #[test]
    fn a_reader_admitted_by_its_own_call_past_a_live_queued_writer_bypasses_it() {
        // c2's read is granted by its own attempt at 600 ms, while c0 still holds a read
        // (readers share) and c1 waits to write, live in the line.
        let read = |at_ms, id| attempt_by(Family::Read, at_ms, 2, (id, 12));
        let answer = |at_ms, id, reply| ev(at_ms, 2, RW_KEY, HistKind::Return { id, reply });
        let shared = Access::Shared;
        let h = vec![
            ev(
                0,
                0,
                "l",
                HistKind::Acquired {
                    token: 0,
                    access: shared,
                },
            ),
            attempt_by(Family::Write, 10, 1, (0, 11)),
            ev(
                11,
                1,
                RW_KEY,
                HistKind::Return {
                    id: 0,
                    reply: LockReply::Denied,
                },
            ),
            attempt_by(Family::Write, 400, 1, (1, 11)),
            ev(
                401,
                1,
                RW_KEY,
                HistKind::Return {
                    id: 1,
                    reply: LockReply::Denied,
                },
            ),
            read(600, 2),
            answer(601, 2, LockReply::Granted { token: 0 }),
            ev(
                602,
                2,
                "l",
                HistKind::Acquired {
                    token: 0,
                    access: shared,
                },
            ),
        ];
        assert_eq!(kinds(&h, &[]), vec![ProblemKind::LineBypassed]);
        // Without the writer's refresh its entry may have lapsed by then: inconclusive.
        let lapsed: Vec<HistEvent> = h
            .iter()
            .enumerate()
            .filter(|(i, _)| !(3..5).contains(i))
            .map(|(_, e)| e.clone())
            .collect();
        assert!(kinds(&lapsed, &[]).is_empty());
    }
}
