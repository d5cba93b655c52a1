//! One client of a safety run: its own lock (own connections, see [`held`]) in a lock loop
//! that records what it *believes* — the same loop as the simulator's workload, so the two
//! histories mean the same thing. The loop runs as a task of the harness, or alone in its
//! own process (`worker_process`) when a fault must stop the process for real.
//!
//! Invariant: a hold is believed from `lock()` returning until the worker calls `unlock()`
//! or observes the lease lost; exclusive holds write to the shared fenced resource at their
//! start and end, and a "paused" hold (holder-pause) ignores `lost()` and writes after the
//! pause, as a process frozen by GC would; a frozen one (holder-freeze) stops its whole
//! process and carries on after it is continued.
//!
//! [`held`]: crate::safety::held

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use futures::future::{Either, select};
use leasehold_sim::workload::LockKind;
use leasehold_sim::world::history::{Access, HistKind};
use leasehold_sim::world::net::ProcId;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::sync::watch;

use crate::error::Result;
use crate::safety::behaviour::{Behaviour, Freeze, PausePlan, RedisTarget};
use crate::safety::held::{Held, Lock};
use crate::safety::process_signal;
use crate::safety::resource::Resource;
use crate::safety::run_history::RunHistory;

/// Pause after a failed acquire before the next attempt, so a worker facing a dead node
/// retries a few times per TTL instead of spinning on connection errors.
const FAILED_ACQUIRE_BACKOFF: Duration = Duration::from_millis(50);

/// Who holds the lock now (the last client granted it), for injectors that aim at the
/// holder, and the evidence they collect.
#[derive(Debug, Default)]
pub struct Board {
    holder: AtomicUsize,
    paused: AtomicBool,
    /// Replicas that acknowledged the latest grant, +1 (0: not asked).
    acked: AtomicUsize,
}

/// Board value for "nobody".
const NOBODY: usize = 0;

impl Board {
    /// The process that believes it holds the lock, if any.
    pub fn holder(&self) -> Option<ProcId> {
        match self.holder.load(Ordering::SeqCst) {
            NOBODY => None,
            n => Some(n - 1),
        }
    }

    /// Whether a planned holder pause has started while holding.
    pub fn paused(&self) -> bool {
        self.paused.load(Ordering::SeqCst)
    }

    /// How many replicas acknowledged the latest grant (`None` without `wait_replicas`).
    pub fn replicas_acked(&self) -> Option<u32> {
        match self.acked.load(Ordering::SeqCst) {
            0 => None,
            n => u32::try_from(n - 1).ok(),
        }
    }

    /// `proc` was granted the lock (`acked`: replicas that acknowledged it, when asked).
    pub(super) fn granted(&self, proc: ProcId, acked: Option<u32>) {
        let acked = acked.map_or(0, |n| n as usize + 1);
        self.acked.store(acked, Ordering::SeqCst);
        self.holder.store(proc + 1, Ordering::SeqCst);
    }

    /// `proc` stopped believing; the board forgets it if it is still the holder shown.
    pub(super) fn ended(&self, proc: ProcId) {
        // Only the shown holder is cleared: a reader or permit holder that ends leaves a
        // later grant on the board.
        let _ = self
            .holder
            .compare_exchange(proc + 1, NOBODY, Ordering::SeqCst, Ordering::SeqCst);
    }

    pub(super) fn mark_paused(&self) {
        self.paused.store(true, Ordering::SeqCst);
    }
}

/// Where a worker's observations go.
pub(super) trait Sink: Send + Sync {
    /// Records what `proc` observed about `lock` now.
    fn record(&self, proc: ProcId, lock: &str, kind: HistKind);
    /// `proc` writes to the fenced resource with `token`.
    fn write(&self, proc: ProcId, lock: &str, token: u64);
    /// `proc` was granted the lock (`acked`: replicas that acknowledged it, when asked).
    fn granted(&self, proc: ProcId, acked: Option<u32>);
    /// `proc` stopped believing it holds.
    fn ended(&self, proc: ProcId);
    /// A planned in-process pause starts now.
    fn paused(&self, proc: ProcId);
    /// Run time (ns) of the worker's clock.
    fn now_ns(&self) -> u64;
}

/// What every in-process worker of a try shares.
#[derive(Debug, Clone)]
pub struct RunContext {
    /// The history.
    pub history: Arc<RunHistory>,
    /// The protected resource.
    pub resource: Arc<Resource>,
    /// Who holds.
    pub board: Arc<Board>,
}

impl Sink for RunContext {
    fn record(&self, proc: ProcId, lock: &str, kind: HistKind) {
        self.history.record(proc, lock, kind);
    }
    fn write(&self, proc: ProcId, lock: &str, token: u64) {
        self.resource.write(proc, lock, token);
    }
    fn granted(&self, proc: ProcId, acked: Option<u32>) {
        self.board.granted(proc, acked);
    }
    fn ended(&self, proc: ProcId) {
        self.board.ended(proc);
    }
    fn paused(&self, _proc: ProcId) {
        self.board.mark_paused();
    }
    fn now_ns(&self) -> u64 {
        self.history.now_ns()
    }
}

