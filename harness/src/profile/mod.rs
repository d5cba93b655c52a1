//! Where the CPU of an acquisition goes, on both sides (issue 36, item 1): the uncontended
//! path (N = 1, cs 0) and the hand-off (N = 32, cs 0, one hot lock) for FairQueue, rslock's
//! default profile and PubSub, in one run against one container.
//!
//! Client side: the bench process's CPU per acquisition (as the benchmark measures it), split
//! by a `perf` profile of the same run into categories ([`perf`]). Server side: `INFO cpu`
//! split into the main thread and the rest, and each script's time from a slowlog pass
//! ([`server`]). Written as `cpu-profile.md` and `cpu-profile.json` ([`render`]).
//!
//! Every figure is a share or a per-acquisition cost measured in the same run as its
//! comparison, because other load on the machine moves absolute figures between runs.

pub mod perf;
pub mod render;
pub mod server;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::bench::contender::Contender;
use crate::bench::floor;
use crate::bench::wait_kind::WaitKind;
use crate::bench::workload::{CellSpec, run_cell};
use crate::error::{Error, Result};
use crate::topology::single::SingleNode;

/// The contenders profiled: the fair strategy, the barging peer it is measured against, and
/// the read-write lock's default wait (the costliest hand-off).
pub const CONTENDERS: [Contender; 3] = [
    Contender::Leasehold(WaitKind::FairQueue),
    Contender::RslockDefault,
    Contender::Leasehold(WaitKind::PubSub),
];
/// The cells: the uncontended path and the one-hot-lock hand-off, both without a critical
/// section so that the lock's own cost is all there is.
pub const CLIENTS: [usize; 2] = [1, 32];
/// Measured time per cell: the quick grid's, so the profile matches its rows.
pub const DEFAULT_SECONDS: u64 = 2;
/// Repetitions, contenders interleaved within each: one run on a shared machine moved a
/// contender's CPU per acquisition by up to 2× (load from other builders), so the report
/// takes medians and pools the samples of three.
pub const DEFAULT_REPETITIONS: usize = 3;
/// The slowlog pass per cell: long enough for thousands of calls per script.
const SCRIPT_PASS: Duration = Duration::from_secs(1);

/// One profiled cell: the medians over its repetitions, the perf samples of all of them.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProfiledCell {
    /// Who ran.
    pub contender: Contender,
    /// Clients on the one hot lock.
    pub clients: usize,
    /// Acquisitions in the measured runs.
    pub acquisitions: u64,
    /// Acquisitions per second (median).
    pub acq_per_s: f64,
    /// The bench process's CPU per acquisition, µs (utime + stime over the measured window;
    /// median).
    pub client_us: f64,
    /// The client CPU of each repetition, µs/acq, for the spread.
    pub client_us_reps: Vec<f64>,
    /// The server's cost per acquisition: the repetition with the median Redis CPU.
    pub server: server::ServerSide,
    /// The Redis CPU of each repetition, µs/acq, for the spread.
    pub server_us_reps: Vec<f64>,
    /// The client-side profile, when `perf` ran.
    pub perf: Option<perf::Folded>,
}

/// A whole profile run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProfileReport {
    /// Start, Unix seconds.
    pub started_unix_s: u64,
    /// Wall time of the run, s.
    pub elapsed_s: f64,
    /// Measured seconds per cell.
    pub seconds: u64,
    /// Repetitions per cell.
    pub repetitions: usize,
    /// `/proc/loadavg`'s 1-minute load at the start: other builders on the machine.
    pub load_at_start: Option<f64>,
    /// The round-trip floor of this run's node (p10 of sequential EVALSHAs), µs.
    pub floor_us: f64,
    /// Why there is no client profile, if there is none.
    pub perf_missing: Option<String>,
    /// Cells in run order.
    pub cells: Vec<ProfiledCell>,
}

/// Runs the profile against a fresh single-node container; `progress` gets the percentage
/// done and the step under way.
pub async fn run(
    seconds: u64,
    repetitions: usize,
    scratch: &Path,
    progress: &mut dyn FnMut(usize, String),
) -> Result<ProfileReport> {
    let started = Instant::now();
    let started_unix_s = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let load_at_start = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next()?.parse().ok());
    let use_perf = perf::available().await;
    std::fs::create_dir_all(scratch).map_err(|e| Error::io("creating the perf scratch dir", e))?;
    progress(0, "starting single-node Redis container".to_owned());
    let node = SingleNode::start().await?;
    let urls = vec![node.url()];
    let floor_us = floor::measure(&urls[0]).await?.rtt_us;
    let mut admin = [server::admin(&urls[0]).await?];
    let mut runs: Vec<ProfiledCell> = Vec::new();
    let total = repetitions * CLIENTS.len() * CONTENDERS.len();
    for repetition in 0..repetitions {
        for &clients in &CLIENTS {
            for &contender in &CONTENDERS {
                progress(
                    runs.len() * 100 / total.max(1),
                    format!("{} N={clients} (rep {})", contender.label(), repetition + 1),
                );
                let tag = format!("p{}", runs.len());
                let recorder = if use_perf {
                    let data = scratch.join(format!("{tag}.perf.data"));
                    Some(perf::Recorder::start(&data).await?)
                } else {
                    None
                };
                runs.push(
                    profile_cell(
                        contender,
                        clients,
                        seconds,
                        &urls,
                        &mut admin[0],
                        recorder,
                        &tag,
                    )
                    .await?,
                );
            }
        }
    }
    let cells = CLIENTS
        .iter()
        .flat_map(|&n| CONTENDERS.iter().map(move |&c| (n, c)))
        .filter_map(|(n, c)| {
            merge(
                runs.iter()
                    .filter(|r| r.clients == n && r.contender == c)
                    .cloned()
                    .collect(),
            )
        })
        .collect();
    Ok(ProfileReport {
        started_unix_s,
        elapsed_s: started.elapsed().as_secs_f64(),
        seconds,
        repetitions,
        load_at_start,
        floor_us,
        perf_missing: (!use_perf).then(|| "`perf` was not found (Debian: linux-perf)".to_owned()),
        cells,
    })
}

