//! Linearizability of each lock key's script calls (acquire, renew, release, probe),
//! ambiguous ones included, against its family's sequential spec ([`super::seq_spec`]): the
//! TTL lock's ([`super::lease_spec`]) for the mutex, the read-write lock's
//! ([`super::rw_spec`]: all of one lock's read and write calls, the writer's renewals and
//! probes on its write hash included) and the semaphore's ([`super::permit_spec`]).
//!
//! How (Lowe's just-in-time linearization, per key as P-compositionality allows): the calls
//! of one key on one deployment target are replayed in the order they were invoked and
//! answered. A configuration is a spec state with the calls invoked but not yet
//! linearized; at each answer, every configuration linearizes some of its pending calls,
//! ending with the answered one, so the frontier is the window of what is still open and
//! a mostly sequential history costs a few configurations per call. A call whose reply
//! never came is ambiguous: it may take effect at any point after its invocation, or never.
//! Configurations with the same state and the same definite calls pending are merged (the
//! hull of their intervals, the union of their ambiguous calls), which only ever admits
//! more.
//!
//! Calls whose replies were lost (a partition, a reset, a node down) each may or may not
//! have granted their hold, so a run of them multiplies the configurations, and calls
//! in flight together may be ordered every way. Where the simulator witnessed which calls
//! its nodes ran ([`HistKind::Ran`]), it also witnessed when and what they answered: a
//! call a node ran with a reply that reads as its script documents is judged at that
//! instant, with that reply, whether or not the reply reached its client (invoked and
//! answered there, in the order the node ran them); a lost call no node ran is left out;
//! only calls that ran with a reply that does not read as documented stay ambiguous. So
//! on the simulator's histories the check judges the server's own sequence at the
//! moments it ran, and on real servers' histories (no witness) each call's whole interval
//! from send to answer. Where a key's server state may have been lost (a failover, a
//! restart, an eviction: [`resets`]), its search starts afresh. When the
//! frontier passes [`WIDEN_AT`], or one answer outgrows its budget, it is *widened*
//! ([`widen`]): configurations that agree on the epoch's owner and token, the highest
//! token and the definite calls pending merge into one holding the union of their holds,
//! marked as possibly holding holds it never saw granted, over the hull of their
//! intervals. That state admits everything each of them admitted (every rule of the spec
//! is monotone in those), so a finding is still one no linearization explains; the check
//! is only coarser, and the key is counted as widened.
//!
//! Invariant: a finding means no linearization exists at that answer; the check then goes
//! on from the answer taken at face value, so one lost lease does not hide later ones. A
//! key whose search outgrows its budget ([`STEP_BUDGET`], [`STEPS_PER_EVENT`],
//! [`ANSWER_STEP_BUDGET`]) even widened, or whose frontier stays past [`FRONTIER_CAP`]
//! widened, is counted unchecked and never reported as a finding.

use std::collections::{BTreeMap, BTreeSet};
use std::marker::PhantomData;

use crate::world::calls::{self, LockOp, LockReply, OpKind};
use crate::world::history::{FaultMark, HistEvent};

use super::lease_spec::{self, Spec, Step, Timing};
use super::permit_spec::PermitSpec;
use super::rw_spec::RwSpec;
use super::seq_spec::SeqSpec;
use super::timeline::Who;

mod frontier;
mod order;
mod reach;
mod read;
mod resets;
mod steps;

use order::{Judge, ordered};
use read::Call;

use frontier::{Frontier, merge, widen};
pub use reach::{KeyReach, Reach};

/// Configurations one key's search may expand in all before it is given up as unchecked,
/// at least: a history of a few thousand calls needs a few per call; this budget is tens
/// of times that. A longer history gets [`STEPS_PER_EVENT`] per invocation and answer.
pub const STEP_BUDGET: u64 = 100_000;

/// Configurations one key's search may expand per invocation or answer of its history,
/// beyond [`STEP_BUDGET`]: a run of short leases makes tens of thousands of calls on one
/// key, each needing a few.
pub const STEPS_PER_EVENT: u64 = 32;

