//! Semaphore capacity: permits are never free on the server for long while a client waits
//! for one.
//!
//! Invariant (DESIGN §2 "semaphore", `semaphore_acquire.lua`, `semaphore_release.lua`): an
//! acquire grants while a permit is free (after the fair line's live heads, which a free
//! permit is handed to, and then counts as taken); a waiter answered busy sleeps until
//! something can have changed: a release hands a freed permit to the first live queue head
//! (FairQueue) or announces it (PubSub), every busy answer names the end of the earliest
//! permit, beyond which no waiter sleeps, and a Spin waiter polls at least every
//! [`leasehold::Backoff::SPIN`]`.max`, as any waiter whose subscription is down does. So
//! while a permit is free on the server (the world's census: no lease, live or handed to a
//! waiter, holds it), a waiting client is granted or asks again within the run's wake bound
//! ([`super::CheckConfig::permit_wake`]). Not judged: time the waiter was hampered (its own
//! pause, partition, slow link, a node outage, its calls refused unrun), and time from a
//! call of its own whose answer never came to its next answered attempt (the call may have
//! run; the waiter resolves it, and then waits as its strategy does with no busy answer to
//! go by).
//!
//! Excuses are sized and placed (rule [`WAKE_LATE`]): a busy answer counts on the serving
//! node's clock and the sleep on the waiter's, so the waiter's clock running slow or a
//! serving node's running fast lets it sleep past a permit's end by that rate times a
//! lease; a forward step of a serving node's clock by its size (at most a lease) after the
//! busy answer; a crash or failover of a serving node a lease before or during the stretch
//! by a lease (the permits vanish while the waiters sleep on what they were told); and a
//! fault on another client by one refresh of a fair entry (a permit handed to a head that
//! then cannot claim it lapses with its entry, and no waiter is told). A stretch longer
//! than the bound with all of these is never excused.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::world::calls::{self, Family, OpKind};
use crate::world::faults::Fault;
use crate::world::history::{FaultMark, HistEvent, HistKind};

use super::Nodes;
use super::problems::{Judge, ProblemKind, Reach};
use super::timeline::{Timeline, Who};
use super::{evictions, serving};

/// The rule that excuses a late wake by the faults that can delay one, each by its size.
const WAKE_LATE: &str = "wake-late";

/// One stretch a waiter waited with permits free: who, on which lock, since when it
/// waited, and the free stretch itself.
struct Idle<'a> {
    who: Who,
    lock: &'a str,
    since: u64,
    from: u64,
    to: u64,
}

/// Waiters that waited past the wake bound while a permit was free on the server. `wake`
/// is the run's wake bound, `lease` the longest lease or entry a permit can carry.
pub(super) fn idle_permits(
    history: &[HistEvent],
    t: &Timeline,
    (nodes, faults): (&Nodes, &[FaultMark]),
    (wake, lease): (Duration, Duration),
    judge: &mut Judge<'_>,
) {
    let free = free_stretches(history);
    if free.is_empty() {
        return;
    }
    let (unresolved, answers) = unresolved(history);
    let judged = Judged {
        nodes,
        faults,
        wake: nanos(wake),
        lease: nanos(lease),
    };
    for wait in &t.waits {
        let Some(free) = free.get(wait.lock.as_str()) else {
            continue;
        };
        judge.case(ProblemKind::PermitsIdle, true);
        let (from, to) = (wait.start, wait.stop);
        let meets = |&(f, u): &(u64, u64)| u > from && f < to;
        let mut covered: Vec<(u64, u64)> = t
            .impairments
            .iter()
            .filter(|&&(p, _, _)| p == wait.who.0)
            .map(|&(_, f, u)| (f, u))
            .filter(meets)
            .collect();
        let key = (wait.who, wait.lock.clone());
        if let Some(list) = unresolved.get(&key) {
            covered.extend(list.iter().copied().filter(meets));
        }
        // Until a call of the wait is answered the waiter is not served at all (it is
        // still connecting, or every connection fails): its liveness is not this rule's.
        let answered = answers.get(&key).map_or(&[][..], Vec::as_slice);
        let first = answered.get(answered.partition_point(|&at| at < from));
        covered.push((from, first.copied().unwrap_or(to)));
        // Time with no permit free counts as covered, like time the waiter was hampered.
        let mut cursor = from;
        let first = free.partition_point(|&(_, u)| u <= from);
        for &(f, u) in free[first..].iter().take_while(|&&(f, _)| f < to) {
            if f > cursor {
                covered.push((cursor, f));
            }
            cursor = cursor.max(u);
        }
        covered.push((cursor, to));
        covered.sort_unstable();
        let (gap_from, gap) = longest_gap(&covered, from, to);
        if gap > judged.wake {
            let idle = Idle {
                who: wait.who,
                lock: &wait.lock,
                since: from,
                from: gap_from,
                to: gap_from + gap,
            };
            judged.report(&idle, judge);
        }
    }
}

