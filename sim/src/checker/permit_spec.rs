//! The sequential specification of the semaphore in server time: what one semaphore's
//! script calls (`semaphore_acquire`, `_renew`, `_release`, `_probe`) may answer, taken one
//! at a time at their linearization points.
//!
//! The semaphore holds permits, each a lease of its own (a hold id in the permits zset with
//! its deadline), at most `limit` of them: the stored size, which the first acquire stores
//! and every later one must match (`semaphore_acquire.lua` lines 34-43), or a resize
//! (`semaphore_resize.lua`) stores; the spec takes the largest any grant asked for or any
//! resize set, so a grow never reads as over capacity (a shrink's effect is judged by the
//! exclusion rule, on the sizes `sizes` derives in time). The rules, each with the script
//! line it mirrors:
//!
//! - An acquire is granted if its hold already owns a live permit (a retry, line 80: it
//!   keeps it whatever the count, line 37), if it waits in the fair line (a release or an
//!   acquire may have handed it a permit, lines 53-66 and `semaphore_release.lua` 45-56),
//!   or if fewer than `limit` other permits are live at its point (line 80). Its deadline
//!   moves to the point plus its TTL, never earlier (`ZADD GT`, line 81): a retry keeps a
//!   later deadline, and a claim of a handed permit its entry deadline, which the spec
//!   cannot see. Its token is `0` (line 87).
//! - A queued acquire that is refused joins the line (lines 90-101): from then on a grant of
//!   its hold is always legal, since the spec cannot see hand-offs.
//! - A renewal answered 1 finds the permit live, and moves its deadline to the point plus
//!   its TTL, never earlier (`semaphore_renew.lua` lines 21-27).
//! - A release answered 0 finds the permit live (`semaphore_release.lua` lines 37-42 and
//!   67-70); it answers 0 or -1, nothing else. Any release drops the hold and its place in
//!   line (lines 34-35).
//! - A probe answered live finds the permit live, with token `0`
//!   (`semaphore_probe.lua` line 13).
//! - Refusals and "not held" answers are always legal (what a refusal means is not
//!   specified, as for the mutex), and the hold is not live after them.
//!
//! Where the answer depends on what the spec cannot see, it admits more: a permit counts
//! against the limit only while it is certainly live (its earliest end is still ahead), so
//! permits handed to waiters, granted by ambiguous calls or merged by widening never make
//! a grant illegal; a "live" answer about a hold the spec does not hold is legal if the
//! hold may wait in the line (a hand-off may have given it a permit) or was not certainly
//! granted before the call (`Step::strict`: an ambiguous call may have granted it, and the
//! search tries only the latest few ambiguous calls, which under a partition may all be
//! others'), and then the hold joins the state, certainly live only as long as the answer
//! proves (a renewal: its TTL from the call's invocation); a semaphore no guard was seen
//! granted has no known size and admits any count.
//!
//! Invariant: the intervals only ever over-approximate, so a history a correct server
//! produced always has a legal linearization here (no false alarm).

use std::collections::BTreeSet;

use crate::world::calls::{LockOp, LockReply, OpKind};

use super::lease_spec::{Illegal, Step, TOLERANCE_MS, Timing};
use super::seq_spec::{self, Leases, SeqSpec};

/// The latest end of a permit whose deadline the spec cannot bound (one a hand-off set to
/// its waiter's entry deadline): far enough never to pass, small enough never to overflow.
const UNBOUNDED_MS: u64 = u64::MAX / 4;

/// The semaphore's discrete state.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct PermitSpec {
    /// The stored size.
    limit: u64,
    /// Permits the spec saw granted and not given back, sorted by hold, each with the
    /// earliest and the latest its lease can end (ms): certainly live before the first,
    /// possibly until the second.
    holds: Leases,
    /// Holds that may wait in the fair line (a release may hand them a permit).
    waiting: BTreeSet<u64>,
}

impl PermitSpec {
    /// A semaphore of `limit` permits nobody holds.
    pub fn new(limit: u64) -> Self {
        Self {
            limit,
            holds: Vec::new(),
            waiting: BTreeSet::new(),
        }
    }

