//! One benchmark cell: N clients, each with its own connection, loop acquire → critical
//! section → release (→ think) on one hot lock (or round-robin over M locks) for a fixed time,
//! each acquisition a read or a write by the cell's read share ([`AccessMix`]; a mutex only
//! writes), while an [`ExclusionMonitor`] checks that no writer is ever inside a lock
//! together with anybody else and counts hand-offs. Raw counts come out; the DESIGN section 3 metrics are derived
//! in `report::results`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::join_all;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use tokio::sync::{Barrier, watch};
use tracing::{debug, info_span, warn};

use crate::bench::access::{Access, AccessMix};
use crate::bench::arrivals::PoissonArrivals;
use crate::bench::commandstats::{self, Attribution, CommandStats};
use crate::bench::contender::{Contender, ContenderClient};
use crate::bench::exclusion::ExclusionMonitor;
use crate::bench::precise_sleep;
use crate::bench::process_cpu::process_cpu;
use crate::bench::server_counters::{self, admin_connections, snapshot_all};
use crate::error::{Error, Result};

/// Upper bound of the latency histograms: one hour in µs, far beyond any sane wait, so a
/// pathological one is clamped rather than lost.
const LATENCY_MAX_US: u64 = 3_600_000_000;
/// hdrhistogram precision: 3 significant digits (0.1 % value error), the usual choice.
const LATENCY_SIGFIG: u8 = 3;
/// After the deadline clients finish the acquisition they are waiting for; a FIFO of 128
/// waiters × 10 ms drains in ~1.3 s, rslock's default retry in ~0.2 s. Longer means stuck.
const DRAIN_LIMIT: Duration = Duration::from_secs(30);
/// Connecting and warming up 128 clients takes about a second; a minute means trouble.
const SETUP_LIMIT: Duration = Duration::from_secs(60);

/// What one cell measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct CellSpec {
    /// The lock implementation under test.
    pub contender: Contender,
    /// Concurrent clients, each with its own connection.
    pub clients: usize,
    /// Time spent holding the lock per acquisition, in µs (0 = release immediately).
    pub critical_section_us: u64,
    /// Number of locks the clients spread over (1 = one hot lock).
    pub locks: usize,
    /// Time each client spends outside the lock after a release before it asks again, in µs
    /// (0 = asks again at once: a saturated lock).
    #[serde(default)]
    pub think_us: u64,
    /// Open loop: acquisitions offered per second by all clients together, each client's
    /// intended starts a Poisson process ([`PoissonArrivals`]) and latency measured from the
    /// intended start; 0 = closed loop (the think time applies instead).
    #[serde(default)]
    pub offered_per_s: u64,
    /// Share of acquisitions that are reads, in percent (drawn per acquisition, seeded per
    /// client); 0 = writes only, the only choice of a mutex.
    #[serde(default)]
    pub read_percent: u8,
}

impl CellSpec {
    /// The critical section as a duration.
    pub fn critical_section(&self) -> Duration {
        Duration::from_micros(self.critical_section_us)
    }

    /// One hot mutex asked for without think time (in a tight closed loop, or open loop at
    /// the offered rate): the main tables. The read-write lock's cells have their own.
    pub fn is_saturated_hot_lock(&self) -> bool {
        self.locks == 1 && self.think_us == 0 && !self.contender.is_rwlock()
    }

    /// Each client's share of the offered rate, per second (0 in a closed loop).
    fn offered_per_client(&self) -> f64 {
        self.offered_per_s as f64 / self.clients.max(1) as f64
    }

    /// " (60 % reads)" for a read-write lock cell, nothing for a mutex's (which only writes).
    pub fn mix_label(&self) -> String {
        if self.contender.is_rwlock() {
            format!(" ({} % reads)", self.read_percent)
        } else {
            String::new()
        }
    }

    /// The think time as a duration.
    pub fn think(&self) -> Duration {
        Duration::from_micros(self.think_us)
    }
}

