//! The history read as intervals: each believed hold from its request to its end, each
//! wait, each impairment, each grant a node answered before its client believed it, the
//! resource's writes and the oracle's lost-lease sightings.
//!
//! Why it exists: every rule of the checker (exclusion, tokens, server truth, liveness)
//! reasons over the same intervals, so they are built once, here, in true time.

use std::collections::BTreeMap;

use crate::world::calls::{self, LockReply, OpKind};
use serde::Serialize;

use crate::model::NodeId;
use crate::world::history::{Access, HistEvent, HistKind};
use crate::world::net::ProcId;

/// A process incarnation.
pub type Who = (ProcId, u32);

/// A hold as the client believed it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Hold {
    /// Process.
    pub proc: ProcId,
    /// Incarnation.
    pub incarnation: u32,
    /// Fencing token.
    pub token: u64,
    /// Whom it excludes (a permit: as read, the number its client asked for; once the
    /// checker has bounded it by the resizes, the most its semaphore can have stored when
    /// it was granted, see `sizes`).
    pub access: Access,
    /// When the client started waiting for it, virtual ns.
    pub requested: u64,
    /// When the request that granted it left the client (the earliest granting call of its
    /// last attempt; its wait's start where the history has no calls), virtual ns.
    pub sent: u64,
    /// When the servers granted it: the last of its granting calls ran (`None` without the
    /// server witness), virtual ns.
    pub granted_at: Option<u64>,
    /// The nodes that ran its calls, from its grant to its release (empty without the
    /// server witness).
    pub nodes: Vec<NodeId>,
    /// Start (lock() returned), virtual ns.
    pub start: u64,
    /// End (unlock called, lost observed, crash, or end of run), virtual ns.
    pub end: u64,
    /// Ended by the lost-lease signal.
    pub by_lost: bool,
    /// The hold ids its granting calls named (one per RedLock master's naming; empty
    /// where the history has no calls): what its renewals name.
    pub ids: Vec<u64>,
}

impl Hold {
    /// Whether a call naming hold id `id` speaks for this hold (any does where its ids are
    /// not known).
    pub(crate) fn named(&self, id: u64) -> bool {
        self.ids.is_empty() || self.ids.contains(&id)
    }

    pub(crate) fn who(&self) -> Who {
        (self.proc, self.incarnation)
    }

    pub(crate) fn label(&self) -> String {
        format!(
            "c{}.{} [{:.3}s, {:.3}s] token {}",
            self.proc,
            self.incarnation,
            self.start as f64 / 1e9,
            self.end as f64 / 1e9,
            self.token
        )
    }
}

/// One wait for a lock, from `WaitStart` to its grant, failure, crash or the run's end.
#[derive(Debug, Clone)]
pub struct Wait {
    /// Lock name.
    pub lock: String,
    /// The waiter.
    pub who: Who,
    /// Start, virtual ns.
    pub start: u64,
    /// End, virtual ns.
    pub stop: u64,
}

/// A re-entry whose token was not its epoch's, though the servers still held the epoch as
/// far as the oracle saw (or had no later token).
#[derive(Debug, Clone)]
pub struct BadReentry {
    /// Lock name.
    pub lock: String,
    /// The re-entering process.
    pub who: Who,
    /// When.
    pub at: u64,
    /// The token the re-entry got.
    pub token: u64,
    /// What went wrong.
    pub detail: String,
}

/// A lost lease the server-truth oracle saw: the hold (index into its lock's holds) and
/// when.
#[derive(Debug, Clone)]
pub struct Gone {
    /// Lock name.
    pub lock: String,
    /// Index of the hold in [`Timeline::holds`]`[lock]`.
    pub hold: usize,
    /// When the oracle saw it, virtual ns.
    pub at: u64,
    /// Nodes still holding it, of the quorum needed.
    pub holding: (u32, u32),
}

