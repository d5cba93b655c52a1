//! The sequential specification of a TTL lock in server time: what one lock key's script
//! calls may answer, taken one at a time at their linearization points.
//!
//! The lock is free, or held by one epoch: one owner's live holds, a fencing token, and a
//! lease that ends `ttl` ms after the point of the grant (or of the latest renewal or
//! re-entry, never earlier). Each hold is a lease of its own: it ends `ttl` ms after its
//! own grant or renewal, and the epoch lasts while one of its holds does. A grant to
//! another owner while a lease is live is illegal; a new epoch's token must exceed every
//! token granted before; a re-entry or a retried grant joins the epoch with its token; a
//! renewal, a release or a probe that says a hold is live must find that hold's own lease
//! live; a release that says some of the owner's holds remain must find that many live.
//! Only a fair hand-off grants a hold with no call of its own (`Step::hand_off_ttl`): where
//! none can happen, every hold a release counts is one the spec saw granted; where one
//! can, such a hold's lease is at most the longest a queued acquire asks for, counted from
//! no later than the answer that revealed it. What a refusal means (held, queued, reserved
//! for a fair hand-off) is not specified: refusals and "not held" answers are legal, and
//! the state follows them, but for a "not held" the node was witnessed giving about a hold
//! whose own lease certainly ran past that point (`certainly_live`), and a mutex acquire the
//! node was witnessed refusing once every lease had certainly ended, where no fair line can
//! hold the lock back and the spec has seen every hold the server can keep
//! (`certainly_free`).
//!
//! Points are known only to lie in a window (the call's invocation to the response being
//! ordered), so the state keeps intervals: the lease's end between `lease.0` and
//! `lease.1`, each hold's own lease end between the earliest and the latest it can be,
//! the previous point no earlier than `now`. When a hold leaves, the epoch's lease may end
//! as early as its remaining holds' do (a hold the spec never saw granted: any time after
//! the last point it was said to be live). Every check asks whether *some* point and
//! lease end in those intervals make the answer legal.
//!
//! Invariant: the intervals only ever over-approximate, so a history a correct server
//! produced always has a legal linearization here (no false alarm); times are whole
//! milliseconds of the node's clock, where a key set to live `ttl` ms at `t` is still
//! there at `t + ttl` (Redis: expired when `now > at`), give or take [`TOLERANCE_MS`].

use crate::model::node::EPOCH_US;
use crate::world::calls::{Family, LockOp, LockReply, OpKind};

/// How far (ms) a lease's end may be off either way: the model's and Redis's expiry
/// boundary (`now > at` versus `now >= at`) and millisecond truncation, so neither is
/// taken for a bug.
pub const TOLERANCE_MS: u64 = 1;

/// The discrete part of the lock's state (what configurations are told apart by).
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Spec {
    /// The current (or last, if its lease has run out) epoch.
    pub epoch: Option<Epoch>,
    /// The highest token granted so far.
    pub max_token: u64,
}

/// A holding epoch.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Epoch {
    /// The owner whose holds share it.
    pub owner: u64,
    /// Its token, unless only an ambiguous grant started it.
    pub token: Option<u64>,
    /// Its live holds the spec saw granted, sorted, each with the earliest and the latest
    /// its own lease can end (ms).
    pub holds: Vec<(u64, u64, u64)>,
    /// Whether it may hold holds the spec never saw granted (a release counted more than
    /// it knew of: fair hand-offs' grants; or a widened frontier merged lost grants'
    /// holds); their leases are bounded only by the epoch's.
    pub unseen: bool,
}

/// The timed part of the state, as intervals (ms of server time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// No later point may precede this one.
    pub now: u64,
    /// The lease's end lies in `[lease.0, lease.1]`.
    pub lease: (u64, u64),
    /// The earliest the current epoch may have started (for the causal window).
    pub since: u64,
}

impl Timing {
    /// The smallest interval state covering both (over-approximates either).
    pub fn hull(self, other: Self) -> Self {
        Self {
            now: self.now.min(other.now),
            lease: (
                self.lease.0.min(other.lease.0),
                self.lease.1.max(other.lease.1),
            ),
            since: self.since.min(other.since),
        }
    }

