//! The lanes of a picture: per lock, one lane per client process with what it believed
//! (holds, waits, the oracle's lost-lease sightings, its writes the fenced resource
//! rejected), and beneath them one lane per deployment target with what the lock scripts'
//! replies show that target held.
//!
//! Invariant: a client lane is the checker's own reading of the history
//! ([`checker::read_timeline`]), so the picture shows the beliefs the verdict judged. A
//! server lane shows only what a reply proved: a hold from its grant's reply to the first
//! of its release's reply, a reply saying it was gone, another owner's grant, the oracle
//! seeing it on no node, or its lease running out (counted from the send of the last call
//! that set it, as the client counts it); an unanswered call proves nothing and draws
//! nothing.

use std::collections::BTreeMap;

use crate::checker::{self, Hold};
use crate::world::calls::{self, Family, LockOp, LockReply, OpKind};
use crate::world::history::{Access, HistEvent, HistKind};
use crate::world::net::{ProcId, Target};

use super::svg::secs;

/// How a mark looks (its CSS class names it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Look {
    /// A believed hold that ended by `unlock()` or at the end of the run.
    Hold,
    /// A believed hold ended by the lost-lease signal.
    Lost,
    /// A believed hold ended by its process crashing.
    Crashed,
    /// A wait for the lock.
    Wait,
    /// A hold a target's replies show it held.
    Server,
    /// The oracle saw a believed hold gone from its nodes (an instant).
    Gone,
    /// The fenced resource rejected a write (an instant).
    Rejected,
}

impl Look {
    /// The CSS class of marks of this look.
    pub(super) fn class(self) -> &'static str {
        match self {
            Self::Hold => "hold",
            Self::Lost => "lost",
            Self::Crashed => "crashed",
            Self::Wait => "wait",
            Self::Server => "server",
            Self::Gone => "gone",
            Self::Rejected => "rejected",
        }
    }

    /// Whether marks of this look are instants (drawn as ticks, not bars).
    pub(super) fn instant(self) -> bool {
        matches!(self, Self::Gone | Self::Rejected)
    }

    /// Whether marks of this look are holds (believed or on a server).
    pub(super) fn holds(self) -> bool {
        matches!(self, Self::Hold | Self::Lost | Self::Crashed | Self::Server)
    }
}

/// One thing drawn in a lane: a stretch (or an instant, `from == to`) with its tooltip.
#[derive(Debug, Clone)]
pub(super) struct Mark {
    pub(super) from: u64,
    pub(super) to: u64,
    pub(super) look: Look,
    /// The fencing token of a hold (believed or on a server), printed in its bar.
    pub(super) token: Option<u64>,
    /// The exact times, tokens and detail, for the tooltip.
    pub(super) note: String,
}

/// Whose lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Owner {
    /// A client process (every incarnation of it).
    Client(ProcId),
    /// A deployment target, as the lock scripts' replies show it.
    Server(Target),
}

/// One lane.
#[derive(Debug, Clone)]
pub(super) struct Lane {
    pub(super) owner: Owner,
    pub(super) marks: Vec<Mark>,
}

impl Lane {
    /// The lane's label.
    pub(super) fn label(&self) -> String {
        match self.owner {
            Owner::Client(proc) => format!("client c{proc}"),
            Owner::Server(Target::Node(node)) => format!("node {node}"),
            Owner::Server(Target::Service(group)) => format!("group {group} master"),
        }
    }
}

/// A lock's lanes: its clients, then its servers.
#[derive(Debug, Clone)]
pub(super) struct Group {
    pub(super) lock: String,
    pub(super) lanes: Vec<Lane>,
}

/// The lanes of `history`, of a run that ended at `end`, grouped by lock.
pub(super) fn groups(history: &[HistEvent], end: u64) -> Vec<Group> {
    let mut lanes: BTreeMap<(String, Owner), Vec<Mark>> = BTreeMap::new();
    client_marks(history, end, &mut lanes);
    for ((lock, target), marks) in server_marks(history) {
        lanes.insert((lock, Owner::Server(target)), marks);
    }
    let mut groups: Vec<Group> = Vec::new();
    for ((lock, owner), mut marks) in lanes {
        marks.sort_by_key(|m| (m.from, m.to));
        let lane = Lane { owner, marks };
        match groups.last_mut() {
            Some(group) if group.lock == lock => group.lanes.push(lane),
            _ => groups.push(Group {
                lock,
                lanes: vec![lane],
            }),
        }
    }
    groups
}

