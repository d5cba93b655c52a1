//! The simulated Sentinels: they name each replication group's master, as the world's
//! failovers left it, unless a fault makes them lag or cuts a client off from them.
//!
//! Why it exists: the production Sentinel backend asks them (through
//! `crate::world::discovery`) whenever it drops its master, so when they start naming a new one
//! decides which master a client talks to after a failure.
//!
//! How real Sentinels diverge: each learns of a promotion from the leader's hello messages
//! (every 2 s) or when it rejoins after being cut off, so for a while some still name the
//! old master. The clients ask their configured Sentinels in order, so one that lags is
//! the one every client hears first: [`Fault::SentinelStale`] is that Sentinel, naming the
//! master as of `lag_ms` ago. redis-rs then checks the named node's `ROLE` and falls back
//! to the next Sentinel when it is no master; the simulator does not (its transport
//! connects with a `PING`), so a stale answer reaches the production backend whatever it
//! names (a dead node, a replica again, a cut-off zombie), the harsher case, whose every
//! failure (refused connect, timeout, `READONLY`) the backend must survive.
//!
//! Invariant: absent a lagging view they answer with the group's master as of the
//! promotion (a split failover promotes only after its detection delay, so until then they
//! name the cut-off old master; a crash failover promotes at once); a stale answer (one
//! naming another node than the current master) is counted as evidence and impairs its
//! asker until the lag ends, since it may send it where no lock can be had; a request for
//! a group that does not exist is an error reply. A client cut from them is the network's
//! doing (`Endpoint::Sentinel` is cut like any endpoint; its lookups across the cut are
//! counted by `crate::world::discovery`).

use std::collections::BTreeMap;

use super::{World, ns_from_ms};
use crate::model::NodeId;
use crate::model::resp::Reply;
use crate::world::discovery::GET_MASTER;
use crate::world::faults::Fault;
use crate::world::history::{HistEvent, HistKind};
use crate::world::net::{ConnId, Endpoint, Event, RequestBody};

/// What the Sentinels' views are made of: the promotions so far and the lagging views in
/// force.
#[derive(Debug, Default)]
pub(super) struct SentinelViews {
    /// Each promotion in time order: (instant, group, the master it replaced).
    promotions: Vec<(u64, usize, NodeId)>,
    /// Lagging views in force, by fault index: (group, lag in ns, until).
    lagging: BTreeMap<usize, (usize, u64, u64)>,
}

impl SentinelViews {
    /// Records that `group`'s master `old` was replaced at `at`.
    pub(super) fn promoted(&mut self, at: u64, group: usize, old: NodeId) {
        self.promotions.push((at, group, old));
    }

    /// What the first Sentinel names for `group` at `now`, given its `current` master: the
    /// master as of the longest lag in force, or `current`; with when that answer stops
    /// (the lag's end, or when the Sentinel hears of the promotion it missed).
    fn answer(&self, group: usize, current: NodeId, now: u64) -> (NodeId, u64) {
        let Some(&(_, lag, until)) = self
            .lagging
            .values()
            .filter(|(g, _, until)| *g == group && *until > now)
            .max_by_key(|(_, lag, _)| *lag)
        else {
            return (current, now);
        };
        let as_of = now.saturating_sub(lag);
        self.promotions
            .iter()
            .find(|(at, g, _)| *g == group && *at > as_of)
            .map_or((current, now), |&(at, _, old)| {
                (old, until.min(at.saturating_add(lag)))
            })
    }
}

impl World {
    /// A request reached the Sentinels: the named group's master, or an error.
    pub(super) fn sentinel_request(&self, conn: ConnId, epoch: u64, req: u64, body: &RequestBody) {
        let group = match body {
            RequestBody::Command(args)
                if args.len() == GET_MASTER.len() + 1
                    && args
                        .iter()
                        .zip(GET_MASTER)
                        .all(|(word, expected)| word.eq_ignore_ascii_case(expected)) =>
            {
                std::str::from_utf8(&args[GET_MASTER.len()])
                    .ok()
                    .and_then(|group| group.parse::<usize>().ok())
            }
            _ => None,
        };
        let master = group.and_then(|group| self.sentinel_answer(conn, group));
        let reply = match master.and_then(|node| i64::try_from(node).ok()) {
            Some(node) => Reply::Int(node),
            None => Reply::error("ERR No such master with that name"),
        };
        self.respond(Endpoint::Sentinel, conn, epoch, req, Ok(reply));
    }

    /// The master the first Sentinel names for `group`, asked on `conn`: a stale answer is
    /// counted and impairs the asker until the lag ends.
    fn sentinel_answer(&self, conn: ConnId, group: usize) -> Option<NodeId> {
        let mut core = self.executor.lock();
        let current = core.service_master.get(group).copied()?;
        let now = core.now;
        let (named, until) = self.sentinel_views.answer(group, current, now);
        if named == current {
            return Some(current);
        }
        core.sentinel_evidence.stale_answers += 1;
        core.trace_line(|| format!("  Sentinel lags: names n{named} for group {group}"));
        let asker = core.conns.get(&conn).map(|c| (c.proc, c.incarnation));
        if let Some((proc, incarnation)) = asker {
            core.history.push(HistEvent {
                at: now,
                proc,
                incarnation,
                lock: String::new(),
                kind: HistKind::Impaired { until },
            });
        }
        Some(named)
    }

    /// Stale-view fault `index` begins: the first Sentinel lags behind on `group`.
    pub(super) fn sentinel_lag(&mut self, index: usize, fault: &Fault) {
        let Fault::SentinelStale { group, lag_ms, ms } = *fault else {
            return;
        };
        let mut core = self.executor.lock();
        let until = core.now + ns_from_ms(ms);
        self.sentinel_views
            .lagging
            .insert(index, (group, ns_from_ms(lag_ms), until));
        core.trace_line(|| format!("  Sentinel lags {lag_ms} ms on group {group} for {ms} ms"));
        core.schedule(until, Event::FaultEnd(index));
    }

    /// Stale-view fault `index` ends: the lagging Sentinel has caught up.
    pub(super) fn sentinel_catch_up(&mut self, index: usize) {
        self.sentinel_views.lagging.remove(&index);
        self.executor
            .lock()
            .trace_line(|| "  Sentinel caught up".to_owned());
    }
}
