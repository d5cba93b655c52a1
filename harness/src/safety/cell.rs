//! The run of one cell (one scenario × subject): its seeded tries side by side on the same
//! containers, each try its own lock, clients and fenced resource; the scenario's fault is
//! injected at [`FAULT_AT`] (once on the shared node, or once per try at each try's holder),
//! and each try's history is judged once its workers have stopped.
//!
//! Invariant: tries share nothing but the containers and the fault, so each is a sample of
//! its own (its own lock name, seed and evidence); every run is bounded — the fault starts
//! at [`FAULT_AT`], the run ends a TTL and a bit after the fault ended (at [`HORIZON`] at
//! the earliest), and the workers' acquires carry a deadline.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::{join_all, try_join_all};
use leasehold::LockKeys;
use leasehold_sim::report::designs::{self, Row};
use leasehold_sim::workload::LockKind;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::error::{Error, Result};
use crate::safety::agreement;
use crate::safety::behaviour::{Behaviour, Freeze, PausePlan};
use crate::safety::fault_target::{Injector, TryView};
use crate::safety::infra::Infra;
use crate::safety::judge::{CellOutcome, judge};
use crate::safety::link::Link;
use crate::safety::monitor::{self, Observation};
use crate::safety::report::CellReport;
use crate::safety::resource::{Fencing, Resource};
use crate::safety::run_history::RunHistory;
use crate::safety::scenario::{FAULT_AT, RealFault, SafetyScenario, THINK};
use crate::safety::subject::Subject;
use crate::safety::worker::{Board, RunContext, Worker};
use crate::safety::worker_process::{RemoteWorker, WorkerSpec};

/// Slack after the fault's end plus one TTL, for the lock to come back and be granted.
const RECOVERY_SLACK: Duration = Duration::from_millis(500);

/// Shortest try.
const HORIZON: Duration = Duration::from_secs(3);

/// Deadline of every `lock()` call, in TTLs (at least [`MIN_ACQUIRE_TIMEOUT`]): longer than
/// a TTL plus a fair-queue hand-off, shorter than a run, so a waiter stuck behind a fault
/// gives up and retries inside the run.
const ACQUIRE_TIMEOUT_TTLS: u32 = 2;
/// See [`ACQUIRE_TIMEOUT_TTLS`].
const MIN_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(3);

/// Bound for the workers to wind down after the stop signal (an unlock may resolve an
/// ambiguous reply for up to a TTL).
const STOP_GRACE: Duration = Duration::from_secs(5);

/// Spacing of the clients' seeds within a try's seed, so no two clients of a cell share one.
const CLIENT_SEED_STRIDE: u64 = 1_000;

/// What the cell runs on.
pub(super) struct CellPlan<'a> {
    /// The containers.
    pub infra: &'a Infra,
    /// The scenario.
    pub scenario: &'a SafetyScenario,
    /// Who takes the lock.
    pub subject: Subject,
    /// One seed per try.
    pub seeds: &'a [u64],
    /// The harness binary, for workers that run in their own process (holder-freeze).
    pub worker_exe: Option<&'a Path>,
}

/// One try while it runs.
struct Try {
    seed: u64,
    name: String,
    key: String,
    history: Arc<RunHistory>,
    board: Arc<Board>,
    links: Vec<Link>,
    tasks: Vec<JoinHandle<()>>,
    remote: Option<RemoteWorker>,
    monitor: Option<JoinHandle<Vec<Observation>>>,
}