/// Every client's holds, waits, lost-lease sightings and rejected writes, per lock.
fn client_marks(history: &[HistEvent], end: u64, lanes: &mut BTreeMap<(String, Owner), Vec<Mark>>) {
    let timeline = checker::read_timeline(history, end);
    let crashes: Vec<(ProcId, u32, u64)> = history
        .iter()
        .filter(|ev| ev.kind == HistKind::Crashed)
        .map(|ev| (ev.proc, ev.incarnation, ev.at))
        .collect();
    for (lock, holds) in &timeline.holds {
        for hold in holds {
            let crashed = crashes.contains(&(hold.proc, hold.incarnation, hold.end));
            let (look, ended) = match (hold.by_lost, crashed) {
                (true, _) => (Look::Lost, "the lost-lease signal"),
                (false, true) => (Look::Crashed, "its process crashing"),
                (false, false) if hold.end >= end => (Look::Hold, "the end of the run"),
                (false, false) => (Look::Hold, "unlock()"),
            };
            lanes
                .entry((lock.clone(), Owner::Client(hold.proc)))
                .or_default()
                .push(Mark {
                    from: hold.start,
                    to: hold.end,
                    look,
                    token: Some(hold.token),
                    note: hold_note(lock, hold, ended),
                });
        }
    }
    for wait in &timeline.waits {
        let (proc, incarnation) = wait.who;
        lanes
            .entry((wait.lock.clone(), Owner::Client(proc)))
            .or_default()
            .push(Mark {
                from: wait.start,
                to: wait.stop,
                look: Look::Wait,
                token: None,
                note: format!(
                    "c{proc}.{incarnation} waited for {} from {} to {}",
                    wait.lock,
                    secs(wait.start),
                    secs(wait.stop)
                ),
            });
    }
    for gone in &timeline.gone {
        let Some(hold) = timeline
            .holds
            .get(&gone.lock)
            .and_then(|l| l.get(gone.hold))
        else {
            continue;
        };
        let (holding, quorum) = gone.holding;
        lanes
            .entry((gone.lock.clone(), Owner::Client(hold.proc)))
            .or_default()
            .push(Mark {
                from: gone.at,
                to: gone.at,
                look: Look::Gone,
                token: None,
                note: format!(
                    "oracle at {}: c{}.{} believes it holds {} (token {}), but only {holding} of the {quorum} nodes needed hold it",
                    secs(gone.at),
                    hold.proc,
                    hold.incarnation,
                    gone.lock,
                    hold.token
                ),
            });
    }
    for ev in history {
        if let HistKind::Write {
            token,
            highest,
            accepted: false,
        } = ev.kind
        {
            lanes
                .entry((ev.lock.clone(), Owner::Client(ev.proc)))
                .or_default()
                .push(Mark {
                    from: ev.at,
                    to: ev.at,
                    look: Look::Rejected,
                    token: None,
                    note: format!(
                        "at {}: the fenced resource rejected c{}.{}'s write with token {token} (it had seen {highest})",
                        secs(ev.at),
                        ev.proc,
                        ev.incarnation
                    ),
                });
        }
    }
}

fn hold_note(lock: &str, hold: &Hold, ended: &str) -> String {
    let access = match hold.access {
        Access::Exclusive => "exclusive".to_owned(),
        Access::Shared => "shared".to_owned(),
        Access::Permit { permits } => format!("one of {permits} permits"),
    };
    format!(
        "c{}.{} believed it held {lock} ({access}) with token {} from {} to {} (requested at {}; ended by {ended})",
        hold.proc,
        hold.incarnation,
        hold.token,
        secs(hold.start),
        secs(hold.end),
        secs(hold.requested)
    )
}

/// A hold a target's replies showed it held, still open.
struct Open {
    who: (ProcId, u32),
    owner: u64,
    token: u64,
    from: u64,
    /// When its lease runs out: the send of the last call that set it, plus its TTL.
    deadline: u64,
}