/// Raw outcome of one run of one cell.
#[derive(Debug, Clone)]
pub struct CellMeasurement {
    /// From the common start to the last client's last release.
    pub wall: Duration,
    /// Successful acquisitions per client (index = client).
    pub per_client: Vec<u64>,
    /// Acquire latency of every acquisition, µs.
    pub latency_us: Histogram<u64>,
    /// Exclusive acquisitions (every one of a mutex; a read-write lock's writes).
    pub writes: u64,
    /// Acquire latency of the exclusive acquisitions, µs.
    pub write_latency_us: Histogram<u64>,
    /// Sum of hold times (acquire returned → release returned) over all acquisitions.
    pub total_hold: Duration,
    /// Sum of the time actually spent inside the critical section (the stated time plus the
    /// timer's overshoot).
    pub total_section: Duration,
    /// Total acquire wait per client (index = client).
    pub per_client_wait: Vec<Duration>,
    /// Acquisitions by a client other than the lock's previous holder.
    pub handoffs: u64,
    /// CPU the Redis process(es) used during the run (`INFO cpu` delta, all servers).
    pub server_cpu: Duration,
    /// CPU the clients used during the run: the bench process (the clients, their runtime
    /// and the bench's own recording) and the clients' own processes, where they have them.
    pub client_cpu: Duration,
    /// Overlapping critical sections seen by the monitor.
    pub violations: u64,
    /// Client errors (failed acquire/release, setup failure, stuck past the drain limit).
    pub errors: u64,
    /// Commands executed during the run, split client-issued / script-internal.
    pub commands: Attribution,
}

/// What each client task returns.
struct ClientOutcome {
    acquisitions: u64,
    latency_us: Histogram<u64>,
    writes: u64,
    write_latency_us: Histogram<u64>,
    total_hold: Duration,
    total_section: Duration,
    total_wait: Duration,
    last_release: Option<Instant>,
    /// CPU the client's own process (if any) used from the start to its last release.
    own_cpu: Duration,
    error: Option<Error>,
}

