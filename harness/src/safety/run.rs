//! Runs the real-fault catalogue: per scenario one topology, per strategy one run of
//! [`CLIENTS`] workers against a fenced resource with the fault injected mid-run, the
//! history judged by the simulator's checker and set beside the simulator's cell.
//!
//! Invariant: every run is bounded — the fault starts at [`FAULT_AT`], the run ends
//! [`RECOVERY_WINDOW`] after the fault ended (or at the plan's horizon, if later), and the
//! workers' acquires carry a deadline — so the quick table finishes in minutes.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::{join_all, try_join_all};
use leasehold::LockKeys;
use leasehold_sim::checker::{self, CheckConfig};
use leasehold_sim::history::{HistEvent, HistKind};
use leasehold_sim::scenario::{self as sim_scenario, Expect};
use leasehold_sim::workload::Strategy;
use tokio::sync::watch;

use crate::error::{Error, Result};
use crate::masters::IndependentMasters;
use crate::node::Node;
use crate::node_options::NodeOptions;
use crate::safety::link::Link;
use crate::safety::monitor::{self, Observation};
use crate::safety::recorder::Recorder;
use crate::safety::report::{Agreement, CellReport, FaultTiming, SafetyReport};
use crate::safety::resource::{Fencing, Resource};
use crate::safety::scenario::{
    CLIENTS, Fault, REDLOCK_MASTERS, REDLOCK_RESTARTED, SafetyScenario, THINK, TTL, Topology,
};
use crate::safety::worker::{Behaviour, Board, PausePlan, Shared, Target, Worker};
use crate::sentinel::SentinelTopology;
use crate::single::SingleNode;

/// When the fault is injected (run time): after a few clean hand-offs.
pub const FAULT_AT: Duration = Duration::from_millis(1_500);

/// How long a run goes on after its fault ended: two TTLs for the lock to come back plus
/// slack for a few grants to show recovery.
pub const RECOVERY_WINDOW: Duration = Duration::from_millis(2_500);

/// Shortest run.
pub const HORIZON: Duration = Duration::from_secs(5);

/// Deadline of every `lock()` call, in TTLs (at least [`MIN_ACQUIRE_TIMEOUT`]): longer than
/// a TTL plus a fair-queue hand-off, shorter than a run, so a waiter stuck behind a fault
/// gives up and retries inside the run.
const ACQUIRE_TIMEOUT_TTLS: u32 = 2;
/// See [`ACQUIRE_TIMEOUT_TTLS`].
const MIN_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(3);

/// How long to look for a holder to aim a mid-hold fault at before injecting anyway.
const HOLDER_WAIT: Duration = Duration::from_secs(2);

/// Bound for the workers to wind down after the stop signal (an unlock may resolve an
/// ambiguous reply for up to a TTL).
const STOP_GRACE: Duration = Duration::from_secs(5);

/// How long periodic faults (script flushes, client kills) keep coming: a few TTLs, so
/// they hit acquires, renewals and releases alike.
const PERIODIC_SPAN: Duration = Duration::from_secs(2);

/// Bound for Sentinel to promote the replica (down-after 1 s + election + reconfiguration).
const FAILOVER_LIMIT: Duration = Duration::from_secs(30);

/// Seeds per simulator cell unless told otherwise: enough to show the simulator's verdict
/// beside the real one while keeping the table's simulator share to seconds.
pub const DEFAULT_SIM_SEEDS: u64 = 2;

/// What to run.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Scenarios, in order.
    pub scenarios: Vec<&'static SafetyScenario>,
    /// Only these strategies (empty: each scenario's own list).
    pub strategies: Vec<Strategy>,
    /// Seeds per simulator cell (0: do not run the simulator, show its expectation only).
    pub sim_seeds: u64,
}

