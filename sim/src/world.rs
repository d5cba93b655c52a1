//! The world: nodes, processes, the fenced resource and the driver loop that ties them to
//! the executor, the network and the fault schedule.
//!
//! Invariant: the driver is the only code that touches nodes (their Lua states never leave
//! this thread); each event is handled atomically at its virtual instant, so a script runs
//! to completion with no interleaving, replication and `WAIT` follow Redis's asynchronous
//! semantics, and faults fire exactly when scheduled.

use std::collections::BTreeMap;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use leasehold::backend::{Backend, BoxFuture, Notification};
use serde::{Deserialize, Serialize};

use crate::backend::{ResourceClient, SimBackend};
use crate::clock::{ClockChange, ClockModel};
use crate::executor::{self, Core, Executor, ProcState};
use crate::faults::{Fault, ProcSel, ScheduledFault};
use crate::history::{HistEvent, HistKind};
use crate::model::node::EffectBatch;
use crate::model::{Executed, Node, NodeId, Persistence, Role};
use crate::net::{
    ConnId, Endpoint, Event, Lane, NetConfig, NetState, ProcId, RequestBody, Target, io_error,
};
use crate::process::{ProcessCtx, recorder_for, runtime_for};
use crate::resp::Reply;
use crate::rng::SimRng;
use crate::trace::Trace;

/// How often `appendfsync everysec` flushes.
const FSYNC_PERIOD: Duration = Duration::from_secs(1);

/// Node clocks start this far after their epoch so that negative offsets stay positive.
const NODE_CLOCK_BASE: Duration = Duration::from_secs(3_600);

/// Polls allowed at one virtual instant before the run is declared livelocked (tasks
/// waking each other forever without letting time pass).
const LIVELOCK_POLLS: u64 = 200_000;

/// Errors of the simulator: choosing what to run, building or running a world.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// No catalogued scenario has this name.
    #[error("no scenario {0:?}")]
    UnknownScenario(String),
    /// No fault kind has this name.
    #[error("unknown fault kind {0:?}; known: {known:?} and loss", known = crate::faults::Fault::KINDS)]
    UnknownFault(String),
    /// The Lua state of a node could not be created.
    #[error("lua setup for node {node}: {message}")]
    Lua {
        /// The node.
        node: NodeId,
        /// The Lua error's text (`mlua::Error` is not `Send`, runs cross threads).
        message: String,
    },
    /// The configuration is inconsistent.
    #[error("invalid world: {0}")]
    Config(String),
}

/// A Redis node in the deployment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct NodeSpec {
    /// Persistence mode.
    pub persistence: Persistence,
    /// Replica of this node (same group), or a master when `None`.
    pub replica_of: Option<NodeId>,
    /// Wall-clock offset from true time in ms (may be negative).
    pub clock_offset_ms: i64,
}

/// Everything fixed before a run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorldConfig {
    /// The run's seed.
    pub seed: u64,
    /// Redis nodes.
    pub nodes: Vec<NodeSpec>,
    /// What each client connects to, one backend per entry.
    pub targets: Vec<Target>,
    /// Initial master of each replication group (`Target::Service(i)`).
    pub groups: Vec<NodeId>,
    /// Network parameters.
    pub net: NetConfig,
    /// The fault schedule.
    pub faults: Vec<ScheduledFault>,
    /// Record a full trace.
    pub trace: bool,
}

/// A process's main task factory, called at every (re)start.
pub type ProcessMain = Arc<dyn Fn(ProcessCtx) -> BoxFuture<'static, ()> + Send + Sync>;

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum RunEnd {
    /// Reached the horizon.
    Horizon,
    /// Tasks kept waking each other at one instant without progress.
    Livelock,
}

struct WaitWaiter {
    node: NodeId,
    conn: ConnId,
    epoch: u64,
    req: u64,
    numreplicas: i64,
    offset: u64,
}

/// A whole simulated deployment.
pub struct World {
    executor: Arc<Executor>,
    nodes: Vec<Node>,
    sched: SimRng,
    mains: Vec<ProcessMain>,
    config: WorldConfig,
    waits: BTreeMap<u64, WaitWaiter>,
    next_waiter: u64,
    fault_targets: BTreeMap<usize, ProcId>,
    highest_token: BTreeMap<String, u64>,
    proc_rng: SimRng,
}

