//! Which node issued a fencing token, and whether that node's clock and fence state explain
//! a token that did not exceed an earlier one.
//!
//! Why it exists: a token is `max(last + 1, server µs)` on the node that granted it
//! (`lock/src/fencing.rs`). It can fall to or below an earlier grant's token only if the
//! granting node did not have the earlier token under its fence key (another node's key,
//! or its own key lost to a crash, a failover, an eviction or the key's expiry after the
//! fence margin)
//! *and* its clock read no more than the earlier token when it granted. Both are facts of
//! the run: the history names the node each granting call went to, and the world's own
//! node clocks say what each read. So an out-of-order token is excused only when that
//! node, at that moment, explains it, never by a clock fault elsewhere or earlier.
//!
//! Invariant: every excuse names the issuing node, its clock reading against the earlier
//! token, and why its fence key lacked that token.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::engine::clock::ClockModel;
use crate::model::node::{NODE_CLOCK_BASE, wall_us};
use crate::model::{NodeId, Persistence};
use crate::world::calls::{Family, LockReply};
use crate::world::faults::Fault;
use crate::world::history::{FaultMark, HistEvent, HistKind, KeyAtEnd};
use crate::world::net::Target;

use super::evictions;
use super::timeline::{Hold, Who};

/// The rule for a token from another node than the earlier one's, whose clock was behind:
/// RedLock's masters, a promoted replica or a zombie master (README: tokens are only as
/// monotonic as the granting nodes' clocks agree, and failover is not covered).
pub const OTHER_NODE: &str = "token-from-another-node-behind";

/// The rule for a token from a node that lost its fence key in a crash without persistence
/// or a failover, with its clock behind (`lock/src/fencing.rs`).
pub const STATE_LOST: &str = "token-after-fence-lost-behind";

/// The rule for a token from a node that evicted its fence key (`maxmemory` with a
/// `volatile-*` policy, a hazard the README names), with its clock behind.
pub const FENCE_EVICTED: &str = "token-after-fence-evicted-behind";

/// The rule for a token from a node whose fence key expired, with its clock stepped back
/// beyond the fence margin (`lock/src/fencing.rs`: not tolerated).
pub const FENCE_EXPIRED: &str = "token-after-fence-expiry-behind";

/// The rule for a re-entry that joined its owner's old epoch, kept live on a node that
/// never received the epoch's release, after a failover or crash (README non-goal: a
/// re-entrant owner's tokens can go backwards across failover).
pub const STALE_EPOCH: &str = "token-of-an-epoch-failover-kept";

/// How far (µs) a granting node's clock reading may lie above the earlier token and still
/// explain the later one: `last + 1` chains run a token ahead of the clock by a few µs per
/// grant within one microsecond, and a reply's stamp is read once per script.
const READING_SLACK_US: i64 = 1_000;

/// The deployment as the token rule needs it.
#[derive(Debug, Clone, Default)]
pub struct Nodes {
    /// Each node's clock, by node id: the world's own model of it.
    pub clocks: Vec<ClockModel>,
    /// Each node's persistence, by node id.
    pub persistence: Vec<Persistence>,
    /// Each replication group's nodes (its initial master first), by group index: what a
    /// `Target::Service` call may have reached.
    pub groups: Vec<Vec<NodeId>>,
    /// How long a fence key outlives its lock's epoch, by the granting node's clock.
    pub fence_margin: Duration,
    /// What every client connects to: where a grant whose call this rule does not read
    /// (the read-write lock's and the semaphore's scripts) may have come from.
    pub targets: Vec<Target>,
    /// The keys the nodes held when the run ended (see [`super::hygiene`]).
    pub keys_at_end: Vec<KeyAtEnd>,
    /// The longest any key may live past its last write: the longest lease or entry a
    /// client asks for, a writer's intent and the fence margin (see [`super::hygiene`]).
    pub key_lifetime: Duration,
}

/// The server's witness of a call that may have issued a token ([`HistKind::Ran`]): the
/// node that ran it, when, and the token its fence key held right before.
#[derive(Debug, Clone, Copy)]
struct Witness {
    node: NodeId,
    at: u64,
    fence: Option<u64>,
}

/// A call that answered `Granted { token }` (or a release that handed a hold its token):
/// where it went and when it was sent, and where and how a node ran it, if witnessed.
#[derive(Debug, Clone, Copy)]
struct Grant {
    target: Target,
    sent: u64,
    ran: Option<Witness>,
}

impl Grant {
    /// When the issuing node read its clock: when it ran the call, where witnessed, else
    /// (the earliest it can have) when the call was sent.
    fn read_at(&self) -> u64 {
        self.ran.map_or(self.sent, |w| w.at)
    }

