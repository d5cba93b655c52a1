//! Stranded state, the dual of `LeaseGone`: a node keeps a hold, or a lock key, longer than
//! the requests the clients sent permit.
//!
//! Why it exists: a script that writes a deadline later than its request asked for, hands
//! the lock off for longer than the grantee's line entry allows, or answers a release and
//! leaves the hold in place, strands the lock (or a permit) with nobody believing in it.
//! The client's beliefs stay right, so no exclusion rule sees it; liveness sees it only
//! when a waiter happens to time out in the gap; and the script's own reply and hand-off
//! message may say the right thing. So truth here is the keyspace the node kept right after
//! each script ran ([`HistKind::Kept`]), judged against what the requests asked for:
//! - a grant or renewal of hold `h` that the node ran at `now` permits `h` until
//!   `now + ttl`, the lease the request asked for (`ARGV` as each script's header says);
//! - a hold that appears in a key without a grant of its own is a hand-off to a waiter
//!   whose queued attempt ran on this node at `a`: it is permitted until the entry's
//!   deadline `a + entry timeout` (the timeout that attempt asked for), and for a lock or
//!   a read-write hold no longer than the lease that attempt asked for,
//!   `min(now + ttl, a + entry timeout)`
//!   (`release.lua`'s `lease = min(ttl, deadline - now)`); a semaphore's handed permit is
//!   reserved until the entry's deadline (`semaphore_release.lua`), and its claim runs to
//!   the later of that deadline and `now + ttl` (`ZADD GT`, `semaphore_acquire.lua`);
//! - a release of `h` permits nothing: once it ran, `h` is gone (a permit is free once its
//!   release answered), whatever it replied;
//! - a key lives no longer than the latest deadline permitted to any hold seen in it (a
//!   key may outlive a released hold's lease: the scripts keep a key's expiry when one
//!   of its holds leaves, and its holds' deadlines, not its life, gate a grant).
//!
//! Invariant: every bound is on the node's own wall clock, read where the script ran, so no
//! clock fault moves it (a deadline the script wrote and the bound are on the same clock).
//! A hold the node holds with no request on this node to bound it (replicated from a master
//! that failed over, or reloaded from disk) is taken as the node shows it the first time it
//! is seen and bounded from then on by the requests that follow; where a node's keyspace
//! may go back to an earlier state (its restart after a crash, a failover), what bounded
//! its holds is forgotten, and a hold first called, or a key first kept, before that is
//! taken as it shows the first time it is seen there again (a hold or key first used after
//! it is judged from its first request). No fault excuses a finding:
//! no fault makes a correct script write a longer deadline than it was asked for.

use std::collections::{BTreeMap, BTreeSet};

use crate::model::NodeId;
use crate::world::calls::{self, Family, LockOp, LockReply, OpKind};
use crate::world::faults::Fault;
use crate::world::history::{FaultMark, HistEvent, HistKind};
use crate::world::kept::KeptKey;

use super::entry_lease;
use super::problems::{Judge, ProblemKind, Reach};
use super::timeline::Who;

/// Slack on the node's clock, ms: the hand-off lease rule's (whole-ms clocks and integer
/// deadlines).
const TOLERANCE_MS: i64 = entry_lease::TOLERANCE_MS as i64;

/// A queued attempt of a hold, as the node that ran it last saw it: when (its wall-clock
/// ms) and the lease it asked for.
#[derive(Clone, Copy)]
struct Attempt {
    /// The order of the call's run among those judged.
    seq: u64,
    ran_ms: i64,
    ttl_ms: i64,
    entry_ms: i64,
}