impl std::fmt::Debug for World {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("World")
            .field("nodes", &self.nodes.len())
            .field("procs", &self.mains.len())
            .finish_non_exhaustive()
    }
}

fn ms(ms: u64) -> u64 {
    ms.saturating_mul(1_000_000)
}

impl World {
    /// Builds the deployment; processes are added with [`World::add_process`].
    pub fn new(config: WorldConfig) -> Result<Self, SimError> {
        let mut root = SimRng::new(config.seed);
        let sched = root.fork(1);
        let net_rng = root.fork(2);
        let proc_rng = root.fork(3);
        let mut nodes = Vec::with_capacity(config.nodes.len());
        for (id, spec) in config.nodes.iter().enumerate() {
            let mut clock = ClockModel::new(NODE_CLOCK_BASE, false);
            clock.apply(
                0,
                ClockChange::Jump(spec.clock_offset_ms.saturating_mul(1_000_000)),
            );
            let mut jumps: Vec<(u64, i64)> = config
                .faults
                .iter()
                .filter_map(|f| match f.fault {
                    Fault::NodeClockJump { node, by_ms } if node == id => {
                        Some((ms(f.at_ms), by_ms.saturating_mul(1_000_000)))
                    }
                    _ => None,
                })
                .collect();
            jumps.sort_unstable();
            for (at, by) in jumps {
                clock.apply(at, ClockChange::Jump(by));
            }
            let mut node = Node::new(id, spec.persistence, clock).map_err(|err| SimError::Lua {
                node: id,
                message: err.to_string(),
            })?;
            if let Some(master) = spec.replica_of {
                if master >= config.nodes.len() || master == id {
                    return Err(SimError::Config(format!("node {id}: bad master {master}")));
                }
                node.role = Role::Replica(master);
            }
            nodes.push(node);
        }
        for (group, &master) in config.groups.iter().enumerate() {
            if master >= nodes.len() {
                return Err(SimError::Config(format!("group {group}: no node {master}")));
            }
        }
        let mut core = Core::new(NetState::new(config.net, net_rng), Trace::new(config.trace));
        core.node_up = vec![true; nodes.len()];
        core.service_master = config.groups.clone();
        for (i, f) in config.faults.iter().enumerate() {
            core.schedule(ms(f.at_ms), Event::Fault(i));
        }
        for node in &nodes {
            if node.persistence == Persistence::AofEverySec {
                core.schedule(ms(1_000), Event::Fsync(node.id));
            }
        }
        Ok(Self {
            executor: Executor::new(core),
            nodes,
            sched,
            mains: Vec::new(),
            config,
            waits: BTreeMap::new(),
            next_waiter: 0,
            fault_targets: BTreeMap::new(),
            highest_token: BTreeMap::new(),
            proc_rng,
        })
    }

    /// Adds a client process that starts at `start` and runs `main` (again after every
    /// restart). Its clock faults from the schedule are applied to its clock.
    pub fn add_process(&mut self, start: Duration, main: ProcessMain) -> ProcId {
        let id = self.mains.len();
        let mut clock = ClockModel::new(Duration::ZERO, true);
        let mut changes: Vec<(u64, ClockChange)> = self
            .config
            .faults
            .iter()
            .filter_map(|f| match f.fault {
                Fault::ClientClockDrift { proc, ppm } if proc == id => {
                    Some((ms(f.at_ms), ClockChange::Drift(ppm)))
                }
                Fault::ClientClockJump { proc, by_ms } if proc == id => Some((
                    ms(f.at_ms),
                    ClockChange::Jump(by_ms.saturating_mul(1_000_000)),
                )),
                _ => None,
            })
            .collect();
        changes.sort_by_key(|(at, _)| *at);
        for (at, change) in changes {
            clock.apply(at, change);
        }
        let rng = self.proc_rng.fork(id as u64);
        self.mains.push(main);
        let mut core = self.executor.lock();
        core.procs.push(ProcState {
            name: format!("c{id}"),
            alive: false,
            incarnation: 0,
            paused_until: 0,
            clock,
            rng,
        });
        let at = u64::try_from(start.as_nanos()).unwrap_or(u64::MAX);
        core.schedule(at, Event::Start(id));
        id
    }