/// A write the resource received.
#[derive(Debug, Clone)]
pub struct Written {
    /// Lock name.
    pub lock: String,
    /// The writer.
    pub who: Who,
    /// When, virtual ns.
    pub at: u64,
    /// The token it presented.
    pub token: u64,
    /// Whether the fenced resource accepted it.
    pub accepted: bool,
}

/// The intervals of a history.
#[derive(Debug, Default)]
pub struct Timeline {
    /// Believed holds per lock, in the order they were granted.
    pub holds: BTreeMap<String, Vec<Hold>>,
    /// Every wait.
    pub waits: Vec<Wait>,
    /// Times a fault hampered a process: (process, from, until). Besides the faults the
    /// world records, a process is hampered from the send of a call the server refused to
    /// run (`NOSCRIPT`; `READONLY` from a replica; `NOREPLICAS` from a master short of
    /// replicas, which takes no writes until they are back) to the answer of its next call
    /// that ran.
    pub impairments: Vec<(ProcId, u64, u64)>,
    /// Processes whose writes the resource accepted, per (lock, token).
    pub accepted_writers: BTreeMap<(String, u64), Vec<Who>>,
    /// Re-entries that got another epoch's token.
    pub bad_reentries: Vec<BadReentry>,
    /// Lost leases the oracle saw.
    pub gone: Vec<Gone>,
    /// Stretches a process spent granted a lock by a node before it believed it or gave it
    /// up (confirming the grant with `WAIT`, or dropping the acquire): (lock, from, until).
    /// The lock is held then, though nobody believes it.
    pub unbelieved: Vec<(String, u64, u64)>,
    /// Acquire attempts that failed.
    pub failed_acquires: u64,
    /// Holds ended by the lost-lease signal.
    pub lost: u64,
    /// Writes at the resource.
    pub writes: u64,
    /// Writes the fenced resource rejected.
    pub stale_rejected: u64,
    /// Every write, in order.
    pub written: Vec<Written>,
}

impl Timeline {
    /// Whether a fault hampered process `proc` at some point of `[from, to]`.
    pub fn impaired(&self, proc: ProcId, (from, to): (u64, u64)) -> bool {
        self.impairments
            .iter()
            .any(|&(p, f, until)| p == proc && f <= to && until >= from)
    }
}