/// Per (waiter, lock name): the stretches from a semaphore call whose answer never came to
/// the waiter's next answered attempt (or the run's end). The call may or may not have
/// run; the waiter resolves that (a probe, retried with a backoff), and a probe's "not
/// held" tells it nothing of the line or of when a permit frees, so it waits as its
/// strategy does without a busy answer (FairQueue: until its next refresh; DESIGN §2
/// "ambiguous replies": keep waiting).
/// Also returns, per (waiter, lock name), when its calls were answered.
fn unresolved(history: &[HistEvent]) -> (PerWaiter<(u64, u64)>, PerWaiter<u64>) {
    let mut answers: PerWaiter<u64> = BTreeMap::new();
    let mut pending: BTreeMap<u64, ((Who, String), u64, bool)> = BTreeMap::new();
    let mut open: BTreeMap<(Who, String), u64> = BTreeMap::new();
    let mut out: PerWaiter<(u64, u64)> = BTreeMap::new();
    for ev in history {
        match &ev.kind {
            HistKind::Call { id, op, .. } if op.family == Family::Permit => {
                let key = (
                    (ev.proc, ev.incarnation),
                    calls::lock_name(&ev.lock).to_owned(),
                );
                pending.insert(*id, (key, ev.at, op.kind == OpKind::Acquire));
            }
            HistKind::Return { id, .. } => {
                let Some((key, sent, attempt)) = pending.remove(id) else {
                    continue;
                };
                answers.entry(key.clone()).or_default().push(ev.at);
                // A connection answers in order: the calls sent before this one and still
                // unanswered never will be.
                let lost: Vec<(u64, u64)> = pending
                    .iter()
                    .filter(|(_, (k, at, _))| *k == key && *at < sent)
                    .map(|(id, (_, at, _))| (*id, *at))
                    .collect();
                for (lost, at) in lost {
                    pending.remove(&lost);
                    let since = open.entry(key.clone()).or_insert(at);
                    *since = (*since).min(at);
                }
                if attempt && let Some(since) = open.remove(&key) {
                    out.entry(key).or_default().push((since, ev.at));
                }
            }
            _ => {}
        }
    }
    let unanswered = pending.into_values().map(|(key, at, _)| (key, at));
    for (key, at) in unanswered.chain(open) {
        out.entry(key).or_default().push((at, u64::MAX));
    }
    (out, answers)
}

/// Per (waiter, lock name): what the history shows of it, in time order.
type PerWaiter<T> = BTreeMap<(Who, String), Vec<T>>;

/// What a late wake is judged against.
struct Judged<'a> {
    nodes: &'a Nodes,
    faults: &'a [FaultMark],
    wake: u64,
    lease: u64,
}

