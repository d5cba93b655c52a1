//! Spurious lost signals: `lost()` does not fire while the server still holds the hold, its
//! node is reachable and no renewal has failed.
//!
//! Invariant (DESIGN §2 "watchdog + `lost()`"): the watchdog renews every TTL/3 (sooner if
//! half of what is left comes first), and the lease is marked lost only when the server
//! reports the hold gone or when validity (the renewal's send + TTL − drift) runs out
//! without a confirmed renewal. So between a renewal the server confirmed and the next
//! renewal's send, neither can happen: a lost signal there is spurious. It is judged only
//! on the history's evidence: the latest renewal sent before the signal was confirmed
//! before it, the oracle had not seen the hold gone, and no fault acted on the holder's
//! process (a pause makes its timers late, a forward jump of its clock ends validity) or
//! on a node that serves the locks (reachability) between that renewal's send and the
//! signal. A hold with no
//! renewal (no watchdog) and RedLock's (a quorum decides) are not judged.
//!
//! Every family is judged: a read hold and a permit have the mutex's lease machinery (the
//! same watchdog and `Lease`), renewed by their own scripts, and the oracle reads their
//! zset deadlines as it reads a mutex's; only renewals of the belief's own access count
//! ([`super::renewals::renews`]).

use std::collections::BTreeSet;
use std::time::Duration;

use crate::world::faults::Fault;
use crate::world::history::FaultMark;

use super::problems::{Judge, ProblemKind, Reach};
use super::renewals::{self, Renewals, Targets};
use super::timeline::{Timeline, Who};
use super::{Nodes, serving};

/// Lost signals that fired between a confirmed renewal and the next one, while nothing
/// acted on the holder or a node.
pub(super) fn spurious(
    (renewals, targets): (&Renewals, &Targets),
    t: &Timeline,
    (nodes, faults): (&Nodes, &[FaultMark]),
    lease_ttl: Duration,
    judge: &mut Judge<'_>,
) {
    let gone: BTreeSet<(&str, usize)> = t.gone.iter().map(|g| (g.lock.as_str(), g.hold)).collect();
    for (lock, holds) in &t.holds {
        for (index, hold) in holds.iter().enumerate().filter(|(_, h)| h.by_lost) {
            let lost = hold.end;
            let Some(list) = renewals.get(&(hold.who(), lock.clone())) else {
                continue;
            };
            // The latest renewal of this belief sent before the signal.
            let Some(last) = list
                .iter()
                .filter(|r| renewals::renews(r.family, hold.access) && hold.named(r.hold))
                .take_while(|r| r.sent < lost)
                .last()
            else {
                continue;
            };
            let confirmed = last
                .answer
                .is_some_and(|(at, renewed)| renewed && at < lost);
            // RedLock's signal is a quorum's: not this rule's.
            if !targets.single(hold.proc, lock) {
                continue;
            }
            // A signal after an unconfirmed renewal, or once the oracle saw the hold gone,
            // is judged right; one after a confirmed renewal is judged only while nothing
            // acted on the holder or a serving node.
            let suspect =
                last.sent >= hold.start && confirmed && !gone.contains(&(lock.as_str(), index));
            let acted = suspect && acted_on((nodes, faults), t, hold.who(), (last.sent, lost));
            judge.case(ProblemKind::SpuriousLost, !acted);
            if !suspect || acted {
                continue;
            }
            judge.add(
                ProblemKind::SpuriousLost,
                lock,
                lost,
                (&[], Reach::Windows),
                format!(
                    "c{}.{}'s lost signal fired at t={:.3}s, {:.0} ms after a renewal the server confirmed (sent at t={:.3}s, TTL {} ms), with no renewal since and nothing acting on it",
                    hold.proc,
                    hold.incarnation,
                    lost as f64 / 1e9,
                    (lost - last.sent) as f64 / 1e6,
                    last.sent as f64 / 1e9,
                    lease_ttl.as_millis()
                ),
            );
        }
    }
}