/// Reads `history` of a run that ended at virtual time `end`.
pub fn read(history: &[HistEvent], end: u64) -> Timeline {
    let mut t = Timeline::default();
    let mut open: BTreeMap<Who, Vec<(String, usize)>> = BTreeMap::new();
    let mut open_waits: BTreeMap<Who, Vec<(String, u64)>> = BTreeMap::new();
    // Grants a node answered, not yet believed or given up: (process, lock) -> when.
    let mut granted: BTreeMap<(Who, String), u64> = BTreeMap::new();
    let mut calls = Calls::default();
    for ev in history {
        let who = (ev.proc, ev.incarnation);
        let settles = matches!(
            ev.kind,
            HistKind::Acquired { .. }
                | HistKind::AcquireFailed { .. }
                | HistKind::Released
                | HistKind::Lost
                | HistKind::Crashed
        );
        if settles {
            let (done, keep): (BTreeMap<_, _>, BTreeMap<_, _>) = std::mem::take(&mut granted)
                .into_iter()
                .partition(|((w, lock), _)| *w == who && (ev.lock.is_empty() || *lock == ev.lock));
            granted = keep;
            t.unbelieved.extend(
                done.into_iter()
                    .map(|((_, lock), from)| (lock, from, ev.at)),
            );
        }
        match &ev.kind {
            HistKind::WaitStart => {
                calls.granting.remove(&(who, ev.lock.clone()));
                open_waits
                    .entry(who)
                    .or_default()
                    .push((ev.lock.clone(), ev.at));
            }
            HistKind::Acquired { token, access } => {
                let requested = open_waits
                    .get(&who)
                    .and_then(|list| list.iter().find(|(lock, _)| *lock == ev.lock))
                    .map_or(ev.at, |(_, start)| *start);
                close_waits(&mut open_waits, &mut t.waits, ev);
                let (sent, granted_at, nodes, ids) = calls.grant(who, &ev.lock, requested);
                let list = t.holds.entry(ev.lock.clone()).or_default();
                list.push(Hold {
                    proc: ev.proc,
                    incarnation: ev.incarnation,
                    token: *token,
                    access: *access,
                    requested,
                    sent,
                    granted_at,
                    nodes,
                    start: ev.at,
                    end,
                    by_lost: false,
                    ids,
                });
                open.entry(who)
                    .or_default()
                    .push((ev.lock.clone(), list.len() - 1));
            }
            HistKind::Reentered { token, hold } => {
                let epoch = open_hold(&open, &t.holds, who, &ev.lock);
                // An epoch the servers already lost (the oracle saw its hold gone: a
                // node crash, a failover) cannot be joined; the re-entry starts a new one,
                // with a higher token, and the lost lease is judged as such.
                let lost = |index: usize| {
                    t.gone
                        .iter()
                        .any(|g| g.lock == ev.lock && g.hold == index && g.at <= ev.at)
                };
                let detail = match epoch {
                    Some((_, held)) if held.token == *token => None,
                    Some((index, held)) if lost(index) && *token > held.token => None,
                    Some((_, held)) => Some(format!(
                        "re-entry got token {token}, not its epoch's {}",
                        held.token
                    )),
                    None => Some(format!("re-entry (token {token}) while it held no epoch")),
                };
                if let Some(detail) = detail {
                    t.bad_reentries.push(BadReentry {
                        lock: ev.lock.clone(),
                        who,
                        at: ev.at,
                        token: *token,
                        detail,
                    });
                }
                // A sibling acquire raced beside the one the belief rests on may have been
                // answered before the belief began, so its id sits among the belief's
                // granting ids. The belief rests on the hold the client recorded as
                // acquired (the one whose lost signal it watches), so the re-entry's calls
                // no longer speak for it; a belief left with no other id keeps it.
                if let Some(held) = epoch
                    .map(|(index, _)| index)
                    .and_then(|index| t.holds.get_mut(&ev.lock)?.get_mut(index))
                    .filter(|held| held.ids.len() > 1)
                {
                    held.ids.retain(|id| id != hold);
                }
            }
            HistKind::LeaseGone { holding, quorum } => {
                if let Some((index, _)) = open_hold(&open, &t.holds, who, &ev.lock) {
                    t.gone.push(Gone {
                        lock: ev.lock.clone(),
                        hold: index,
                        at: ev.at,
                        holding: (*holding, *quorum),
                    });
                }
            }
            HistKind::AcquireFailed { .. } => {
                calls.granting.remove(&(who, ev.lock.clone()));
                t.failed_acquires += 1;
                close_waits(&mut open_waits, &mut t.waits, ev);
            }
            HistKind::Released | HistKind::Lost | HistKind::Crashed => {
                let by_lost = ev.kind == HistKind::Lost;
                t.lost += u64::from(by_lost);
                if ev.kind == HistKind::Crashed {
                    close_waits(&mut open_waits, &mut t.waits, ev);
                }
                if let Some(list) = open.get_mut(&who) {
                    let (done, keep): (Vec<_>, Vec<_>) = list
                        .drain(..)
                        .partition(|(lock, _)| ev.lock.is_empty() || *lock == ev.lock);
                    *list = keep;
                    for (lock, index) in done {
                        if let Some(hold) = t.holds.get_mut(&lock).and_then(|l| l.get_mut(index)) {
                            hold.end = ev.at;
                            hold.by_lost = by_lost;
                        }
                    }
                }
            }
            // Script calls are ordered by the linearizability check (`linear.rs`); a grant
            // answered marks the lock held on its node from then on.
            HistKind::Return { id, reply } => {
                if *reply == LockReply::NotRun {
                    let sent = calls.sent.get(id).map_or(ev.at, |&(_, _, at)| at);
                    calls.refused.entry(ev.proc).or_insert(sent);
                } else if let Some(since) = calls.refused.remove(&ev.proc) {
                    t.impairments.push((ev.proc, since, ev.at));
                }
                if matches!(reply, LockReply::Granted { .. }) {
                    let name = calls::lock_name(&ev.lock).to_owned();
                    calls
                        .granting
                        .entry((who, name.clone()))
                        .or_default()
                        .push(*id);
                    granted.entry((who, name)).or_insert(ev.at);
                }
            }
            HistKind::Call { id, op, .. } => {
                let name = calls::lock_name(&ev.lock).to_owned();
                // A release while waiting gives back what a failed attempt was granted
                // (RedLock's minority): those grants of the released hold did not make the
                // hold. Another hold's grant stays (a downgrade's read, granted before its
                // write hold is released).
                if op.kind == OpKind::Release
                    && let Some(ids) = calls.granting.get_mut(&(who, name.clone()))
                {
                    ids.retain(|id| calls.hold_of.get(id) != Some(&op.hold));
                }
                calls.last.insert((who, name.clone()), ev.at);
                calls.last_hold.insert((who, name.clone()), op.hold);
                calls.hold_of.insert(*id, op.hold);
                calls.sent.insert(*id, (who, name, ev.at));
            }
            HistKind::Ran { id, node, .. } => {
                calls.ran.insert(*id, (*node, ev.at));
                if let Some((caller, name, _)) = calls.sent.get(id)
                    && let Some((index, _)) = open_hold(&open, &t.holds, *caller, name)
                    && let Some(hold) = t.holds.get_mut(name).and_then(|l| l.get_mut(index))
                    && !hold.nodes.contains(node)
                {
                    hold.nodes.push(*node);
                }
            }
            // Resizes bound the permits' capacity once the holds are read (`sizes`).
            HistKind::HandedOff { hold, node, .. } => {
                calls.handed.insert(*hold, (*node, ev.at));
            }
            HistKind::PermitsFree { .. }
            | HistKind::Kept { .. }
            | HistKind::Resize { .. }
            | HistKind::Resized { .. } => {}
            HistKind::Impaired { until } => t.impairments.push((ev.proc, ev.at, *until)),
            HistKind::Write {
                token, accepted, ..
            } => {
                t.writes += 1;
                t.written.push(Written {
                    lock: ev.lock.clone(),
                    who,
                    at: ev.at,
                    token: *token,
                    accepted: *accepted,
                });
                if *accepted {
                    let writers = t
                        .accepted_writers
                        .entry((ev.lock.clone(), *token))
                        .or_default();
                    if !writers.contains(&who) {
                        writers.push(who);
                    }
                } else {
                    t.stale_rejected += 1;
                }
            }
        }
    }
    t.unbelieved.extend(
        granted
            .into_iter()
            .map(|((_, lock), from)| (lock, from, end)),
    );
    t.impairments.extend(
        calls
            .refused
            .into_iter()
            .map(|(proc, since)| (proc, since, end)),
    );
    for (who, list) in open_waits {
        for (lock, start) in list {
            t.waits.push(Wait {
                lock,
                who,
                start,
                stop: end,
            });
        }
    }
    t
}

