//! Runs a [`GridPlan`]: starts the topologies the contenders need (containers, or an explicit
//! Redis URL for development), runs every cell repetition by repetition (each repetition
//! starting with the round-trip floor, and the pipe to a Python worker where Python peers
//! run), probes each contender's keyspace footprint once, and
//! folds the measurements into a [`BenchReport`]. Progress ([`BenchProgress`]) is reported through a callback so the CLI
//! owns the terminal and this module stays UI-free.

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hdrhistogram::Histogram;
use tracing::info;

use crate::bench::contender::{Contender, TopologyNeed};
use crate::bench::grid::GridPlan;
use crate::bench::python_peer::pipe_overhead;
use crate::bench::workload::{CellSpec, run_cell};
use crate::bench::{floor, footprint};
use crate::error::{Error, Result};
use crate::report::results::latency_curve;
use crate::report::results::{
    BenchReport, CellResult, MedianMetrics, RepMetrics, RunMeta, ServerCost,
};
use crate::topology::masters::IndependentMasters;
use crate::topology::single::SingleNode;

/// How `bench.json` and `summary.md` explain round-trip attribution.
pub const COMMANDSTATS_METHOD: &str = "INFO commandstats is snapshotted after every client has \
connected and warmed up and again after the last release; the delta (calls + rejected_calls, \
summed over all servers, the harness's own INFO excluded) is split by command name. A command \
Redis flags `noscript` in COMMAND INFO (EVALSHA, EVAL, SCRIPT LOAD, SUBSCRIBE, BLPOP, ...) can \
only come from a client; a plain command counts as client-issued only when the contender declares \
that its client sends it (rslock and redis-py: SET NX PX; python-redis-lock: GET and SET NX EX, \
less one GET per script call, which its release script runs); every other call ran inside a Lua \
script. Redis itself counts script calls in commandstats and total_commands_processed alike, so \
no server counter separates them.";

/// Pause before measuring the round-trip floor, so the previous cell's dropped clients (up to
/// 128 connections, five masters for RedLock) have closed.
const FLOOR_SETTLE: Duration = Duration::from_millis(500);

/// Where Redis comes from.
#[derive(Debug, Clone)]
pub enum RedisSource {
    /// Start the container topologies (the committed benchmark).
    Containers,
    /// Use this already running node for single-node contenders (development only).
    Url(String),
}

/// What the runner tells its caller.
#[derive(Debug, Clone)]
pub enum BenchProgress {
    /// A setup step (container start, floor, footprint probe) began.
    Setup(String),
    /// Cell run `index` (0-based) of `total` began.
    CellStarted {
        /// Run index.
        index: usize,
        /// Total runs.
        total: usize,
        /// The cell.
        spec: CellSpec,
        /// Repetition, 0-based.
        repetition: usize,
    },
    /// Cell run finished with these metrics.
    CellFinished {
        /// Run index.
        index: usize,
        /// The cell.
        spec: CellSpec,
        /// Its metrics.
        metrics: Box<RepMetrics>,
    },
}

/// The topologies of a run, started on first need and torn down on drop.
#[derive(Default)]
struct Topologies {
    single: Option<SingleNode>,
    masters: BTreeMap<usize, IndependentMasters>,
}

impl Topologies {
    async fn urls(
        &mut self,
        need: TopologyNeed,
        source: &RedisSource,
        progress: &mut dyn FnMut(BenchProgress),
    ) -> Result<Vec<String>> {
        match (need, source) {
            (TopologyNeed::SingleNode, RedisSource::Url(url)) => Ok(vec![url.clone()]),
            (TopologyNeed::SingleNode, RedisSource::Containers) => {
                if self.single.is_none() {
                    progress(BenchProgress::Setup(
                        "starting single-node Redis container".into(),
                    ));
                    self.single = Some(SingleNode::start().await?);
                }
                Ok(self.single.iter().map(SingleNode::url).collect())
            }
            (TopologyNeed::IndependentMasters(n), _) => {
                if let std::collections::btree_map::Entry::Vacant(slot) = self.masters.entry(n) {
                    progress(BenchProgress::Setup(format!(
                        "starting {n} independent Redis masters"
                    )));
                    slot.insert(IndependentMasters::start(n).await?);
                }
                Ok(self
                    .masters
                    .get(&n)
                    .map(IndependentMasters::urls)
                    .unwrap_or_default())
            }
        }
    }
}