/// Whether a fault acted on `who` or on a node serving the locks during `[from, to]`.
fn acted_on(
    (nodes, faults): (&Nodes, &[FaultMark]),
    t: &Timeline,
    who: Who,
    (from, to): (u64, u64),
) -> bool {
    t.impaired(who.0, (from, to))
        || faults.iter().any(|m| {
            let meets = m.from <= to && m.until >= from;
            match m.fault {
                Fault::ClientClockDrift { proc, .. } | Fault::ClientClockJump { proc, .. } => {
                    meets && proc == who.0
                }
                Fault::Pause { .. }
                | Fault::Crash { .. }
                | Fault::Isolate { .. }
                | Fault::CutFrom { .. }
                | Fault::OneWay { .. }
                | Fault::SentinelCut { .. }
                | Fault::Slow { .. } => meets && m.proc == Some(who),
                // Only a stale answer actually given acts on a client: recorded as that
                // client's impairment (`world::sentinels`), counted above.
                Fault::SentinelStale { .. } => false,
                Fault::ScriptFlush { .. } | Fault::NodeClockDrift { .. } => false,
                Fault::NodeClockJump { .. }
                | Fault::NodeCrash { .. }
                | Fault::NodePause { .. }
                | Fault::NodeIsolate { .. }
                | Fault::Failover { .. }
                | Fault::Evict { .. }
                | Fault::ReplicaCut { .. } => meets && serving::on_serving_node(nodes, m),
            }
        })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::super::ProblemKind;
    use super::super::fixtures::{self, FAMILIES};
    use crate::world::calls::{Family, LockReply};
    use crate::world::faults::{Fault, ProcSel};
    use crate::world::history::{Access, FaultMark, HistEvent, HistKind};
    use crate::world::net::Target;

    fn ev(at_ms: u64, lock: &str, kind: HistKind) -> HistEvent {
        fixtures::ev(at_ms, 1, lock, kind)
    }

    /// c1 holds from 0 ms (1 s TTL) with `access`; its renewal by `family`'s script on
    /// `key` at 330 ms is confirmed at 331 ms; the lost signal fires at `lost_ms`, with a
    /// renewal sent at 660 ms first when `renewed_again`.
    fn held_as(
        lost_ms: u64,
        renewed_again: bool,
        (access, family, key): (Access, Family, &str),
    ) -> Vec<HistEvent> {
        let op = fixtures::renewal(family, 7);
        let target = Target::Node(0);
        let mut h = vec![
            ev(0, "l", HistKind::Acquired { token: 1, access }),
            ev(330, key, HistKind::Call { id: 0, target, op }),
            ev(
                331,
                key,
                HistKind::Return {
                    id: 0,
                    reply: LockReply::Renewed(true),
                },
            ),
        ];
        if renewed_again {
            h.push(ev(660, key, HistKind::Call { id: 1, target, op }));
        }
        h.push(ev(lost_ms, "l", HistKind::Lost));
        h
    }

    /// A mutex hold's [`held_as`].
    fn held(lost_ms: u64, renewed_again: bool) -> Vec<HistEvent> {
        held_as(lost_ms, renewed_again, FAMILIES[0])
    }

    fn kinds(h: &[HistEvent], faults: &[FaultMark]) -> Vec<ProblemKind> {
        fixtures::kinds(h, faults, None, 2_000)
    }

    #[test]
    fn lost_after_a_confirmed_renewal_and_before_the_next_is_spurious() {
        assert_eq!(
            kinds(&held(980, false), &[]),
            vec![ProblemKind::SpuriousLost]
        );
        // A renewal in flight that never came back may let validity run out.
        assert!(kinds(&held(980, true), &[]).is_empty());
    }

    #[test]
    fn a_write_hold_a_read_hold_and_a_permit_lost_after_a_confirmed_renewal_are_spurious() {
        for family in FAMILIES {
            assert_eq!(
                kinds(&held_as(980, false, family), &[]),
                vec![ProblemKind::SpuriousLost],
                "{family:?}"
            );
            assert!(kinds(&held_as(980, true, family), &[]).is_empty());
        }
        // A permit's renewal confirms nothing of a read hold.
        let (_, permit, key) = FAMILIES[3];
        let h = held_as(980, false, (Access::Shared, permit, key));
        assert!(kinds(&h, &[]).is_empty());
    }

    #[test]
    fn a_pause_of_the_holder_after_the_renewal_explains_a_late_lost() {
        let pause = FaultMark {
            fault: Fault::Pause {
                who: ProcSel::Id(1),
                ms: 900,
            },
            proc: Some((1, 0)),
            from: 400_000_000,
            until: 1_300_000_000,
        };
        assert!(kinds(&held(1_300, false), &[pause]).is_empty());
    }
}
