//! The world room: the simulated deployment. The network ([`net`]), the executor that
//! runs processes over it ([`executor`]), the production client's seams ([`backend`],
//! [`process`], Sentinel [`discovery`]), the fault catalogue ([`faults`]), the history
//! every event is recorded in ([`history`], with the lock-script [`calls`] read off the
//! wire), the server-truth oracle's vocabulary ([`truth`]), and the driver below.
//!
//! The world: nodes, processes, the fenced resource and the driver loop that ties them to
//! the executor, the network and the fault schedule.
//!
//! This module holds the deployment's configuration, the driver loop and the event
//! dispatch; what each event does lives with its concern: `nodes.rs` (commands,
//! replication, `WAIT`, crashes and failover), `clients.rs` (client processes and their
//! connections), `resource.rs` (the fenced resource), `sentinels.rs` (who the Sentinels
//! name as each group's master), `inject.rs` (fault injection) and `oracle.rs` (believed
//! holds checked against the nodes before every event; `census.rs` counts semaphores' free
//! permits beside it).
//!
//! Invariant: the driver is the only code that touches nodes (their Lua states never leave
//! this thread); each event is handled atomically at its virtual instant, so a script runs
//! to completion with no interleaving, replication and `WAIT` follow Redis's asynchronous
//! semantics, and faults fire exactly when scheduled.
//!
//! May import: engine, model.

pub mod backend;
pub mod calls;
pub mod discovery;
pub mod executor;
pub mod faults;
pub mod history;
pub mod kept;
pub mod net;
pub mod process;
pub mod truth;

use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use leasehold::backend::BoxFuture;
use serde::{Deserialize, Serialize};

use crate::engine::clock::{ClockChange, ClockModel};
use crate::engine::rng::SimRng;
use crate::engine::trace::Trace;
use crate::model::coverage::Coverage;
use crate::model::node::{MinReplicas, NODE_CLOCK_BASE};
use crate::model::resp::Reply;
use crate::model::{Executed, Node, NodeId, Persistence, Role, ServerClock};
use crate::world::executor::{Core, Executor, ProcState};
use crate::world::faults::{Fault, ScheduledFault};
use crate::world::history::{FaultMark, HistEvent, KeyAtEnd};
use crate::world::net::{ConnId, Endpoint, Event, Lane, NetConfig, NetState, ProcId, Target};
use crate::world::process::ProcessCtx;

mod census;
mod clients;
mod driven;
mod inject;
mod min_replicas;
mod nodes;
mod oracle;
mod promotion;
mod resource;
mod sentinels;
mod split;
mod stall;

use nodes::WaitWaiter;
use split::SplitState;
use stall::Stall;

/// How often `appendfsync everysec` flushes, ns of the node's clock.
const FSYNC_PERIOD_NS: u64 = 1_000_000_000;

/// Polls allowed at one virtual instant before the run is declared livelocked (tasks
/// waking each other forever without letting time pass).
const LIVELOCK_POLLS: u64 = 200_000;

