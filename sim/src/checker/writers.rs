//! Writer preference: a read-write lock's waiting writer is never overtaken by a reader
//! that came after its intent.
//!
//! Invariant (DESIGN §2 "read-write lock", `rw_write_acquire.lua`, `rw_read_acquire.lua`): a
//! writer's attempt answered busy recorded its intent, which lives the intent timeout of
//! server time from the attempt's run and is refreshed by each later attempt; while one
//! lives, no reader of another owner is admitted. So no read hold whose first attempt was
//! sent after a writer's busy answer is granted while that writer waits with its intent
//! surely live. Re-entry aside: an owner that holds a read or the write hold re-enters,
//! so a read the keyspace shows granted to an owner that held the lock
//! ([`super::reentries`]) overtakes nobody; every other read is judged, in re-entering
//! workloads (one owner per process) too.
//!
//! The bound is the intent's sure life on the history's own evidence, the same as the fair
//! line's ([`super::fifo`]): every refresh was answered within the bound of the previous
//! one's send, the grant was answered within the bound of the last refresh's send, and the
//! writer had no attempt in flight (one may have been granted, which ends the intent). The
//! bound is half the intent timeout (a node clock up to twice as fast as true time cannot
//! have lapsed the intent sooner), less where a serving node's clock runs faster still;
//! it is below the acquire timeout whenever a writer waits that long. A writer's pause,
//! partition or slow link only stops its refreshes, which ends its claim by the bound, so
//! no client fault excuses anything. A crash, restart or failover of a serving node after
//! the intent was first recorded may have lost it (rule [`INTENT_LOST`]), and a forward
//! step of a serving node's clock large enough to reach the intent timeout may have
//! lapsed it (rule [`INTENT_LAPSED`]); nothing else excuses an overtaking.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::world::calls::{self, Family, LockOp, LockReply, OpKind};
use crate::world::faults::Fault;
use crate::world::history::{FaultMark, HistEvent, HistKind};

use super::Nodes;
use super::problems::{Judge, ProblemKind, Reach};
use super::reentries::Reentries;
use super::timeline::Who;
use super::{evictions, serving};

/// The rule that excuses an overtaking by a node crash, restart or failover that may have
/// lost the writer's intent.
const INTENT_LOST: &str = "intent-lost";

/// The rule that excuses an overtaking by a forward step of a serving node's clock large
/// enough to lapse the writer's intent.
const INTENT_LAPSED: &str = "intent-lapsed";

/// A writer waiting with an intent: whose, the attempt that first recorded it (sent,
/// answered), the send of its latest busy answer, and its attempts in flight.
struct Waiting {
    who: Who,
    owner: u64,
    joined: (u64, u64),
    refreshed: u64,
    in_flight: u32,
    last_sent: u64,
}

/// A read-write lock script call on its way: who sent it, on which lock, and when.
struct Sent {
    who: Who,
    lock: String,
    op: LockOp,
    at: u64,
}

/// What an overtaking is judged against.
struct Judged<'a> {
    nodes: &'a Nodes,
    faults: &'a [FaultMark],
    intent: u64,
    bound: u64,
}

