//! The deterministic executor: tasks, wakers, virtual time, armed timers and the event queue.
//!
//! Invariant: exactly one task runs at a time, on the caller's thread; which ready task
//! runs next is drawn from the seed; time only moves when no task can run, jumping to the
//! earliest queued event (ties broken by insertion order). Nothing here reads the wall
//! clock, iterates a hash map or touches a thread-local RNG, so a seed fixes the run.
//! The queue also carries the network's retransmission-budget checks, which `pop_event`
//! does itself: the world sees only the resets they cause.
//! Futures are never dropped while the core lock is held (their `Drop` may call back in).

use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::task::{Context, Wake, Waker};

use leasehold::backend::BoxFuture;
use serde::Serialize;

use crate::engine::clock::ClockModel;
use crate::engine::rng::SimRng;
use crate::engine::timer::TimerState;
use crate::engine::trace::Trace;
use crate::model::NodeId;
use crate::world::history::{FaultMark, HistEvent};
use crate::world::net::{Arrival, Conn, ConnId, Endpoint, Event, Expiry, Lane, NetState, ProcId};
use crate::world::truth::Belief;

/// A task id, unique over the run.
pub type TaskId = u64;

/// The executor itself: the core (world state reachable from tasks) and the set of ready
/// tasks, shared by the driver and every seam handle (clock, spawner, backend).
#[derive(Debug)]
pub struct Executor {
    core: Mutex<Core>,
    ready: Mutex<BTreeSet<TaskId>>,
}

impl Executor {
    /// Wraps a core.
    pub fn new(core: Core) -> Arc<Self> {
        Arc::new(Self {
            core: Mutex::new(core),
            ready: Mutex::new(BTreeSet::new()),
        })
    }

    /// Locks the core. The simulator is single-threaded, so the lock is never contended;
    /// a poisoned lock (a panic in a task) still holds consistent data for the report.
    pub fn lock(&self) -> MutexGuard<'_, Core> {
        self.core.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn ready(&self) -> MutexGuard<'_, BTreeSet<TaskId>> {
        self.ready.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn mark_ready(&self, id: TaskId) {
        self.ready().insert(id);
    }
}

struct TaskWaker {
    id: TaskId,
    executor: Weak<Executor>,
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if let Some(executor) = self.executor.upgrade() {
            executor.mark_ready(self.id);
        }
    }
}

struct TaskEntry {
    proc: ProcId,
    future: Option<BoxFuture<'static, ()>>,
    waker: Waker,
}

impl std::fmt::Debug for TaskEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskEntry")
            .field("proc", &self.proc)
            .finish_non_exhaustive()
    }
}

/// A simulated client process: its clock, randomness, and fault state.
#[derive(Debug)]
pub struct ProcState {
    /// Name for traces (`c0`, `c1`...).
    pub name: String,
    /// False between a crash and the next start.
    pub alive: bool,
    /// Bumped by every crash; handles from an older incarnation are inert.
    pub incarnation: u32,
    /// The process's tasks do not run before this virtual time (a GC pause).
    pub paused_until: u64,
    /// Its monotonic clock.
    pub clock: ClockModel,
    /// Its entropy source (seeded).
    pub rng: SimRng,
}

/// An event in the queue, ordered by its time, then by when it was queued (the sequence
/// numbers are unique, so the order is total and ties go to the earlier insertion).
#[derive(Debug)]
struct Queued {
    at: u64,
    seq: u64,
    due: Due,
}

/// What a queued entry is: an event for the world, or the network's own bookkeeping,
/// which the world never sees.
#[derive(Debug)]
enum Due {
    /// An event the world handles.
    World(Event),
    /// A connection's retransmission budget is to be checked ([`NetState::expire`]).
    Retransmit(ConnId),
}