impl Judged<'_> {
    fn report(&self, idle: &Idle<'_>, judge: &mut Judge<'_>) {
        let gap = idle.to - idle.from;
        let (allowed, evidence) = self.allowance(idle);
        let excuse = (!evidence.is_empty() && gap <= self.wake.saturating_add(allowed))
            .then(|| (WAKE_LATE, evidence.join("; ")));
        let detail = format!(
            "c{}.{} waited from t={:.3}s, its calls answered, while a permit was free on the server for {:.0} ms from t={:.3}s (wake bound {} ms)",
            idle.who.0,
            idle.who.1,
            idle.since as f64 / 1e9,
            gap as f64 / 1e6,
            idle.from as f64 / 1e9,
            self.wake / 1_000_000,
        );
        judge.add_explained(
            ProblemKind::PermitsIdle,
            idle.lock,
            idle.to,
            (&[(idle.who, idle.since, idle.to)], Reach::Windows),
            (detail, excuse),
        );
    }

    /// How much longer than the wake bound the faults placed on `idle` can make it sleep,
    /// and what each of them contributed.
    fn allowance(&self, idle: &Idle<'_>) -> (u64, Vec<String>) {
        let lease = self.lease;
        let since = idle.from.saturating_sub(lease);
        let refresh = lease / u64::from(leasehold::QUEUE_REFRESHES_PER_TIMEOUT);
        let mut total = 0u64;
        let mut evidence = Vec::new();
        let share = |ppm: i64, sign: i64| {
            let r = u128::from(ppm.unsigned_abs()).min(999_999);
            let d = u128::try_from(1_000_000 + sign * i64::try_from(r).unwrap_or(0)).unwrap_or(1);
            u64::try_from(u128::from(lease) * r / d).unwrap_or(u64::MAX)
        };
        for m in self.faults {
            let meets = m.from <= idle.to && m.until >= since;
            let on_node = serving::on_serving_node(self.nodes, m);
            let allowed = match m.fault {
                Fault::ClientClockDrift { proc, ppm } if meets && proc == idle.who.0 && ppm < 0 => {
                    share(ppm, -1)
                }
                Fault::NodeClockDrift { ppm, .. } if on_node && meets && ppm > 0 => share(ppm, 1),
                Fault::NodeClockJump { by_ms, .. } if on_node && meets && by_ms > 0 => {
                    u64::try_from(by_ms)
                        .unwrap_or(0)
                        .saturating_mul(1_000_000)
                        .min(lease)
                }
                Fault::NodeCrash { .. } | Fault::Failover { .. } if on_node && meets => lease,
                Fault::Evict { .. } if meets && evictions::took_key_of(m, idle.lock) => lease,
                Fault::Crash { .. }
                | Fault::Pause { .. }
                | Fault::Isolate { .. }
                | Fault::CutFrom { .. }
                | Fault::OneWay { .. }
                // A head that cannot find its master cannot claim what it was handed.
                | Fault::SentinelCut { .. }
                | Fault::Slow { .. }
                    if meets && m.proc.is_some_and(|p| p != idle.who) =>
                {
                    refresh
                }
                // A lagging Sentinel may misroute any head of the group's line (the waiter
                // itself is covered by its impairment when it was told a stale master).
                Fault::SentinelStale { .. } if meets => refresh,
                _ => 0,
            };
            if allowed > 0 {
                total = total.saturating_add(allowed);
                let ms = allowed as f64 / 1e6;
                evidence.push(format!("{} (up to {ms:.1} ms)", serving::described(m)));
            }
        }
        (total, evidence)
    }
}

/// Per lock name, the stretches the census saw a permit free, in time order.
fn free_stretches(history: &[HistEvent]) -> BTreeMap<&str, Vec<(u64, u64)>> {
    let mut open: BTreeMap<&str, u64> = BTreeMap::new();
    let mut stretches: BTreeMap<&str, Vec<(u64, u64)>> = BTreeMap::new();
    for ev in history {
        if let HistKind::PermitsFree { free, .. } = ev.kind {
            let lock = ev.lock.as_str();
            match (free > 0, open.get(lock).copied()) {
                (true, None) => {
                    open.insert(lock, ev.at);
                }
                (false, Some(from)) => {
                    open.remove(lock);
                    stretches.entry(lock).or_default().push((from, ev.at));
                }
                _ => {}
            }
        }
    }
    for (lock, from) in open {
        stretches.entry(lock).or_default().push((from, u64::MAX));
    }
    stretches
}