    /// Runs until virtual time `horizon` (or a livelock).
    pub fn run(&mut self, horizon: Duration) -> RunEnd {
        let horizon = u64::try_from(horizon.as_nanos()).unwrap_or(u64::MAX);
        let mut instant = u64::MAX;
        let mut polls_here = 0u64;
        loop {
            if executor::run_one(&self.executor, &mut self.sched) {
                let now = self.executor.lock().now;
                if now == instant {
                    polls_here += 1;
                    if polls_here > LIVELOCK_POLLS {
                        self.executor
                            .lock()
                            .trace_line(|| "LIVELOCK: tasks spin without time passing".to_owned());
                        return RunEnd::Livelock;
                    }
                } else {
                    instant = now;
                    polls_here = 0;
                }
                continue;
            }
            let event = self.executor.lock().pop_event(horizon);
            match event {
                Some(event) => self.handle(event),
                None => break,
            }
        }
        let mut core = self.executor.lock();
        core.now = core.now.max(horizon);
        RunEnd::Horizon
    }

    /// The history so far.
    pub fn history(&self) -> Vec<HistEvent> {
        self.executor.lock().history.clone()
    }

    /// The trace so far.
    pub fn trace(&self) -> String {
        self.executor.lock().trace.text().to_owned()
    }

    /// Executor polls performed so far.
    pub fn polls(&self) -> u64 {
        self.executor.lock().polls
    }

    /// Commands the nodes received so far.
    pub fn node_commands(&self) -> u64 {
        self.nodes.iter().map(|n| n.stats.commands).sum()
    }

    /// A node, for inspection in tests.
    pub fn node(&self, id: NodeId) -> Option<&Node> {
        self.nodes.get(id)
    }

    /// Runs one command directly on a node, outside the network (test and setup helper).
    pub fn direct(&mut self, node: NodeId, args: &[&str]) -> Option<Reply> {
        let now = self.executor.lock().now;
        let words: Vec<Vec<u8>> = args.iter().map(|a| a.as_bytes().to_vec()).collect();
        match self.nodes.get_mut(node)?.execute(&words, now).executed {
            Executed::Reply(reply) => Some(reply),
            Executed::Wait { .. } => None,
        }
    }