    /// Whether `self` is inside `other` (nothing new to explore).
    pub fn within(self, other: Self) -> bool {
        self.now >= other.now
            && self.lease.0 >= other.lease.0
            && self.lease.1 <= other.lease.1
            && self.since >= other.since
    }
}

/// One call to linearize: what it asked, what it was answered (`None`: ambiguous, only
/// its effect is tried), and the window its point lies in.
#[derive(Debug, Clone, Copy)]
pub struct Step {
    /// The call.
    pub op: LockOp,
    /// Its answer.
    pub reply: Option<LockReply>,
    /// Invocation, ms.
    pub from: u64,
    /// The latest its point can be, ms.
    pub to: u64,
    /// Whether its hold was granted for certain before it was invoked (the latest answer
    /// about it before then granted it): only then can a "live" answer about a hold the
    /// spec does not hold be wrong (a hold never granted, or one that left since and was
    /// asked for again, may have been reserved by a fair hand-off, or granted by an
    /// ambiguous call).
    pub strict: bool,
    /// The longest lease a fair hand-off can grant on this key, ms (the longest TTL its
    /// queued acquires ask for); `None` if none queues, so no hand-off can happen.
    pub hand_off_ttl: Option<u64>,
    /// Whether its point may come while holds granted before the key's state was lost (a
    /// failover, a restart, an eviction) can still be live unseen: an epoch it starts may
    /// then hold holds the spec never saw granted.
    pub fogged: bool,
    /// Whether `from` and `to` are the node's own clock reading when it ran the call (the
    /// simulator's witness), not true time.
    pub clock_read: bool,
    /// Whether every hold the server can have kept on the key at its point is one the
    /// spec saw granted: no reset of the key came before it, and no earlier answer found
    /// live a hold the spec never saw granted, nor left a call's effect unknown.
    pub all_seen: bool,
}

impl Step {
    /// Whether a token not above the highest granted `max` is one a fencing rule judges,
    /// not this spec: the highest runs ahead of the clock that ran this call (a token is the
    /// µs of the Unix time `TIME` gave the script), which only a clock that stepped back, or
    /// a promoted replica's clock behind, makes; once the fence key that chained them
    /// expired, a correct server issues from its clock alone. Whether the fault explains
    /// that drop is the token rule's to judge (`issuers`, with its cause).
    pub fn token_behind_clock_ok(&self, max: u64) -> bool {
        self.clock_read && max > token_at(self.to + TOLERANCE_MS)
    }
}

/// The token a script issues from its node's clock reading `ms` (µs of the Unix time
/// `TIME` gives; the simulator's clocks count from [`EPOCH_US`]).
pub fn token_at(ms: u64) -> u64 {
    EPOCH_US
        .unsigned_abs()
        .saturating_add(ms.saturating_mul(1_000))
}

/// A state: discrete and timed.
pub type State = (Spec, Timing);

/// Why a step was illegal, with the state the check goes on from (the server's answer
/// taken as the truth); `S` is the discrete state of the family's spec (see
/// [`super::seq_spec`]).
#[derive(Debug, Clone)]
pub struct Illegal<S = Spec> {
    /// What rule it broke.
    pub reason: String,
    /// The state after taking the answer at face value.
    pub forced: (S, Timing),
}