/// Runs `plan` and returns the report.
pub async fn run(
    plan: &GridPlan,
    source: &RedisSource,
    progress: &mut dyn FnMut(BenchProgress),
) -> Result<BenchReport> {
    let started = Instant::now();
    let started_unix_s = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let mut topologies = Topologies::default();
    let mut reps: Vec<Vec<RepMetrics>> = vec![Vec::new(); plan.cells.len()];
    let mut pooled: Vec<Option<Histogram<u64>>> = vec![None; plan.cells.len()];
    let mut redis_version = String::new();
    let mut server = ServerCost::default();
    let total = plan.total_runs();
    let mut index = 0;
    // Any Python peer's worker measures the pipe: the script and the pipe are the same.
    let python = plan.cells.iter().find_map(|c| match c.contender {
        Contender::Python(lib) => Some(lib),
        _ => None,
    });
    // Repetitions outermost: slow drift of the machine (other tenants, thermal) then spreads
    // over all contenders instead of biasing whichever ran during it.
    for repetition in 0..plan.repetitions {
        let single = topologies
            .urls(TopologyNeed::SingleNode, source, progress)
            .await?;
        if let Some(url) = single.first() {
            progress(BenchProgress::Setup("round-trip floor".into()));
            // The last cell's clients are still closing their connections.
            tokio::time::sleep(FLOOR_SETTLE).await;
            server.floors.push(floor::measure(url).await?);
            if let Some(lib) = python {
                progress(BenchProgress::Setup("pipe to a Python worker".into()));
                server.pipe.push(pipe_overhead::measure(lib, url).await?);
            }
        }
        for (cell, spec) in plan.cells.iter().enumerate() {
            let urls = topologies
                .urls(spec.contender.topology(), source, progress)
                .await?;
            if redis_version.is_empty() {
                redis_version = server_version(&urls).await.unwrap_or_default();
            }
            progress(BenchProgress::CellStarted {
                index,
                total,
                spec: *spec,
                repetition,
            });
            let run_tag = format!("r{repetition}c{cell}");
            let measurement = run_cell(*spec, &urls, plan.duration, &run_tag).await?;
            let metrics = RepMetrics::from_measurement(spec, &measurement);
            info!(
                contender = spec.contender.label(),
                clients = spec.clients,
                cs_us = spec.critical_section_us,
                locks = spec.locks,
                read_percent = spec.read_percent,
                acq_per_s = metrics.acq_per_s,
                p99_us = metrics.p99_us,
                jain = metrics.jain,
                violations = metrics.violations,
                "cell measured"
            );
            match &mut pooled[cell] {
                Some(h) => h
                    .add(&measurement.latency_us)
                    .map_err(|err| Error::Report {
                        what: "pooled latency histogram".into(),
                        reason: err.to_string(),
                    })?,
                slot @ None => *slot = Some(measurement.latency_us.clone()),
            }
            progress(BenchProgress::CellFinished {
                index,
                spec: *spec,
                metrics: Box::new(metrics.clone()),
            });
            reps[cell].push(metrics);
            index += 1;
        }
    }
    // The read-write lock's section has no server-cost table: its footprint is not probed.
    let contenders: std::collections::BTreeSet<Contender> = plan
        .cells
        .iter()
        .map(|c| c.contender)
        .filter(|c| !c.is_rwlock())
        .collect();
    for &contender in &contenders {
        let urls = topologies
            .urls(contender.topology(), source, progress)
            .await?;
        progress(BenchProgress::Setup(format!(
            "keyspace footprint of {}",
            contender.label()
        )));
        let probe = footprint::measure(contender, &urls, "footprint").await?;
        server.footprints.push((contender, probe));
    }
    let cells = plan
        .cells
        .iter()
        .zip(reps)
        .zip(pooled)
        .map(|((spec, reps), pooled)| CellResult {
            spec: *spec,
            median: MedianMetrics::of(&reps),
            latency_curve: pooled.as_ref().map(latency_curve).unwrap_or_default(),
            samples: pooled.as_ref().map_or(0, |h| h.len()),
            reps,
        })
        .collect();
    let topology = match source {
        RedisSource::Containers => "containers: leasehold-harness SingleNode".to_owned(),
        RedisSource::Url(url) => format!("external node {url} (development run)"),
    };
    Ok(BenchReport {
        meta: RunMeta {
            started_unix_s,
            elapsed_s: started.elapsed().as_secs_f64(),
            plan: plan.clone(),
            topology,
            redis_version,
            cpus: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            commandstats_method: COMMANDSTATS_METHOD.to_owned(),
        },
        cells,
        server,
    })
}

/// `redis_version` of the first server.
async fn server_version(urls: &[String]) -> Result<String> {
    let Some(url) = urls.first() else {
        return Ok(String::new());
    };
    let client = redis::Client::open(url.as_str()).map_err(|err| Error::redis(url, err))?;
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .map_err(|err| Error::redis(url, err))?;
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut conn)
        .await
        .map_err(|err| Error::redis(url, err))?;
    Ok(info
        .lines()
        .find_map(|l| l.trim().strip_prefix("redis_version:"))
        .unwrap_or_default()
        .to_owned())
}