/// The lock-script calls seen so far, for each hold's granting request and serving nodes.
#[derive(Default)]
struct Calls {
    /// Each call's caller, lock name and send time, by id.
    sent: BTreeMap<u64, (Who, String, u64)>,
    /// Where and when a node ran each call, by id.
    ran: BTreeMap<u64, (NodeId, u64)>,
    /// The calls answered "granted" in each (caller, lock)'s current attempt.
    granting: BTreeMap<(Who, String), Vec<u64>>,
    /// Each (caller, lock)'s latest call send.
    last: BTreeMap<(Who, String), u64>,
    /// The hold id each call named, by id.
    hold_of: BTreeMap<u64, u64>,
    /// The hold id each (caller, lock)'s latest call named.
    last_hold: BTreeMap<(Who, String), u64>,
    /// Holds a release handed the lock to, by hold id: the node that ran the release, and
    /// when.
    handed: BTreeMap<u64, (NodeId, u64)>,
    /// Per process, the send of its earliest call refused unrun since its last call that
    /// ran (see [`Timeline::impairments`]).
    refused: BTreeMap<ProcId, u64>,
}

impl Calls {
    /// The granting request of `who`'s new hold of `lock` (waited for since `requested`):
    /// its send, when a node ran it, the nodes that ran the attempt's grants, and the hold
    /// ids they named.
    fn grant(
        &mut self,
        who: Who,
        lock: &str,
        requested: u64,
    ) -> (u64, Option<u64>, Vec<NodeId>, Vec<u64>) {
        let key = (who, lock.to_owned());
        let ids = self.granting.remove(&key).unwrap_or_default();
        // No call of its own answered "granted": a fair hand-off, granted where and when the
        // release that named the attempt's hold ran (its spec step), not when its message
        // arrived.
        if ids.is_empty()
            && let Some(&hold) = self.last_hold.get(&key)
            && let Some(&(node, at)) = self.handed.get(&hold)
        {
            let sent = self
                .last
                .get(&key)
                .copied()
                .filter(|&sent| sent >= requested)
                .map_or(requested.min(at), |sent| sent.min(at));
            return (sent, Some(at), vec![node], vec![hold]);
        }
        let sent = ids
            .iter()
            .filter_map(|id| self.sent.get(id).map(|s| s.2))
            .min()
            .or_else(|| self.last.get(&key).copied().filter(|&at| at >= requested))
            .unwrap_or(requested);
        let ran: Vec<(NodeId, u64)> = ids
            .iter()
            .filter_map(|id| self.ran.get(id).copied())
            .collect();
        let mut nodes: Vec<NodeId> = ran.iter().map(|r| r.0).collect();
        nodes.sort_unstable();
        nodes.dedup();
        let mut named: Vec<u64> = ids
            .iter()
            .filter_map(|id| self.hold_of.get(id).copied())
            .collect();
        named.sort_unstable();
        named.dedup();
        // The servers granted it once its last granting call ran (RedLock's quorum).
        (sent, ran.iter().map(|r| r.1).max(), nodes, named)
    }
}