/// The states after `step` from `state`: several when the window allows both a lapsed
/// and a live lease; none for an ambiguous call that cannot take effect.
pub fn apply(state: &State, step: &Step) -> Result<Vec<State>, Illegal> {
    let (spec, timing) = state;
    let from = step.from.max(timing.now);
    let to = step.to.max(from);
    let lease = timing.lease;
    // Some point in [from, to] may find the epoch's lease live.
    let epoch_live = from <= lease.1 + TOLERANCE_MS;
    // The latest this hold's own lease can end, if the spec holds it.
    let until = spec.epoch.as_ref().and_then(|e| until_of(e, step.op.hold));
    let holding = until.is_some();
    // Some point in [from, to] may find this hold's own lease live.
    let may_live = until.is_some_and(|u| from <= u + TOLERANCE_MS);
    let ttl = step.op.ttl_ms;
    // This hold renewed at a point in [from, min(to, its live end)].
    let renewed = || {
        let mut next = spec.clone();
        let mut end = 0;
        if let Some(e) = &mut next.epoch
            && let Some(held) = e.holds.iter_mut().find(|(h, _, _)| *h == step.op.hold)
        {
            held.1 = held.1.max(from + ttl);
            held.2 = held.2.max(to.min(held.2 + TOLERANCE_MS) + ttl);
            end = held.2;
        }
        let t = Timing {
            now: from,
            lease: (lease.0.max(from + ttl), lease.1.max(end)),
            since: timing.since,
        };
        (next, t)
    };
    // The hold gone (released, or said not to be held): the epoch lasts as long as its
    // other holds do, which may end as early as the latest of their earliest ends.
    let without_hold = || {
        let mut next = spec.clone();
        let mut t = *timing;
        if let Some(e) = &mut next.epoch {
            e.holds.retain(|(h, _, _)| *h != step.op.hold);
            if e.holds.is_empty() && !e.unseen {
                next.epoch = None;
            } else if e.unseen {
                // Holds it never saw granted may remain, ending at any time.
                t.lease.0 = t.lease.0.min(t.now);
            } else {
                let floor = e.holds.iter().map(|&(_, from, _)| from).max().unwrap_or(0);
                t.lease.0 = t.lease.0.min(floor);
            }
        }
        (next, t)
    };
    let unchanged = (spec.clone(), *timing);
    match (step.op.kind, step.reply) {
        // The server did not run it: no effect.
        (_, Some(LockReply::NotRun)) => Ok(vec![unchanged]),
        (OpKind::Acquire, Some(LockReply::Granted { token })) => grant(state, step, Some(token)),
        (OpKind::Acquire, None) => Ok(grant(state, step, None).unwrap_or_default()),
        (OpKind::Renew, Some(LockReply::Renewed(true)) | None) => {
            if holding && may_live {
                Ok(vec![renewed()])
            } else if step.reply.is_none() {
                Ok(Vec::new())
            } else if !step.strict {
                Ok(vec![renewed_unseen(state, step).unwrap_or(unchanged)])
            } else {
                Err(Illegal {
                    reason: dead_hold("renewed", until),
                    forced: unchanged,
                })
            }
        }
        (OpKind::Release, Some(LockReply::Released(left))) if left >= 0 => {
            if holding && may_live {
                let mut next = spec.clone();
                if let Some(e) = &mut next.epoch {
                    e.holds.retain(|(h, _, _)| *h != step.op.hold);
                }
                let t = Timing {
                    now: from,
                    ..*timing
                };
                remaining(next, t, step, left.unsigned_abs()).map(|state| vec![state])
            } else if !step.strict {
                // A hold an ambiguous call granted: the last of its owner's holds gone,
                // the server deleted the lock.
                let mut next = spec.clone();
                if left == 0
                    && next
                        .epoch
                        .as_ref()
                        .is_some_and(|e| e.owner == step.op.owner)
                {
                    next.epoch = None;
                }
                Ok(vec![(next, *timing)])
            } else {
                Err(Illegal {
                    reason: dead_hold("released", until),
                    forced: unchanged,
                })
            }
        }
        (OpKind::Release, None) => Ok(if holding && may_live {
            vec![without_hold()]
        } else if !step.strict && unseen_holds_of(spec, step.op.owner) {
            // One of the owner's holds the spec did not see (a fair hand-off's grant, or
            // one an ambiguous call granted): it may have been the last one, so the server
            // deleted the lock.
            vec![(
                Spec {
                    epoch: None,
                    ..spec.clone()
                },
                *timing,
            )]
        } else {
            Vec::new()
        }),
        (OpKind::Probe, Some(LockReply::Probed { held: true, token })) => {
            let epoch_token = spec.epoch.as_ref().and_then(|e| e.token);
            if holding && may_live {
                match (token, epoch_token) {
                    (Some(seen), Some(epoch)) if seen != epoch => Err(Illegal {
                        reason: format!("a probe saw token {seen}, not its epoch's {epoch}"),
                        forced: unchanged,
                    }),
                    _ => Ok(vec![unchanged]),
                }
            } else if !step.strict {
                // A hold an ambiguous call granted, seen live in the epoch of its token:
                // it joins the epoch, its lease bounded by the epoch's.
                let mut next = spec.clone();
                if let Some(e) = &mut next.epoch
                    && epoch_live
                    && token.is_some()
                    && e.token == token
                    && let Err(at) = e.holds.binary_search_by_key(&step.op.hold, |&(h, _, _)| h)
                {
                    e.holds.insert(at, (step.op.hold, from, lease.1));
                }
                Ok(vec![(next, *timing)])
            } else {
                Err(Illegal {
                    reason: dead_hold("probed live", until),
                    forced: unchanged,
                })
            }
        }
        // Refusals and "not held" answers: legal (what a refusal means is not specified),
        // and the hold is not live after them, as the server says; but a witnessed "not
        // held" about a hold whose own lease certainly runs past its point is not, nor a
        // witnessed refusal where no lease can be live and no line can reserve the lock.
        (OpKind::Acquire | OpKind::Renew | OpKind::Release | OpKind::Probe, Some(_)) => {
            if let Some(ended) = certainly_free(state, step) {
                return Err(Illegal {
                    reason: format!(
                        "refused while the lock was free: every lease the spec saw had ended by {ended} ms, and nobody queues on it"
                    ),
                    forced: without_hold(),
                });
            }
            match certainly_live(spec, step) {
                Some(earliest) => Err(Illegal {
                    reason: format!(
                        "answered \"not held\" about a hold whose own lease ran until {earliest} ms at least"
                    ),
                    forced: without_hold(),
                }),
                None => Ok(vec![without_hold()]),
            }
        }
        (OpKind::Probe, None) => Ok(Vec::new()),
    }
}