    /// Whether the issuing node's fence key already held `token` or a later one: its
    /// script (`max(last + 1, now)`) then issued above `token`, whatever its clock read.
    fn fence_had(&self, token: u64) -> bool {
        self.ran.and_then(|w| w.fence).is_some_and(|f| f >= token)
    }
}

/// The granting calls of a history, by (caller, token), every caller's calls, and the
/// hand-offs the nodes witnessed, by the grantee's hold id.
#[derive(Debug, Default)]
pub(super) struct Issuers {
    grants: BTreeMap<(Who, u64), Vec<Grant>>,
    calls: BTreeMap<Who, Vec<Grant>>,
    handed: BTreeMap<u64, Vec<Grant>>,
}

impl Issuers {
    /// Reads the granting calls of `history`.
    pub(super) fn read(history: &[HistEvent]) -> Self {
        let mut calls: BTreeMap<u64, Grant> = BTreeMap::new();
        let mut issuers = Self::default();
        // The last witnessed run: a hand-off is published by the release that ran just then.
        let mut last_ran: Option<Witness> = None;
        for ev in history {
            match &ev.kind {
                HistKind::Call { id, target, op } if op.family == Family::Mutex => {
                    let call = Grant {
                        target: *target,
                        sent: ev.at,
                        ran: None,
                    };
                    calls.insert(*id, call);
                    issuers
                        .calls
                        .entry((ev.proc, ev.incarnation))
                        .or_default()
                        .push(call);
                }
                HistKind::Ran {
                    id, node, fence, ..
                } => {
                    let witness = Witness {
                        node: *node,
                        at: ev.at,
                        fence: *fence,
                    };
                    if let Some(call) = calls.get_mut(id) {
                        call.ran = Some(witness);
                    }
                    last_ran = Some(witness);
                }
                HistKind::HandedOff { hold, node, .. } => {
                    let ran = last_ran
                        .filter(|w| w.node == *node && w.at == ev.at)
                        .unwrap_or(Witness {
                            node: *node,
                            at: ev.at,
                            fence: None,
                        });
                    issuers.handed.entry(*hold).or_default().push(Grant {
                        target: Target::Node(*node),
                        sent: ev.at,
                        ran: Some(ran),
                    });
                }
                HistKind::Return {
                    id,
                    reply: LockReply::Granted { token },
                } => {
                    if let Some(grant) = calls.get(id) {
                        issuers
                            .grants
                            .entry(((ev.proc, ev.incarnation), *token))
                            .or_default()
                            .push(*grant);
                    }
                }
                _ => {}
            }
        }
        issuers
    }

    /// The calls that granted `hold` its token (one per master that answered with it). A
    /// fair hand-off is granted by another client's release, with no reply of the holder's
    /// own: the release the node witnessed handing it over, or, without that witness, its
    /// holder's last call of that wait (the queued attempt the grant names), which went to
    /// the same target.
    fn of(&self, hold: &Hold) -> Vec<Grant> {
        // Only calls sent by the hold's start granted it: a later call of the same owner
        // answered with the same token (a re-entry joining the epoch) issued nothing.
        let granting: Vec<Grant> = self
            .grants
            .get(&(hold.who(), hold.token))
            .into_iter()
            .flatten()
            .filter(|g| g.sent <= hold.start)
            .copied()
            .collect();
        if !granting.is_empty() {
            return granting;
        }
        let handed: Vec<Grant> = hold
            .ids
            .iter()
            .filter_map(|id| self.handed.get(id))
            .flatten()
            .filter(|g| g.sent <= hold.start)
            .copied()
            .collect();
        if !handed.is_empty() {
            return handed;
        }
        self.calls
            .get(&hold.who())
            .and_then(|calls| {
                calls
                    .iter()
                    .rev()
                    .find(|c| (hold.requested..=hold.start).contains(&c.sent))
            })
            .copied()
            .into_iter()
            .collect()
    }
}

impl Nodes {
    /// The nodes `grant` may have run on: the one that ran it, where witnessed; else its
    /// target node, or its group's initial master and, once the group failed over (by the
    /// call's send), its other members.
    fn reached(&self, grant: &Grant, marks: &[FaultMark]) -> Vec<NodeId> {
        if let Some(w) = grant.ran {
            return vec![w.node];
        }
        let sent = grant.sent;
        match grant.target {
            Target::Node(n) => vec![n],
            Target::Service(g) => {
                let members = self.groups.get(g).map_or(&[][..], Vec::as_slice);
                let failed_over = marks.iter().any(|m| {
                    m.from <= sent && matches!(m.fault, Fault::Failover { group, .. } if group == g)
                });
                let shown = if failed_over { members.len() } else { 1 };
                members.iter().copied().take(shown).collect()
            }
        }
    }