impl PartialEq for Queued {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl Eq for Queued {}

impl PartialOrd for Queued {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Queued {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

/// The mutable world state reachable from tasks (everything except the nodes, whose Lua
/// states stay on the driver).
#[derive(Debug)]
pub struct Core {
    /// Virtual time in nanoseconds.
    pub now: u64,
    seq: u64,
    /// Min-heap on (time, sequence): a heap rather than an ordered map because the queue
    /// is only ever pushed and popped at its front, and a heap does that without a node
    /// allocation per event.
    events: BinaryHeap<Reverse<Queued>>,
    tasks: BTreeMap<TaskId, TaskEntry>,
    next_task: TaskId,
    /// Client processes.
    pub procs: Vec<ProcState>,
    /// Open connections.
    pub conns: BTreeMap<ConnId, Conn>,
    /// Next connection id.
    pub next_conn: ConnId,
    /// Next request id.
    pub next_req: u64,
    /// Links.
    pub net: NetState,
    /// Mirror of each node's `up` flag (routing decisions happen off the driver).
    pub node_up: Vec<bool>,
    /// Current master of each replication group, as the Sentinels name it.
    pub service_master: Vec<NodeId>,
    /// What the Sentinel faults did: evidence that they landed.
    pub sentinel_evidence: SentinelEvidence,
    /// The master each process's Sentinel backend last resolved for a group, which it
    /// keeps using until a failure: (process, group) -> node.
    pub routes: BTreeMap<(ProcId, usize), NodeId>,
    /// The lock history the checker reads.
    pub history: Vec<HistEvent>,
    /// Lock-script calls sent and not yet answered, by request id -> the index of their
    /// [`crate::world::history::HistKind::Call`] in `history`: what a node that runs the request
    /// names when it records [`crate::world::history::HistKind::Ran`].
    pub calls_in_flight: BTreeMap<u64, usize>,
    /// The faults that landed, for the checker's causal excuses.
    pub fault_log: Vec<FaultMark>,
    /// Holds clients believe they have now, by (process, incarnation, lock), for the
    /// server-truth oracle.
    pub beliefs: BTreeMap<(ProcId, u32, String), Belief>,
    /// The run's trace.
    pub trace: Trace,
    /// Set while tearing down: spawns are refused.
    pub shutting_down: bool,
    /// Polls performed (for the benchmark).
    pub polls: u64,
}

impl Core {
    /// An empty core at virtual time zero.
    pub fn new(net: NetState, trace: Trace) -> Self {
        Self {
            now: 0,
            seq: 0,
            events: BinaryHeap::new(),
            tasks: BTreeMap::new(),
            next_task: 0,
            procs: Vec::new(),
            conns: BTreeMap::new(),
            next_conn: 0,
            next_req: 0,
            net,
            node_up: Vec::new(),
            service_master: Vec::new(),
            sentinel_evidence: SentinelEvidence::default(),
            routes: BTreeMap::new(),
            history: Vec::new(),
            calls_in_flight: BTreeMap::new(),
            fault_log: Vec::new(),
            beliefs: BTreeMap::new(),
            trace,
            shutting_down: false,
            polls: 0,
        }
    }

    /// Queues `event` at virtual time `at` (never in the past).
    pub fn schedule(&mut self, at: u64, event: Event) {
        self.queue(at, Due::World(event));
    }

    fn queue(&mut self, at: u64, due: Due) {
        let at = at.max(self.now);
        self.seq += 1;
        self.events.push(Reverse(Queued {
            at,
            seq: self.seq,
            due,
        }));
    }

    /// Sends a message from `from` to `to` on `lane`: queues the event `arrive` builds at
    /// the time the network delivers it, nothing if the network loses it or holds it (a
    /// cut link; a heal through [`Core::set_cut`] queues it then), or the reset of the
    /// connection the loss broke.
    pub fn transmit(
        &mut self,
        from: Endpoint,
        to: Endpoint,
        lane: Lane,
        arrive: impl FnOnce() -> Event,
    ) {
        let now = self.now;
        match self.net.send(now, from, to, lane, arrive) {
            Arrival::At(at, event) => self.schedule(at, event),
            Arrival::Held(check) => {
                if let (Some(at), Lane::Up(conn) | Lane::Down(conn)) = (check, lane) {
                    self.queue(at, Due::Retransmit(conn));
                }
            }
            Arrival::Lost => {}
            Arrival::Reset(at, conn) => {
                if let Some(epoch) = self.conns.get(&conn).map(|c| c.epoch) {
                    self.schedule(at, Event::Reset { conn, epoch });
                }
            }
        }
    }

    /// Cuts (or heals) what `from` sends to `to`, one way; a heal queues what it held.
    pub fn set_one_way(&mut self, from: Endpoint, to: Endpoint, cut: bool) {
        let now = self.now;
        let released = self.net.set_one_way(now, from, to, cut);
        for (at, event) in released {
            self.schedule(at, event);
        }
    }

    /// Cuts (or heals) the link between `a` and `b`; a heal queues what the link held.
    pub fn set_cut(&mut self, a: Endpoint, b: Endpoint, cut: bool) {
        let now = self.now;
        let released = self.net.set_cut(now, a, b, cut);
        if !released.is_empty() {
            self.trace_line(|| format!("  {a:?}-{b:?} heals: {} held released", released.len()));
        }
        for (at, event) in released {
            self.schedule(at, event);
        }
    }

    /// Connection `conn`'s retransmission budget is checked: if it ran out, the connection
    /// is broken and its client sees the reset now.
    fn retransmit_check(&mut self, conn: ConnId) {
        let now = self.now;
        match self.net.expire(now, conn) {
            Expiry::Clear => {}
            Expiry::Recheck(at) => self.queue(at, Due::Retransmit(conn)),
            Expiry::Broken => {
                if let Some(epoch) = self.conns.get(&conn).map(|c| c.epoch) {
                    self.trace_line(|| {
                        format!("  connection {conn} gives up: held past the retransmission budget")
                    });
                    self.schedule(now, Event::Reset { conn, epoch });
                }
            }
        }
    }

    /// The time of the next queued event.
    pub fn next_event_time(&self) -> Option<u64> {
        self.events.peek().map(|Reverse(queued)| queued.at)
    }