/// A renewal answered "renewed" of a hold the spec never saw granted, where a fair
/// hand-off can have granted it to the live epoch's owner: the hold is live at the point,
/// so the epoch is too, for the lease the renewal asked (`None` where that is not so).
fn renewed_unseen((spec, timing): &State, step: &Step) -> Option<State> {
    let e = spec.epoch.as_ref()?;
    if e.owner != step.op.owner || step.hand_off_ttl.is_none() {
        return None;
    }
    let from = step.from.max(timing.now);
    let to = step.to.max(from);
    let mut next = spec.clone();
    if let Some(e) = &mut next.epoch {
        e.unseen = true;
    }
    let t = Timing {
        now: from,
        lease: (
            timing.lease.0.min(from),
            timing.lease.1.max(to + step.op.ttl_ms),
        ),
        since: timing.since,
    };
    Some((next, t))
}

/// How far past the clock reading at its start a script may read `TIME` on a server whose
/// clock moves while a script runs (Redis 7.0/7.1): twenty calls at the slowest pace the
/// simulator draws (200 µs a call, `explore/node_clocks.rs`) take 4 ms.
const SCRIPT_RUN_MS: u64 = 5;

/// The earliest end of the lease of the hold a witnessed "not held" answer (a renewal
/// answered not renewed, a release answered -1, a probe answered not held) is about, where
/// that lease certainly ran past the script's run: the spec saw the hold granted (or
/// renewed) in an epoch it knows whole, and no reset's fog hides what the server kept.
/// A correct server drops a hold only when its deadline passes, its release runs (which
/// the spec takes), or its state is lost (a reset), so such an answer is wrong.
fn certainly_live(spec: &Spec, step: &Step) -> Option<u64> {
    let not_held = match (step.op.kind, step.reply) {
        (OpKind::Renew, Some(LockReply::Renewed(false)))
        | (OpKind::Probe, Some(LockReply::Probed { held: false, .. })) => true,
        (OpKind::Release, Some(LockReply::Released(left))) => left < 0,
        _ => false,
    };
    if !not_held || !step.clock_read || step.fogged {
        return None;
    }
    let e = spec.epoch.as_ref().filter(|e| !e.unseen)?;
    e.holds
        .iter()
        .find(|&&(h, _, _)| h == step.op.hold)
        .map(|&(_, earliest, _)| earliest)
        .filter(|&earliest| earliest > step.to + TOLERANCE_MS + SCRIPT_RUN_MS)
}