/// Read grants that overtook a writer waiting with a surely live intent recorded before
/// the reader's first attempt; `intent` is the writers' intent timeout.
pub(super) fn preference(
    history: &[HistEvent],
    (nodes, faults, reentries): (&Nodes, &[FaultMark], &Reentries),
    intent: Duration,
    judge: &mut Judge<'_>,
) {
    let intent = u64::try_from(intent.as_nanos()).unwrap_or(u64::MAX);
    let fast = u128::from(serving::fastest_drift_ppm(nodes, faults));
    let sure = u128::from(intent) * 1_000_000 / (1_000_000 + fast);
    let judged = Judged {
        nodes,
        faults,
        intent,
        bound: (intent / 2).min(u64::try_from(sure).unwrap_or(u64::MAX)),
    };
    let mut writers: BTreeMap<String, BTreeMap<u64, Waiting>> = BTreeMap::new();
    let mut sent: BTreeMap<u64, Sent> = BTreeMap::new();
    // Each read hold's first attempt.
    let mut first: BTreeMap<u64, u64> = BTreeMap::new();
    for ev in history {
        let who = (ev.proc, ev.incarnation);
        match &ev.kind {
            HistKind::Call { id, op, .. } if matches!(op.family, Family::Read | Family::Write) => {
                let lock = calls::lock_name(&ev.lock).to_owned();
                let line = writers.entry(lock.clone()).or_default();
                match (op.family, op.kind) {
                    (Family::Write, OpKind::Acquire) => {
                        if let Some(w) = line.get_mut(&op.hold) {
                            w.in_flight += 1;
                            w.last_sent = ev.at;
                        }
                    }
                    // A writer giving up withdraws its intent.
                    (Family::Write, OpKind::Release) => {
                        line.remove(&op.hold);
                    }
                    (Family::Read, OpKind::Acquire) => {
                        first.entry(op.hold).or_insert(ev.at);
                    }
                    _ => {}
                }
                let call = Sent {
                    who,
                    lock,
                    op: *op,
                    at: ev.at,
                };
                sent.insert(*id, call);
            }
            HistKind::Return { id, reply } => {
                let Some(call) = sent.remove(id) else {
                    continue;
                };
                if call.op.kind != OpKind::Acquire {
                    continue;
                }
                let line = writers.entry(call.lock.clone()).or_default();
                if call.op.family == Family::Write {
                    judged.writer_answered(line, &call, (ev.at, reply));
                } else if matches!(reply, LockReply::Granted { .. }) && !reentries.contains(*id) {
                    judge.case(ProblemKind::WriterOvertaken, true);
                    let arrived = first.get(&call.op.hold).copied().unwrap_or(call.at);
                    judged.overtaken(line, (&call, arrived, ev.at), judge);
                }
            }
            // A writer that was granted, gave up or died waits no more.
            HistKind::Acquired { .. } | HistKind::AcquireFailed { .. } => {
                if let Some(line) = writers.get_mut(&ev.lock) {
                    line.retain(|_, w| w.who != who);
                }
            }
            HistKind::Crashed => {
                for line in writers.values_mut() {
                    line.retain(|_, w| w.who != who);
                }
            }
            _ => {}
        }
    }
}