/// Configurations one answer may expand before its key is given up as unchecked: an
/// answer with a few calls pending needs tens; a stalled node answering a pile of held
/// requests at once would otherwise try their orders for seconds.
pub const ANSWER_STEP_BUDGET: u64 = 1_000;

/// Most configurations open at once before the frontier is widened ([`widen`]): a mostly
/// sequential history has a handful; a run of lost replies doubles them with each, and
/// every answer walks them all, so a wide frontier costs on every later call.
pub const WIDEN_AT: usize = 8;

/// Most configurations open at once even widened before a key is given up as unchecked
/// (widening merges all but those with other owners or other definite calls pending).
pub const FRONTIER_CAP: usize = 256;

/// How long after its invocation an unanswered call may still take effect, beyond the
/// longest stall of a node in the run (a paused node runs what it held when it wakes):
/// longer than any delay the simulated network and its faults put on a request (a slow
/// link adds seconds at most), so dropping it after that only drops what cannot happen.
pub const AMBIGUOUS_WINDOW_NS: u64 = 10_000_000_000;

/// Most unanswered calls still open at once before a key is given up as unchecked: each
/// answer walks them in every configuration, and a client cut off from its node retrying
/// for seconds leaves hundreds.
pub const AMBIGUOUS_CAP: usize = 64;

/// Most ambiguous calls one answer may call on: each doubles the configurations, and an
/// answer that needs more than a few lost calls' effects at once is not seen in practice.
const AMBIGUOUS_TRIED: usize = 4;

/// Nanoseconds per millisecond of server time.
const NS_PER_MS: u64 = 1_000_000;

/// A call no linearization explains.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinearFinding {
    /// The lock's name.
    pub lock: String,
    /// The caller.
    pub who: Who,
    /// When its answer arrived, virtual ns.
    pub at: u64,
    /// The earliest the state it contradicts may have begun, virtual ns (the causal
    /// window's start).
    pub since: u64,
    /// Described for a report.
    pub detail: String,
}

/// What the check found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Linear {
    /// Calls checked.
    pub calls: u64,
    /// Keys not checked exactly.
    pub reach: Reach,
    /// Calls no linearization explains.
    pub findings: Vec<LinearFinding>,
}

/// Checks every key's calls in `history`, where an unanswered call may take effect up to
/// `window_ns` after its invocation (see [`AMBIGUOUS_WINDOW_NS`]), starting a key afresh
/// where `faults` or a change of the node running its calls may have lost its state
/// ([`resets`]).
pub fn check(history: &[HistEvent], faults: &[FaultMark], window_ns: u64) -> Linear {
    let read::Read {
        calls,
        keys,
        permits,
    } = read::read(history);
    let mut out = Linear {
        calls: calls.len() as u64,
        ..Linear::default()
    };
    // Where the simulator witnessed which calls its nodes ran, an unanswered call no node
    // ran took no effect and is left out, and one a node ran with a readable reply is
    // invoked and answered where it ran.
    let witnessed = calls.iter().any(|c| c.ran);
    let resets = resets::resets(history, faults);
    for ((judge, target, key), seen) in keys {
        let lost = resets
            .get(&(target, key.to_owned()))
            .map_or(&[][..], Vec::as_slice);
        let (order, restarts) = ordered(&calls, seen, lost, witnessed);
        let lock = calls::lock_name(key);
        let before = out.reach;
        match judge {
            Judge::Mutex => Search::<Spec>::new(&calls, lock, &order, window_ns)
                .restarting(&restarts)
                .run(Spec::default(), &mut out),
            Judge::RwLock => Search::<RwSpec>::new(&calls, lock, &order, window_ns)
                .restarting(&restarts)
                .run(RwSpec::default(), &mut out),
            // A semaphore no guard was seen granted has no known size: it admits any count.
            Judge::Semaphore => Search::<PermitSpec>::new(&calls, lock, &order, window_ns)
                .restarting(&restarts)
                .run(
                    PermitSpec::new(permits.get(lock).copied().unwrap_or(u64::MAX)),
                    &mut out,
                ),
        }
        let this = KeyReach {
            keys: 1,
            widened: out.reach.widened - before.widened,
            unchecked: out.reach.unchecked - before.unchecked,
        };
        let family = match judge {
            Judge::Mutex => &mut out.reach.mutex,
            Judge::RwLock => &mut out.reach.rwlock,
            Judge::Semaphore => &mut out.reach.semaphore,
        };
        *family = family.plus(this);
    }
    out
}