/// Runs one cell for `duration` against the servers at `urls`. `run_tag` makes lock names
/// unique per run so no key of an earlier cell can interfere.
pub async fn run_cell(
    spec: CellSpec,
    urls: &[String],
    duration: Duration,
    run_tag: &str,
) -> Result<CellMeasurement> {
    let span = info_span!(
        "cell",
        contender = spec.contender.label(),
        clients = spec.clients,
        cs_us = spec.critical_section_us,
        locks = spec.locks
    );
    let _entered = span.enter();
    let mut admins = admin_connections(urls).await?;
    for (conn, url) in admins.iter_mut().zip(urls) {
        // A clean keyspace per cell: leftover queues or leases cannot skew the next contender.
        let _: () = redis::cmd("FLUSHALL")
            .query_async(conn)
            .await
            .map_err(|err| Error::redis(url, err))?;
    }

    let monitor = Arc::new(ExclusionMonitor::new(spec.locks));
    let lock_names: Arc<Vec<String>> = Arc::new(
        (0..spec.locks)
            .map(|i| format!("bench:{run_tag}:lock{i}"))
            .collect(),
    );
    let ready = Arc::new(Barrier::new(spec.clients + 1));
    let (start_tx, start_rx) = watch::channel::<Option<(Instant, Instant)>>(None);
    let urls_shared: Arc<Vec<String>> = Arc::new(urls.to_vec());

    let mut tasks = Vec::with_capacity(spec.clients);
    for client in 0..spec.clients {
        let task = ClientTask {
            client,
            spec,
            urls: urls_shared.clone(),
            lock_names: lock_names.clone(),
            monitor: monitor.clone(),
            ready: ready.clone(),
            start: start_rx.clone(),
            run_tag: run_tag.to_owned(),
        };
        tasks.push(tokio::spawn(task.run(new_histogram()?, new_histogram()?)));
    }

    // Every client is connected and warmed up (scripts loaded) once the barrier opens; only
    // then is the "before" snapshot taken, so setup traffic is not charged to acquisitions.
    if tokio::time::timeout(SETUP_LIMIT, ready.wait())
        .await
        .is_err()
    {
        for task in &tasks {
            task.abort();
        }
        return Err(Error::Timeout {
            what: format!(
                "{} clients of {} to connect",
                spec.clients,
                spec.contender.label()
            ),
            after: SETUP_LIMIT,
        });
    }
    let before = snapshot_all(&mut admins, urls).await?;
    let cpu_before = process_cpu()?;
    let start = Instant::now();
    let deadline = start + duration;
    // The receivers live in the tasks; a send error would mean they all ended already.
    let _ = start_tx.send(Some((start, deadline)));

    let abort_handles: Vec<_> = tasks.iter().map(|t| t.abort_handle()).collect();
    let joined = tokio::time::timeout(duration + DRAIN_LIMIT, join_all(tasks)).await;
    let outcomes: Vec<Option<ClientOutcome>> = match joined {
        Ok(results) => results.into_iter().map(|r| r.ok()).collect(),
        Err(_) => {
            warn!("clients still waiting {DRAIN_LIMIT:?} after the deadline; aborted");
            for handle in &abort_handles {
                handle.abort();
            }
            Vec::new()
        }
    };
    let cpu_after = process_cpu()?;
    let after = snapshot_all(&mut admins, urls).await?;
    let commands_of = |all: &[server_counters::ServerCounters]| {
        CommandStats::merged(all.iter().map(|s| &s.commands))
    };
    let delta = commands_of(&after).since(&commands_of(&before));
    let noscript =
        commandstats::noscript_commands(&mut admins[0], &urls[0], delta.calls().keys()).await?;
    let commands = commandstats::attribute(
        &delta,
        &noscript,
        spec.contender.direct_commands(),
        spec.contender.scripted_commands(),
    );

    let mut measurement = CellMeasurement {
        wall: Duration::ZERO,
        per_client: vec![0; spec.clients],
        latency_us: new_histogram()?,
        writes: 0,
        write_latency_us: new_histogram()?,
        total_hold: Duration::ZERO,
        total_section: Duration::ZERO,
        per_client_wait: vec![Duration::ZERO; spec.clients],
        handoffs: monitor.handoffs(),
        server_cpu: server_counters::cpu_since(&after, &before),
        client_cpu: cpu_after.saturating_sub(cpu_before),
        violations: monitor.violations(),
        errors: 0,
        commands,
    };
    if outcomes.len() != spec.clients {
        measurement.errors += spec.clients as u64;
    }
    let mut last_release = start;
    for (client, outcome) in outcomes.into_iter().enumerate() {
        let Some(outcome) = outcome else {
            measurement.errors += 1;
            continue;
        };
        if let Some(err) = &outcome.error {
            warn!(client, error = %err, "client failed");
            measurement.errors += 1;
        }
        measurement.per_client[client] = outcome.acquisitions;
        measurement.writes += outcome.writes;
        measurement.per_client_wait[client] = outcome.total_wait;
        measurement.total_hold += outcome.total_hold;
        measurement.total_section += outcome.total_section;
        measurement.client_cpu += outcome.own_cpu;
        if let Some(t) = outcome.last_release {
            last_release = last_release.max(t);
        }
        add(&mut measurement.latency_us, &outcome.latency_us)?;
        add(&mut measurement.write_latency_us, &outcome.write_latency_us)?;
    }
    measurement.wall = last_release.saturating_duration_since(start);
    debug!(
        acquisitions = measurement.per_client.iter().sum::<u64>(),
        wall_ms = measurement.wall.as_millis() as u64,
        "cell done"
    );
    Ok(measurement)
}

/// Everything one client task needs.
struct ClientTask {
    client: usize,
    spec: CellSpec,
    urls: Arc<Vec<String>>,
    lock_names: Arc<Vec<String>>,
    monitor: Arc<ExclusionMonitor>,
    ready: Arc<Barrier>,
    start: watch::Receiver<Option<(Instant, Instant)>>,
    run_tag: String,
}