    fn find(&self, hold: u64) -> Option<(u64, u64)> {
        seq_spec::lease_of(&self.holds, hold)
    }

    /// `hold`'s permit set to end in `[earliest, latest]`.
    fn with(mut self, hold: u64, earliest: u64, latest: u64) -> Self {
        seq_spec::set_lease(&mut self.holds, hold, earliest, latest);
        self
    }

    /// `hold`'s permit gone (given back, or said not to be live).
    fn without(mut self, hold: u64) -> Self {
        self.holds.retain(|&(h, _, _)| h != hold);
        self
    }

    /// Permits other than `hold`'s certainly live at `to` (their earliest end after it):
    /// the point that counts fewest.
    fn certainly_live(&self, hold: u64, to: u64) -> u64 {
        self.holds
            .iter()
            .filter(|&&(h, earliest, _)| h != hold && earliest > to + TOLERANCE_MS)
            .count() as u64
    }
}

impl SeqSpec for PermitSpec {
    type Group = u64;

    fn apply(state: &(Self, Timing), step: &Step) -> Result<Vec<(Self, Timing)>, Illegal<Self>> {
        let (spec, timing) = state;
        let from = step.from.max(timing.now);
        let to = step.to.max(from);
        let t = Timing {
            now: from,
            ..*timing
        };
        let hold = step.op.hold;
        let ttl = step.op.ttl_ms;
        let own = spec.find(hold);
        // Some point in [from, to] may find this hold's permit live.
        let may_live = own.is_some_and(|(_, latest)| from <= latest + TOLERANCE_MS);
        let unchanged = (spec.clone(), *timing);
        let illegal = |reason: String, forced: Self| Illegal {
            reason,
            forced: (forced, t),
        };
        match (step.op.kind, step.reply) {
            (_, Some(LockReply::NotRun)) => Ok(vec![unchanged]),
            (OpKind::Acquire, Some(LockReply::Granted { .. }) | None) => {
                let token = match step.reply {
                    Some(LockReply::Granted { token }) => Some(token),
                    _ => None,
                };
                let mut next = spec.clone();
                next.waiting.remove(&hold);
                // A retry moves the deadline to its point plus TTL, never earlier (line
                // 81), at a point the permit is live; a fresh grant at any point of the
                // window; a claim of a permit handed to the waiting hold keeps the entry
                // deadline the hand-off set, which the spec cannot bound.
                let granted = match own {
                    Some((earliest, latest)) if may_live => {
                        let end = to.min(latest + TOLERANCE_MS) + ttl;
                        next.with(hold, earliest.max(from + ttl), latest.max(end))
                    }
                    _ if spec.waiting.contains(&hold) => next.with(hold, from + ttl, UNBOUNDED_MS),
                    _ => next.with(hold, from + ttl, to + ttl),
                };
                let others = spec.certainly_live(hold, to);
                let legal = may_live || spec.waiting.contains(&hold) || others < spec.limit;
                let mut out = Vec::new();
                match token {
                    Some(token) if token != 0 => {
                        return Err(illegal(
                            format!("a permit was granted with token {token}, not 0"),
                            granted,
                        ));
                    }
                    Some(_) if !legal => {
                        return Err(illegal(
                            format!(
                                "a permit was granted while {others} others were live, of {}",
                                spec.limit
                            ),
                            granted,
                        ));
                    }
                    _ if legal => out.push((granted, t)),
                    _ => {}
                }
                // An unanswered queued acquire may have joined the line instead.
                if token.is_none() && step.op.queued {
                    let mut queued = spec.clone();
                    queued.waiting.insert(hold);
                    out.push((queued, t));
                }
                Ok(out)
            }
            // A refusal, at any point (the timing stays, so one that changes nothing may
            // stay pending, as the search's `idle` allows).
            (OpKind::Acquire, Some(_)) => {
                let mut next = spec.clone().without(hold);
                if step.op.queued {
                    next.waiting.insert(hold);
                }
                Ok(vec![(next, *timing)])
            }
            (OpKind::Renew, Some(LockReply::Renewed(true)) | None) => match own {
                Some((earliest, latest)) if may_live => {
                    let end = to.min(latest + TOLERANCE_MS) + ttl;
                    let next = spec
                        .clone()
                        .with(hold, earliest.max(from + ttl), latest.max(end));
                    Ok(vec![(next, t)])
                }
                _ if step.reply.is_none() => Ok(Vec::new()),
                // A permit the spec did not see granted: live at the point, so at least
                // its TTL from then.
                _ if spec.waiting.contains(&hold) || !step.strict => {
                    Ok(vec![(spec.clone().with(hold, from + ttl, UNBOUNDED_MS), t)])
                }
                _ => Err(illegal(
                    "renewed a permit that was no longer live".to_owned(),
                    spec.clone(),
                )),
            },
            (OpKind::Release, Some(LockReply::Released(left))) if left >= 0 => {
                let mut next = spec.clone().without(hold);
                next.waiting.remove(&hold);
                if left > 0 {
                    Err(illegal(
                        format!("a permit release answered {left}, not 0 or -1"),
                        next,
                    ))
                } else if may_live || spec.waiting.contains(&hold) || !step.strict {
                    Ok(vec![(next, t)])
                } else {
                    Err(illegal(
                        "released (freed) a permit that was no longer live".to_owned(),
                        next,
                    ))
                }
            }
            (OpKind::Release, _) => {
                let mut next = spec.clone().without(hold);
                next.waiting.remove(&hold);
                Ok(vec![(next, *timing)])
            }
            (OpKind::Probe, Some(LockReply::Probed { held: true, token })) => {
                if let Some(token) = token.filter(|&token| token != 0) {
                    Err(illegal(
                        format!("a permit probe saw token {token}, not 0"),
                        spec.clone(),
                    ))
                } else if may_live {
                    Ok(vec![(spec.clone(), t)])
                } else if spec.waiting.contains(&hold) || !step.strict {
                    // Live at the point, which is no earlier than `from`.
                    Ok(vec![(spec.clone().with(hold, from, UNBOUNDED_MS), t)])
                } else {
                    Err(illegal(
                        "probed live a permit that was no longer live".to_owned(),
                        spec.clone(),
                    ))
                }
            }
            (OpKind::Probe, None) => Ok(Vec::new()),
            (OpKind::Renew | OpKind::Probe, Some(_)) => {
                Ok(vec![(spec.clone().without(hold), *timing)])
            }
        }
    }

