//! The lock-script calls of a history, as the linearizability search takes them: each
//! call with its invocation, its answer and the simulator's witness of where and when a
//! node ran it, grouped per key (spec, target, key name) as the events that order them.

use std::collections::BTreeMap;

use crate::world::calls::{self, Family, LockOp, LockReply, OpKind};
use crate::world::history::{Access, HistEvent, HistKind};
use crate::world::net::Target;

use super::order::{Judge, Seen, judge_of};
use crate::checker::timeline::Who;

/// A key of the search: its spec, target and key name.
pub(super) type Key<'h> = (Judge, Target, &'h str);

/// One call of the history.
#[derive(Debug, Clone)]
pub(super) struct Call {
    pub(super) who: Who,
    pub(super) op: LockOp,
    pub(super) inv: u64,
    pub(super) reply: Option<(u64, LockReply)>,
    /// Whether a node ran it, where the history witnesses that ([`HistKind::Ran`]).
    pub(super) ran: bool,
    /// When a node ran it with a reply that reads as its script documents, ns: its exact
    /// point.
    pub(super) ran_at: Option<u64>,
    /// What that node's clock read then, ms: the point in the server time its script saw.
    pub(super) clock_ms: Option<u64>,
}

/// What a history holds for the search.
pub(super) struct Read<'h> {
    /// Every lock-script call, by position.
    pub(super) calls: Vec<Call>,
    /// Per key, its calls' events in history order.
    pub(super) keys: BTreeMap<Key<'h>, Vec<Seen>>,
    /// Per semaphore name: the most permits a guard of it was granted under or a resize
    /// asked for (the largest size it can have stored).
    pub(super) permits: BTreeMap<&'h str, u64>,
}

/// The calls of `history`, per key.
pub(super) fn read(history: &[HistEvent]) -> Read<'_> {
    let mut calls: Vec<Call> = Vec::new();
    let mut by_id: BTreeMap<u64, usize> = BTreeMap::new();
    let mut keys: BTreeMap<Key<'_>, Vec<Seen>> = BTreeMap::new();
    let mut key_of: Vec<Key<'_>> = Vec::new();
    // Per semaphore name: the most permits a guard of it was granted under or a resize
    // asked for (the largest size it can have stored).
    let mut permits: BTreeMap<&str, u64> = BTreeMap::new();
    // Each hold's latest acquire call, by position: its owner (a renewal names only its
    // hold), and what a hand-off to it grants.
    let mut last_acquire: BTreeMap<u64, usize> = BTreeMap::new();
    for ev in history {
        match &ev.kind {
            HistKind::Call { id, target, op } => {
                let mut op = *op;
                if op.kind == OpKind::Acquire {
                    last_acquire.insert(op.hold, calls.len());
                } else if op.kind == OpKind::Renew
                    && let Some(asked) = last_acquire.get(&op.hold).and_then(|&i| calls.get(i))
                {
                    op.owner = asked.op.owner;
                }
                let op = &op;
                let (judge, key) = judge_of(op, ev.lock.as_str());
                by_id.insert(*id, calls.len());
                keys.entry((judge, *target, key))
                    .or_default()
                    .push(Seen::Invoked(calls.len(), ev.at));
                key_of.push((judge, *target, key));
                calls.push(Call {
                    who: (ev.proc, ev.incarnation),
                    op: *op,
                    inv: ev.at,
                    reply: None,
                    ran: false,
                    ran_at: None,
                    clock_ms: None,
                });
            }
            HistKind::Ran {
                id,
                reply,
                clock_ms,
                ..
            } => {
                if let Some(&index) = by_id.get(id)
                    && let Some(call) = calls.get_mut(index)
                {
                    call.ran = true;
                    if let Some(reply) = reply {
                        call.ran_at = Some(ev.at);
                        call.clock_ms = Some(*clock_ms);
                        call.reply = Some((ev.at, *reply));
                        keys.entry(key_of[index])
                            .or_default()
                            .push(Seen::Ran(index, ev.at));
                    }
                }
            }
            HistKind::Return { id, reply } => {
                if let Some(&index) = by_id.get(id)
                    && let Some(call) = calls.get_mut(index)
                {
                    // A witnessed call's answer is where its node ran it.
                    let at = call.ran_at.unwrap_or(ev.at);
                    call.reply = Some((at, *reply));
                    keys.entry(key_of[index])
                        .or_default()
                        .push(Seen::Answered(index, ev.at));
                }
            }
            // A fair hand-off grants the line head a hold where and when the release that
            // names it runs, with no call of the grantee's own: a step of the spec at that
            // point, witnessed by the node (the message it published names the lease and
            // the token), on the key and target of the grantee's own attempts, as the
            // family they asked for (the mutex, or a read-write lock's read or write; a
            // semaphore's hand-off message names no lease and is not read).
            HistKind::HandedOff {
                hold,
                lease_ms,
                token,
                clock_ms,
                ..
            } => {
                if let Some(&index) = last_acquire.get(hold)
                    && let Some(asked) = calls.get(index).filter(|c| c.op.family != Family::Permit)
                {
                    let op = LockOp {
                        ttl_ms: *lease_ms,
                        queued: false,
                        entry_ms: 0,
                        ..asked.op
                    };
                    let key = key_of[index];
                    let step = calls.len();
                    calls.push(Call {
                        who: asked.who,
                        op,
                        inv: ev.at,
                        reply: Some((ev.at, LockReply::Granted { token: *token })),
                        ran: true,
                        ran_at: Some(ev.at),
                        clock_ms: Some(*clock_ms),
                    });
                    key_of.push(key);
                    keys.entry(key).or_default().push(Seen::Ran(step, ev.at));
                }
            }
            HistKind::Acquired {
                access: Access::Permit { permits: n },
                ..
            } => {
                let most = permits.entry(ev.lock.as_str()).or_default();
                *most = (*most).max(u64::from(*n));
            }
            // A resize may store a larger size than any grant asked for: the spec admits
            // the largest (a shrink is judged by the capacity rule, not here).
            HistKind::Resize { permits: n, .. } => {
                let most = permits.entry(calls::lock_name(&ev.lock)).or_default();
                *most = (*most).max(u64::from(*n));
            }
            _ => {}
        }
    }
    Read {
        calls,
        keys,
        permits,
    }
}
