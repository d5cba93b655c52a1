//! The sequential specification of the read-write lock in server time: what one
//! read-write lock's script calls (`rw_read_*`, `rw_write_*`, and the writer's renewals and
//! probes, which use the mutex's `renew.lua` and `probe.lua` on the write hash) may answer,
//! taken one at a time at their linearization points.
//!
//! The write side is the mutex's spec ([`super::lease_spec`]) as it stands: one owner's
//! epoch of write holds, each a lease of its own, re-entry by the owner joining the epoch
//! with its token, a new epoch's token above every one before (`rw_write_acquire.lua` lines
//! 44-54 and 73-107 mirror `acquire.lua`; `rw_write_release.lua` mirrors `release.lua`).
//! The read side is a set of read holds, each a lease of its own. The rules the read side
//! adds, each with the script line it mirrors:
//!
//! - A writer starts a new epoch only while no read hold is live (`rw_write_acquire.lua`
//!   line 139, after the purge of expired readers, lines 45-53); re-entry by the epoch's
//!   owner joins whatever readers there are (line 117).
//! - A reader is granted while another owner's write epoch is live only if its hold is
//!   already live (a retry, `rw_read_acquire.lua` lines 82-90); a fresh read hold is
//!   refused while the write hash exists for another owner (line 98). The write epoch's
//!   owner is admitted (downgrade, line 101).
//! - A read grant's token is the last write epoch's (the fence key, line 55) or `0` once
//!   that key has expired: never below the highest write token granted before, but for
//!   the latest write epoch's own where that epoch's token was admitted below the highest
//!   (behind its node's clock, see `Step::token_behind_clock_ok`).
//! - A read grant's deadline is its point plus its TTL (line 86 for a retry, never
//!   earlier; line 126 fresh); a read renewal answered 1 finds the hold live and sets the
//!   deadline to the point plus its TTL (`rw_read_renew.lua` lines 16-20); a read release
//!   answered >= 0 and a read probe answered live find the hold live
//!   (`rw_read_release.lua` line 65, `rw_read_probe.lua` line 13).
//! - Refusals and "not held" answers are always legal, and the hold is not live after
//!   them (as for the mutex; the upgrade refusal `{2, 0}` is one).
//!
//! Where the answer depends on what the spec cannot see, it admits more. A writer's intent
//! (`rw_write_acquire.lua` line 162) blocks new readers of other owners
//! (`rw_read_acquire.lua` lines 104-107) for an intent timeout the history does not record,
//! so the spec never refuses a reader for an intent (writer preference is judged by
//! [`super::writers`]). Within the fog of a reset (`Step::fogged`) the server may keep an
//! owner's write epoch the spec never saw (a promoted replica's copy): a write grant whose
//! token is below its node's clock reading is a join of it, which live readers do not
//! block ([`joins_unseen`]). A read hold counts against a writer only while it is certainly live
//! (its earliest end ahead of the writer's point), so read holds granted by ambiguous
//! calls or merged by widening never make a writer illegal. A "live" answer about a read
//! hold the spec does not hold is legal unless the hold was certainly granted before the
//! call (`Step::strict`): an ambiguous call may have granted it, and the search tries only
//! the latest few ambiguous calls, which under a partition may all be others'. A reader's re-entry
//! (its owner already reading, admitted past intents, line 101) is admitted as any reader
//! is. The count of the owner's read holds a read release answers counts holds not yet
//! purged (`rw_read_release.lua` line 67), which the spec does not
//! track: any count is admitted. A fair line's release hands a read or write hold out as
//! the mutex's does (`rw_*_release.lua`): where the node witnessed it (`HistKind::HandedOff`,
//! the simulator's), the hand-off is a step of the spec at the release's point, granting
//! the mode the grantee's queued attempt asked for (`linear/read.rs`). For hand-offs no
//! node witnessed (a real server's history), the write side still admits, in every
//! history, holds no call of their own was granted where some acquire on the lock waits in
//! a line (`Step::hand_off_ttl`; a waiting writer's intent counts too, which only admits
//! more), and a read hold handed out unwitnessed is one the spec never saw granted: every
//! answer about it is judged leniently (`Step::strict`).
//!
//! Invariant: the intervals only ever over-approximate, so a history a correct server
//! produced always has a legal linearization here (no false alarm).

use crate::world::calls::{Family, LockReply, OpKind};

use super::lease_spec::{self, Illegal, Spec, Step, TOLERANCE_MS, Timing, token_at};
use super::seq_spec::{self, Leases, SeqSpec};

/// The latest end of a read hold whose deadline the spec cannot bound (one a probe saw
/// live): far enough never to pass, small enough never to overflow.
const UNBOUNDED_MS: u64 = u64::MAX / 4;

/// The read-write lock's discrete state.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct RwSpec {
    /// The write side: the mutex's state.
    writer: Spec,
    /// Read holds the spec saw granted and not released, sorted by hold, each with the
    /// earliest and the latest its lease can end (ms): certainly live before the first,
    /// possibly until the second.
    readers: Leases,
    /// The token of the latest write epoch the spec saw granted: what the fence key names
    /// and a reader is told (line 55), even where it is below the highest, because that
    /// epoch's grant was itself admitted behind its node's clock (a promoted replica, a
    /// zombie master's token from a clock ahead: the token rule's to judge).
    fence: u64,
}