    fn handle(&mut self, event: Event) {
        match event {
            Event::Timer(state) => state.fire(),
            Event::Request {
                conn,
                epoch,
                to,
                req,
                body,
            } => match to {
                Endpoint::Node(node) => self.node_request(node, conn, epoch, req, body),
                Endpoint::Resource => self.resource_request(conn, epoch, req, &body),
                Endpoint::Process(_) => {}
            },
            Event::Response {
                conn,
                epoch,
                req,
                result,
            } => {
                let mut core = self.executor.lock();
                let slot = core
                    .conns
                    .get_mut(&conn)
                    .filter(|c| c.epoch == epoch)
                    .and_then(|c| c.pending.remove(&req));
                if let Some(slot) = slot {
                    if core.trace.enabled() {
                        let text = match &result {
                            Ok(reply) => reply.render(),
                            Err(kind) => format!("io error {kind:?}"),
                        };
                        core.trace_line(|| format!("  <- #{req} {text}"));
                    }
                    drop(core);
                    slot.complete(match result {
                        Ok(reply) => reply.into_result(),
                        Err(kind) => Err(io_error(kind, "connection failure")),
                    });
                }
            }
            Event::Deadline { conn, req } => {
                let mut core = self.executor.lock();
                let slot = core
                    .conns
                    .get_mut(&conn)
                    .and_then(|c| c.pending.remove(&req));
                if let Some(slot) = slot {
                    core.trace_line(|| format!("  <- #{req} timed out"));
                    drop(core);
                    slot.complete(Err(io_error(io::ErrorKind::TimedOut, "response timeout")));
                }
            }
            Event::Push {
                conn,
                epoch,
                notification,
            } => {
                let core = self.executor.lock();
                if let Some(push) = core
                    .conns
                    .get(&conn)
                    .filter(|c| c.epoch == epoch)
                    .and_then(|c| c.push.as_ref())
                {
                    // The receiver may be gone (subscription dropped): nothing to deliver to.
                    let _ = push.unbounded_send(notification);
                }
            }
            Event::Repl {
                master,
                replica,
                offset,
                batch,
            } => self.repl_apply(master, replica, offset, &batch),
            Event::ReplAck {
                replica,
                master,
                offset,
            } => {
                if let Some(node) = self.nodes.get_mut(master)
                    && node.up
                    && node.role == Role::Master
                {
                    let acked = node.replica_acks.entry(replica).or_insert(0);
                    *acked = (*acked).max(offset);
                    self.check_waits(master, false);
                }
            }
            Event::Fsync(node) => {
                if let Some(n) = self.nodes.get_mut(node)
                    && n.up
                {
                    n.fsync_tick();
                }
                let mut core = self.executor.lock();
                let next = core.now + u64::try_from(FSYNC_PERIOD.as_nanos()).unwrap_or(u64::MAX);
                core.schedule(next, Event::Fsync(node));
            }
            Event::WaitTimeout { node, waiter } => {
                if let Some(w) = self.waits.remove(&waiter) {
                    let count = self
                        .nodes
                        .get(node)
                        .map_or(0, |n| n.acked_replicas(w.offset));
                    self.respond(
                        Endpoint::Node(node),
                        w.conn,
                        w.epoch,
                        w.req,
                        Ok(Reply::Int(count)),
                    );
                }
            }
            Event::Fault(index) => self.fault_begin(index),
            Event::FaultEnd(index) => self.fault_end(index),
            Event::NodeRestart(node) => self.node_restart(node),
            Event::Start(proc) => self.start_process(proc),
        }
    }

    fn respond(
        &self,
        from: Endpoint,
        conn: ConnId,
        epoch: u64,
        req: u64,
        result: Result<Reply, io::ErrorKind>,
    ) {
        let mut core = self.executor.lock();
        let Some(proc) = core.conns.get(&conn).map(|c| c.proc) else {
            return;
        };
        let now = core.now;
        if let Some(at) = core
            .net
            .arrival(now, from, Endpoint::Process(proc), Lane::Down(conn))
        {
            core.schedule(
                at,
                Event::Response {
                    conn,
                    epoch,
                    req,
                    result,
                },
            );
        }
    }

    fn node_request(
        &mut self,
        node: NodeId,
        conn: ConnId,
        epoch: u64,
        req: u64,
        body: RequestBody,
    ) {
        let (now, current) = {
            let core = self.executor.lock();
            let current = core
                .conns
                .get(&conn)
                .is_some_and(|c| c.epoch == epoch && !c.closed);
            (core.now, current)
        };
        // A request on a connection that was reset meanwhile died with the old socket.
        if !current {
            return;
        }
        let Some(n) = self.nodes.get_mut(node) else {
            return;
        };
        if !n.up {
            self.respond(
                Endpoint::Node(node),
                conn,
                epoch,
                req,
                Err(io::ErrorKind::ConnectionRefused),
            );
            return;
        }
        match body {
            RequestBody::Command(args) => {
                let outcome = n.execute(&args, now);
                let is_master = n.role == Role::Master;
                match outcome.executed {
                    Executed::Reply(reply) => {
                        self.respond(Endpoint::Node(node), conn, epoch, req, Ok(reply));
                    }
                    Executed::Wait {
                        numreplicas,
                        timeout_ms,
                        offset,
                    } => {
                        let id = self.next_waiter;
                        self.next_waiter += 1;
                        self.waits.insert(
                            id,
                            WaitWaiter {
                                node,
                                conn,
                                epoch,
                                req,
                                numreplicas,
                                offset,
                            },
                        );
                        if timeout_ms > 0 {
                            let at = now + ms(timeout_ms.unsigned_abs());
                            self.executor
                                .lock()
                                .schedule(at, Event::WaitTimeout { node, waiter: id });
                        }
                        self.check_waits(node, false);
                    }
                }
                if is_master && !outcome.effects.dirty.is_empty() {
                    self.replicate(node, &outcome.effects.dirty);
                }
                for (channel, message) in outcome.effects.published {
                    self.publish(node, &channel, message);
                }
            }
            RequestBody::Subscribe(channel) => {
                n.subscribe(&channel, conn);
                let reply = Reply::Array(vec![
                    Reply::bulk("subscribe"),
                    Reply::Bulk(channel),
                    Reply::Int(1),
                ]);
                self.respond(Endpoint::Node(node), conn, epoch, req, Ok(reply));
            }
            RequestBody::Unsubscribe(channel) => {
                n.unsubscribe(Some(&channel), conn);
                let reply = Reply::Array(vec![
                    Reply::bulk("unsubscribe"),
                    Reply::Bulk(channel),
                    Reply::Int(0),
                ]);
                self.respond(Endpoint::Node(node), conn, epoch, req, Ok(reply));
            }
        }
    }