/// The rule's state: each hold's permitted deadline per node (with the order of the run
/// that last set it), and each waiter's last queued attempt per node.
struct Permits {
    /// The order of the run being judged.
    seq: u64,
    until: BTreeMap<(NodeId, u64), (i64, u64)>,
    attempts: BTreeMap<(NodeId, u64), (Family, Attempt)>,
    /// Per node and key, the latest deadline permitted to any hold seen in it.
    keys: BTreeMap<(NodeId, String), i64>,
    /// When (virtual ns) each node's keyspace, or every node's, last may have gone back to
    /// an earlier state (see [`resets`]).
    reset_at: BTreeMap<NodeId, u64>,
    reset_all: u64,
    /// When each hold's first call was sent, and each key was first kept, anywhere.
    first_call: BTreeMap<u64, u64>,
    first_kept: BTreeMap<String, u64>,
    reported: BTreeSet<(NodeId, u64, &'static str)>,
}

impl Permits {
    /// What the call `op` (answered `reply`, run at `now` on `node`) permits from now on;
    /// whether its own hold is instead to be taken as the node shows it after the call.
    fn apply(&mut self, node: NodeId, now: i64, op: &LockOp, reply: Option<LockReply>) -> bool {
        let ttl = i64::try_from(op.ttl_ms).unwrap_or(i64::MAX);
        let key = (node, op.hold);
        // A hold called before the node's last reset and not seen on it since may carry a
        // deadline from that earlier state (a renewal keeps a later one): it is taken as
        // the node shows it, after this call, once.
        let as_shown = matches!(op.kind, OpKind::Acquire | OpKind::Renew)
            && !self.until.contains_key(&key)
            && self.predates(node, self.first_call.get(&op.hold).copied());
        match (op.kind, reply) {
            _ if as_shown => {}
            (OpKind::Acquire, Some(LockReply::Granted { .. }))
            | (OpKind::Renew, Some(LockReply::Renewed(true))) => {
                // A semaphore's claim keeps a handed permit's entry deadline when that is
                // later (`ZADD GT`, semaphore_acquire.lua): the entry its last queued
                // attempt asked for.
                let entry = match (op.family, op.kind, self.attempts.get(&key)) {
                    (Family::Permit, OpKind::Acquire, Some((_, a))) => {
                        a.ran_ms.saturating_add(a.entry_ms)
                    }
                    _ => i64::MIN,
                };
                let until = now.saturating_add(ttl).max(entry);
                let permitted = self.until.entry(key).or_insert((until, self.seq));
                *permitted = (permitted.0.max(until), self.seq);
            }
            // Nothing after its release: a hold that shows up again with no request of its
            // own since is stranded.
            (OpKind::Release, Some(_)) => {
                self.until.insert(key, (now, self.seq));
            }
            _ => {}
        }
        if op.kind == OpKind::Acquire && op.entry_ms > 0 {
            let attempt = Attempt {
                seq: self.seq,
                ran_ms: now,
                ttl_ms: ttl,
                entry_ms: i64::try_from(op.entry_ms).unwrap_or(i64::MAX),
            };
            self.attempts.insert(key, (op.family, attempt));
        }
        as_shown
    }

    /// Forgets what bounds the holds and keys of `node` (every node's, for `None`), and its
    /// waiters' attempts: its keyspace may show an earlier state, or another node's, which
    /// is taken as it shows.
    fn forget(&mut self, node: Option<NodeId>, at: u64) {
        match node {
            Some(node) => {
                self.reset_at.insert(node, at.max(1));
            }
            None => self.reset_all = at.max(1),
        }
        let other = |n: &NodeId| node.is_some_and(|node| node != *n);
        self.until.retain(|(n, _), _| other(n));
        self.keys.retain(|(n, _), _| other(n));
        self.attempts.retain(|(n, _), _| other(n));
    }

    /// Whether what `node` shows may come from before its last reset, for something first
    /// used anywhere at `since` (ns): a hold first called, or a key first kept, before it.
    fn predates(&self, node: NodeId, since: Option<u64>) -> bool {
        let reset = self
            .reset_at
            .get(&node)
            .copied()
            .unwrap_or(0)
            .max(self.reset_all);
        reset > 0 && since.is_some_and(|t| t < reset)
    }