/// Runs the cell's tries and judges them (simulator columns still empty).
pub(super) async fn run(plan: &CellPlan<'_>) -> Result<CellReport> {
    let CellPlan {
        infra,
        scenario,
        subject,
        ..
    } = *plan;
    let origin = Instant::now();
    let (stop_tx, stop_rx) = watch::channel(false);
    let master = infra.master().await?;
    let mut tries = Vec::with_capacity(plan.seeds.len());
    for &seed in plan.seeds {
        tries.push(start_try(plan, seed, origin, master.url(), &stop_rx).await?);
    }

    tokio::time::sleep(FAULT_AT.saturating_sub(origin.elapsed())).await;
    let injector = Injector {
        infra,
        master,
        ttl: scenario.ttl,
        fault_at: FAULT_AT,
        tries: tries
            .iter()
            .map(|t| TryView {
                board: &t.board,
                history: &t.history,
                links: &t.links,
                process: t.remote.as_ref().map(RemoteWorker::pid),
                clients: scenario.clients(),
                name: &t.name,
                key: &t.key,
            })
            .collect(),
    };
    let faults = injector.inject(scenario.fault).await?;
    let fault_end = faults.iter().map(|f| f.end_ms).fold(0.0, f64::max);
    let end = Duration::from_secs_f64(fault_end / 1e3) + scenario.ttl + RECOVERY_SLACK;
    tokio::time::sleep(end.max(HORIZON).saturating_sub(origin.elapsed())).await;

    stop_tx.send_replace(true);
    let end_ns = u64::try_from(origin.elapsed().as_nanos()).unwrap_or(u64::MAX);
    let mut handles = Vec::new();
    let mut remotes = Vec::new();
    for t in &mut tries {
        handles.append(&mut t.tasks);
        remotes.extend(t.remote.take());
    }
    let stopped = async {
        join_all(handles).await;
        join_all(remotes.into_iter().map(RemoteWorker::stop)).await;
    };
    if tokio::time::timeout(STOP_GRACE, stopped).await.is_err() {
        tracing::warn!(scenario = scenario.name, "workers did not stop in time");
    }
    if scenario.fault.fails_over() {
        infra.restart_stopped_nodes().await?;
    }
    let master = infra.master().await?;
    let mut reports = Vec::with_capacity(tries.len());
    for (t, fault) in tries.into_iter().zip(faults) {
        let observations = match t.monitor {
            Some(task) => task.await.unwrap_or_default(),
            None => Vec::new(),
        };
        let leftover = master
            .query::<i64>(redis::cmd("PTTL").arg(&t.key))
            .await
            .ok();
        let events = t.history.events();
        let outcome = CellOutcome {
            events: &events,
            end_ns,
            fault,
            observations: &observations,
            leftover,
        };
        tracing::debug!(lock = t.name, "try judged");
        reports.push(judge(scenario, subject, t.seed, outcome));
    }
    Ok(agreement::cell(scenario, subject, reports))
}

/// Connects and starts the clients of the try with `seed`.
async fn start_try(
    plan: &CellPlan<'_>,
    seed: u64,
    origin: Instant,
    master_url: String,
    stop: &watch::Receiver<bool>,
) -> Result<Try> {
    let CellPlan {
        infra,
        scenario,
        subject,
        ..
    } = *plan;
    let history = Arc::new(RunHistory::starting_at(origin));
    let resource = Arc::new(Resource::new(Fencing::Fenced, Arc::clone(&history)));
    let board = Arc::new(Board::default());
    let name = format!(
        "safety:{}:{}:{seed}:{:x}",
        scenario.name,
        subject.label().replace(' ', "-"),
        rand::random::<u32>()
    );
    let key = server_key(&name, scenario.kind, subject)?;
    let links = match scenario.fault {
        RealFault::HolderPartition(_) => {
            let addr = infra.master().await?.addr();
            try_join_all((0..scenario.clients()).map(|_| Link::open(addr))).await?
        }
        _ => Vec::new(),
    };
    let context = RunContext {
        history: Arc::clone(&history),
        resource,
        board: Arc::clone(&board),
    };
    let mut tasks = Vec::new();
    let mut remote = None;
    for proc in 0..scenario.clients() {
        let target = infra.target(links.get(proc));
        let behaviour = behaviour(scenario, subject, proc, seed);
        if matches!(scenario.fault, RealFault::HolderFreeze(_)) && proc == 0 {
            let exe = plan.worker_exe.ok_or_else(|| Error::Lock {
                name: name.clone(),
                reason: "holder-freeze needs the harness binary for its worker process".to_owned(),
            })?;
            let spec = WorkerSpec {
                proc,
                target,
                name: name.clone(),
                behaviour,
            };
            remote = Some(RemoteWorker::spawn(exe, &spec, context.clone()).await?);
            continue;
        }
        let worker = Worker::connect(proc, &target, &name, behaviour).await?;
        let (context, stop) = (context.clone(), stop.clone());
        tasks.push(tokio::spawn(
            async move { worker.run(&context, stop).await },
        ));
    }
    let monitor = (!infra.is_masters()).then(|| {
        tokio::spawn(monitor::watch_lease(
            master_url,
            key.clone(),
            Arc::clone(&history),
            stop.clone(),
        ))
    });
    Ok(Try {
        seed,
        name,
        key,
        history,
        board,
        links,
        tasks,
        remote,
        monitor,
    })
}