    fn holds(&self) -> Vec<u64> {
        self.holds
            .iter()
            .map(|&(h, _, _)| h)
            .chain(self.waiting.iter().copied())
            .collect()
    }

    fn unseen_owners(&self) -> Vec<u64> {
        Vec::new()
    }

    /// A fair waiter's permit may be handed to it with its entry deadline as the lease
    /// (`semaphore_release.lua` lines 45-56, `semaphore_acquire.lua` lines 53-66), and its
    /// claim keeps that later deadline (`ZADD GT`): up to its entry timeout after the
    /// attempt that set it, longer than its TTL when the timeout is.
    fn unseen_lease(op: &LockOp) -> u64 {
        if op.queued {
            op.ttl_ms.max(op.entry_ms)
        } else {
            op.ttl_ms
        }
    }

    /// The limit: configurations of one key share it.
    fn group(&self) -> u64 {
        self.limit
    }

    /// The permits' union, each over the hull of its intervals; one only some held is
    /// possibly live, never certainly (it counts against no grant); the line's union.
    fn absorb(&mut self, other: Self) {
        for held in &mut self.holds {
            if other.find(held.0).is_none() {
                held.1 = 0;
            }
        }
        for (hold, earliest, latest) in other.holds {
            match self.holds.binary_search_by_key(&hold, |&(h, _, _)| h) {
                Ok(at) => {
                    let held = &mut self.holds[at];
                    held.1 = held.1.min(earliest);
                    held.2 = held.2.max(latest);
                }
                Err(at) => self.holds.insert(at, (hold, 0, latest)),
            }
        }
        self.waiting.extend(other.waiting);
    }
}

#[cfg(test)]
mod tests;