/// Progress events for the CLI.
#[derive(Debug)]
pub enum Progress<'a> {
    /// Starting containers.
    Setup(String),
    /// A cell is about to run.
    CellStarted(&'static str, Strategy),
    /// A cell finished.
    CellFinished(&'a CellReport),
}

/// The containers of one scenario.
enum Infra {
    Single(SingleNode),
    Masters(IndependentMasters),
    Sentinel(SentinelTopology),
}

impl Infra {
    async fn start(topology: Topology, strategy: Strategy) -> Result<Self> {
        Ok(match (topology, strategy) {
            (Topology::Single(p), Strategy::RedLock) => Infra::Masters(
                IndependentMasters::builder()
                    .count(REDLOCK_MASTERS)
                    .node_options(NodeOptions::default().persistence(p))
                    .start()
                    .await?,
            ),
            (Topology::Single(p), _) => Infra::Single(
                SingleNode::builder()
                    .node_options(NodeOptions::default().persistence(p))
                    .start()
                    .await?,
            ),
            (Topology::Sentinel, _) => Infra::Sentinel(SentinelTopology::start().await?),
        })
    }

    fn is_masters(&self) -> bool {
        matches!(self, Infra::Masters(_))
    }

    /// The data nodes faults apply to.
    fn nodes(&self) -> Vec<&Node> {
        match self {
            Infra::Single(s) => vec![s.node()],
            Infra::Masters(m) => m.nodes().iter().collect(),
            Infra::Sentinel(s) => s.data_nodes().collect(),
        }
    }

    async fn master(&self) -> Result<&Node> {
        match self {
            Infra::Single(s) => Ok(s.node()),
            Infra::Masters(m) => m.nodes().first().ok_or_else(|| Error::Timeout {
                what: "a RedLock master".to_owned(),
                after: Duration::ZERO,
            }),
            Infra::Sentinel(s) => {
                let addr = s.master_addr().await?;
                s.node_at(addr).ok_or_else(|| Error::UnexpectedReply {
                    addr: addr.to_string(),
                    reply: "Sentinel names a master that is not a topology node".to_owned(),
                })
            }
        }
    }

    fn target(&self, link: Option<&Link>) -> Target {
        match (self, link) {
            (_, Some(link)) => Target::Single(link.url()),
            (Infra::Single(s), None) => Target::Single(s.url()),
            (Infra::Masters(m), None) => Target::Masters(m.urls()),
            (Infra::Sentinel(s), None) => {
                Target::Sentinel(s.sentinel_urls(), s.master_name().to_owned())
            }
        }
    }
}

/// Runs `plan`, reporting progress; containers are started per scenario and removed after.
pub async fn run(plan: &Plan, on_progress: &mut dyn FnMut(Progress<'_>)) -> Result<SafetyReport> {
    let started = Instant::now();
    let mut cells = Vec::new();
    for scenario in &plan.scenarios {
        let strategies: Vec<Strategy> = scenario
            .strategies
            .iter()
            .copied()
            .filter(|s| plan.strategies.is_empty() || plan.strategies.contains(s))
            .collect();
        let mut infra: Option<Infra> = None;
        for strategy in strategies {
            let wants_masters = strategy == Strategy::RedLock;
            if infra
                .as_ref()
                .is_none_or(|i| i.is_masters() != wants_masters)
            {
                // Drop the old topology first: the machine is small.
                drop(infra.take());
                on_progress(Progress::Setup(format!(
                    "{}: starting containers for {}",
                    scenario.name,
                    strategy.name()
                )));
                infra = Some(Infra::start(scenario.topology, strategy).await?);
            }
            let Some(current) = infra.as_ref() else {
                continue;
            };
            on_progress(Progress::CellStarted(scenario.name, strategy));
            let mut cell = run_cell(current, scenario, strategy).await?;
            attach_sim(&mut cell, scenario, strategy, plan.sim_seeds).await;
            on_progress(Progress::CellFinished(&cell));
            cells.push(cell);
        }
    }
    Ok(SafetyReport {
        elapsed_s: started.elapsed().as_secs_f64(),
        sim_seeds: plan.sim_seeds,
        ttl_ms: u64::try_from(TTL.as_millis()).unwrap_or(u64::MAX),
        clients: CLIENTS,
        cells,
    })
}

/// Fills in the simulator's expectation and observation and the agreement.
async fn attach_sim(
    cell: &mut CellReport,
    scenario: &SafetyScenario,
    strategy: Strategy,
    seeds: u64,
) {
    let Some(sim) = scenario.sim.and_then(sim_scenario::find) else {
        cell.agreement = Agreement::NoSim;
        return;
    };
    let expected = sim.expect(strategy);
    cell.sim_expected = Some(expected.to_string());
    if let Expect::Pending(why) = expected {
        cell.agreement = Agreement::SimPending(why.to_owned());
        return;
    }
    if seeds > 0 {
        // The simulator is CPU-bound and synchronous: keep it off the async workers.
        let observed =
            tokio::task::spawn_blocking(move || sim_scenario::run_cell(sim, strategy, seeds)).await;
        match observed {
            Ok(Ok(sim_cell)) => cell.sim_observed = sim_cell.worst,
            Ok(Err(err)) => tracing::warn!(%err, scenario = sim.name, "simulator cell failed"),
            Err(err) => tracing::warn!(%err, scenario = sim.name, "simulator task failed"),
        }
    }
    let saw = cell
        .sim_observed
        .map_or(String::new(), |v| format!(" (and saw '{v}')"));
    cell.agreement = if expected.met_by(cell.real) {
        Agreement::Agree
    } else if let Expect::Exactly(worst) = expected
        && cell.real < worst
    {
        // `Exactly` is the worst over the simulator's seeds; one real run is one sample.
        Agreement::NotReproduced(format!(
            "real Redis gave '{}' in one run; the simulator's worst over its seeds is '{worst}'{saw}",
            cell.real
        ))
    } else {
        Agreement::Disagree(format!(
            "real Redis gave '{}', the simulator expects {expected}{saw}",
            cell.real
        ))
    };
}

/// Runs one scenario for one strategy on `infra`.
async fn run_cell(
    infra: &Infra,
    scenario: &SafetyScenario,
    strategy: Strategy,
) -> Result<CellReport> {
    let recorder = Arc::new(Recorder::new());
    let resource = Arc::new(Resource::new(Fencing::Fenced, Arc::clone(&recorder)));
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
        Fault::HolderPartition(_) => {
            try_join_all((0..CLIENTS).map(|_| Link::open(master.addr()))).await?
        }
        _ => Vec::new(),
    };
    let mut workers = Vec::with_capacity(CLIENTS);
    for proc in 0..CLIENTS {
        let pause = match scenario.fault {
            Fault::HolderPause(pause) if proc == 0 => Some(PausePlan {
                after: FAULT_AT,
                pause,
            }),
            _ => None,
        };
        let behaviour = Behaviour {
            strategy,
            ttl: scenario.ttl,
            // A process that will freeze has its watchdog starved: model it as off.
            watchdog: pause.is_none(),
            hold: scenario.holds(),
            think: THINK,
            acquire_timeout: (scenario.ttl * ACQUIRE_TIMEOUT_TTLS).max(MIN_ACQUIRE_TIMEOUT),
            pause,
        };
        let target = infra.target(links.get(proc));
        workers.push(Worker::connect(proc, &target, &name, behaviour).await?);
    }
    let shared = Shared {
        recorder: Arc::clone(&recorder),
        resource: Arc::clone(&resource),
        board: Arc::clone(&board),
        stop: stop_rx.clone(),
    };
    let lock_key = LockKeys::new(&name)
        .map_err(|err| Error::Lock {
            name: name.clone(),
            reason: err.to_string(),
        })?
        .lock;
    let monitor = (!infra.is_masters()).then(|| {
        tokio::spawn(monitor::watch_lease(
            master.url(),
            lock_key.clone(),
            Arc::clone(&recorder),
            stop_rx.clone(),
        ))
    });
    let handles: Vec<_> = workers
        .into_iter()
        .map(|w| tokio::spawn(w.run(shared.clone())))
        .collect();

    tokio::time::sleep(FAULT_AT).await;
    let fault = inject(
        infra,
        master,
        scenario.fault,
        scenario.ttl,
        &links,
        &board,
        &recorder,
    )
    .await?;
    let end = Duration::from_secs_f64(fault.end_ms / 1e3) + RECOVERY_WINDOW;
    let now = Duration::from_nanos(recorder.now_ns());
    tokio::time::sleep(end.max(HORIZON).saturating_sub(now)).await;

    stop_tx.send_replace(true);
    let end_ns = recorder.now_ns();
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
    if let Fault::Failover = scenario.fault {
        // Bring the killed master back (it rejoins as a replica) for the next cell.
        for node in infra.nodes() {
            if node.query::<String>(&redis::cmd("PING")).await.is_err() {
                node.start().await?;
            }
        }
    }
    let leftover = infra
        .master()
        .await?
        .query::<i64>(redis::cmd("PTTL").arg(&lock_key))
        .await
        .ok();
    let events = recorder.events();
    Ok(judge(
        scenario,
        strategy,
        &events,
        end_ns,
        fault,
        &observations,
        leftover,
    ))
}

/// Judges a run's history with the simulator's checker and derives the real-only measures.
fn judge(
    scenario: &SafetyScenario,
    strategy: Strategy,
    events: &[HistEvent],
    end_ns: u64,
    fault: FaultTiming,
    observations: &[Observation],
    leftover: Option<i64>,
) -> CellReport {
    let config = CheckConfig {
        liveness_bound: sim_scenario::liveness_bound(strategy, scenario.ttl),
    };
    let findings = checker::check(events, &config, end_ns);
    let fault_end_ns = (fault.end_ms * 1e6) as u64;
    let recovery_ms = events
        .iter()
        .find(|e| e.at >= fault_end_ns && matches!(e.kind, HistKind::Acquired { .. }))
        .map(|e| (e.at - fault_end_ns) as f64 / 1e6);
    let lost_before_ttl_end_ms = events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.kind == HistKind::Lost)
        .filter_map(|(i, e)| {
            let granted = events[..i]
                .iter()
                .rev()
                .find(|g| g.proc == e.proc && matches!(g.kind, HistKind::Acquired { .. }))?;
            monitor::lease_end_before(observations, granted.at, e.at)
                .map(|lease_end| (lease_end as f64 - e.at as f64) / 1e6)
        })
        .reduce(f64::min);
    let mut errors: BTreeMap<String, u64> = BTreeMap::new();
    for e in events {
        if let HistKind::AcquireFailed { error } = &e.kind {
            *errors.entry(error.clone()).or_default() += 1;
        }
    }
    CellReport {
        scenario: scenario.name.to_owned(),
        sim_scenario: scenario.sim.map(str::to_owned),
        design_item: scenario.design_item,
        strategy,
        ttl_ms: u64::try_from(scenario.ttl.as_millis()).unwrap_or(u64::MAX),
        real: findings.verdict,
        sim_expected: None,
        sim_observed: None,
        agreement: Agreement::NoSim,
        fault,
        acquisitions: findings.acquisitions,
        failed_acquires: findings.failed_acquires,
        overlaps: findings.overlap_count,
        stale_rejected: findings.stale_rejected,
        token_problems: findings.token_problems,
        starvations: findings.starvations,
        lost_signals: findings.lost,
        lost_before_ttl_end_ms,
        lost_before_next_grant_ms: findings.lost_margin_ms,
        recovery_ms,
        leftover_pttl_ms: leftover,
        errors: errors.into_iter().collect(),
        run_s: end_ns as f64 / 1e9,
    }
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// Waits (bounded) until somebody holds the lock, so a mid-hold fault hits a holder.
async fn wait_for_holder(board: &Board) -> Option<usize> {
    let deadline = Instant::now() + HOLDER_WAIT;
    while Instant::now() < deadline {
        if let Some(holder) = board.holder() {
            return Some(holder);
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    None
}

/// Marks `procs` as hampered from now until `until_ns`, so the checker does not judge
/// their waits during an outage as starvation (as the simulator does for its faults).
fn impair(recorder: &Recorder, procs: impl IntoIterator<Item = usize>, until_ns: u64) {
    for proc in procs {
        recorder.record(proc, "", HistKind::Impaired { until: until_ns });
    }
}

/// Injects `fault` and returns its timing once it is over (for periodic faults: after the
/// last injection).
async fn inject(
    infra: &Infra,
    master: &Node,
    fault: Fault,
    ttl: Duration,
    links: &[Link],
    board: &Board,
    recorder: &Recorder,
) -> Result<FaultTiming> {
    let ttl_ns = u64::try_from(ttl.as_nanos()).unwrap_or(u64::MAX);
    let all = 0..CLIENTS;
    let (start, note) = match fault {
        Fault::HolderPause(pause) => {
            // The pausing worker freezes on its own at its first hold after FAULT_AT.
            let start = recorder.now_ns();
            let deadline = Instant::now() + HOLDER_WAIT + pause;
            while !board.paused() && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            tokio::time::sleep(pause).await;
            (
                start,
                format!("c0 froze for {} ms on its next hold", pause.as_millis()),
            )
        }
        Fault::NodePause(length) => {
            let holder = wait_for_holder(board).await;
            let start = recorder.now_ns();
            impair(
                recorder,
                all.clone(),
                start + ttl_ns * 2 + length.as_nanos() as u64,
            );
            for node in infra.nodes() {
                node.pause().await?;
            }
            tokio::time::sleep(length).await;
            for node in infra.nodes() {
                node.unpause().await?;
            }
            (
                start,
                format!(
                    "docker pause for {} ms while {} held",
                    length.as_millis(),
                    holder_label(holder)
                ),
            )
        }
        Fault::NodeCut(length) => {
            let holder = wait_for_holder(board).await;
            let start = recorder.now_ns();
            impair(
                recorder,
                all.clone(),
                start + ttl_ns * 2 + length.as_nanos() as u64,
            );
            master.cut().await?;
            tokio::time::sleep(length).await;
            master.restore().await?;
            (
                start,
                format!(
                    "node cut for {} ms while {} held",
                    length.as_millis(),
                    holder_label(holder)
                ),
            )
        }
        Fault::HolderPartition(length) => {
            let holder = wait_for_holder(board).await.unwrap_or(0);
            let start = recorder.now_ns();
            impair(
                recorder,
                [holder],
                start + ttl_ns + length.as_nanos() as u64,
            );
            if let Some(link) = links.get(holder) {
                link.cut();
                tokio::time::sleep(length).await;
                link.restore();
            }
            (
                start,
                format!("c{holder}'s links cut for {} ms", length.as_millis()),
            )
        }
        Fault::Restart(down) => {
            let holder = wait_for_holder(board).await;
            let start = recorder.now_ns();
            impair(
                recorder,
                all.clone(),
                start + ttl_ns * 2 + down.as_nanos() as u64,
            );
            let nodes = infra.nodes();
            let victims = if infra.is_masters() {
                &nodes[..REDLOCK_RESTARTED.min(nodes.len())]
            } else {
                &nodes[..]
            };
            try_join_all(victims.iter().map(|n| n.kill())).await?;
            tokio::time::sleep(down).await;
            try_join_all(victims.iter().map(|n| n.start())).await?;
            (
                start,
                format!(
                    "SIGKILL of {} node(s) while {} held, restarted after {} ms",
                    victims.len(),
                    holder_label(holder),
                    down.as_millis()
                ),
            )
        }
        Fault::Failover => {
            let Infra::Sentinel(sentinel) = infra else {
                return Err(Error::Lock {
                    name: "(safety)".to_owned(),
                    reason: "failover needs the Sentinel topology".to_owned(),
                });
            };
            // Right after a grant: wait for the lock to change hands, then kill at once.
            let first = board.holder();
            let deadline = Instant::now() + HOLDER_WAIT;
            while board.holder().is_none_or(|h| Some(h) == first) && Instant::now() < deadline {
                tokio::task::yield_now().await;
            }
            let holder = board.holder();
            let start = recorder.now_ns();
            let old = master.addr();
            master.kill().await?;
            impair(
                recorder,
                all.clone(),
                start + FAILOVER_LIMIT.as_nanos() as u64,
            );
            let new = sentinel.wait_for_new_master(old, FAILOVER_LIMIT).await?;
            impair(recorder, all.clone(), recorder.now_ns() + ttl_ns * 2);
            (
                start,
                format!("master {old} killed right after c{holder:?}'s grant; {new} promoted"),
            )
        }
        Fault::ScriptFlush(every) => {
            periodic(
                infra,
                recorder,
                every,
                &redis::cmd("SCRIPT").arg("FLUSH").clone(),
                "SCRIPT FLUSH",
            )
            .await?
        }
        Fault::ClientKill(every) => {
            let cmd = redis::cmd("CLIENT")
                .arg("KILL")
                .arg("TYPE")
                .arg("normal")
                .clone();
            periodic(infra, recorder, every, &cmd, "CLIENT KILL TYPE normal").await?
        }
    };
    Ok(FaultTiming {
        start_ms: ms(start),
        end_ms: ms(recorder.now_ns()),
        note,
    })
}

/// Runs `cmd` on every data node every `every` for [`PERIODIC_SPAN`].
async fn periodic(
    infra: &Infra,
    recorder: &Recorder,
    every: Duration,
    cmd: &redis::Cmd,
    label: &str,
) -> Result<(u64, String)> {
    let start = recorder.now_ns();
    let until = FAULT_AT + PERIODIC_SPAN;
    let mut count = 0u32;
    while Duration::from_nanos(recorder.now_ns()) < until {
        for node in infra.nodes() {
            // The reply (OK, or how many clients were killed) is not interesting.
            node.query::<redis::Value>(cmd).await?;
        }
        count += 1;
        tokio::time::sleep(every).await;
    }
    Ok((
        start,
        format!("{label} ×{count}, every {} ms", every.as_millis()),
    ))
}

/// Who held the lock when a fault was injected, for the fault log ("c2", or nobody yet).
fn holder_label(holder: Option<usize>) -> String {
    holder.map_or_else(|| "no client".to_owned(), |c| format!("c{c}"))
}