/// A connected worker, ready to run.
pub struct Worker {
    proc: ProcId,
    name: String,
    lock: Lock,
    behaviour: Behaviour,
}

impl Worker {
    /// Connects process `proc` to `target` (its own client, hence its own connections).
    pub async fn connect(
        proc: ProcId,
        target: &RedisTarget,
        name: &str,
        behaviour: Behaviour,
    ) -> Result<Self> {
        let lock = Lock::connect(target, name, &behaviour).await?;
        Ok(Self {
            proc,
            name: name.to_owned(),
            lock,
            behaviour,
        })
    }

    /// Runs the lock loop until `stop` turns true, reporting to `sink`.
    pub(super) async fn run(self, sink: &dyn Sink, mut stop: watch::Receiver<bool>) {
        let Worker {
            proc,
            name,
            lock,
            behaviour,
        } = self;
        let mut rng = StdRng::seed_from_u64(behaviour.seed);
        let mut pause = behaviour.pause;
        while !*stop.borrow() {
            tokio::time::sleep(uniform(&mut rng, behaviour.think)).await;
            let read = match behaviour.kind {
                LockKind::ReadWrite { read_percent } => {
                    rng.next_u64() % 100 < u64::from(read_percent)
                }
                LockKind::Mutex | LockKind::Semaphore { .. } => false,
            };
            sink.record(proc, &name, HistKind::WaitStart);
            let attempt = tokio::select! {
                held = lock.lock(&name, &behaviour, read) => held,
                _ = stop.wait_for(|s| *s) => {
                    // Dropping the acquire future is cancellation-safe (docs/DESIGN.md §2).
                    sink.record(proc, &name, HistKind::AcquireFailed { error: "run ended".into() });
                    break;
                }
            };
            let held = match attempt {
                Ok(held) => held,
                Err(err) => {
                    let error = err.to_string();
                    sink.record(proc, &name, HistKind::AcquireFailed { error });
                    tokio::time::sleep(FAILED_ACQUIRE_BACKOFF).await;
                    continue;
                }
            };
            hold(
                &held,
                (proc, &name),
                &behaviour,
                sink,
                &mut pause,
                uniform(&mut rng, behaviour.hold),
                &mut stop,
            )
            .await;
            sink.ended(proc);
            // LeaseLost / NotHeld / Ambiguous are the client's business; the checker judges
            // the history.
            if let Err(err) = held.unlock().await {
                tracing::debug!(proc, %err, "unlock");
            }
        }
    }
}

/// One believed hold: from the grant to the release (or the lost signal). The end of the
/// run ends it early, as an application winding down finishes its work: the try's history
/// is stamped at the stop, and nobody acquires after it, so the rest of a long hold would
/// only keep the cell waiting (up to 2 TTL per cell).
async fn hold(
    held: &Held,
    (proc, name): (ProcId, &str),
    behaviour: &Behaviour,
    sink: &dyn Sink,
    pause: &mut Option<PausePlan>,
    length: Duration,
    stop: &mut watch::Receiver<bool>,
) {
    let token = held.token();
    let access: Access = held.access();
    sink.record(proc, name, HistKind::Acquired { token, access });
    sink.granted(proc, held.replicas_acked());
    let writes = held.writes();
    if writes {
        sink.write(proc, name, token);
    }
    let now = Duration::from_nanos(sink.now_ns());
    if let Some(plan) = pause.filter(|p| now >= p.after) {
        *pause = None;
        sink.paused(proc);
        tracing::debug!(proc, token, how = ?plan.how, "holder pauses");
        match plan.how {
            Freeze::Task => {
                // The frozen task neither renews (its watchdog is off) nor looks at lost().
                tokio::time::sleep(plan.pause).await;
                if writes {
                    sink.write(proc, name, token);
                }
                sink.record(proc, name, HistKind::Released);
                return;
            }
            Freeze::Process => {
                // The injector sees the pause on the board, finds the process stopped and
                // continues it; a failed stop leaves the injector's evidence saying so.
                if let Err(err) = process_signal::stop_self() {
                    tracing::warn!(proc, %err, "holder freeze");
                }
                // Stopped on its way to the resource, it writes first thing when continued,
                // before anything looks at lost(): the write fencing must refuse.
                if writes {
                    sink.write(proc, name, token);
                }
            }
        }
    }
    let worked = async {
        tokio::select! {
            () = tokio::time::sleep(length) => {}
            _ = stop.wait_for(|s| *s) => {}
        }
    };
    match select(Box::pin(worked), Box::pin(held.lost(behaviour.ttl))).await {
        Either::Left(_) => {
            if writes {
                sink.write(proc, name, token);
            }
            sink.record(proc, name, HistKind::Released);
        }
        Either::Right(_) => sink.record(proc, name, HistKind::Lost),
    }
}

fn uniform(rng: &mut StdRng, (lo, hi): (Duration, Duration)) -> Duration {
    if hi <= lo {
        return lo;
    }
    let span = u64::try_from((hi - lo).as_nanos()).unwrap_or(u64::MAX);
    lo + Duration::from_nanos(rng.next_u64() % span.max(1))
}