/// Errors of the simulator: choosing what to run, building or running a world.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// No catalogued scenario has this name.
    #[error("no scenario {0:?}")]
    UnknownScenario(String),
    /// No fault class of the design matrix has this name.
    #[error("no fault class {name:?}; known: {known:?}")]
    UnknownFaultClass {
        /// The name given.
        name: String,
        /// The classes there are.
        known: Vec<&'static str>,
    },
    /// No fault kind has this name.
    #[error("unknown fault kind {0:?}; known: {known:?} and loss", known = crate::world::faults::Fault::KINDS)]
    UnknownFault(String),
    /// The Lua state of a node could not be created or hooked.
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
    /// A run id is neither a seed nor a seed followed by `/`-separated mutation numbers.
    #[error("bad run id {0:?}: expected a seed (17) or a steered run (17/0/3)")]
    RunId(String),
    /// The share of exploration runs to steer is not in `[0, 1)`.
    #[error("steering share {0} is not in [0, 1): exploration needs plain seeds to steer from")]
    SteerShare(f64),
    /// `explore --shard` is not `I/N` with `1 <= I <= N`.
    #[error("bad shard {text:?}: {why}; expected I/N with 1 <= I <= N, e.g. 2/4")]
    Shard {
        /// The text given.
        text: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// `explore --shard` with steering on: a steered round derives from the corpus of every
    /// run before it, which no shard holds, so shards run plain seeds only.
    #[error("explore --shard runs plain seeds only, but the steering share is {0}: add --steer 0")]
    ShardSteered(f64),
    /// A directory given to `merge` holds no shard's report.
    #[error("{}: no shard of an exploration: {why}", dir.display())]
    NotAShard {
        /// The directory.
        dir: PathBuf,
        /// Why its `sim-explore.json` does not serve.
        why: String,
    },
    /// A shard given to `merge` is of another exploration than the first one given.
    #[error("{} is not a shard of the exploration {} is one of: its {what} differ", dir.display(), first.display())]
    ShardMismatch {
        /// The shard that does not fit.
        dir: PathBuf,
        /// The first shard given, which the others are checked against.
        first: PathBuf,
        /// What differs: the options, the shard count, the seeds.
        what: &'static str,
    },
    /// Two directories given to `merge` hold the same shard.
    #[error("shard {shard} given twice: {} and {}", first.display(), second.display())]
    DuplicateShard {
        /// The shard, `I/N`.
        shard: String,
        /// Where it was found first.
        first: PathBuf,
        /// Where it was found again.
        second: PathBuf,
    },
    /// `merge` was given no shard at all.
    #[error("merge needs the report directories of an exploration's shards")]
    NoShards,
    /// `merge` was not given every shard of the exploration.
    #[error("shard(s) {missing} of {count} missing: merge needs every shard once")]
    MissingShards {
        /// The missing shards' numbers, `2, 4`.
        missing: String,
        /// How many shards the exploration was split into.
        count: u32,
    },
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
    /// Its `min-replicas-to-write` and `min-replicas-max-lag`, set in its configuration
    /// file (so kept across restarts); off when absent, Redis's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_replicas: Option<MinReplicas>,
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
    /// How the nodes' scripts read the clock (their Redis version).
    #[serde(default)]
    pub server_clock: ServerClock,
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

/// A whole simulated deployment.
pub struct World {
    executor: Arc<Executor>,
    nodes: Vec<Node>,
    sched: SimRng,
    mains: Vec<ProcessMain>,
    config: WorldConfig,
    waits: BTreeMap<u64, WaitWaiter>,
    next_waiter: u64,
    /// Per master and connection, the replication offset of the connection's last write
    /// (Redis's `client->woff`): what its `WAIT` waits for.
    woff: BTreeMap<(NodeId, ConnId), u64>,
    /// Per replica, the virtual time of its last acknowledgement (`min_replicas.rs`).
    acked_at: BTreeMap<NodeId, u64>,
    fault_targets: BTreeMap<usize, ProcId>,
    /// Crash failovers waiting for their promotion, by fault index: the crashed master.
    late_promotions: BTreeMap<usize, NodeId>,
    /// Replication links a fault cut, by fault index: (master, replica).
    link_cuts: BTreeMap<usize, (NodeId, NodeId)>,
    /// Promotions and lagging Sentinel views, for what the Sentinels answer.
    sentinel_views: sentinels::SentinelViews,
    stalls: Vec<Stall>,
    splits: BTreeMap<usize, SplitState>,
    highest_token: BTreeMap<String, u64>,
    proc_rng: SimRng,
    hiccup_rng: SimRng,
    glitch_rng: SimRng,
    /// Each script's pace on a server whose clock moves during scripts.
    pace_rng: SimRng,
    /// The semaphores whose free permits are counted (see [`census`]).
    census: Vec<census::Census>,
}

impl std::fmt::Debug for World {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("World")
            .field("nodes", &self.nodes.len())
            .field("procs", &self.mains.len())
            .finish_non_exhaustive()
    }
}

/// Virtual nanoseconds in `ms` milliseconds (schedules are written in ms, time runs in ns).
fn ns_from_ms(ms: u64) -> u64 {
    ms.saturating_mul(1_000_000)
}