    /// The calls that may have granted `hold`: those the history shows, else any target
    /// of the deployment, sent at the hold's request or at a node clock step back or a
    /// failover while it waited (the lowest a node's clock read in the wait is at one of
    /// these moments, and a failover changes which node a call reaches).
    fn grants_of(&self, issuers: &Issuers, hold: &Hold, marks: &[FaultMark]) -> Vec<Grant> {
        let grants = issuers.of(hold);
        if !grants.is_empty() {
            return grants;
        }
        let turns = marks.iter().filter(|m| {
            m.from > hold.requested
                && m.from <= hold.start
                && matches!(
                    m.fault,
                    Fault::Failover { .. } | Fault::NodeClockJump { by_ms: ..0, .. }
                )
        });
        let moments: Vec<u64> = std::iter::once(hold.requested)
            .chain(turns.map(|m| m.from))
            .collect();
        self.targets
            .iter()
            .flat_map(|&target| {
                moments.iter().map(move |&sent| Grant {
                    target,
                    sent,
                    ran: None,
                })
            })
            .collect()
    }

    fn group_of(&self, node: NodeId) -> Option<usize> {
        self.groups.iter().position(|g| g.contains(&node))
    }

    /// Why `node`'s fence key may have lacked a token node `earlier` issued at `issued`,
    /// by the time of a grant at `at`: the rule's name and the evidence; `None` when it
    /// surely had it.
    fn fence_lacked(
        &self,
        (lock, node): (&str, NodeId),
        (earlier, issued): (NodeId, u64),
        at: u64,
        marks: &[FaultMark],
    ) -> Option<(&'static str, String)> {
        if node != earlier {
            // Another master keeps a fence key of its own (RedLock); another member of
            // the group has a copy only as far as asynchronous replication brought it,
            // and none while split from the node that issued the token (a zombie master).
            return Some((
                OTHER_NODE,
                format!("n{node} is not n{earlier}, whose fence key held the earlier token"),
            ));
        }
        let between = |m: &&FaultMark| m.from >= issued && m.from <= at;
        let loses_writes = self.persistence.get(node) != Some(&Persistence::AofAlways);
        if let Some(m) = marks.iter().filter(between).find(|m| match m.fault {
            Fault::NodeCrash { node: crashed, .. } => crashed == node && loses_writes,
            // A demoted master resyncs from the new one, whose copy may lack the token.
            Fault::Failover { group, .. } => self.group_of(node) == Some(group),
            _ => false,
        }) {
            return Some((
                STATE_LOST,
                format!(
                    "{} at t={:.3}s lost n{node}'s copy of its fence key",
                    m.fault.kind(),
                    m.from as f64 / 1e9
                ),
            ));
        }
        let evicted = marks.iter().filter(between).find_map(|m| match m.fault {
            Fault::Evict { node: n, .. } if n == node => evictions::fence_key_taken(m, lock),
            _ => None,
        });
        if let Some((key, from)) = evicted {
            return Some((
                FENCE_EVICTED,
                format!("n{node} evicted {key} at t={:.3}s", from as f64 / 1e9),
            ));
        }
        // The key expired once the node's clock passed its deadline, even if a step back
        // took the clock below it again before the grant: measure to the clock's peak.
        let clock = self.clocks.get(node)?;
        let peak = marks
            .iter()
            .filter(|m| m.from > issued && m.from <= at)
            .filter(|m| matches!(m.fault, Fault::NodeClockJump { node: n, by_ms } if n == node && by_ms < 0))
            .map(|m| clock.local_nanos(m.from.saturating_sub(1)))
            .chain([clock.local_nanos(at)])
            .max()
            .unwrap_or(0);
        let elapsed = peak.saturating_sub(clock.local_nanos(issued));
        let margin = u64::try_from(self.fence_margin.as_nanos()).unwrap_or(u64::MAX);
        (elapsed >= margin).then(|| {
            (
                FENCE_EXPIRED,
                format!(
                    "n{node}'s clock ran {:.0} ms (to its peak) between the grants, past the {} ms fence margin",
                    elapsed as f64 / 1e6,
                    self.fence_margin.as_millis()
                ),
            )
        })
    }

