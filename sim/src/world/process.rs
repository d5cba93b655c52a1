//! A simulated client process: its `Runtime` seams (clock, spawner, entropy) and handles.
//!
//! Invariant: everything the production client asks of its process goes through these
//! handles and is answered from the simulator — its own skewed clock under virtual time,
//! tasks on the seeded executor, seeded randomness — and every handle of a crashed
//! incarnation is inert (spawns are dropped, so a crashed holder cannot release).

use std::sync::Arc;
use std::time::Duration;

use leasehold::backend::{Backend, BoxFuture};
use leasehold::runtime::{Clock, Entropy, Runtime, Spawner};

use crate::engine::timer::Sleep;
use crate::world::executor::{Executor, spawn_task};
use crate::world::history::{Access, HistEvent, HistKind};
use crate::world::net::ProcId;
use crate::world::truth::{Belief, Claim};

/// A process's clock.
#[derive(Debug, Clone)]
pub struct SimClock {
    executor: Arc<Executor>,
    proc: ProcId,
}

impl Clock for SimClock {
    fn now(&self) -> Duration {
        let core = self.executor.lock();
        let local = core
            .procs
            .get(self.proc)
            .map_or(core.now, |p| p.clock.local_nanos(core.now));
        Duration::from_nanos(local)
    }

    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        let after = u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
        let state = self.executor.lock().timer(self.proc, after);
        Box::pin(Sleep(state))
    }
}

/// A process's spawner: tasks run on the executor as part of this process.
#[derive(Debug, Clone)]
pub struct SimSpawner {
    executor: Arc<Executor>,
    proc: ProcId,
    incarnation: u32,
}

impl Spawner for SimSpawner {
    fn spawn(&self, task: BoxFuture<'static, ()>) {
        if let Err(refused) = spawn_task(&self.executor, self.proc, self.incarnation, task) {
            // The process crashed (or the run ended): its work never runs. Dropped here,
            // outside the core lock, because its destructors may call back in.
            drop(refused);
        }
    }
}

/// A process's entropy: its own seeded stream.
#[derive(Debug, Clone)]
pub struct SimEntropy {
    executor: Arc<Executor>,
    proc: ProcId,
}

impl Entropy for SimEntropy {
    fn next_u64(&self) -> u64 {
        let mut core = self.executor.lock();
        core.procs
            .get_mut(self.proc)
            .map_or(0, |p| p.rng.next_u64())
    }
}

/// Records lock observations into the history, stamped with true time.
#[derive(Debug, Clone)]
pub struct Recorder {
    executor: Arc<Executor>,
    proc: ProcId,
    incarnation: u32,
}

impl Recorder {
    /// Appends `kind` for lock `lock`; a release or a lost lease ends the process's belief
    /// that it holds `lock`.
    pub fn record(&self, lock: &str, kind: HistKind) {
        let mut core = self.executor.lock();
        let at = core.now;
        let proc = self.proc;
        let incarnation = self.incarnation;
        core.trace_line(|| format!("c{proc}.{incarnation} {lock} {kind:?}"));
        if matches!(kind, HistKind::Released | HistKind::Lost) {
            core.beliefs.remove(&(proc, incarnation, lock.to_owned()));
        }
        core.history.push(HistEvent {
            at,
            proc,
            incarnation,
            lock: lock.to_owned(),
            kind,
        });
    }

    /// Records that `lock()` returned a hold with `token` and `access`, and starts
    /// checking, until the hold is released or lost, that the servers still hold `claim`.
    pub fn acquired(&self, lock: &str, token: u64, access: Access, claim: Claim) {
        self.record(lock, HistKind::Acquired { token, access });
        self.executor.lock().beliefs.insert(
            (self.proc, self.incarnation, lock.to_owned()),
            Belief {
                claim,
                reported: false,
            },
        );
    }

    /// True (virtual) time now, for workload bookkeeping that must not use a skewed clock.
    pub fn true_now(&self) -> Duration {
        Duration::from_nanos(self.executor.lock().now)
    }
}

/// Everything a process's main task gets.
#[derive(Clone)]
pub struct ProcessCtx {
    /// Process index.
    pub id: ProcId,
    /// Incarnation (0 for the first start, +1 per restart).
    pub incarnation: u32,
    /// The seams to hand to `leasehold`.
    pub runtime: Runtime,
    /// One backend per deployment target (one node, a service, or N RedLock masters).
    pub backends: Vec<Arc<dyn Backend>>,
    /// Connection to the fenced resource.
    pub resource: crate::world::backend::ResourceClient,
    /// History recorder.
    pub recorder: Recorder,
}

impl std::fmt::Debug for ProcessCtx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessCtx")
            .field("id", &self.id)
            .field("incarnation", &self.incarnation)
            .finish_non_exhaustive()
    }
}

/// The seams of `proc`'s incarnation `incarnation`.
pub fn runtime_for(executor: &Arc<Executor>, proc: ProcId, incarnation: u32) -> Runtime {
    Runtime {
        clock: Arc::new(SimClock {
            executor: Arc::clone(executor),
            proc,
        }),
        spawner: Arc::new(SimSpawner {
            executor: Arc::clone(executor),
            proc,
            incarnation,
        }),
        entropy: Arc::new(SimEntropy {
            executor: Arc::clone(executor),
            proc,
        }),
    }
}

/// A recorder for `proc`'s incarnation.
pub fn recorder_for(executor: &Arc<Executor>, proc: ProcId, incarnation: u32) -> Recorder {
    Recorder {
        executor: Arc::clone(executor),
        proc,
        incarnation,
    }
}