    fn publish(&self, node: NodeId, channel: &[u8], message: Vec<u8>) {
        let Some(n) = self.nodes.get(node) else {
            return;
        };
        let subs = n.subscribers_of(channel);
        let mut core = self.executor.lock();
        let now = core.now;
        for sub in subs {
            let Some((proc, epoch)) = core.conns.get(&sub).map(|c| (c.proc, c.epoch)) else {
                continue;
            };
            if let Some(at) = core.net.arrival(
                now,
                Endpoint::Node(node),
                Endpoint::Process(proc),
                Lane::Down(sub),
            ) {
                let notification = Notification {
                    channel: String::from_utf8_lossy(channel).into_owned(),
                    payload: message.clone(),
                };
                core.schedule(
                    at,
                    Event::Push {
                        conn: sub,
                        epoch,
                        notification,
                    },
                );
            }
        }
    }

    fn replicate(&mut self, master: NodeId, dirty: &std::collections::BTreeSet<Vec<u8>>) {
        let Some(m) = self.nodes.get_mut(master) else {
            return;
        };
        m.repl_offset += 1;
        let offset = m.repl_offset;
        let batch = m.effect_batch(dirty);
        let replicas: Vec<NodeId> = self
            .nodes
            .iter()
            .filter(|n| n.up && n.role == Role::Replica(master))
            .map(|n| n.id)
            .collect();
        let mut core = self.executor.lock();
        let now = core.now;
        for replica in replicas {
            if let Some(at) = core.net.arrival(
                now,
                Endpoint::Node(master),
                Endpoint::Node(replica),
                Lane::Repl(master, replica),
            ) {
                core.schedule(
                    at,
                    Event::Repl {
                        master,
                        replica,
                        offset,
                        batch: batch.clone(),
                    },
                );
            }
        }
    }

    fn repl_apply(&mut self, master: NodeId, replica: NodeId, offset: u64, batch: &EffectBatch) {
        let master_state = self
            .nodes
            .get(master)
            .filter(|m| m.up && m.role == Role::Master)
            .map(|m| (m.data().clone(), m.repl_offset));
        let Some(r) = self.nodes.get_mut(replica) else {
            return;
        };
        if !r.up || r.role != Role::Replica(master) {
            return;
        }
        if offset == r.repl_offset + 1 {
            r.apply_batch(batch, offset);
        } else if offset > r.repl_offset + 1 {
            // A gap (lost batch): resynchronise from the master's current dataset.
            match master_state {
                Some((data, master_offset)) => r.full_sync(&data, master_offset),
                None => return,
            }
        } else {
            return;
        }
        let applied = r.repl_offset;
        let mut core = self.executor.lock();
        let now = core.now;
        if let Some(at) = core.net.arrival(
            now,
            Endpoint::Node(replica),
            Endpoint::Node(master),
            Lane::Ack(replica, master),
        ) {
            core.schedule(
                at,
                Event::ReplAck {
                    replica,
                    master,
                    offset: applied,
                },
            );
        }
    }