/// The latest any lease of the lock could have ended, where `step` is a mutex acquire the
/// node was witnessed refusing (its point known in the node's own time) past that end: no
/// call on the key queues (so no fair line holds it back or reserves the lock for a
/// hand-off), and every hold the server can have kept is one the spec saw granted
/// (`Step::all_seen`: no reset before it, nor a hold admitted live unseen, nor a call of
/// unknown effect). The lock key lives no longer than the latest
/// lease any grant or renewal set (`acquire.lua` sets its expiry extend-only, `renew.lua`
/// too), with a margin for a script's run on a moving clock, so a correct server finds the
/// lock free and grants: such a refusal is wrong (a script that keeps the lock key, or a
/// hold, past what the requests asked for).
fn certainly_free((spec, timing): &State, step: &Step) -> Option<u64> {
    let witnessed_refusal = step.op.family == Family::Mutex
        && step.op.kind == OpKind::Acquire
        && step.reply == Some(LockReply::Denied)
        && step.clock_read
        && step.all_seen
        && step.hand_off_ttl.is_none();
    if !witnessed_refusal || spec.epoch.as_ref().is_some_and(|e| e.unseen) {
        return None;
    }
    let ended = timing.lease.1;
    (step.from.max(timing.now) > ended + TOLERANCE_MS + SCRIPT_RUN_MS).then_some(ended)
}

/// Whether `step` is answered with a refusal or a "not held" (or was not run): legal in
/// every state, its only effect to drop its own hold (see [`apply`]'s last arms).
pub fn is_refusal(step: &Step) -> bool {
    match (step.op.kind, step.reply) {
        (_, None)
        | (OpKind::Acquire, Some(LockReply::Granted { .. }))
        | (OpKind::Renew, Some(LockReply::Renewed(true)))
        | (OpKind::Probe, Some(LockReply::Probed { held: true, .. })) => false,
        (OpKind::Release, Some(LockReply::Released(left))) => left < 0,
        (_, Some(_)) => true,
    }
}

/// The latest `hold`'s own lease can end, if the epoch holds it.
fn until_of(epoch: &Epoch, hold: u64) -> Option<u64> {
    epoch
        .holds
        .iter()
        .find(|(h, _, _)| *h == hold)
        .map(|&(_, _, until)| until)
}

/// The state after a release at a point no earlier than `t.now` answered that `left` of
/// the owner's holds remain, live (the scripts drop those whose own deadline passed).
/// Holds whose lease had certainly ended by then are gone; if the live ones the spec knows
/// are fewer than `left`, the rest are holds it never saw granted, which only a fair
/// hand-off makes, and the epoch may end any time after the point; otherwise it ends with
/// the last of the known ones: no earlier than the earliest any `left` of them may end, no
/// later than the latest any may.
fn remaining(mut next: Spec, mut t: Timing, step: &Step, left: u64) -> Result<State, Illegal> {
    let Some(e) = next.epoch.as_mut().filter(|_| left > 0) else {
        next.epoch = None;
        return Ok((next, t));
    };
    e.holds
        .retain(|&(_, _, until)| t.now <= until + TOLERANCE_MS);
    let known = e.holds.len() as u64;
    if left > known {
        match step.hand_off_ttl {
            // The hand-off that granted them ran before this answer, and granted at most
            // the longest lease a queued acquire asks for.
            Some(ttl) => t.lease.1 = t.lease.1.max(step.to + ttl),
            None if !e.unseen => {
                return Err(Illegal {
                    reason: format!(
                        "released with {left} hold(s) said to remain, but at most {known} could be live"
                    ),
                    forced: (next, t),
                });
            }
            None => {}
        }
        e.unseen = true;
    }
    if e.unseen {
        // Some live holds are ones it never saw granted: live at the point, their ends
        // otherwise unknown.
        t.lease.0 = t.lease.0.min(t.now);
    } else {
        let end = e
            .holds
            .iter()
            .map(|&(_, _, until)| until)
            .max()
            .unwrap_or(t.now);
        // The last of the `left` live holds ends no earlier than the `left`-th earliest
        // of their earliest ends (whichever of the known ones are the live ones).
        let mut earliest: Vec<u64> = e.holds.iter().map(|&(_, from, _)| from).collect();
        earliest.sort_unstable();
        let floor = earliest
            .get(
                usize::try_from(left)
                    .unwrap_or(usize::MAX)
                    .saturating_sub(1),
            )
            .copied()
            .unwrap_or(t.now)
            .max(t.now);
        t.lease = (t.lease.0.min(floor.min(end)), end);
    }
    Ok((next, t))
}