    /// Removes the next event for the world if it is due by `horizon`, advancing time to
    /// it (and doing the network's own bookkeeping due before it).
    pub fn pop_event(&mut self, horizon: u64) -> Option<Event> {
        loop {
            if self.next_event_time()? > horizon {
                return None;
            }
            let Reverse(Queued { at, due, .. }) = self.events.pop()?;
            self.now = self.now.max(at);
            match due {
                Due::World(event) => return Some(event),
                Due::Retransmit(conn) => self.retransmit_check(conn),
            }
        }
    }

    /// Registers a timer on `proc`'s clock firing `after` local nanoseconds from now.
    pub fn timer(&mut self, proc: ProcId, after: u64) -> Arc<TimerState> {
        let state = Arc::new(TimerState::default());
        let Some(clock) = self.procs.get(proc).map(|p| &p.clock) else {
            return state;
        };
        let deadline = clock.after(self.now, after);
        if deadline <= self.now {
            // Nothing sleeps on it yet, so firing only marks it.
            state.fire();
        } else if deadline != u64::MAX {
            self.schedule(deadline, Event::Timer(Arc::clone(&state)));
        }
        state
    }

    /// Appends a trace line stamped with the current time.
    pub fn trace_line(&mut self, line: impl FnOnce() -> String) {
        let now = self.now;
        self.trace.record(now, line);
    }

    /// Whether `proc`'s handles of `incarnation` are still live.
    pub fn proc_live(&self, proc: ProcId, incarnation: u32) -> bool {
        self.procs
            .get(proc)
            .is_some_and(|p| p.alive && p.incarnation == incarnation)
    }
}

/// Adds a task; returns the future back if it cannot be accepted (to be dropped by the
/// caller after releasing the lock).
pub fn spawn_task(
    executor: &Arc<Executor>,
    proc: ProcId,
    incarnation: u32,
    future: BoxFuture<'static, ()>,
) -> Result<TaskId, BoxFuture<'static, ()>> {
    let mut core = executor.lock();
    if core.shutting_down || !core.proc_live(proc, incarnation) {
        return Err(future);
    }
    let id = core.next_task;
    core.next_task += 1;
    let waker = Waker::from(Arc::new(TaskWaker {
        id,
        executor: Arc::downgrade(executor),
    }));
    core.tasks.insert(
        id,
        TaskEntry {
            proc,
            future: Some(future),
            waker,
        },
    );
    drop(core);
    executor.mark_ready(id);
    Ok(id)
}

/// Picks a runnable task (seeded choice among ready tasks of unpaused processes) and
/// polls it once. Returns the process it belongs to, or `None` when nothing can run at
/// the current instant.
pub fn run_one(executor: &Arc<Executor>, sched: &mut SimRng) -> Option<ProcId> {
    let (id, proc, mut future, waker) = {
        let mut core = executor.lock();
        let mut ready = executor.ready();
        let now = core.now;
        let mut runnable = Vec::new();
        let mut stale = Vec::new();
        for &id in ready.iter() {
            match core.tasks.get(&id) {
                None => stale.push(id),
                Some(task) => {
                    let paused = core
                        .procs
                        .get(task.proc)
                        .is_some_and(|p| p.paused_until > now);
                    if !paused {
                        runnable.push((id, task.proc));
                    }
                }
            }
        }
        for id in stale {
            ready.remove(&id);
        }
        if runnable.is_empty() {
            return None;
        }
        let (id, proc) = runnable[sched.index(runnable.len())];
        ready.remove(&id);
        drop(ready);
        let Some(task) = core.tasks.get_mut(&id) else {
            return Some(proc);
        };
        let Some(future) = task.future.take() else {
            return Some(proc);
        };
        let waker = task.waker.clone();
        core.polls += 1;
        (id, proc, future, waker)
    };
    let mut cx = Context::from_waker(&waker);
    let done = future.as_mut().poll(&mut cx).is_ready();
    let mut core = executor.lock();
    let keep = !done && core.tasks.contains_key(&id);
    if keep {
        if let Some(task) = core.tasks.get_mut(&id) {
            task.future = Some(future);
        }
        drop(core);
    } else {
        core.tasks.remove(&id);
        drop(core);
        drop(future);
    }
    Some(proc)
}

/// Removes every task of `proc` (a crash) and returns their futures for dropping
/// outside the lock.
pub fn take_tasks_of(core: &mut Core, proc: Option<ProcId>) -> Vec<BoxFuture<'static, ()>> {
    let ids: Vec<TaskId> = core
        .tasks
        .iter()
        .filter(|(_, t)| proc.is_none_or(|p| t.proc == p))
        .map(|(id, _)| *id)
        .collect();
    ids.into_iter()
        .filter_map(|id| core.tasks.remove(&id).and_then(|t| t.future))
        .collect()
}

/// Number of live tasks.
pub fn task_count(core: &Core) -> usize {
    core.tasks.len()
}

/// Evidence that the Sentinel faults landed: a check judging one must see it happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct SentinelEvidence {
    /// Answers that named another node than the group's master (a lagging view).
    pub stale_answers: u64,
    /// Lookups a client sent while cut from the Sentinels (held, so unanswered in time).
    pub cut_lookups: u64,
}
