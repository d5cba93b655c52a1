//! The run loop of one cell (one scenario × one strategy): [`CLIENTS`] workers on their own
//! clients contend for one lock against a fenced resource, the scenario's fault is injected
//! at [`FAULT_AT`], and the history is handed to the judge once the workers have stopped.
//!
//! Invariant: every run is bounded — the fault starts at [`FAULT_AT`], the run ends
//! [`RECOVERY_WINDOW`] after the fault ended (or at [`HORIZON`], if later), and the
//! workers' acquires carry a deadline — so the quick table finishes in minutes.

use std::sync::Arc;
use std::time::Duration;

use futures::future::{join_all, try_join_all};
use leasehold::LockKeys;
use leasehold_sim::workload::Strategy;
use tokio::sync::watch;

use crate::error::{Error, Result};
use crate::safety::infra::Infra;
use crate::safety::inject::Injector;
use crate::safety::judge::{CellOutcome, judge};
use crate::safety::link::Link;
use crate::safety::monitor;
use crate::safety::report::CellReport;
use crate::safety::resource::{Fencing, Resource};
use crate::safety::run_history::RunHistory;
use crate::safety::scenario::{CLIENTS, FAULT_AT, RealFault, SafetyScenario, THINK};
use crate::safety::worker::{Behaviour, Board, PausePlan, RunContext, Worker};

/// How long a run goes on after its fault ended: two TTLs for the lock to come back plus
/// slack for a few grants to show recovery.
const RECOVERY_WINDOW: Duration = Duration::from_millis(2_500);

/// Shortest run.
const HORIZON: Duration = Duration::from_secs(5);

/// Deadline of every `lock()` call, in TTLs (at least [`MIN_ACQUIRE_TIMEOUT`]): longer than
/// a TTL plus a fair-queue hand-off, shorter than a run, so a waiter stuck behind a fault
/// gives up and retries inside the run.
const ACQUIRE_TIMEOUT_TTLS: u32 = 2;
/// See [`ACQUIRE_TIMEOUT_TTLS`].
const MIN_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(3);

/// Bound for the workers to wind down after the stop signal (an unlock may resolve an
/// ambiguous reply for up to a TTL).
const STOP_GRACE: Duration = Duration::from_secs(5);

/// Runs `scenario` for `strategy` on `infra` and judges it (simulator columns still empty).
pub(super) async fn run(
    infra: &Infra,
    scenario: &SafetyScenario,
    strategy: Strategy,
) -> Result<CellReport> {
    let history = Arc::new(RunHistory::new());
    let resource = Arc::new(Resource::new(Fencing::Fenced, Arc::clone(&history)));
    let board = Arc::new(Board::default());
    let (stop_tx, stop_rx) = watch::channel(false);
    let name = format!(
        "safety:{}:{}:{:x}",
        scenario.name,
        strategy.name(),
        rand::random::<u32>()
    );
    let master = infra.master().await?;
    let links = match scenario.fault {
        RealFault::HolderPartition(_) => {
            try_join_all((0..CLIENTS).map(|_| Link::open(master.addr()))).await?
        }
        _ => Vec::new(),
    };
    let mut workers = Vec::with_capacity(CLIENTS);
    for proc in 0..CLIENTS {
        let target = infra.target(links.get(proc));
        let behaviour = behaviour(scenario, strategy, proc);
        workers.push(Worker::connect(proc, &target, &name, behaviour).await?);
    }
    let context = RunContext {
        history: Arc::clone(&history),
        resource: Arc::clone(&resource),
        board: Arc::clone(&board),
        stop: stop_rx.clone(),
    };
    let keys = LockKeys::new(&name).map_err(|err| Error::Lock {
        name: name.clone(),
        reason: err.to_string(),
    })?;
    let lock_key = keys.lock.clone();
    let monitor = (!infra.is_masters()).then(|| {
        tokio::spawn(monitor::watch_lease(
            master.url(),
            lock_key.clone(),
            Arc::clone(&history),
            stop_rx.clone(),
        ))
    });
    let handles: Vec<_> = workers
        .into_iter()
        .map(|w| tokio::spawn(w.run(context.clone())))
        .collect();

    tokio::time::sleep(FAULT_AT).await;
    let injector = Injector {
        infra,
        master,
        keys: &keys,
        ttl: scenario.ttl,
        links: &links,
        board: &board,
        history: &history,
    };
    let fault = injector.inject(scenario.fault).await?;
    let end = Duration::from_secs_f64(fault.end_ms / 1e3) + RECOVERY_WINDOW;
    let now = Duration::from_nanos(history.now_ns());
    tokio::time::sleep(end.max(HORIZON).saturating_sub(now)).await;

    stop_tx.send_replace(true);
    let end_ns = history.now_ns();
    if tokio::time::timeout(STOP_GRACE, join_all(handles))
        .await
        .is_err()
    {
        tracing::warn!(scenario = scenario.name, "workers did not stop in time");
    }
    let observations = match monitor {
        Some(task) => task.await.unwrap_or_default(),
        None => Vec::new(),
    };
    if scenario.fault.fails_over() {
        infra.restart_stopped_nodes().await?;
    }
    let leftover = infra
        .master()
        .await?
        .query::<i64>(redis::cmd("PTTL").arg(&lock_key))
        .await
        .ok();
    let events = history.events();
    let outcome = CellOutcome {
        events: &events,
        end_ns,
        fault,
        observations: &observations,
        leftover,
    };
    Ok(judge(scenario, strategy, outcome))
}

/// How worker `proc` uses its lock in this cell: the holder-pause scenario freezes c0.
fn behaviour(scenario: &SafetyScenario, strategy: Strategy, proc: usize) -> Behaviour {
    let pause = match scenario.fault {
        RealFault::HolderPause(pause) if proc == 0 => Some(PausePlan {
            after: FAULT_AT,
            pause,
        }),
        _ => None,
    };
    Behaviour {
        strategy,
        ttl: scenario.ttl,
        // A process that will freeze has its watchdog starved: model it as off.
        watchdog: pause.is_none() && scenario.fault.leaves_watchdog_on(),
        hold: scenario.holds(),
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
    }
}
