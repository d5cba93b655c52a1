//! Fault injection in the world: a scheduled fault begins and ends, aimed at the process
//! its selector names at that moment (the holder, a waiter, or a fixed id).
//!
//! Invariant: every fault that hampers a process is recorded as `Impaired` in the history
//! for its duration, so the checker does not blame the lock for waits the fault caused; and
//! every fault that lands is logged as a [`FaultMark`] with the process it hit and the
//! stretch it acted over, so only a fault that touched a hold can excuse what befell it.

use std::collections::BTreeMap;
use std::time::Duration;

use super::{World, ns_from_ms};
use crate::model::NodeId;
use crate::world::executor::Core;
use crate::world::faults::{Fault, ProcSel};
use crate::world::history::{FaultMark, HistEvent, HistKind};
use crate::world::net::{Endpoint, Event, ProcId};

impl World {
    /// Resolves a process selector against the current history.
    pub(super) fn select(&self, who: ProcSel) -> Option<ProcId> {
        let core = self.executor.lock();
        match who {
            ProcSel::Id(p) => (p < core.procs.len()).then_some(p),
            ProcSel::Holder | ProcSel::Waiter => {
                // Last lock-relevant event per live process incarnation.
                let mut last: BTreeMap<ProcId, &HistKind> = BTreeMap::new();
                for ev in &core.history {
                    let live = core
                        .procs
                        .get(ev.proc)
                        .is_some_and(|p| p.alive && p.incarnation == ev.incarnation);
                    // Writes, script calls and counts say nothing of holding or waiting.
                    let relevant = !matches!(
                        ev.kind,
                        HistKind::Write { .. }
                            | HistKind::Call { .. }
                            | HistKind::Ran { .. }
                            | HistKind::Kept { .. }
                            | HistKind::Return { .. }
                            | HistKind::PermitsFree { .. }
                    );
                    if live && relevant {
                        last.insert(ev.proc, &ev.kind);
                    }
                }
                last.into_iter()
                    .find(|(_, kind)| match who {
                        ProcSel::Holder => matches!(kind, HistKind::Acquired { .. }),
                        _ => matches!(kind, HistKind::WaitStart),
                    })
                    .map(|(p, _)| p)
            }
        }
    }

    /// Marks `proc` (or every process) impaired until `until`.
    fn impair(&self, proc: Option<ProcId>, until: u64) {
        let mut core = self.executor.lock();
        let at = core.now;
        let procs: Vec<(ProcId, u32)> = core
            .procs
            .iter()
            .enumerate()
            .filter(|(id, _)| proc.is_none_or(|p| p == *id))
            .map(|(id, p)| (id, p.incarnation))
            .collect();
        for (proc, incarnation) in procs {
            core.history.push(HistEvent {
                at,
                proc,
                incarnation,
                lock: String::new(),
                kind: HistKind::Impaired { until },
            });
        }
    }

    /// Logs that `fault` landed (on `proc`, for process faults) and acts until `until`.
    fn mark(&self, fault: &Fault, proc: Option<ProcId>, until: u64) {
        let mut core = self.executor.lock();
        let proc = proc.and_then(|p| core.procs.get(p).map(|state| (p, state.incarnation)));
        let from = core.now;
        core.fault_log.push(FaultMark {
            fault: fault.clone(),
            proc,
            from,
            until,
        });
    }