/// One run of one cell: the measured run under `recorder`, then the slowlog pass.
async fn profile_cell(
    contender: Contender,
    clients: usize,
    seconds: u64,
    urls: &[String],
    admin: &mut redis::aio::MultiplexedConnection,
    recorder: Option<perf::Recorder>,
    tag: &str,
) -> Result<ProfiledCell> {
    let spec = CellSpec {
        contender,
        clients,
        critical_section_us: 0,
        locks: 1,
        think_us: 0,
        offered_per_s: 0,
        read_percent: 0,
    };
    let url = &urls[0];
    let before = server::snapshot(admin, url).await?;
    let measured = run_cell(spec, urls, Duration::from_secs(seconds), tag).await?;
    let after = server::snapshot(admin, url).await?;
    let perf = match recorder {
        Some(r) => Some(r.finish().await?),
        None => None,
    };
    let acquisitions: u64 = measured.per_client.iter().sum();
    let per_acq = 1e6 / acquisitions.max(1) as f64;
    let mut side = server::side(&before, &after, acquisitions);
    // The window of the bench's own INFO cpu snapshots is exact; the main thread's share
    // comes from this wider one (which also holds the clients' connecting).
    let exact_us = measured.server_cpu.as_secs_f64() * per_acq;
    let main_share = side
        .main_thread_us
        .map(|m| (m / side.process_us.max(f64::MIN_POSITIVE)).min(1.0));
    side.process_us = exact_us;
    side.main_thread_us = main_share.map(|s| s * exact_us);
    side.other_threads_us = side.main_thread_us.map(|m| exact_us - m);

    let saved = server::slowlog_on(admin, url).await?;
    let pass = run_cell(spec, urls, SCRIPT_PASS, &format!("{tag}s")).await;
    let pass_acqs = pass.as_ref().map_or(0, |m| m.per_client.iter().sum());
    side.scripts = server::slowlog_off(admin, url, &saved, pass_acqs).await?;
    pass?;

    let client_us = measured.client_cpu.as_secs_f64() * per_acq;
    Ok(ProfiledCell {
        contender,
        clients,
        acquisitions,
        acq_per_s: acquisitions as f64 / measured.wall.as_secs_f64().max(1e-9),
        client_us,
        client_us_reps: vec![client_us],
        server_us_reps: vec![side.process_us],
        server: side,
        perf,
    })
}

/// One cell's repetitions as one: medians of the rates and costs, the median repetition's
/// server detail, every repetition's perf samples pooled.
fn merge(mut reps: Vec<ProfiledCell>) -> Option<ProfiledCell> {
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(0.0)
    };
    let acq_per_s = median(reps.iter().map(|r| r.acq_per_s).collect());
    let client_us = median(reps.iter().map(|r| r.client_us).collect());
    let client_us_reps: Vec<f64> = reps.iter().map(|r| r.client_us).collect();
    let server_us_reps: Vec<f64> = reps.iter().map(|r| r.server.process_us).collect();
    let acquisitions = reps.iter().map(|r| r.acquisitions).sum();
    let mut pooled: Option<perf::Folded> = None;
    for folded in reps.iter().filter_map(|r| r.perf.as_ref()) {
        pooled.get_or_insert_with(perf::Folded::default).add(folded);
    }
    reps.sort_by(|a, b| a.server.process_us.total_cmp(&b.server.process_us));
    let middle = reps.len() / 2;
    let mut cell = reps.into_iter().nth(middle)?;
    cell.acq_per_s = acq_per_s;
    cell.client_us = client_us;
    cell.client_us_reps = client_us_reps;
    cell.server_us_reps = server_us_reps;
    cell.acquisitions = acquisitions;
    cell.perf = pooled;
    Some(cell)
}

/// Writes `cpu-profile.md` and `cpu-profile.json` into `dir`; returns their paths.
pub fn write(report: &ProfileReport, dir: &Path) -> Result<Vec<PathBuf>> {
    crate::report_file::create_dir(dir)?;
    let json = dir.join(render::JSON);
    crate::report_file::write_json(&json, report)?;
    let md = dir.join(render::MARKDOWN);
    crate::report_file::write_text(&md, render::markdown(report))?;
    Ok(vec![json, md])
}