/// The server key whose PTTL shows the lease: the mutex's (RedLock's on each master), the
/// read-write lock's write hash, the semaphore's permits set, rslock's plain key, or a
/// design's key.
fn server_key(name: &str, kind: LockKind, subject: Subject) -> Result<String> {
    let keys = match (subject, kind) {
        (Subject::Rslock { .. }, _) => return Ok(name.to_owned()),
        // The key a design keeps its holds under (`rw-two-keys`: its write key).
        (Subject::Design(_), _) => return Ok(leasehold_sim::workload::designs::lock_key(name)),
        (_, LockKind::Mutex) => LockKeys::new(name),
        (_, LockKind::ReadWrite { .. }) => LockKeys::rwlock(name),
        (_, LockKind::Semaphore { .. }) => LockKeys::semaphore(name),
    };
    keys.map(|k| k.lock).map_err(|err| Error::Lock {
        name: name.to_owned(),
        reason: err.to_string(),
    })
}

/// How long a worker holds: the scenario's holds, or for a design's row the holds of the
/// simulator's design-matrix cell it is set beside (the matrix keeps the base run's short
/// holds in every fault column, so that a design which cannot hold past its lease fails in
/// `long-holds` alone): the same experiment on both sides.
fn holds(scenario: &SafetyScenario, subject: Subject) -> (Duration, Duration) {
    let matrix_holds = match subject {
        Subject::Design(design) => scenario
            .sim
            .and_then(designs::class_of_scenario)
            .and_then(|class| class.spec(&Row::Other(design), 0).ok())
            .map(|spec| spec.workload.hold),
        Subject::Leasehold(_) | Subject::Rslock { .. } => None,
    };
    matrix_holds.unwrap_or_else(|| scenario.holds(subject.strategy()))
}

/// The queue entry timeout the simulator's scenario runs with, where it sets one (as
/// `semaphore-holder-pause`'s 500 ms entries, shorter than the pause, so that a handed
/// permit's entry deadline does not keep the paused holder's permit across the pause):
/// the same experiment on both sides.
fn sim_queue_entry(scenario: &SafetyScenario, subject: Subject) -> Option<Duration> {
    let sim = scenario.sim.and_then(leasehold_sim::scenario::find)?;
    sim.spec(subject.strategy(), 0).workload.entry_timeout
}

/// How worker `proc` of the try with `seed` uses its lock: the in-process holder pause
/// stops c0's task (whose watchdog is then off for the run: a frozen process's is starved),
/// the holder freeze c0's own process.
fn behaviour(scenario: &SafetyScenario, subject: Subject, proc: usize, seed: u64) -> Behaviour {
    let plan = |pause, how| PausePlan {
        after: FAULT_AT,
        pause,
        how,
    };
    let pause = match scenario.fault {
        RealFault::HolderPause(pause) if proc == 0 => Some(plan(pause, Freeze::Task)),
        RealFault::HolderFreeze(pause) if proc == 0 => Some(plan(pause, Freeze::Process)),
        _ => None,
    };
    Behaviour {
        subject,
        kind: scenario.kind,
        ttl: scenario.ttl,
        watchdog: pause.is_none_or(|p| p.how == Freeze::Process)
            && scenario.fault.leaves_watchdog_on(),
        hold: holds(scenario, subject),
        think: THINK,
        acquire_timeout: (scenario.ttl * ACQUIRE_TIMEOUT_TTLS).max(MIN_ACQUIRE_TIMEOUT),
        pause,
        wait_replicas: matches!(
            scenario.fault,
            RealFault::FailoverLostGrant {
                wait_replicas: true,
                ..
            }
        ),
        queue_entry: scenario
            .fault
            .queue_entry()
            .or_else(|| sim_queue_entry(scenario, subject)),
        seed: seed * CLIENT_SEED_STRIDE + proc as u64,
    }
}