impl Judged<'_> {
    /// A writer's attempt `call` was answered `reply` at `at`: its intent was recorded or
    /// refreshed (busy), or it holds the lock (granted).
    fn writer_answered(
        &self,
        line: &mut BTreeMap<u64, Waiting>,
        call: &Sent,
        (at, reply): (u64, &LockReply),
    ) {
        let hold = call.op.hold;
        // Another attempt still unanswered may have been granted: the claim starts anew.
        let mut unresolved = false;
        if let Some(w) = line.get_mut(&hold) {
            unresolved = w.in_flight > 1;
            // A connection delivers in order: the latest attempt's answer settles the rest.
            w.in_flight = if call.at >= w.last_sent {
                0
            } else {
                w.in_flight.saturating_sub(1)
            };
        }
        match reply {
            LockReply::Denied if call.op.queued => {
                let live = !unresolved
                    && line
                        .get(&hold)
                        .is_some_and(|w| at < w.refreshed.saturating_add(self.bound));
                match line.get_mut(&hold) {
                    Some(w) if live => w.refreshed = call.at,
                    _ => {
                        let waiting = Waiting {
                            who: call.who,
                            owner: call.op.owner,
                            joined: (call.at, at),
                            refreshed: call.at,
                            in_flight: 0,
                            last_sent: call.at,
                        };
                        line.insert(hold, waiting);
                    }
                }
            }
            LockReply::Granted { .. } => {
                line.remove(&hold);
            }
            _ => {}
        }
    }

    /// Reports each writer of `line` the read grant `(call, arrived, at)` overtook: the
    /// reader's first attempt was sent at `arrived`, its granting call at `call.at`, and
    /// the grant was answered at `at`.
    fn overtaken(
        &self,
        line: &BTreeMap<u64, Waiting>,
        (call, arrived, at): (&Sent, u64, u64),
        judge: &mut Judge<'_>,
    ) {
        for w in line.values() {
            let ahead = w.who != call.who && w.owner != call.op.owner && w.joined.1 < arrived;
            let live = w.in_flight == 0
                && w.last_sent < call.at
                && at < w.refreshed.saturating_add(self.bound);
            if !ahead || !live {
                continue;
            }
            let detail = format!(
                "c{}.{} waited to write with its intent recorded at t={:.3}s and refreshed at t={:.3}s (intent {} ms, judged for {} ms after a refresh), but c{}.{}'s read, first asked for at t={:.3}s, was granted at t={:.3}s",
                w.who.0,
                w.who.1,
                w.joined.1 as f64 / 1e9,
                w.refreshed as f64 / 1e9,
                self.intent / 1_000_000,
                self.bound / 1_000_000,
                call.who.0,
                call.who.1,
                arrived as f64 / 1e9,
                at as f64 / 1e9,
            );
            let windows = [(w.who, w.joined.0, at), (call.who, arrived, at)];
            judge.add_explained(
                ProblemKind::WriterOvertaken,
                &call.lock,
                at,
                (&windows, Reach::Windows),
                (detail, self.excuse(w, &call.lock, at)),
            );
        }
    }

    /// The node fault that may have taken `w`'s intent before `at`, as a rule and its
    /// evidence.
    fn excuse(&self, w: &Waiting, lock: &str, at: u64) -> Option<(&'static str, String)> {
        self.faults
            .iter()
            .filter(|m| m.from <= at && m.until >= w.joined.0)
            .filter(|m| serving::on_serving_node(self.nodes, m))
            .find_map(|m| match m.fault {
                Fault::NodeCrash { .. } | Fault::Failover { .. } => {
                    Some((INTENT_LOST, serving::described(m)))
                }
                Fault::Evict { .. } if evictions::took_key_of(m, lock) => {
                    Some((INTENT_LOST, serving::described(m)))
                }
                // As for the fair line's entries: a step of a quarter of the intent may
                // lapse one refreshed within the bound; after the last refresh, the time
                // since it (doubled for a fast clock) is known.
                Fault::NodeClockJump { by_ms, .. } => {
                    let step = u64::try_from(by_ms).unwrap_or(0).saturating_mul(1_000_000);
                    let since_last = m.from >= w.refreshed
                        && step.saturating_add(2 * at.saturating_sub(w.refreshed)) >= self.intent;
                    (step > 0 && (since_last || step.saturating_mul(4) >= self.intent)).then(|| {
                        let by = format!("{} by {by_ms} ms", serving::described(m));
                        (INTENT_LAPSED, by)
                    })
                }
                _ => None,
            })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::super::ProblemKind;
    use super::super::fixtures::{self, ev};
    use crate::world::calls::{Family, LockOp, LockReply, OpKind};
    use crate::world::faults::Fault;
    use crate::world::history::{Access, FaultMark, HistEvent, HistKind};
    use crate::world::net::{ProcId, Target};
    use std::time::Duration;

    const RW: &str = "leasehold:{l}:rw";

    fn call(at_ms: u64, proc: ProcId, id: u64, family: Family, hold: u64) -> HistEvent {
        let op = LockOp {
            family,
            kind: OpKind::Acquire,
            hold,
            owner: hold,
            ttl_ms: 1_000,
            queued: family == Family::Write,
            entry_ms: 0,
        };
        let target = Target::Node(0);
        ev(at_ms, proc, RW, HistKind::Call { id, target, op })
    }

    fn answer(at_ms: u64, proc: ProcId, id: u64, reply: LockReply) -> HistEvent {
        ev(at_ms, proc, RW, HistKind::Return { id, reply })
    }

    /// c0 reads from 0 ms; c1 asks to write at 10 ms and is told busy (its intent
    /// recorded), and again at 1,500 ms; c2 starts reading at `reader_ms` and is granted a
    /// millisecond later.
    fn history(reader_ms: u64) -> Vec<HistEvent> {
        let shared = Access::Shared;
        let mut h = vec![
            call(0, 0, 0, Family::Read, 10),
            answer(1, 0, 0, LockReply::Granted { token: 0 }),
            ev(
                1,
                0,
                "l",
                HistKind::Acquired {
                    token: 0,
                    access: shared,
                },
            ),
            ev(9, 1, "l", HistKind::WaitStart),
            call(10, 1, 1, Family::Write, 11),
            answer(11, 1, 1, LockReply::Denied),
            call(1_500, 1, 2, Family::Write, 11),
            answer(1_501, 1, 2, LockReply::Denied),
        ];
        h.push(ev(reader_ms - 1, 2, "l", HistKind::WaitStart));
        h.push(call(reader_ms, 2, 3, Family::Read, 12));
        h.push(answer(reader_ms + 1, 2, 3, LockReply::Granted { token: 0 }));
        h.push(ev(
            reader_ms + 1,
            2,
            "l",
            HistKind::Acquired {
                token: 0,
                access: shared,
            },
        ));
        h.sort_by_key(|e| e.at);
        h
    }

    fn judged(h: &[HistEvent], faults: &[FaultMark]) -> Vec<(ProblemKind, bool)> {
        let mut config = fixtures::config(None);
        config.writer_intent = Some(Duration::from_secs(5));
        fixtures::judged(h, faults, &config, 3_000)
    }

    fn kinds(h: &[HistEvent], faults: &[FaultMark]) -> Vec<ProblemKind> {
        judged(h, faults)
            .into_iter()
            .filter(|(kind, _)| *kind == ProblemKind::WriterOvertaken)
            .map(|(kind, excused)| {
                assert!(!excused, "excused");
                kind
            })
            .collect()
    }

    #[test]
    fn a_reader_that_came_after_a_live_intent_overtakes_the_writer() {
        assert_eq!(
            kinds(&history(2_000), &[]),
            vec![ProblemKind::WriterOvertaken]
        );
        // A reader whose first attempt came before the intent was recorded is not new.
        let mut h = history(2_000);
        h.insert(0, call(5, 2, 9, Family::Read, 12));
        assert!(kinds(&h, &[]).is_empty());
    }

    #[test]
    fn an_intent_not_refreshed_within_the_bound_may_have_lapsed() {
        // 4,500 ms is past half the 5 s intent after the refresh sent at 1,500 ms.
        assert!(kinds(&history(4_500), &[]).is_empty());
    }

    #[test]
    fn only_a_node_fault_that_can_lose_the_intent_excuses_it() {
        let crash = FaultMark {
            fault: Fault::NodeCrash {
                node: 0,
                restart_after_ms: Some(10),
            },
            proc: None,
            from: 1_800_000_000,
            until: 1_810_000_000,
        };
        let found = judged(&history(2_000), &[crash]);
        assert!(found.contains(&(ProblemKind::WriterOvertaken, true)));
        // A pause of the reader explains nothing.
        let pause = FaultMark {
            fault: Fault::Pause {
                who: crate::world::faults::ProcSel::Id(2),
                ms: 50,
            },
            proc: Some((2, 0)),
            from: 1_900_000_000,
            until: 1_950_000_000,
        };
        assert_eq!(
            kinds(&history(2_000), &[pause]),
            vec![ProblemKind::WriterOvertaken]
        );
    }
}