/// The longest stretch of `[start, stop]` not covered by the `covered` intervals (sorted
/// by start), as (its start, its length).
fn longest_gap(covered: &[(u64, u64)], start: u64, stop: u64) -> (u64, u64) {
    let mut cursor = start;
    let mut longest = (start, 0);
    for &(from, until) in covered {
        if until <= cursor || from >= stop {
            continue;
        }
        if from > cursor && from - cursor > longest.1 {
            longest = (cursor, from - cursor);
        }
        cursor = cursor.max(until);
    }
    if stop > cursor && stop - cursor > longest.1 {
        longest = (cursor, stop - cursor);
    }
    longest
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::super::ProblemKind;
    use super::super::fixtures::{self, ev};
    use crate::world::calls::{Family, LockOp, LockReply, OpKind};
    use crate::world::faults::{Fault, ProcSel};
    use crate::world::history::{Access, FaultMark, HistEvent, HistKind};
    use crate::world::net::Target;
    use std::time::Duration;

    const SEM: &str = "leasehold:{l}:sem";

    fn attempt(at_ms: u64, id: u64) -> HistEvent {
        let op = LockOp {
            family: Family::Permit,
            kind: OpKind::Acquire,
            hold: 11,
            owner: 0,
            ttl_ms: 1_000,
            queued: false,
            entry_ms: 0,
        };
        let target = Target::Node(0);
        ev(at_ms, 1, SEM, HistKind::Call { id, target, op })
    }

    fn free(at_ms: u64, free: u32) -> HistEvent {
        ev(at_ms, 0, "l", HistKind::PermitsFree { free, node: 0 })
    }

    /// c0 holds the one permit from 0 ms and releases it at 100 ms; c1 asks at 10 ms, is
    /// told busy, and asks again at `again_ms`, when it is granted.
    fn history(again_ms: u64) -> Vec<HistEvent> {
        let permit = Access::Permit { permits: 1 };
        vec![
            free(0, 0),
            ev(
                1,
                0,
                "l",
                HistKind::Acquired {
                    token: 0,
                    access: permit,
                },
            ),
            ev(9, 1, "l", HistKind::WaitStart),
            attempt(10, 0),
            ev(
                11,
                1,
                SEM,
                HistKind::Return {
                    id: 0,
                    reply: LockReply::Denied,
                },
            ),
            ev(100, 0, "l", HistKind::Released),
            free(100, 1),
            attempt(again_ms, 1),
            free(again_ms, 0),
            ev(
                again_ms + 1,
                1,
                SEM,
                HistKind::Return {
                    id: 1,
                    reply: LockReply::Granted { token: 0 },
                },
            ),
            ev(
                again_ms + 1,
                1,
                "l",
                HistKind::Acquired {
                    token: 0,
                    access: permit,
                },
            ),
        ]
    }

    fn judged(h: &[HistEvent], faults: &[FaultMark]) -> Vec<(ProblemKind, bool)> {
        let mut config = fixtures::config(None);
        config.permit_wake = Some(Duration::from_millis(200));
        fixtures::judged(h, faults, &config, 3_000)
            .into_iter()
            .filter(|(kind, _)| *kind == ProblemKind::PermitsIdle)
            .collect()
    }

    #[test]
    fn a_waiter_sleeping_past_the_wake_bound_with_a_permit_free_leaves_capacity_idle() {
        assert!(judged(&history(150), &[]).is_empty());
        assert_eq!(
            judged(&history(900), &[]),
            vec![(ProblemKind::PermitsIdle, false)]
        );
    }

    #[test]
    fn a_waiter_resolving_an_unanswered_attempt_is_not_judged_until_it_asks_again() {
        // c1's attempt at 10 ms is never answered (its reply lost): until its next answered
        // attempt it cannot know whether it waits in line.
        let mut h = history(900);
        h.remove(4);
        assert!(judged(&h, &[]).is_empty());
    }

    #[test]
    fn a_waiter_refused_unrun_is_not_judged_until_an_attempt_of_its_runs() {
        // c1's attempt at 10 ms is refused unrun (a master short of replicas): the answer
        // names no permit's end, and the server takes no writes for now, so c1 waits as for
        // a busy lock; answered busy instead, the same wait is judged (the test above).
        let mut h = history(900);
        h[4].kind = HistKind::Return {
            id: 0,
            reply: LockReply::NotRun,
        };
        assert!(judged(&h, &[]).is_empty());
    }

    #[test]
    fn only_a_fault_that_can_delay_the_wake_by_that_much_excuses_it() {
        let crash = |proc| FaultMark {
            fault: Fault::Crash {
                who: ProcSel::Id(proc),
                restart_after_ms: None,
            },
            proc: Some((proc, 0)),
            from: 50_000_000,
            until: u64::MAX,
        };
        // No entry timeout here: a crash of another client explains no late wake.
        assert_eq!(
            judged(&history(900), &[crash(2)]),
            vec![(ProblemKind::PermitsIdle, false)]
        );
        // A forward node step of 600 ms after the busy answer can, by its size; 100 ms cannot.
        let jump = |by_ms| FaultMark {
            fault: Fault::NodeClockJump { node: 0, by_ms },
            proc: None,
            from: 50_000_000,
            until: 50_000_000,
        };
        assert_eq!(
            judged(&history(900), &[jump(600)]),
            vec![(ProblemKind::PermitsIdle, true)]
        );
        // A clock drifting slow from after the stretch explains nothing of it.
        let drift = FaultMark {
            fault: Fault::ClientClockDrift {
                proc: 1,
                ppm: -500_000,
            },
            proc: Some((1, 0)),
            from: 2_000_000_000,
            until: u64::MAX,
        };
        assert_eq!(
            judged(&history(900), &[drift]),
            vec![(ProblemKind::PermitsIdle, false)]
        );
        assert_eq!(
            judged(&history(900), &[jump(100)]),
            vec![(ProblemKind::PermitsIdle, false)]
        );
    }
}