    /// Fault `index` of the schedule begins.
    pub(super) fn fault_begin(&mut self, index: usize) {
        let Some(fault) = self.config.faults.get(index).map(|f| f.fault.clone()) else {
            return;
        };
        self.executor
            .lock()
            .trace_line(|| format!("FAULT {fault:?}"));
        let now = self.executor.lock().now;
        let restart = |after: Option<u64>| after.map_or(u64::MAX, |ms| now + ns_from_ms(ms));
        match &fault {
            Fault::ClientClockDrift { proc, .. } => self.mark(&fault, Some(*proc), u64::MAX),
            Fault::NodeClockDrift { .. } => self.mark(&fault, None, u64::MAX),
            Fault::ClientClockJump { proc, .. } => self.mark(&fault, Some(*proc), now),
            Fault::Failover {
                split: Some(split), ..
            } => self.mark(&fault, None, now + ns_from_ms(split.heal_after_ms)),
            Fault::Failover {
                promote_after_ms: Some(ms),
                ..
            } => self.mark(&fault, None, now + ns_from_ms(*ms)),
            Fault::NodeClockJump { .. } | Fault::Failover { .. } | Fault::ScriptFlush { .. } => {
                self.mark(&fault, None, now);
            }
            // Logged below, with the keys it evicted.
            Fault::Evict { .. } => {}
            Fault::NodeCrash {
                restart_after_ms, ..
            } => self.mark(&fault, None, restart(*restart_after_ms)),
            Fault::NodePause { ms, .. }
            | Fault::NodeIsolate { ms, .. }
            | Fault::ReplicaCut { ms, .. }
            | Fault::SentinelStale { ms, .. } => {
                self.mark(&fault, None, now + ns_from_ms(*ms));
            }
            // Process faults are logged once their target is resolved (below).
            Fault::Pause { .. }
            | Fault::Crash { .. }
            | Fault::Isolate { .. }
            | Fault::CutFrom { .. }
            | Fault::SentinelCut { .. }
            | Fault::OneWay { .. }
            | Fault::Slow { .. } => {}
        }
        match fault {
            Fault::Pause { who, ms: len } => {
                let until = now + ns_from_ms(len);
                self.begin_on_process(
                    index,
                    who,
                    until,
                    |core, p| {
                        if let Some(state) = core.procs.get_mut(p) {
                            state.paused_until = until;
                        }
                    },
                    |p| format!("  pause c{p} for {len} ms"),
                );
            }
            Fault::Crash {
                who,
                restart_after_ms,
            } => {
                if let Some(p) = self.select(who) {
                    self.mark(&fault, Some(p), restart(restart_after_ms));
                    self.crash_process(p);
                    if let Some(after) = restart_after_ms {
                        self.executor
                            .lock()
                            .schedule(now + ns_from_ms(after), Event::Start(p));
                    }
                }
            }
            Fault::Isolate { who, ms: len } => {
                let nodes = self.nodes.len();
                self.begin_on_process(
                    index,
                    who,
                    now + ns_from_ms(len),
                    |core, p| {
                        for node in 0..nodes {
                            core.set_cut(Endpoint::Process(p), Endpoint::Node(node), true);
                        }
                    },
                    |p| format!("  isolate c{p} for {len} ms"),
                );
            }
            Fault::CutFrom { who, node, ms: len } => self.begin_on_process(
                index,
                who,
                now + ns_from_ms(len),
                |core, p| core.set_cut(Endpoint::Process(p), Endpoint::Node(node), true),
                |p| format!("  cut c{p} from n{node} for {len} ms"),
            ),
            Fault::OneWay {
                who,
                replies,
                ms: len,
            } => {
                let nodes = self.nodes.len();
                self.begin_on_process(
                    index,
                    who,
                    now + ns_from_ms(len),
                    |core, p| {
                        for node in 0..nodes {
                            let (from, to) = one_way(p, node, replies);
                            core.set_one_way(from, to, true);
                        }
                    },
                    |p| format!("  one-way loss on c{p} (replies: {replies}) for {len} ms"),
                );
            }
            Fault::ReplicaCut { replica, ms } => self.cut_replica(index, replica, ms),
            Fault::SentinelCut { who, ms: len } => self.begin_on_process(
                index,
                who,
                now + ns_from_ms(len),
                |core, p| core.set_cut(Endpoint::Process(p), Endpoint::Sentinel, true),
                |p| format!("  cut c{p} from the Sentinels for {len} ms"),
            ),
            Fault::SentinelStale { .. } => self.sentinel_lag(index, &fault),
            Fault::Slow {
                who,
                extra_ms,
                ms: len,
            } => self.begin_on_process(
                index,
                who,
                now + ns_from_ms(len),
                |core, p| core.net.set_slow(p, Duration::from_millis(extra_ms)),
                |p| format!("  slow c{p} by {extra_ms} ms for {len} ms"),
            ),
            // Clock faults were folded into the clock models when the world was built.
            Fault::ClientClockDrift { .. }
            | Fault::ClientClockJump { .. }
            | Fault::NodeClockJump { .. }
            | Fault::NodeClockDrift { .. } => {}
            Fault::NodeCrash {
                node,
                restart_after_ms,
            } => {
                self.crash_node(node);
                self.impair(
                    None,
                    now + ns_from_ms(restart_after_ms.unwrap_or(u64::MAX / 4_000_000)),
                );
                if let Some(after) = restart_after_ms {
                    self.executor
                        .lock()
                        .schedule(now + ns_from_ms(after), Event::NodeRestart(node));
                }
            }
            Fault::Failover {
                group,
                split: Some(split),
                ..
            } => {
                self.split_begin(index, group, split);
                self.impair(None, now + ns_from_ms(split.heal_after_ms));
            }
            Fault::Failover {
                group,
                restart_after_ms,
                split: None,
                promote_after_ms: Some(delay),
            } => {
                let until = now + ns_from_ms(delay);
                let old = self.executor.lock().service_master.get(group).copied();
                if let Some(old) = old {
                    self.crash_node(old);
                    self.late_promotions.insert(index, old);
                }
                self.impair(None, until + ns_from_ms(1_000));
                let mut core = self.executor.lock();
                core.schedule(until, Event::FaultEnd(index));
                if let (Some(after), Some(old)) = (restart_after_ms, old) {
                    core.schedule(now + ns_from_ms(after), Event::NodeRestart(old));
                }
            }
            Fault::Failover {
                group,
                restart_after_ms,
                split: None,
                promote_after_ms: None,
            } => {
                self.failover(group);
                self.impair(None, now + ns_from_ms(1_000));
                if let (Some(after), Some(old)) = (restart_after_ms, self.old_master_of(group)) {
                    self.executor
                        .lock()
                        .schedule(now + ns_from_ms(after), Event::NodeRestart(old));
                }
            }
            Fault::ScriptFlush { node } => {
                if let Some(n) = self.nodes.get_mut(node) {
                    n.flush_scripts();
                }
            }
            Fault::Evict {
                node, policy, keys, ..
            } => {
                let evicted = self.evict(index, node, policy, keys);
                let landed = Fault::Evict {
                    node,
                    policy,
                    keys,
                    evicted,
                };
                self.mark(&landed, None, now);
            }
            Fault::NodePause { node, ms } => {
                let until = now + ns_from_ms(ms);
                self.stall_node(node, until);
                self.impair(None, until);
                self.executor.lock().schedule(until, Event::FaultEnd(index));
            }
            Fault::NodeIsolate { node, ms } => {
                let until = now + ns_from_ms(ms);
                self.cut_node(node, None, true);
                self.impair(None, until);
                self.executor.lock().schedule(until, Event::FaultEnd(index));
            }
        }
    }