/// Per (lock, target), the holds the replies show, from the mutex scripts' calls.
fn server_marks(history: &[HistEvent]) -> BTreeMap<(String, Target), Vec<Mark>> {
    let mut calls: BTreeMap<u64, (u64, Target, &str, LockOp)> = BTreeMap::new();
    let mut open: BTreeMap<(String, Target), BTreeMap<u64, Open>> = BTreeMap::new();
    let mut marks: BTreeMap<(String, Target), Vec<Mark>> = BTreeMap::new();
    for ev in history {
        match &ev.kind {
            HistKind::Call { id, target, op } if op.family == Family::Mutex => {
                calls.insert(*id, (ev.at, *target, ev.lock.as_str(), *op));
            }
            HistKind::Return { id, reply } => {
                let Some((sent, target, key, op)) = calls.remove(id) else {
                    continue;
                };
                let lane = (calls::lock_name(key).to_owned(), target);
                let held = open.entry(lane.clone()).or_default();
                let done = marks.entry(lane).or_default();
                let lease = sent.saturating_add(op.ttl_ms.saturating_mul(NS_PER_MS));
                match (op.kind, reply) {
                    (OpKind::Acquire, LockReply::Granted { token }) => {
                        // A grant to another owner proves every other owner's hold gone.
                        let others: Vec<u64> = held
                            .iter()
                            .filter(|(_, h)| h.owner != op.owner)
                            .map(|(hold, _)| *hold)
                            .collect();
                        for hold in others {
                            close(held, hold, ev.at, "another owner's grant", done);
                        }
                        held.entry(op.hold)
                            .and_modify(|h| h.deadline = lease)
                            .or_insert(Open {
                                who: (ev.proc, ev.incarnation),
                                owner: op.owner,
                                token: *token,
                                from: ev.at,
                                deadline: lease,
                            });
                    }
                    (OpKind::Renew, LockReply::Renewed(true)) => {
                        if let Some(h) = held.get_mut(&op.hold) {
                            h.deadline = lease;
                        }
                    }
                    (OpKind::Renew, LockReply::Renewed(false)) => {
                        close(held, op.hold, ev.at, "a renewal answered not held", done);
                    }
                    (OpKind::Release, LockReply::Released(_)) => {
                        close(held, op.hold, ev.at, "its release", done);
                    }
                    (OpKind::Probe, LockReply::Probed { held: false, .. }) => {
                        close(held, op.hold, ev.at, "a probe answered not held", done);
                    }
                    _ => {}
                }
            }
            // The oracle saw a belief's hold on no node at all (a node's clock jumped, a
            // node lost its data): its server holds end there, whatever their leases said.
            HistKind::LeaseGone { holding: 0, .. } => {
                let who = (ev.proc, ev.incarnation);
                for (lane, held) in open.iter_mut().filter(|((lock, _), _)| *lock == ev.lock) {
                    let gone: Vec<u64> = held
                        .iter()
                        .filter(|(_, h)| h.who == who)
                        .map(|(hold, _)| *hold)
                        .collect();
                    let done = marks.entry(lane.clone()).or_default();
                    for hold in gone {
                        close(held, hold, ev.at, "the oracle seeing it on no node", done);
                    }
                }
            }
            _ => {}
        }
    }
    for ((lock, target), held) in open {
        let done = marks.entry((lock, target)).or_default();
        for (_, h) in held {
            done.push(server_mark(&h, h.deadline, "its lease running out"));
        }
    }
    marks.retain(|_, list| !list.is_empty());
    marks
}

/// Nanoseconds per millisecond (a TTL is asked for in ms).
const NS_PER_MS: u64 = 1_000_000;

/// Ends hold `hold` at `at` (or at its lease's end, if that came first), by `why`.
fn close(held: &mut BTreeMap<u64, Open>, hold: u64, at: u64, why: &str, done: &mut Vec<Mark>) {
    if let Some(h) = held.remove(&hold) {
        let (to, why) = if h.deadline < at {
            (h.deadline, "its lease running out")
        } else {
            (at, why)
        };
        done.push(server_mark(&h, to, why));
    }
}

fn server_mark(h: &Open, to: u64, why: &str) -> Mark {
    let (proc, incarnation) = h.who;
    Mark {
        from: h.from,
        to: to.max(h.from),
        look: Look::Server,
        token: Some(h.token),
        note: format!(
            "held for c{proc}.{incarnation} with token {} from {} (grant's reply) to {} (ended by {why})",
            h.token,
            secs(h.from),
            secs(to.max(h.from))
        ),
    }
}