    fn check_waits(&mut self, node: NodeId, drop_all: bool) {
        let ids: Vec<u64> = self
            .waits
            .iter()
            .filter(|(_, w)| w.node == node)
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            let Some(w) = self.waits.get(&id) else {
                continue;
            };
            if drop_all {
                self.waits.remove(&id);
                continue;
            }
            let count = self
                .nodes
                .get(node)
                .map_or(0, |n| n.acked_replicas(w.offset));
            if count >= w.numreplicas
                && let Some(w) = self.waits.remove(&id)
            {
                self.respond(
                    Endpoint::Node(node),
                    w.conn,
                    w.epoch,
                    w.req,
                    Ok(Reply::Int(count)),
                );
            }
        }
    }

    fn resource_request(&mut self, conn: ConnId, epoch: u64, req: u64, body: &RequestBody) {
        let RequestBody::Command(args) = body else {
            return;
        };
        let (Some(lock), Some(token)) = (
            args.get(1).map(|l| String::from_utf8_lossy(l).into_owned()),
            args.get(2)
                .and_then(|t| std::str::from_utf8(t).ok())
                .and_then(|t| t.parse::<u64>().ok()),
        ) else {
            self.respond(
                Endpoint::Resource,
                conn,
                epoch,
                req,
                Ok(Reply::error("ERR bad write")),
            );
            return;
        };
        let highest = self.highest_token.get(&lock).copied().unwrap_or(0);
        let accepted = token >= highest;
        if accepted {
            self.highest_token.insert(lock.clone(), token);
        }
        {
            let mut core = self.executor.lock();
            let Some((proc, incarnation)) = core.conns.get(&conn).map(|c| (c.proc, c.incarnation))
            else {
                return;
            };
            let at = core.now;
            core.trace_line(|| {
                format!("resource {lock}: write token {token} from c{proc}.{incarnation}: highest {highest}, accepted {accepted}")
            });
            core.history.push(HistEvent {
                at,
                proc,
                incarnation,
                lock,
                kind: HistKind::Write {
                    token,
                    highest,
                    accepted,
                },
            });
        }
        self.respond(
            Endpoint::Resource,
            conn,
            epoch,
            req,
            Ok(Reply::Int(i64::from(accepted))),
        );
    }

    fn start_process(&mut self, proc: ProcId) {
        let Some(main) = self.mains.get(proc).cloned() else {
            return;
        };
        let incarnation = {
            let mut core = self.executor.lock();
            let Some(state) = core.procs.get_mut(proc) else {
                return;
            };
            state.alive = true;
            state.paused_until = 0;
            let incarnation = state.incarnation;
            core.trace_line(|| format!("c{proc}.{incarnation} starts"));
            incarnation
        };
        let backends: Vec<Arc<dyn Backend>> = self
            .config
            .targets
            .iter()
            .map(|&target| {
                Arc::new(SimBackend::connect(
                    &self.executor,
                    proc,
                    incarnation,
                    target,
                )) as Arc<dyn Backend>
            })
            .collect();
        let ctx = ProcessCtx {
            id: proc,
            incarnation,
            runtime: runtime_for(&self.executor, proc, incarnation),
            backends,
            resource: ResourceClient::connect(&self.executor, proc, incarnation),
            recorder: recorder_for(&self.executor, proc, incarnation),
        };
        let future = main(ctx);
        if let Err(refused) = executor::spawn_task(&self.executor, proc, incarnation, future) {
            drop(refused);
        }
    }

    /// Resolves a process selector against the current history.
    fn select(&self, who: ProcSel) -> Option<ProcId> {
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
                    if live && !matches!(ev.kind, HistKind::Write { .. }) {
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

    fn fault_begin(&mut self, index: usize) {
        let Some(fault) = self.config.faults.get(index).map(|f| f.fault.clone()) else {
            return;
        };
        self.executor
            .lock()
            .trace_line(|| format!("FAULT {fault:?}"));
        let now = self.executor.lock().now;
        match fault {
            Fault::Pause { who, ms: len } => {
                if let Some(p) = self.select(who) {
                    self.fault_targets.insert(index, p);
                    self.impair(Some(p), now + ms(len));
                    let mut core = self.executor.lock();
                    if let Some(state) = core.procs.get_mut(p) {
                        state.paused_until = now + ms(len);
                    }
                    core.trace_line(|| format!("  pause c{p} for {len} ms"));
                    core.schedule(now + ms(len), Event::FaultEnd(index));
                }
            }
            Fault::Crash {
                who,
                restart_after_ms,
            } => {
                if let Some(p) = self.select(who) {
                    self.crash_process(p);
                    if let Some(after) = restart_after_ms {
                        self.executor
                            .lock()
                            .schedule(now + ms(after), Event::Start(p));
                    }
                }
            }
            Fault::Isolate { who, ms: len } => {
                if let Some(p) = self.select(who) {
                    self.fault_targets.insert(index, p);
                    self.impair(Some(p), now + ms(len));
                    let mut core = self.executor.lock();
                    for node in 0..self.nodes.len() {
                        core.net
                            .set_cut(Endpoint::Process(p), Endpoint::Node(node), true);
                    }
                    core.trace_line(|| format!("  isolate c{p} for {len} ms"));
                    core.schedule(now + ms(len), Event::FaultEnd(index));
                }
            }
            Fault::Slow {
                who,
                extra_ms,
                ms: len,
            } => {
                if let Some(p) = self.select(who) {
                    self.fault_targets.insert(index, p);
                    self.impair(Some(p), now + ms(len));
                    let mut core = self.executor.lock();
                    core.net.set_slow(p, Duration::from_millis(extra_ms));
                    core.trace_line(|| format!("  slow c{p} by {extra_ms} ms for {len} ms"));
                    core.schedule(now + ms(len), Event::FaultEnd(index));
                }
            }
            // Clock faults were folded into the clock models when the world was built.
            Fault::ClientClockDrift { .. }
            | Fault::ClientClockJump { .. }
            | Fault::NodeClockJump { .. } => {}
            Fault::NodeCrash {
                node,
                restart_after_ms,
            } => {
                self.crash_node(node);
                self.impair(
                    None,
                    now + ms(restart_after_ms.unwrap_or(u64::MAX / 4_000_000)),
                );
                if let Some(after) = restart_after_ms {
                    self.executor
                        .lock()
                        .schedule(now + ms(after), Event::NodeRestart(node));
                }
            }
            Fault::Failover {
                group,
                restart_after_ms,
            } => {
                self.failover(group);
                self.impair(None, now + ms(1_000));
                if let (Some(after), Some(old)) = (restart_after_ms, self.old_master_of(group)) {
                    self.executor
                        .lock()
                        .schedule(now + ms(after), Event::NodeRestart(old));
                }
            }
            Fault::ScriptFlush { node } => {
                if let Some(n) = self.nodes.get_mut(node) {
                    n.flush_scripts();
                }
            }
        }
    }

    fn old_master_of(&self, group: usize) -> Option<NodeId> {
        let current = self.executor.lock().service_master.get(group).copied()?;
        self.nodes
            .iter()
            .find(|n| !n.up && n.role == Role::Replica(current))
            .map(|n| n.id)
    }

    fn fault_end(&mut self, index: usize) {
        let Some(fault) = self.config.faults.get(index).map(|f| f.fault.clone()) else {
            return;
        };
        let Some(p) = self.fault_targets.remove(&index) else {
            return;
        };
        let mut core = self.executor.lock();
        match fault {
            Fault::Isolate { .. } => {
                for node in 0..self.nodes.len() {
                    core.net
                        .set_cut(Endpoint::Process(p), Endpoint::Node(node), false);
                }
            }
            Fault::Slow { .. } => core.net.set_slow(p, Duration::ZERO),
            _ => {}
        }
        core.trace_line(|| format!("FAULT END {} on c{p}", fault.kind()));
    }

    fn crash_process(&mut self, proc: ProcId) {
        let (futures, pubsubs) = {
            let mut core = self.executor.lock();
            let Some(state) = core.procs.get_mut(proc) else {
                return;
            };
            if !state.alive {
                return;
            }
            let state_incarnation = state.incarnation;
            state.alive = false;
            state.incarnation += 1;
            state.paused_until = 0;
            core.trace_line(|| format!("c{proc} crashes"));
            let (at, incarnation) = (core.now, state_incarnation);
            core.history.push(HistEvent {
                at,
                proc,
                incarnation,
                lock: String::new(),
                kind: HistKind::Crashed,
            });
            let futures = executor::take_tasks_of(&mut core, Some(proc));
            let mut pubsubs = Vec::new();
            let ids: Vec<ConnId> = core
                .conns
                .iter()
                .filter(|(_, c)| c.proc == proc && !c.closed)
                .map(|(id, _)| *id)
                .collect();
            for id in ids {
                if let Some(c) = core.conns.get_mut(&id) {
                    c.closed = true;
                    if let Some(node) = c.pinned {
                        pubsubs.push((node, id));
                    }
                }
                core.reset_conn(id, io::ErrorKind::ConnectionAborted, "process crashed");
            }
            (futures, pubsubs)
        };
        // The server notices the closed sockets.
        for (node, conn) in pubsubs {
            if let Some(n) = self.nodes.get_mut(node) {
                n.unsubscribe(None, conn);
            }
        }
        drop(futures);
    }

    fn crash_node(&mut self, node: NodeId) {
        let Some(n) = self.nodes.get_mut(node) else {
            return;
        };
        if !n.up {
            return;
        }
        n.crash();
        self.check_waits(node, true);
        let mut core = self.executor.lock();
        if let Some(up) = core.node_up.get_mut(node) {
            *up = false;
        }
        core.trace_line(|| format!("node n{node} crashes"));
        let ids: Vec<ConnId> = core
            .conns
            .iter()
            .filter(|(_, c)| {
                c.pinned == Some(node)
                    || (c.pinned.is_none() && core.resolve(c.target) == Some(node))
            })
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            core.reset_conn(id, io::ErrorKind::ConnectionReset, "server went away");
        }
    }

    fn node_restart(&mut self, node: NodeId) {
        let master = match self.nodes.get(node).map(|n| n.role) {
            Some(Role::Replica(master)) => self
                .nodes
                .get(master)
                .filter(|m| m.up)
                .map(|m| (m.data().clone(), m.repl_offset)),
            _ => None,
        };
        let Some(n) = self.nodes.get_mut(node) else {
            return;
        };
        if n.up {
            return;
        }
        n.restart();
        if let Some((data, offset)) = master {
            n.full_sync(&data, offset);
        }
        let mut core = self.executor.lock();
        if let Some(up) = core.node_up.get_mut(node) {
            *up = true;
        }
        core.trace_line(|| format!("node n{node} restarts"));
    }

    fn failover(&mut self, group: usize) {
        let Some(old) = self.executor.lock().service_master.get(group).copied() else {
            return;
        };
        self.crash_node(old);
        let best = self
            .nodes
            .iter()
            .filter(|n| n.up && n.role == Role::Replica(old))
            .max_by_key(|n| (n.repl_offset, std::cmp::Reverse(n.id)))
            .map(|n| n.id);
        let Some(new) = best else {
            self.executor
                .lock()
                .trace_line(|| format!("failover of group {group}: no replica to promote"));
            return;
        };
        let data = self.nodes[new].data().clone();
        for n in &mut self.nodes {
            if n.id == new {
                n.role = Role::Master;
                n.replica_acks.clear();
            } else if n.role == Role::Replica(old) || n.id == old {
                n.role = Role::Replica(new);
                if n.up {
                    n.full_sync(&data, 0);
                }
            }
        }
        let mut core = self.executor.lock();
        if let Some(master) = core.service_master.get_mut(group) {
            *master = new;
        }
        core.trace_line(|| format!("failover of group {group}: n{new} promoted"));
    }

    /// Stops every task (dropping futures outside the lock) so the world can be dropped
    /// without reference cycles keeping it alive.
    pub fn shutdown(&mut self) {
        loop {
            let futures = {
                let mut core = self.executor.lock();
                core.shutting_down = true;
                executor::take_tasks_of(&mut core, None)
            };
            if futures.is_empty() {
                break;
            }
            drop(futures);
        }
        let mut core = self.executor.lock();
        core.conns.clear();
    }
}

impl Drop for World {
    fn drop(&mut self) {
        self.shutdown();
    }
}