    /// Begins fault `index` on the process `who` selects, until virtual time `until`:
    /// remembers the target for the fault's end, marks it impaired, applies `start` to it
    /// and schedules the end. Nothing happens when no process matches.
    fn begin_on_process(
        &mut self,
        index: usize,
        who: ProcSel,
        until: u64,
        start: impl FnOnce(&mut Core, ProcId),
        describe: impl FnOnce(ProcId) -> String,
    ) {
        let Some(p) = self.select(who) else {
            return;
        };
        self.fault_targets.insert(index, p);
        if let Some(scheduled) = self.config.faults.get(index) {
            self.mark(&scheduled.fault.clone(), Some(p), until);
        }
        self.impair(Some(p), until);
        let mut core = self.executor.lock();
        start(&mut core, p);
        core.trace_line(|| describe(p));
        core.schedule(until, Event::FaultEnd(index));
    }

    /// Fault `index` of the schedule, one with a duration, ends on the process or node it
    /// hit.
    pub(super) fn fault_end(&mut self, index: usize) {
        let Some(fault) = self.config.faults.get(index).map(|f| f.fault.clone()) else {
            return;
        };
        match fault {
            Fault::NodePause { node, .. } => return self.wake_node(node),
            Fault::NodeIsolate { node, .. } => return self.cut_node(node, None, false),
            Fault::Failover { split: Some(_), .. } => return self.split_step(index),
            Fault::Failover { group, .. } => return self.promote_late(index, group),
            Fault::ReplicaCut { .. } => return self.heal_replica(index),
            Fault::SentinelStale { .. } => return self.sentinel_catch_up(index),
            _ => {}
        }
        let Some(p) = self.fault_targets.remove(&index) else {
            return;
        };
        let mut core = self.executor.lock();
        match fault {
            Fault::Isolate { .. } => {
                for node in 0..self.nodes.len() {
                    core.set_cut(Endpoint::Process(p), Endpoint::Node(node), false);
                }
            }
            Fault::CutFrom { node, .. } => {
                core.set_cut(Endpoint::Process(p), Endpoint::Node(node), false);
            }
            Fault::SentinelCut { .. } => {
                core.set_cut(Endpoint::Process(p), Endpoint::Sentinel, false);
            }
            Fault::OneWay { replies, .. } => {
                for node in 0..self.nodes.len() {
                    let (from, to) = one_way(p, node, replies);
                    core.set_one_way(from, to, false);
                }
            }
            Fault::Slow { .. } => core.net.set_slow(p, Duration::ZERO),
            _ => {}
        }
        core.trace_line(|| format!("FAULT END {} on c{p}", fault.kind()));
    }
}

/// The direction a one-way loss on `proc`'s link to `node` cuts: the node's replies, or
/// the process's requests.
fn one_way(proc: ProcId, node: NodeId, replies: bool) -> (Endpoint, Endpoint) {
    let (p, n) = (Endpoint::Process(proc), Endpoint::Node(node));
    if replies { (n, p) } else { (p, n) }
}