impl ClientTask {
    async fn run(
        self,
        latency_us: Histogram<u64>,
        write_latency_us: Histogram<u64>,
    ) -> ClientOutcome {
        let mut outcome = ClientOutcome {
            acquisitions: 0,
            latency_us,
            writes: 0,
            write_latency_us,
            total_hold: Duration::ZERO,
            total_section: Duration::ZERO,
            total_wait: Duration::ZERO,
            last_release: None,
            own_cpu: Duration::ZERO,
            error: None,
        };
        let client = match self.setup().await {
            Ok(client) => Some(client),
            Err(err) => {
                outcome.error = Some(err);
                None
            }
        };
        self.ready.wait().await;
        let Some(client) = client else {
            return outcome;
        };
        let mut start = self.start.clone();
        // The watch guard is a temporary dropped at the end of the statement, before any await.
        let times = match start.wait_for(Option::is_some).await {
            Ok(started) => *started,
            Err(_) => None,
        };
        let Some((start, deadline)) = times else {
            return outcome;
        };
        // A client process idles outside contend, so its CPU between these two reads is
        // the cell's share of it.
        let cpu_before = client.own_process_cpu().await;
        let contended = self.contend(&client, start, deadline, &mut outcome).await;
        let cpu = match (cpu_before, client.own_process_cpu().await) {
            (Ok(before), Ok(after)) => Ok(after.saturating_sub(before)),
            (Err(err), _) | (_, Err(err)) => Err(err),
        };
        match (contended, cpu) {
            (Ok(()), Ok(cpu)) => outcome.own_cpu = cpu,
            (Err(err), _) | (Ok(()), Err(err)) => outcome.error = Some(err),
        }
        outcome
    }

    /// Connects and does one uncontended acquire/release on a private name, so connections
    /// exist and scripts are loaded before measuring.
    async fn setup(&self) -> Result<ContenderClient> {
        let client = ContenderClient::connect(self.spec.contender, &self.urls).await?;
        let warmup = format!("bench:{}:warmup{}", self.run_tag, self.client);
        let held = client.acquire(&warmup, Access::Write).await?;
        client.release(held).await?;
        Ok(client)
    }

    async fn contend(
        &self,
        client: &ContenderClient,
        start: Instant,
        deadline: Instant,
        outcome: &mut ClientOutcome,
    ) -> Result<()> {
        let critical_section = self.spec.critical_section();
        let think = self.spec.think();
        // Seeded by the client index: every contender sees the same arrival pattern.
        let mut arrivals =
            PoissonArrivals::new(self.spec.offered_per_client(), start, self.client as u64);
        let mut mix = AccessMix::new(self.spec.read_percent, self.client);
        let mut round = 0usize;
        loop {
            // The wait counts from the intended start in an open loop (a late client starts at
            // once and is charged the delay), from now in a closed one.
            let waiting = match &mut arrivals {
                Some(arrivals) => {
                    let intended = arrivals.next_start();
                    if intended >= deadline {
                        break;
                    }
                    precise_sleep::pause(intended.saturating_duration_since(Instant::now())).await;
                    intended
                }
                None if Instant::now() < deadline => Instant::now(),
                None => break,
            };
            // Round-robin with a per-client offset spreads M locks evenly and deterministically.
            let lock = (self.client + round) % self.lock_names.len();
            round += 1;
            let access = mix.next_access();
            let held = client.acquire(&self.lock_names[lock], access).await?;
            let acquired = Instant::now();
            self.monitor.enter(lock, self.client, access);
            precise_sleep::pause(critical_section).await;
            let left = Instant::now();
            self.monitor.exit(lock, self.client, access);
            client.release(held).await?;
            let released = Instant::now();
            let waited = acquired.duration_since(waiting);
            let waited_us = u64::try_from(waited.as_micros()).unwrap_or(u64::MAX).max(1);
            outcome.latency_us.saturating_record(waited_us);
            if access == Access::Write {
                outcome.writes += 1;
                outcome.write_latency_us.saturating_record(waited_us);
            }
            outcome.total_wait += waited;
            outcome.total_section += left.duration_since(acquired);
            outcome.total_hold += released.duration_since(acquired);
            outcome.acquisitions += 1;
            outcome.last_release = Some(released);
            if arrivals.is_none() && !think.is_zero() && released < deadline {
                precise_sleep::pause(think).await;
            }
        }
        Ok(())
    }
}

/// Adds one client's latencies to the cell's.
fn add(into: &mut Histogram<u64>, from: &Histogram<u64>) -> Result<()> {
    into.add(from).map_err(|err| Error::Report {
        what: "latency histogram".to_owned(),
        reason: err.to_string(),
    })
}

fn new_histogram() -> Result<Histogram<u64>> {
    Histogram::new_with_bounds(1, LATENCY_MAX_US, LATENCY_SIGFIG).map_err(|err| Error::Report {
        what: "latency histogram".to_owned(),
        reason: err.to_string(),
    })
}