/// One key's search against spec `S`.
struct Search<'a, S> {
    calls: &'a [Call],
    lock: &'a str,
    order: &'a [Result<usize, usize>],
    /// Per hold: its answered calls that say whether it is held (a grant: true; a release,
    /// a refusal or a "not held": false), by answer time, ns. A hold id is reused by the
    /// attempts of one acquire, so a grant counts only until the hold next leaves.
    held_by_answer: BTreeMap<u64, Vec<(u64, bool)>>,
    /// Per hold: when its first call was invoked, ns.
    first_sent: BTreeMap<u64, u64>,
    /// From when (ns) the spec may miss a live hold of the key even outside a reset's fog:
    /// the first answer that found live a hold no earlier answer granted (admitted
    /// leniently, it leaves no lease in the state), or the first call whose effect is
    /// unknown (unanswered and not witnessed, or witnessed with a reply that does not read
    /// as its script documents); `u64::MAX` if none.
    blind_from: u64,
    /// The longest TTL a queued acquire on the key asks for (a release may grant its hold
    /// outright, for at most that long), if any queues.
    hand_off_ttl: Option<u64>,
    /// How long after its invocation an unanswered call no node was seen to run may take
    /// effect.
    window_ns: u64,
    /// When the last answer of the key arrived, ns: an unanswered call whose last moment
    /// to take effect came after it may still be linearized before the next answer.
    previous_answer: u64,
    steps: u64,
    /// Where the key's server state may have been lost: (the position in `order` it
    /// precedes, ns), in order.
    restarts: &'a [(usize, u64)],
    /// The longest lease any call on the key asks for, ms (`SeqSpec::unseen_lease`): how
    /// long a hold granted before a restart may live on unseen after it.
    longest_lease: u64,
    /// Until when (ms) holds granted before the latest restart may still be live unseen.
    fog_until: Option<u64>,
    spec: PhantomData<S>,
}

impl<'a, S: SeqSpec> Search<'a, S> {
    fn new(
        calls: &'a [Call],
        lock: &'a str,
        order: &'a [Result<usize, usize>],
        window_ns: u64,
    ) -> Self {
        let mut held_by_answer: BTreeMap<u64, Vec<(u64, bool)>> = BTreeMap::new();
        let mut granted: BTreeSet<u64> = BTreeSet::new();
        let mut blind_from = order
            .iter()
            .filter_map(|e| e.ok())
            .map(|index| &calls[index])
            .filter(|call| call.reply.is_none())
            .map(|call| call.inv)
            .min()
            .unwrap_or(u64::MAX);
        for index in order.iter().filter_map(|e| e.err()) {
            let call = &calls[index];
            match call.reply {
                Some((_, LockReply::Granted { .. })) => {
                    granted.insert(call.op.hold);
                }
                Some((
                    at,
                    LockReply::Renewed(true)
                    | LockReply::Probed { held: true, .. }
                    | LockReply::Released(0..),
                )) if !granted.contains(&call.op.hold) => blind_from = blind_from.min(at),
                _ => {}
            }
            let held = match call.reply {
                Some((at, LockReply::Granted { .. })) => Some((at, true)),
                Some((
                    at,
                    LockReply::Denied
                    | LockReply::Released(_)
                    | LockReply::Renewed(false)
                    | LockReply::Probed { held: false, .. },
                )) => Some((at, false)),
                _ => None,
            };
            if let Some(answer) = held {
                held_by_answer.entry(call.op.hold).or_default().push(answer);
            }
        }
        let hand_off_ttl = order
            .iter()
            .filter_map(|e| e.ok())
            .map(|index| calls[index].op)
            .filter(|op| op.queued)
            .map(|op| op.ttl_ms)
            .max();
        let longest_lease = order
            .iter()
            .filter_map(|e| e.ok())
            .map(|index| S::unseen_lease(&calls[index].op))
            .max()
            .unwrap_or(0);
        let mut first_sent: BTreeMap<u64, u64> = BTreeMap::new();
        for call in order
            .iter()
            .filter_map(|e| e.ok())
            .map(|index| &calls[index])
        {
            let at = first_sent.entry(call.op.hold).or_insert(call.inv);
            *at = (*at).min(call.inv);
        }
        Self {
            calls,
            lock,
            order,
            held_by_answer,
            first_sent,
            blind_from,
            hand_off_ttl,
            window_ns,
            previous_answer: 0,
            steps: 0,
            restarts: &[],
            longest_lease,
            fog_until: None,
            spec: PhantomData,
        }
    }