impl RwSpec {
    fn find(&self, hold: u64) -> Option<(u64, u64)> {
        seq_spec::lease_of(&self.readers, hold)
    }

    /// `hold`'s read lease set to end in `[earliest, latest]`.
    fn with(mut self, hold: u64, earliest: u64, latest: u64) -> Self {
        seq_spec::set_lease(&mut self.readers, hold, earliest, latest);
        self
    }

    /// `hold`'s read lease gone.
    fn without(mut self, hold: u64) -> Self {
        self.readers.retain(|&(h, _, _)| h != hold);
        self
    }

    /// The latest earliest end of the read holds certainly live at `to`, if any is.
    fn readers_until(&self, to: u64) -> Option<u64> {
        self.readers
            .iter()
            .map(|&(_, earliest, _)| earliest)
            .filter(|&earliest| earliest > to + TOLERANCE_MS)
            .max()
    }

    /// A write-side step (the writer's acquire and release, its renewals and probes).
    // The error is the one `SeqSpec::apply` returns, which this serves; boxing it here
    // alone would buy nothing.
    #[allow(clippy::result_large_err)]
    fn write(state: &(Self, Timing), step: &Step) -> Result<Vec<(Self, Timing)>, Illegal<Self>> {
        let (spec, timing) = state;
        let readers = &spec.readers;
        // A grant answered with a token makes it the fence key's (a join keeps the
        // epoch's, the same token).
        let fence = match (step.op.kind, step.reply) {
            (OpKind::Acquire, Some(LockReply::Granted { token })) => token,
            _ => spec.fence,
        };
        let with_readers = |(writer, t): (Spec, Timing)| {
            (
                Self {
                    writer,
                    readers: readers.clone(),
                    fence,
                },
                t,
            )
        };
        let states =
            lease_spec::apply(&(spec.writer.clone(), *timing), step).map_err(|e| Illegal {
                reason: e.reason,
                forced: with_readers(e.forced),
            })?;
        let to = step.to.max(step.from).max(timing.now);
        // Only a grant (answered, or a lost reply's possible effect) is blocked by readers.
        let grant = matches!(step.reply, Some(LockReply::Granted { .. }) | None);
        let blocked = (step.op.kind == OpKind::Acquire && grant)
            .then(|| spec.readers_until(to))
            .flatten();
        let Some(until) = blocked else {
            return Ok(states.into_iter().map(with_readers).collect());
        };
        // Live readers leave only a join of a live epoch (it keeps the epoch's start;
        // a new epoch starts at its grant, so one granted at the very start of the last
        // is taken for a join, which only admits more), or of one the spec never saw.
        let unseen_join = joins_unseen(step);
        let joins: Vec<_> = states
            .iter()
            .filter(|(w, t)| {
                w.epoch.is_some()
                    && (unseen_join || spec.writer.epoch.is_some() && t.since == timing.since)
            })
            .cloned()
            .map(with_readers)
            .collect();
        match (joins.is_empty(), step.reply, states.into_iter().next()) {
            (true, Some(LockReply::Granted { .. }), Some(forced)) => Err(Illegal {
                reason: format!(
                    "a writer was granted while a read lease ran until {until} ms at least"
                ),
                forced: with_readers(forced),
            }),
            _ => Ok(joins),
        }
    }
}

/// Whether a write grant may join an epoch the spec never saw: within the fog of a reset
/// (`Step::fogged`: a failover's promoted replica, a restart, may hold the owner's write
/// epoch from before it), a grant whose token is below the clock reading its node ran it
/// at. A new epoch's token is never below that reading (`issue_token` in
/// `rw_write_acquire.lua`: `max(last + 1, now µs)`), so such a token is the epoch's own,
/// kept on the server: the owner's re-entry, which its live readers do not block (line
/// 117).
fn joins_unseen(step: &Step) -> bool {
    let Some(LockReply::Granted { token }) = step.reply else {
        return false;
    };
    step.fogged && step.clock_read && token < token_at(step.from.saturating_sub(TOLERANCE_MS))
}

impl SeqSpec for RwSpec {
    type Group = (<Spec as SeqSpec>::Group, u64);