impl World {
    /// Builds the deployment; processes are added with [`World::add_process`].
    pub fn new(config: WorldConfig) -> Result<Self, SimError> {
        let mut root = SimRng::new(config.seed);
        let sched = root.fork(1);
        let net_rng = root.fork(2);
        let proc_rng = root.fork(3);
        let hiccup_rng = root.fork(4);
        let glitch_rng = root.fork(5);
        let pace_rng = root.fork(6);
        let mut nodes = Vec::with_capacity(config.nodes.len());
        for (id, spec) in config.nodes.iter().enumerate() {
            let mut clock = ClockModel::new(NODE_CLOCK_BASE, false);
            clock.apply(
                0,
                ClockChange::Jump(spec.clock_offset_ms.saturating_mul(1_000_000)),
            );
            let mut changes: Vec<(u64, ClockChange)> = config
                .faults
                .iter()
                .filter_map(|f| match f.fault {
                    Fault::NodeClockJump { node, by_ms } if node == id => Some((
                        ns_from_ms(f.at_ms),
                        ClockChange::Jump(by_ms.saturating_mul(1_000_000)),
                    )),
                    Fault::NodeClockDrift { node, ppm } if node == id => {
                        Some((ns_from_ms(f.at_ms), ClockChange::Drift(ppm)))
                    }
                    _ => None,
                })
                .collect();
            changes.sort_by_key(|&(at, _)| at);
            for (at, change) in changes {
                clock.apply(at, change);
            }
            let mut node = Node::new(id, spec.persistence, clock).map_err(|err| SimError::Lua {
                node: id,
                message: err.to_string(),
            })?;
            node.min_replicas = spec.min_replicas;
            if let Some(master) = spec.replica_of {
                if master >= config.nodes.len() || master == id {
                    return Err(SimError::Config(format!("node {id}: bad master {master}")));
                }
                node.role = Role::Replica(master);
            }
            nodes.push(node);
        }
        // A replica starts online and in sync with its empty master, as after its first
        // full synchronisation: it counts for a `WAIT` of a connection that wrote nothing.
        for (id, spec) in config.nodes.iter().enumerate() {
            if let Some(master) = spec.replica_of.and_then(|m| nodes.get_mut(m)) {
                master.replica_acks.insert(id, 0);
            }
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
            core.schedule(ns_from_ms(f.at_ms), Event::Fault(i));
        }
        for node in &nodes {
            if node.persistence == Persistence::AofEverySec {
                core.schedule(node.clock.after(0, FSYNC_PERIOD_NS), Event::Fsync(node.id));
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
            woff: BTreeMap::new(),
            acked_at: BTreeMap::new(),
            fault_targets: BTreeMap::new(),
            late_promotions: BTreeMap::new(),
            link_cuts: BTreeMap::new(),
            sentinel_views: sentinels::SentinelViews::default(),
            stalls: Vec::new(),
            splits: BTreeMap::new(),
            highest_token: BTreeMap::new(),
            proc_rng,
            hiccup_rng,
            glitch_rng,
            pace_rng,
            census: Vec::new(),
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
                    Some((ns_from_ms(f.at_ms), ClockChange::Drift(ppm)))
                }
                Fault::ClientClockJump { proc, by_ms } if proc == id => Some((
                    ns_from_ms(f.at_ms),
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
            if let Some(proc) = executor::run_one(&self.executor, &mut self.sched) {
                self.maybe_hiccup(proc);
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
                Some(event) => {
                    self.check_beliefs();
                    self.census_permits();
                    self.handle(event);
                }
                None => break,
            }
        }
        {
            let mut core = self.executor.lock();
            core.now = core.now.max(horizon);
        }
        self.check_beliefs();
        self.census_permits();
        RunEnd::Horizon
    }

    /// The history so far.
    pub fn history(&self) -> Vec<HistEvent> {
        self.executor.lock().history.clone()
    }

    /// Each node's clock, by node id (their whole course: changes are scheduled up front).
    pub fn node_clocks(&self) -> Vec<ClockModel> {
        self.nodes.iter().map(|n| n.clock.clone()).collect()
    }

    /// Every live key of the nodes that are up at virtual time `t`, with its time to live
    /// on its node's clock.
    pub fn keys_at(&self, t: u64) -> Vec<KeyAtEnd> {
        let mut keys = Vec::new();
        for node in self.nodes.iter().filter(|n| n.up) {
            let now_ms = node.wall_us(t) / 1_000;
            for (key, entry) in node.data().iter() {
                let ttl_ms = entry.expires_at.map(|at| at - now_ms);
                if ttl_ms.is_none_or(|ms| ms > 0) {
                    keys.push(KeyAtEnd {
                        node: node.id,
                        key: String::from_utf8_lossy(key).into_owned(),
                        ttl_ms,
                    });
                }
            }
        }
        keys
    }

    /// The faults that landed so far.
    pub fn fault_log(&self) -> Vec<FaultMark> {
        self.executor.lock().fault_log.clone()
    }

    /// The trace so far.
    pub fn trace(&self) -> String {
        self.executor.lock().trace.text().to_owned()
    }

    /// Executor polls performed so far.
    pub fn polls(&self) -> u64 {
        self.executor.lock().polls
    }

    /// Messages the loss model lost on client connections so far.
    pub fn message_losses(&self) -> u64 {
        self.executor.lock().net.losses
    }

    /// What the Sentinel faults did so far.
    pub fn sentinel_evidence(&self) -> executor::SentinelEvidence {
        self.executor.lock().sentinel_evidence
    }

    /// Commands the nodes received so far.
    pub fn node_commands(&self) -> u64 {
        self.nodes.iter().map(|n| n.stats.commands).sum()
    }

    /// Records which script lines and call sites run, on every node, from now on.
    pub fn record_coverage(&mut self) -> Result<(), SimError> {
        for (id, node) in self.nodes.iter_mut().enumerate() {
            node.record_coverage().map_err(|err| SimError::Lua {
                node: id,
                message: err.to_string(),
            })?;
        }
        Ok(())
    }

    /// The script lines and call sites run on any node while recording.
    pub fn coverage(&self) -> Coverage {
        let mut sites = Coverage::default();
        for node in &self.nodes {
            sites.merge(&node.coverage());
        }
        sites
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

    /// Handles one event at its virtual instant, atomically.
    fn handle(&mut self, event: Event) {
        let Some(event) = self.hold_if_stalled(event) else {
            return;
        };
        match event {
            Event::Timer(state) => state.fire(),
            Event::Request {
                conn,
                epoch,
                to,
                req,
                body,
            } => match to {
                Endpoint::Node(node) => {
                    if self.conn_current(conn, epoch) {
                        self.node_execute(node, conn, epoch, req, body);
                    }
                }
                Endpoint::Resource => self.resource_request(conn, epoch, req, &body),
                Endpoint::Sentinel => self.sentinel_request(conn, epoch, req, &body),
                Endpoint::Process(_) => {}
            },
            Event::Response {
                conn,
                epoch,
                req,
                result,
            } => self.deliver_response(conn, epoch, req, result),
            Event::Deadline { conn, req } => self.response_timeout(conn, req),
            Event::Push {
                conn,
                epoch,
                notification,
            } => self.deliver_push(conn, epoch, notification),
            Event::Repl {
                master,
                replica,
                offset,
                batch,
                published,
            } => self.repl_apply(master, replica, offset, &batch, &published),
            Event::ReplAck {
                replica,
                master,
                offset,
            } => self.repl_ack(replica, master, offset),
            Event::Fsync(node) => self.fsync(node),
            Event::WaitTimeout { node, waiter } => self.wait_timeout(node, waiter),
            Event::Fault(index) => self.fault_begin(index),
            Event::FaultEnd(index) => self.fault_end(index),
            Event::NodeRestart(node) => self.node_restart(node),
            Event::Start(proc) => self.start_process(proc),
            Event::Reset { conn, epoch } => self.connection_reset(conn, epoch),
        }
    }

    /// Sends a reply (or a connection failure) from `from` back to the client on `conn`.
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
        core.transmit(from, Endpoint::Process(proc), Lane::Down(conn), || {
            Event::Response {
                conn,
                epoch,
                req,
                result,
            }
        });
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