    /// Searches from `initial`, the state of a key nobody has used.
    fn run(mut self, initial: S, out: &mut Linear) {
        let mut frontier = Frontier::new();
        frontier.insert(
            (initial.clone(), Vec::new()),
            (
                Timing {
                    now: 0,
                    lease: (0, 0),
                    since: 0,
                },
                Vec::new(),
            ),
        );
        let mut widened = false;
        let mut restarts = self.restarts.iter().peekable();
        for (position, event) in self.order.iter().enumerate() {
            while let Some(&&(before, at)) = restarts.peek()
                && before <= position
            {
                frontier = self.restart(frontier, &initial, at);
                restarts.next();
            }
            frontier = match *event {
                Ok(index) => self.invoke(frontier, index),
                Err(index) => {
                    // An answer that outgrows its budget is tried once more over the
                    // widened frontier.
                    let mut outcome = self.answer(&frontier, index);
                    if outcome.is_none() && frontier.len() > 1 {
                        frontier = widen(frontier);
                        widened = true;
                        outcome = self.answer(&frontier, index);
                    }
                    self.previous_answer = self.calls[index].reply.map_or(0, |(at, _)| at);
                    match outcome {
                        Some(Ok(next)) => next,
                        // Every finding goes to the judge, which classifies each before it
                        // caps what it keeps.
                        Some(Err((finding, next))) => {
                            out.findings.push(finding);
                            next
                        }
                        None => {
                            out.reach.unchecked += 1;
                            return;
                        }
                    }
                }
            };
            if frontier
                .values()
                .next()
                .is_some_and(|(_, ambiguous)| ambiguous.len() > AMBIGUOUS_CAP)
            {
                out.reach.unchecked += 1;
                return;
            }
            if frontier.len() > WIDEN_AT {
                frontier = widen(frontier);
                widened = true;
                if frontier.len() > FRONTIER_CAP {
                    out.reach.unchecked += 1;
                    return;
                }
            }
        }
        if widened {
            out.reach.widened += 1;
        }
    }

    /// The last moment unanswered call `c` may take effect: the window after its
    /// invocation. (Not the moment a node ran it: only the ambiguous calls relevant to an
    /// answer are tried there, so one may not have been tried by then.)
    fn deadline(&self, c: usize) -> u64 {
        self.calls[c].inv.saturating_add(self.window_ns)
    }

    /// The configurations this key's search may expand in all.
    fn budget(&self) -> u64 {
        STEP_BUDGET.max(STEPS_PER_EVENT.saturating_mul(self.order.len() as u64))
    }

    /// Call `index` was invoked: it is pending in every configuration. (Calls are
    /// indexed in invocation order, so pushing keeps each list sorted; an ambiguous call
    /// changes no key, so the map is rebuilt only for a definite one.)
    fn invoke(&self, mut frontier: Frontier<S>, index: usize) -> Frontier<S> {
        if self.calls[index].reply.is_none() {
            for (_, ambiguous) in frontier.values_mut() {
                ambiguous.push(index);
            }
            return frontier;
        }
        frontier
            .into_iter()
            .map(|((spec, mut pending), value)| {
                pending.push(index);
                ((spec, pending), value)
            })
            .collect()
    }