/// The hold `who` has open on `lock`, with its index.
fn open_hold<'a>(
    open: &BTreeMap<Who, Vec<(String, usize)>>,
    holds: &'a BTreeMap<String, Vec<Hold>>,
    who: Who,
    lock: &str,
) -> Option<(usize, &'a Hold)> {
    let (lock, index) = open.get(&who)?.iter().find(|(l, _)| l == lock)?;
    holds.get(lock)?.get(*index).map(|hold| (*index, hold))
}

/// Ends `ev`'s process's open waits on `ev`'s lock (all of them for a lock-less event).
fn close_waits(
    open_waits: &mut BTreeMap<Who, Vec<(String, u64)>>,
    waits: &mut Vec<Wait>,
    ev: &HistEvent,
) {
    let who = (ev.proc, ev.incarnation);
    if let Some(list) = open_waits.get_mut(&who) {
        let (done, keep): (Vec<_>, Vec<_>) = list
            .drain(..)
            .partition(|(lock, _)| ev.lock.is_empty() || *lock == ev.lock);
        *list = keep;
        for (lock, start) in done {
            waits.push(Wait {
                lock,
                who,
                start,
                stop: ev.at,
            });
        }
    }
}

/// Whether `hold` may coexist with the `active` holds of its lock under its access rule.
pub fn conflicts(hold: &Hold, active: &[&Hold]) -> bool {
    match hold.access {
        Access::Exclusive => !active.is_empty(),
        Access::Shared => active.iter().any(|h| h.access != Access::Shared),
        Access::Permit { permits } => {
            active
                .iter()
                .any(|h| !matches!(h.access, Access::Permit { .. }))
                || active.len() >= permits as usize
        }
    }
}