    fn apply(state: &(Self, Timing), step: &Step) -> Result<Vec<(Self, Timing)>, Illegal<Self>> {
        if step.op.family != Family::Read {
            return Self::write(state, step);
        }
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
        let may_live = own.is_some_and(|(_, latest)| from <= latest + TOLERANCE_MS);
        let illegal = |reason: String, forced: Self| Illegal {
            reason,
            forced: (forced, t),
        };
        let dead = |what: &str| format!("{what} a read hold that was no longer live");
        match (step.op.kind, step.reply) {
            (_, Some(LockReply::NotRun)) => Ok(vec![(spec.clone(), *timing)]),
            (OpKind::Acquire, Some(LockReply::Granted { .. }) | None) => {
                let token = match step.reply {
                    Some(LockReply::Granted { token }) => Some(token),
                    _ => None,
                };
                let granted = match own {
                    // A retry of a live hold: its deadline moves to its point plus TTL,
                    // never earlier (line 85).
                    Some((earliest, latest)) if may_live => spec.clone().with(
                        hold,
                        earliest.max(from + ttl),
                        latest.max(to.min(latest + TOLERANCE_MS) + ttl),
                    ),
                    _ => spec.clone().with(hold, from + ttl, to + ttl),
                };
                // Another owner's write epoch certainly live throughout the window.
                let writer = spec
                    .writer
                    .epoch
                    .as_ref()
                    .filter(|e| e.owner != step.op.owner && timing.lease.0 > to + TOLERANCE_MS);
                let reason = match (writer, token) {
                    (_, Some(token))
                        if token != 0
                            && token < spec.writer.max_token
                            && token != spec.fence
                            && !step.token_behind_clock_ok(spec.writer.max_token) =>
                    {
                        Some(format!(
                            "a reader got token {token}, below the highest write token {}",
                            spec.writer.max_token
                        ))
                    }
                    (Some(e), _) if !may_live => Some(format!(
                        "a reader was granted while a writer's lease (token {}) ran until {} ms at least",
                        e.token
                            .map_or_else(|| "unknown".to_owned(), |t| t.to_string()),
                        timing.lease.0
                    )),
                    _ => None,
                };
                match (reason, token) {
                    (None, _) => Ok(vec![(granted, t)]),
                    (Some(reason), Some(_)) => Err(illegal(reason, granted)),
                    (Some(_), None) => Ok(Vec::new()),
                }
            }
            (OpKind::Renew, Some(LockReply::Renewed(true)) | None) => match own {
                Some((_, latest)) if may_live => {
                    let end = to.min(latest + TOLERANCE_MS) + ttl;
                    Ok(vec![(spec.clone().with(hold, from + ttl, end), t)])
                }
                _ if step.reply.is_none() => Ok(Vec::new()),
                // A read hold an ambiguous call granted: live at the point, which then
                // set its deadline to the point plus TTL.
                _ if !step.strict => Ok(vec![(spec.clone().with(hold, from + ttl, to + ttl), t)]),
                _ => Err(illegal(dead("renewed"), spec.clone())),
            },
            (OpKind::Release, Some(LockReply::Released(left))) if left >= 0 => {
                let next = spec.clone().without(hold);
                if may_live || !step.strict {
                    Ok(vec![(next, t)])
                } else {
                    Err(illegal(dead("released"), next))
                }
            }
            (OpKind::Probe, Some(LockReply::Probed { held: true, token })) => {
                match token.filter(|&token| token != 0 && token < spec.writer.max_token) {
                    Some(token) => Err(illegal(
                        format!(
                            "a read probe saw token {token}, below the highest write token {}",
                            spec.writer.max_token
                        ),
                        spec.clone(),
                    )),
                    None if may_live => Ok(vec![(spec.clone(), t)]),
                    // Live at the point, which is no earlier than `from`.
                    None if !step.strict => {
                        Ok(vec![(spec.clone().with(hold, from, UNBOUNDED_MS), t)])
                    }
                    None => Err(illegal(dead("probed live"), spec.clone())),
                }
            }
            (OpKind::Probe, None) => Ok(Vec::new()),
            // Refusals, "not held" answers and unanswered releases: the hold is gone, at
            // any point (the timing stays, so a refusal that changes nothing may stay
            // pending, as the search's `idle` allows).
            (OpKind::Acquire | OpKind::Renew | OpKind::Release | OpKind::Probe, _) => {
                Ok(vec![(spec.clone().without(hold), *timing)])
            }
        }
    }

    fn holds(&self) -> Vec<u64> {
        let mut holds = self.writer.holds();
        holds.extend(self.readers.iter().map(|&(h, _, _)| h));
        holds
    }

    fn unseen_owners(&self) -> Vec<u64> {
        self.writer.unseen_owners()
    }

    /// The write side's group and the fence key's token.
    fn group(&self) -> Self::Group {
        (self.writer.group(), self.fence)
    }

    /// The write sides absorbed; the read holds' union, each over the hull of its
    /// intervals, one only some held possibly live, never certainly (it blocks no writer).
    fn absorb(&mut self, other: Self) {
        for held in &mut self.readers {
            if other.find(held.0).is_none() {
                held.1 = 0;
            }
        }
        self.writer.absorb(other.writer);
        for (hold, earliest, latest) in other.readers {
            match self.readers.binary_search_by_key(&hold, |&(h, _, _)| h) {
                Ok(at) => {
                    let held = &mut self.readers[at];
                    held.1 = held.1.min(earliest);
                    held.2 = held.2.max(latest);
                }
                Err(at) => self.readers.insert(at, (hold, 0, latest)),
            }
        }
    }
}

#[cfg(test)]
mod tests;