    /// Call `x` was answered: the configurations that linearize it by now, a finding if
    /// there are none, or `None` if the budget ran out.
    #[allow(clippy::type_complexity)]
    fn answer(
        &mut self,
        frontier: &Frontier<S>,
        x: usize,
    ) -> Option<Result<Frontier<S>, (LinearFinding, Frontier<S>)>> {
        let at = self.calls[x].reply.map_or(0, |(at, _)| at);
        if !frontier.keys().any(|k| k.1.contains(&x)) {
            return Some(Ok(frontier.clone()));
        }
        let (mut next, illegal) = self.closure(frontier, x, at)?;
        if !next.is_empty() {
            return Some(Ok(next));
        }
        let broken = illegal?;
        // Go on from the answer taken at face value, in every configuration that had it
        // pending.
        for ((_, pending), (_, ambiguous)) in frontier.iter().filter(|(k, _)| k.1.contains(&x)) {
            let pending = pending.iter().copied().filter(|&c| c != x).collect();
            merge(
                &mut next,
                (broken.forced.0.clone(), pending),
                (broken.forced.1, ambiguous.clone()),
            );
        }
        let since = frontier
            .values()
            .map(|(t, _)| t.since.saturating_mul(NS_PER_MS))
            .chain(self.first_grant(self.calls[x].op.hold))
            .min()
            .unwrap_or(0);
        let call = &self.calls[x];
        let finding = LinearFinding {
            lock: self.lock.to_owned(),
            who: call.who,
            at,
            since: since.min(call.inv),
            detail: format!(
                "c{}.{} {} sent at t={:.3}s, answered {} at t={:.3}s: no linearization: {}",
                call.who.0,
                call.who.1,
                describe(call.op.kind),
                call.inv as f64 / 1e9,
                call.reply
                    .map_or_else(String::new, |(_, reply)| format!("{reply:?}")),
                at as f64 / 1e9,
                broken.reason
            ),
        };
        Some(Err((finding, next)))
    }

    /// The configurations after linearizing pending calls of `frontier`, ending with `x`
    /// (answered at `at`), definite ones and the ambiguous ones that may matter to it;
    /// the first reason `x` was illegal; `None` if the budget ran out.
    fn closure(
        &mut self,
        frontier: &Frontier<S>,
        x: usize,
        at: u64,
    ) -> Option<(Frontier<S>, Option<lease_spec::Illegal<S>>)> {
        let to = at / NS_PER_MS;
        let mut next = Frontier::new();
        let mut seen = Frontier::new();
        let mut work = Vec::new();
        for (key, value) in frontier {
            // Ambiguous calls that took effect, if at all, before the previous answer were
            // tried there, and are dropped (those that may have taken effect since are
            // tried before this one).
            let ambiguous = value
                .1
                .iter()
                .copied()
                .filter(|&c| self.deadline(c) >= self.previous_answer)
                .collect();
            if key.1.contains(&x) {
                merge(&mut seen, key.clone(), (value.0, ambiguous));
                work.push(key.clone());
            } else {
                merge(&mut next, key.clone(), (value.0, ambiguous));
            }
        }
        let mut illegal = None;
        let tried = self.relevant(&seen, x);
        let mut answer_steps = 0;
        while let Some(key) = work.pop() {
            self.steps += 1;
            answer_steps += 1;
            if self.steps > self.budget() || answer_steps > ANSWER_STEP_BUDGET {
                return None;
            }
            let Some((timing, ambiguous)) = seen.get(&key).cloned() else {
                continue;
            };
            let state = (key.0.clone(), timing);
            let candidates = tried.iter().filter(|c| ambiguous.binary_search(c).is_ok());
            for &y in key.1.iter().chain(candidates) {
                let step = self.step(y, to);
                match S::apply(&state, &step) {
                    // A refusal that changes nothing here stays pending (see
                    // [`Self::idle`]).
                    Ok(states)
                        if y != x
                            && states.len() == 1
                            && states[0] == state
                            && self.idle(y, &step, &key.1, &ambiguous) => {}
                    Ok(states) => {
                        for (spec, timing) in states {
                            let pending: Vec<usize> =
                                key.1.iter().copied().filter(|&c| c != y).collect();
                            let left: Vec<usize> =
                                ambiguous.iter().copied().filter(|&c| c != y).collect();
                            let new_key = (spec, pending);
                            if y == x {
                                merge(&mut next, new_key, (timing, left));
                            } else if merge(&mut seen, new_key.clone(), (timing, left)) {
                                work.push(new_key);
                            }
                        }
                    }
                    Err(broken) if y == x && illegal.is_none() => illegal = Some(broken),
                    Err(_) => {}
                }
            }
        }
        Some((next, illegal))
    }