    /// The deadline permitted to `hold` on `node` at `now`: its own grants', or, when a
    /// queued attempt of it ran since, a hand-off's from that attempt (a hold id is reused
    /// by its acquire's retries, so a lapsed grant may be followed by a hand-off);
    /// `None` when no request on this node bounds it.
    fn permitted(&mut self, node: NodeId, hold: u64, now: i64) -> Option<i64> {
        let own = self.until.get(&(node, hold)).copied();
        let Some(&(family, a)) = self
            .attempts
            .get(&(node, hold))
            .filter(|(_, a)| own.is_none_or(|(_, set)| a.seq > set))
        else {
            return own.map(|(until, _)| until);
        };
        let entry = a.ran_ms.saturating_add(a.entry_ms);
        let handed = match family {
            Family::Permit => entry,
            Family::Mutex | Family::Read | Family::Write => entry.min(now.saturating_add(a.ttl_ms)),
        };
        let until = own.map_or(handed, |(until, _)| until.max(handed));
        self.until.insert((node, hold), (until, self.seq));
        Some(until)
    }
}

/// Where a node's keyspace may go back to an earlier state than the requests since left
/// it, as `(virtual ns, node)` in order (`None` for every node): a crashed node's restart
/// from its persistence, and a failover, before and after (the promoted replica, and the
/// old master rejoining from its disk or the new master's copy).
fn resets(faults: &[FaultMark]) -> Vec<(u64, Option<NodeId>)> {
    let mut out: Vec<(u64, Option<NodeId>)> = faults
        .iter()
        .flat_map(|mark| match mark.fault {
            Fault::NodeCrash {
                node,
                restart_after_ms: Some(_),
            } => vec![(mark.until, Some(node))],
            Fault::Failover { .. } => vec![(mark.from, None), (mark.until, None)],
            _ => Vec::new(),
        })
        .filter(|&(at, _)| at != u64::MAX)
        .collect();
    out.sort_unstable();
    out
}

/// Holds and lock keys the nodes kept past what the requests permit (see the module doc).
pub(super) fn stranded(history: &[HistEvent], judge: &mut Judge<'_>) {
    let mut calls: BTreeMap<u64, (Who, LockOp, u64)> = BTreeMap::new();
    let mut replies: BTreeMap<u64, Option<LockReply>> = BTreeMap::new();
    let mut p = Permits {
        seq: 0,
        until: BTreeMap::new(),
        attempts: BTreeMap::new(),
        keys: BTreeMap::new(),
        reported: BTreeSet::new(),
        reset_at: BTreeMap::new(),
        reset_all: 0,
        first_call: BTreeMap::new(),
        first_kept: BTreeMap::new(),
    };
    let mut resets = resets(judge.faults()).into_iter().peekable();
    for ev in history {
        while let Some((at, node)) = resets.next_if(|&(at, _)| at <= ev.at) {
            p.forget(node, at);
        }
        match &ev.kind {
            HistKind::Call { id, op, .. } => {
                calls.insert(*id, ((ev.proc, ev.incarnation), *op, ev.at));
                p.first_call.entry(op.hold).or_insert(ev.at);
            }
            HistKind::Ran { id, reply, .. } => {
                replies.insert(*id, *reply);
            }
            HistKind::Kept {
                id,
                node,
                now_ms,
                keys,
            } => {
                let Some(&(who, op, sent)) = calls.get(id) else {
                    continue;
                };
                let reply = replies.get(id).copied().flatten();
                // A script the node refused to run (`NOSCRIPT`) changed nothing: its retry
                // by source is a call of its own.
                if reply == Some(LockReply::NotRun) {
                    continue;
                }
                p.seq += 1;
                let as_shown = p.apply(*node, *now_ms, &op, reply);
                let call = Call {
                    who,
                    op,
                    sent,
                    at: ev.at,
                    node: *node,
                    now: *now_ms,
                    answered: reply.is_some(),
                    as_shown,
                };
                for key in keys {
                    judge_key(&ev.lock, key, &call, &mut p, judge);
                }
            }
            _ => {}
        }
    }
}

/// The call whose run a [`HistKind::Kept`] shows.
struct Call {
    who: Who,
    op: LockOp,
    sent: u64,
    at: u64,
    node: NodeId,
    now: i64,
    /// Whether the node's reply reads as the script documents (an error reply, such as
    /// `OOM`, may come from a script that stopped before its writes).
    answered: bool,
    /// Whether its own hold is taken as the node shows it (see [`Permits::apply`]).
    as_shown: bool,
}

/// Judges one kept key after `call` ran.
fn judge_key(lock: &str, key: &KeptKey, call: &Call, p: &mut Permits, judge: &mut Judge<'_>) {
    let (node, now) = (call.node, call.now);
    let since = *p.first_kept.entry(key.key.clone()).or_insert(call.at);
    let mut longest = match p.keys.get(&(node, key.key.clone())) {
        Some(&at) => at.max(now),
        // Kept before the node's last reset: its expiry may come from that earlier state.
        None if p.predates(node, Some(since)) => key.expires_ms.unwrap_or(i64::MAX),
        None => now,
    };
    for &(hold, deadline) in &key.holds {
        if deadline <= now {
            continue;
        }
        if call.op.kind == OpKind::Release && call.answered && hold == call.op.hold {
            report(
                (lock, call, hold, "kept after its release"),
                format!(
                    "n{node} still holds {hold:016x} in {} until {} ms from now after its release ran (a released hold is gone)",
                    key.key,
                    deadline - now
                ),
                p,
                judge,
            );
            continue;
        }
        let shown = call.as_shown && hold == call.op.hold;
        let Some(until) = p.permitted(node, hold, now).filter(|_| !shown) else {
            // Nothing on this node bounds it: as it shows now, bounded from here on.
            p.until.insert((node, hold), (deadline, p.seq));
            longest = longest.max(deadline);
            continue;
        };
        longest = longest.max(until);
        if deadline > until + TOLERANCE_MS {
            report(
                (lock, call, hold, "past its permitted deadline"),
                format!(
                    "n{node} keeps {hold:016x} in {} until {} ms from now, {} ms past the {} ms its requests permit",
                    key.key,
                    deadline - now,
                    deadline - until,
                    until - now
                ),
                p,
                judge,
            );
        }
    }
    p.keys.insert((node, key.key.clone()), longest);
    let expires = key.expires_ms.unwrap_or(i64::MAX);
    if expires > longest + TOLERANCE_MS {
        let life = key.expires_ms.map_or("with no expiry".to_owned(), |at| {
            format!("for {} ms more", at - now)
        });
        report(
            (
                lock,
                call,
                calls::id_of(key.key.as_bytes()),
                "key outlives its holds",
            ),
            format!(
                "n{node} keeps {} {life}, {} past the latest deadline any request permits a hold seen in it ({} ms from now)",
                key.key,
                key.expires_ms
                    .map_or("for ever".to_owned(), |at| format!("{} ms", at - longest)),
                longest - now
            ),
            p,
            judge,
        );
    }
}

/// Records one finding per node, hold and kind of excess.
fn report(
    (lock, call, hold, what): (&str, &Call, u64, &'static str),
    detail: String,
    p: &mut Permits,
    judge: &mut Judge<'_>,
) {
    if !p.reported.insert((call.node, hold, what)) {
        return;
    }
    let by = format!(
        "{detail}; seen after c{}.{}'s {:?} {:?} ran",
        call.who.0, call.who.1, call.op.family, call.op.kind
    );
    judge.add_explained(
        ProblemKind::Stranded,
        lock,
        call.at,
        (&[(call.who, call.sent, call.at)], Reach::Windows),
        (by, None),
    );
}

#[cfg(test)]
mod tests;