/// Whether the epoch is `owner`'s and may hold holds the spec did not see (a release said
/// more remained than it knew of).
fn unseen_holds_of(spec: &Spec, owner: u64) -> bool {
    spec.epoch
        .as_ref()
        .is_some_and(|e| e.owner == owner && e.unseen)
}

/// Why a live answer about a hold was wrong: its own lease had ended by `until`, or (none)
/// the spec no longer held it.
fn dead_hold(what: &str, until: Option<u64>) -> String {
    match until {
        Some(until) => {
            format!("{what} a hold whose own lease had ended (at {until} ms at the latest)")
        }
        None => format!("{what} a hold that was no longer held"),
    }
}

/// A grant (`token` unknown for an ambiguous one): a new epoch if the lease may have
/// lapsed (or nobody held it), a join if the owner (or the hold itself) may still hold it.
fn grant(state: &State, step: &Step, token: Option<u64>) -> Result<Vec<State>, Illegal> {
    let (spec, timing) = state;
    let from = step.from.max(timing.now);
    let to = step.to.max(from);
    let ttl = step.op.ttl_ms;
    let new_epoch = |start: u64| {
        (
            Spec {
                epoch: Some(Epoch {
                    owner: step.op.owner,
                    token,
                    holds: vec![(step.op.hold, start + ttl, to.max(start) + ttl)],
                    unseen: step.fogged,
                }),
                max_token: spec.max_token.max(token.unwrap_or(0)),
            },
            Timing {
                now: start,
                lease: (start + ttl, to.max(start) + ttl),
                since: start,
            },
        )
    };
    let mut out = Vec::new();
    let mut reasons = Vec::new();
    let fresh_token_ok =
        token.is_none_or(|t| t > spec.max_token || step.token_behind_clock_ok(spec.max_token));
    let lapse_from = match &spec.epoch {
        None => Some(from),
        Some(_) if to + TOLERANCE_MS > timing.lease.0 => {
            Some(from.max((timing.lease.0 + 1).saturating_sub(TOLERANCE_MS)))
        }
        Some(e) => {
            reasons.push(format!(
                "granted while the lease of another epoch (token {}) ran until {} ms at least",
                e.token
                    .map_or_else(|| "unknown".to_owned(), |t| t.to_string()),
                timing.lease.0
            ));
            None
        }
    };
    if let Some(start) = lapse_from {
        if fresh_token_ok {
            out.push(new_epoch(start));
        } else {
            reasons.push(format!(
                "a new epoch's token {} does not exceed the highest granted, {}",
                token.unwrap_or(0),
                spec.max_token
            ));
        }
    }
    if let Some(e) = &spec.epoch
        && (e.owner == step.op.owner || until_of(e, step.op.hold).is_some())
        && from <= timing.lease.1 + TOLERANCE_MS
    {
        match (token, e.token) {
            (Some(got), Some(epoch)) if got != epoch => reasons.push(format!(
                "a re-entry or retried grant got token {got}, not its epoch's {epoch}"
            )),
            _ => {
                // The hold's own lease, from a join at a point the epoch is live.
                let end = to.min(timing.lease.1 + TOLERANCE_MS) + ttl;
                let mut next = spec.clone();
                if let Some(joined) = &mut next.epoch {
                    joined.token = joined.token.or(token);
                    match joined
                        .holds
                        .binary_search_by_key(&step.op.hold, |&(h, _, _)| h)
                    {
                        Ok(at) => {
                            let held = &mut joined.holds[at];
                            held.1 = held.1.max(from + ttl);
                            held.2 = held.2.max(end);
                        }
                        Err(at) => joined.holds.insert(at, (step.op.hold, from + ttl, end)),
                    }
                }
                next.max_token = next.max_token.max(token.unwrap_or(0));
                out.push((
                    next,
                    Timing {
                        now: from,
                        lease: (timing.lease.0.max(from + ttl), timing.lease.1.max(end)),
                        since: timing.since,
                    },
                ));
            }
        }
    }
    if out.is_empty() && token.is_some() {
        return Err(Illegal {
            reason: reasons.join("; "),
            forced: new_epoch(from),
        });
    }
    Ok(out)
}