    /// Whether pending call `y`, a refusal or "not held" answer that leaves the state as
    /// it is, may be left pending rather than linearized before the answer at hand. Such
    /// an answer is legal at any point (a witnessed one, which lease_spec may find wrong,
    /// is judged at its own point, never left pending), and later only removes its own hold or lets the
    /// epoch end earlier, which admits no less; so the configuration that linearized it
    /// here is covered by the one that keeps it pending, as long as no other call could
    /// bring its hold into the epoch first: an acquire or a probe of that hold, pending or
    /// ambiguous (a renewal or a release only keeps or drops a hold already there).
    /// Skipping those configurations keeps a pile of refusals (a node that answers a
    /// stalled queue at once) from doubling the frontier with each.
    fn idle(&self, y: usize, step: &Step, pending: &[usize], ambiguous: &[usize]) -> bool {
        let hold = self.calls[y].op.hold;
        lease_spec::is_refusal(step)
            && !pending.iter().chain(ambiguous).any(|&c| {
                let op = self.calls[c].op;
                c != y && op.hold == hold && matches!(op.kind, OpKind::Acquire | OpKind::Probe)
            })
    }

    /// The ambiguous calls that may explain answer `x` in the configurations of `seen`:
    /// the latest [`AMBIGUOUS_TRIED`] of those on the hold of `x` or of a definite call
    /// pending beside it (which may be linearized first), by the owner of one of those, on
    /// a hold of an epoch `x` contends with (a release or renewal that may have ended or
    /// kept it), or by the owner of an epoch whose holds the spec did not see (a release of
    /// one of them may have ended it). Others' ambiguous grants only ever make an answer
    /// less legal; a pending call's owner's may make that call legal (a re-entry its
    /// release counts), and the release may be what frees the lock for `x`.
    fn relevant(&self, seen: &Frontier<S>, x: usize) -> Vec<usize> {
        let mut ops: Vec<LockOp> = seen
            .keys()
            .flat_map(|k| k.1.iter().map(|&c| self.calls[c].op))
            .collect();
        ops.push(self.calls[x].op);
        let mut holds: Vec<u64> = seen.keys().flat_map(|k| k.0.holds()).collect();
        holds.extend(ops.iter().map(|op| op.hold));
        let unseen: Vec<u64> = seen.keys().flat_map(|k| k.0.unseen_owners()).collect();
        let mut calls: Vec<usize> = seen.values().flat_map(|v| v.1.iter().copied()).collect();
        calls.sort_unstable();
        calls.dedup();
        calls.retain(|&c| {
            let y = self.calls[c].op;
            holds.contains(&y.hold)
                || ops.iter().any(|op| op.owner != 0 && y.owner == op.owner)
                || (y.kind == OpKind::Release && unseen.contains(&y.owner))
        });
        let keep = calls.len().saturating_sub(AMBIGUOUS_TRIED);
        calls.split_off(keep)
    }

    /// When `hold`'s first certain grant was answered, ns.
    fn first_grant(&self, hold: u64) -> Option<u64> {
        self.held_by_answer
            .get(&hold)?
            .iter()
            .filter(|&&(_, held)| held)
            .map(|&(at, _)| at)
            .min()
    }
}

fn describe(kind: OpKind) -> &'static str {
    match kind {
        OpKind::Acquire => "acquire",
        OpKind::Renew => "renew",
        OpKind::Release => "release",
        OpKind::Probe => "probe",
    }
}

#[cfg(test)]
mod tests;