    /// The rule and evidence by which a grant's token (`later`: its token, when it was
    /// granted, and its label), the token of an earlier hold of the same owner (`own`), is
    /// explained: a fault that can keep an epoch after its release, on a node that held
    /// `own`'s epoch, between `own`'s start and `later`. That is a failover of the group of
    /// a node that granted `own` (the promoted replica may lack the release), or a crash and
    /// restart of such a node whose persistence keeps some writes and loses others (an
    /// `appendfsync everysec` log: the grant kept, the release lost). A node without
    /// persistence comes back empty, and one under `appendfsync always` keeps the release:
    /// neither keeps the epoch.
    pub(super) fn explain_stale_epoch(
        &self,
        (issuers, own): (&Issuers, &Hold),
        (token, at, label): (u64, u64, &str),
        marks: &[FaultMark],
    ) -> Option<(&'static str, String)> {
        let mut kept_on: Vec<NodeId> = self
            .grants_of(issuers, own, marks)
            .iter()
            .flat_map(|g| self.reached(g, marks))
            .collect();
        kept_on.sort_unstable();
        kept_on.dedup();
        let (m, place) = marks
            .iter()
            .filter(|m| m.from >= own.start && m.from <= at)
            .find_map(|m| match m.fault {
                Fault::Failover { group, .. }
                    if kept_on.iter().any(|&n| self.group_of(n) == Some(group)) =>
                {
                    Some((m, format!("of group {group}")))
                }
                Fault::NodeCrash {
                    node,
                    restart_after_ms: Some(_),
                } if kept_on.contains(&node)
                    && self.persistence.get(node) == Some(&Persistence::AofEverySec)
                    && m.until <= at =>
                {
                    Some((m, format!("of n{node} (appendfsync everysec)")))
                }
                _ => None,
            })?;
        Some((
            STALE_EPOCH,
            format!(
                "token {token} is the epoch of {}, granted on n{}, whose release the {} {place} at t={:.3}s may have lost before {label} re-entered it",
                own.label(),
                kept_on
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("/n"),
                m.fault.kind(),
                m.from as f64 / 1e9,
            ),
        ))
    }

    /// The rule and evidence by which `later`'s token, not above `earlier`'s, is explained
    /// by the node that issued it; `None` when no issuing node explains it.
    pub(super) fn explain_token(
        &self,
        (issuers, lock): (&Issuers, &str),
        (earlier, later): (&Hold, &Hold),
        marks: &[FaultMark],
    ) -> Option<(&'static str, String)> {
        let earlier_nodes: Vec<(NodeId, u64)> = self
            .grants_of(issuers, earlier, marks)
            .iter()
            .flat_map(|g| self.reached(g, marks).into_iter().map(|n| (n, g.read_at())))
            .collect();
        for grant in &self.grants_of(issuers, later, marks) {
            // A node that had the earlier token issues above it: nothing it suffered
            // since explains a lower one.
            if grant.fence_had(earlier.token) {
                continue;
            }
            for node in self.reached(grant, marks) {
                let Some(clock) = self.clocks.get(node) else {
                    continue;
                };
                let read = wall_us(clock, grant.read_at());
                let Ok(limit) = i64::try_from(earlier.token) else {
                    continue;
                };
                if read > limit + READING_SLACK_US {
                    continue;
                }
                // The node issued the token when it ran the call, where witnessed; else
                // between the call's send and its holder's learning of it (a fair
                // hand-off's, at another client's release): what befell its fence key
                // meanwhile counts.
                let issued_by = grant.ran.map_or(grant.sent.max(later.start), |w| w.at);
                for &(from, issued) in &earlier_nodes {
                    let Some((rule, why)) =
                        self.fence_lacked((lock, node), (from, issued), issued_by, marks)
                    else {
                        continue;
                    };
                    let why = if rule == OTHER_NODE {
                        // Two nodes' clocks order tokens only as far as they agree: the
                        // earlier issuer's clock, by the time its grant was answered, must
                        // have read at least what this one read later, which takes a clock
                        // ahead there or behind here. Clocks that agreed explain nothing.
                        let Some(ahead) = self.clocks.get(from) else {
                            continue;
                        };
                        let earlier_read = wall_us(ahead, earlier.start);
                        if earlier_read + READING_SLACK_US < read {
                            continue;
                        }
                        format!(
                            "{why}, and n{from}'s clock read {earlier_read} µs ({:+.0} ms from true time) by t={:.3}s, when that token's grant was answered",
                            offset_ms(ahead, earlier.start),
                            earlier.start as f64 / 1e9
                        )
                    } else {
                        why
                    };
                    return Some((
                        rule,
                        format!(
                            "issuer clock behind: token {} from n{node}, whose clock read {} µs ({:+.0} ms from true time) at t={:.3}s, not above token {} from n{from}; {why}",
                            later.token,
                            read,
                            offset_ms(clock, grant.read_at()),
                            grant.read_at() as f64 / 1e9,
                            earlier.token
                        ),
                    ));
                }
            }
        }
        None
    }
}

/// How far `clock` reads from true time at `t`, in ms (for evidence).
fn offset_ms(clock: &ClockModel, t: u64) -> f64 {
    let base = NODE_CLOCK_BASE.as_nanos() as f64;
    (clock.local_nanos(t) as f64 - base - t as f64) / 1e6
}

#[cfg(test)]
mod tests;
