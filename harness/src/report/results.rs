//! The raw, serialisable results of a benchmark run (`bench.json`): per cell every repetition's
//! DESIGN section 3 metrics and their medians, plus run metadata, so a later run can be
//! compared number by number.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::bench::commandstats::Attribution;
use crate::bench::contender::Contender;
use crate::bench::floor::Floor;
use crate::bench::footprint::Footprint;
use crate::bench::grid::GridPlan;
use crate::bench::python_peer::pipe_overhead::PipeOverhead;
use crate::bench::workload::{CellMeasurement, CellSpec};
use crate::report::metrics::{handoff_gap_us, jain_index, median};

/// Percentiles stored for the latency curve plots: dense towards the tail, like HdrHistogram's
/// own percentile plots.
pub const CURVE_PERCENTILES: [f64; 27] = [
    0.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 75.0, 80.0, 85.0, 90.0, 92.5, 95.0, 96.0, 97.0,
    98.0, 99.0, 99.25, 99.5, 99.75, 99.9, 99.95, 99.97, 99.99, 99.999, 100.0,
];

/// One repetition of one cell, every metric of DESIGN section 3.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RepMetrics {
    /// Successful acquisitions.
    pub acquisitions: u64,
    /// Wall time, s.
    pub wall_s: f64,
    /// acq/s.
    pub acq_per_s: f64,
    /// Exclusive acquisitions: all of a mutex's, a read-write lock's writes.
    #[serde(default)]
    pub writes: u64,
    /// Exclusive acquisitions per second (a read-write lock's reads are the rest of acq/s).
    #[serde(default)]
    pub write_acq_per_s: f64,
    /// Acquire latency p99 of the exclusive acquisitions, µs (none without one).
    #[serde(default)]
    pub write_p99_us: Option<f64>,
    /// Acquisitions by a client other than the lock's previous holder.
    #[serde(default)]
    pub handoffs: u64,
    /// Hand-offs per second: acq/s without a holder re-acquiring its own lock.
    #[serde(default)]
    pub handoffs_per_s: f64,
    /// The worst-served client's mean acquire wait, µs.
    #[serde(default)]
    pub worst_client_wait_us: Option<f64>,
    /// Mean time really spent inside the critical section, µs (the stated time plus the
    /// timer's overshoot).
    #[serde(default)]
    pub mean_section_us: f64,
    /// Redis process CPU per acquisition (`INFO cpu` delta), µs.
    #[serde(default)]
    pub server_cpu_us_per_acq: Option<f64>,
    /// Redis command execution time per acquisition (commandstats `usec` delta), µs.
    #[serde(default)]
    pub command_us_per_acq: Option<f64>,
    /// Bench process CPU per acquisition (clients, runtime, recording), µs.
    #[serde(default)]
    pub client_cpu_us_per_acq: Option<f64>,
    /// Acquire latency p50, µs.
    pub p50_us: f64,
    /// Acquire latency p99, µs.
    pub p99_us: f64,
    /// Acquire latency max, µs.
    pub max_us: f64,
    /// Mean hold time (acquire returned → release returned), µs.
    pub mean_hold_us: f64,
    /// wall / acquisitions − mean hold, µs.
    pub handoff_gap_us: Option<f64>,
    /// Jain's index over per-client acquisition counts.
    pub jain: f64,
    /// Fewest acquisitions of any client.
    pub min_count: u64,
    /// Most acquisitions of any client.
    pub max_count: u64,
    /// Client-issued commands / acquisitions.
    pub client_round_trips_per_acq: Option<f64>,
    /// All commands (client + script-internal) / acquisitions.
    pub all_commands_per_acq: Option<f64>,
    /// Overlapping critical sections (must be 0).
    pub violations: u64,
    /// Client errors.
    pub errors: u64,
    /// Commandstats delta, attributed.
    pub commands: Attribution,
    /// `(percentile, µs)` points of this repetition's latency distribution.
    pub latency_curve: Vec<(f64, f64)>,
}

impl RepMetrics {
    /// Derives the metrics from a raw measurement.
    pub fn from_measurement(spec: &CellSpec, m: &CellMeasurement) -> Self {
        let acquisitions: u64 = m.per_client.iter().sum();
        let wall_us = m.wall.as_secs_f64() * 1e6;
        let per_acq = |n: u64| (acquisitions > 0).then(|| n as f64 / acquisitions as f64);
        let cpu_us_per_acq = |cpu: std::time::Duration| {
            (acquisitions > 0).then(|| cpu.as_secs_f64() * 1e6 / acquisitions as f64)
        };
        let mean_us = |total: std::time::Duration| {
            if acquisitions == 0 {
                0.0
            } else {
                total.as_secs_f64() * 1e6 / acquisitions as f64
            }
        };
        let mean_hold_us = mean_us(m.total_hold);
        let per_s = |n: u64| {
            if m.wall.is_zero() {
                0.0
            } else {
                n as f64 / m.wall.as_secs_f64()
            }
        };
        let worst_client_wait_us = m
            .per_client
            .iter()
            .zip(&m.per_client_wait)
            .filter(|(n, _)| **n > 0)
            .map(|(n, wait)| wait.as_secs_f64() * 1e6 / *n as f64)
            .max_by(f64::total_cmp);
        Self {
            acquisitions,
            wall_s: m.wall.as_secs_f64(),
            acq_per_s: per_s(acquisitions),
            writes: m.writes,
            write_acq_per_s: per_s(m.writes),
            write_p99_us: (!m.write_latency_us.is_empty())
                .then(|| m.write_latency_us.value_at_quantile(0.99) as f64),
            handoffs: m.handoffs,
            handoffs_per_s: per_s(m.handoffs),
            worst_client_wait_us,
            mean_section_us: mean_us(m.total_section),
            server_cpu_us_per_acq: cpu_us_per_acq(m.server_cpu),
            command_us_per_acq: per_acq(m.commands.usec),
            client_cpu_us_per_acq: cpu_us_per_acq(m.client_cpu),
            p50_us: m.latency_us.value_at_quantile(0.50) as f64,
            p99_us: m.latency_us.value_at_quantile(0.99) as f64,
            max_us: m.latency_us.max() as f64,
            mean_hold_us,
            // With M locks the wall time is shared by M independent locks: idle time per
            // acquisition per lock is (M · wall) / acquisitions − mean hold.
            handoff_gap_us: handoff_gap_us(wall_us * spec.locks as f64, acquisitions, mean_hold_us),
            jain: jain_index(&m.per_client),
            min_count: m.per_client.iter().copied().min().unwrap_or(0),
            max_count: m.per_client.iter().copied().max().unwrap_or(0),
            client_round_trips_per_acq: per_acq(m.commands.client_issued),
            all_commands_per_acq: per_acq(m.commands.all_commands()),
            violations: m.violations,
            errors: m.errors,
            commands: m.commands.clone(),
            latency_curve: latency_curve(&m.latency_us),
        }
    }
}

/// The `(percentile, µs)` curve of a histogram at [`CURVE_PERCENTILES`].
pub fn latency_curve(histogram: &Histogram<u64>) -> Vec<(f64, f64)> {
    if histogram.is_empty() {
        return Vec::new();
    }
    CURVE_PERCENTILES
        .iter()
        .map(|&p| (p, histogram.value_at_quantile(p / 100.0) as f64))
        .collect()
}

/// The smallest and largest value of a metric over a cell's repetitions.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
}

impl Spread {
    /// The spread of `values` (NaN ignored); `None` when there is none.
    pub fn of(values: impl IntoIterator<Item = f64>) -> Option<Self> {
        values
            .into_iter()
            .filter(|v| !v.is_nan())
            .fold(None, |acc: Option<Spread>, v| {
                Some(match acc {
                    None => Spread { min: v, max: v },
                    Some(s) => Spread {
                        min: s.min.min(v),
                        max: s.max.max(v),
                    },
                })
            })
    }

    /// Whether two spreads share a value: a difference between them may be noise.
    pub fn overlaps(&self, other: &Spread) -> bool {
        self.min <= other.max && other.min <= self.max
    }
}

/// Medians over repetitions (violations and errors are summed: one is one too many), and the
/// spread of the headline metrics.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct MedianMetrics {
    /// Repetitions folded.
    #[serde(default)]
    pub repetitions: usize,
    /// acq/s.
    pub acq_per_s: Option<f64>,
    /// Shared (read) acquisitions per second.
    #[serde(default)]
    pub read_acq_per_s: Option<f64>,
    /// Exclusive (write) acquisitions per second.
    #[serde(default)]
    pub write_acq_per_s: Option<f64>,
    /// p99 of the exclusive acquisitions, µs.
    #[serde(default)]
    pub write_p99_us: Option<f64>,
    /// Spread of the exclusive acquisitions' p99, µs.
    #[serde(default)]
    pub write_p99_us_spread: Option<Spread>,
    /// Hand-offs per second.
    #[serde(default)]
    pub handoffs_per_s: Option<f64>,
    /// Worst client's mean wait, µs.
    #[serde(default)]
    pub worst_client_wait_us: Option<f64>,
    /// Mean time inside the critical section, µs.
    #[serde(default)]
    pub mean_section_us: Option<f64>,
    /// Redis process CPU per acquisition, µs.
    #[serde(default)]
    pub server_cpu_us_per_acq: Option<f64>,
    /// Redis command time per acquisition, µs.
    #[serde(default)]
    pub command_us_per_acq: Option<f64>,
    /// Bench process CPU per acquisition, µs.
    #[serde(default)]
    pub client_cpu_us_per_acq: Option<f64>,
    /// Spread of acq/s over repetitions.
    #[serde(default)]
    pub acq_per_s_spread: Option<Spread>,
    /// Spread of hand-offs/s.
    #[serde(default)]
    pub handoffs_per_s_spread: Option<Spread>,
    /// Spread of p99, µs.
    #[serde(default)]
    pub p99_us_spread: Option<Spread>,
    /// Spread of Jain's index.
    #[serde(default)]
    pub jain_spread: Option<Spread>,
    /// Spread of the worst client's mean wait, µs.
    #[serde(default)]
    pub worst_client_wait_us_spread: Option<Spread>,
    /// p50, µs.
    pub p50_us: Option<f64>,
    /// p99, µs.
    pub p99_us: Option<f64>,
    /// max, µs.
    pub max_us: Option<f64>,
    /// Mean hold, µs.
    pub mean_hold_us: Option<f64>,
    /// Hand-off gap, µs.
    pub handoff_gap_us: Option<f64>,
    /// Jain's index.
    pub jain: Option<f64>,
    /// Min per-client count.
    pub min_count: Option<f64>,
    /// Max per-client count.
    pub max_count: Option<f64>,
    /// Client round trips / acquisition.
    pub client_round_trips_per_acq: Option<f64>,
    /// All commands / acquisition.
    pub all_commands_per_acq: Option<f64>,
    /// Sum of violations over repetitions.
    pub violations: u64,
    /// Sum of errors over repetitions.
    pub errors: u64,
}

impl MedianMetrics {
    /// Folds repetitions into medians.
    pub fn of(reps: &[RepMetrics]) -> Self {
        let med = |f: fn(&RepMetrics) -> Option<f64>| {
            median(&reps.iter().filter_map(f).collect::<Vec<_>>())
        };
        let spread = |f: fn(&RepMetrics) -> Option<f64>| Spread::of(reps.iter().filter_map(f));
        Self {
            repetitions: reps.len(),
            acq_per_s: med(|r| Some(r.acq_per_s)),
            read_acq_per_s: med(|r| Some(r.acq_per_s - r.write_acq_per_s)),
            write_acq_per_s: med(|r| Some(r.write_acq_per_s)),
            write_p99_us: med(|r| r.write_p99_us),
            write_p99_us_spread: spread(|r| r.write_p99_us),
            handoffs_per_s: med(|r| Some(r.handoffs_per_s)),
            worst_client_wait_us: med(|r| r.worst_client_wait_us),
            mean_section_us: med(|r| Some(r.mean_section_us)),
            server_cpu_us_per_acq: med(|r| r.server_cpu_us_per_acq),
            command_us_per_acq: med(|r| r.command_us_per_acq),
            client_cpu_us_per_acq: med(|r| r.client_cpu_us_per_acq),
            acq_per_s_spread: spread(|r| Some(r.acq_per_s)),
            handoffs_per_s_spread: spread(|r| Some(r.handoffs_per_s)),
            p99_us_spread: spread(|r| Some(r.p99_us)),
            jain_spread: spread(|r| Some(r.jain)),
            worst_client_wait_us_spread: spread(|r| r.worst_client_wait_us),
            p50_us: med(|r| Some(r.p50_us)),
            p99_us: med(|r| Some(r.p99_us)),
            max_us: med(|r| Some(r.max_us)),
            mean_hold_us: med(|r| Some(r.mean_hold_us)),
            handoff_gap_us: med(|r| r.handoff_gap_us),
            jain: med(|r| Some(r.jain)),
            min_count: med(|r| Some(r.min_count as f64)),
            max_count: med(|r| Some(r.max_count as f64)),
            client_round_trips_per_acq: med(|r| r.client_round_trips_per_acq),
            all_commands_per_acq: med(|r| r.all_commands_per_acq),
            violations: reps.iter().map(|r| r.violations).sum(),
            errors: reps.iter().map(|r| r.errors).sum(),
        }
    }
}

/// One cell: its spec, every repetition, the medians.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CellResult {
    /// What was measured.
    pub spec: CellSpec,
    /// Every repetition.
    pub reps: Vec<RepMetrics>,
    /// Medians over `reps`.
    pub median: MedianMetrics,
    /// Latency curve of all repetitions pooled, for plots.
    pub latency_curve: Vec<(f64, f64)>,
    /// Acquisitions behind `latency_curve` (all repetitions pooled).
    #[serde(default)]
    pub samples: u64,
}

/// How and where the run happened.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunMeta {
    /// Unix time the run started, s.
    pub started_unix_s: u64,
    /// Total run time including container start-up, s.
    pub elapsed_s: f64,
    /// The grid that ran.
    pub plan: GridPlan,
    /// Where Redis ran (containers or an explicit URL).
    pub topology: String,
    /// `redis_version` from `INFO server`.
    pub redis_version: String,
    /// Logical CPUs of the machine the clients ran on.
    pub cpus: usize,
    /// How client-issued and script-internal commands were separated.
    pub commandstats_method: String,
}

/// The server-cost measurements that are not cells: the round-trip floor of every
/// repetition, each contender's keyspace footprint, and the Python peers' pipe.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ServerCost {
    /// One floor per repetition, measured on the single node before its cells.
    pub floors: Vec<Floor>,
    /// Bytes per held lock and per queued waiter, per contender.
    pub footprints: Vec<(Contender, Footprint)>,
    /// The pipe round trip to a Python worker, one per repetition of a run with Python peers.
    #[serde(default)]
    pub pipe: Vec<PipeOverhead>,
}

impl ServerCost {
    /// The run's floor: the lowest of the repetitions' low-percentile round trips. Other load
    /// on a shared machine only ever lengthens a round trip (one run measured p10s of 24, 58 and
    /// 70 µs while its uncontended cells needed less than 58 µs per round trip), and a floor
    /// is a lower bound.
    pub fn floor(&self) -> Option<Floor> {
        self.floors
            .iter()
            .copied()
            .filter(|f| f.rtt_us > 0.0)
            .min_by(|a, b| a.rtt_us.total_cmp(&b.rtt_us))
    }

    /// The footprint of `contender`, if probed.
    pub fn footprint(&self, contender: Contender) -> Option<&Footprint> {
        self.footprints
            .iter()
            .find(|(c, _)| *c == contender)
            .map(|(_, f)| f)
    }
}

/// A whole benchmark run: what `bench.json` holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BenchReport {
    /// Run metadata.
    pub meta: RunMeta,
    /// Every cell, in plan order.
    pub cells: Vec<CellResult>,
    /// Floor and footprints (absent in reports written before they were measured).
    #[serde(default)]
    pub server: ServerCost,
}

impl BenchReport {
    /// The cell matching `pred`, if it ran.
    pub fn find(&self, pred: impl Fn(&CellSpec) -> bool) -> Option<&CellResult> {
        self.cells.iter().find(|c| pred(&c.spec))
    }

    /// The mutex contenders that ran (the read-write lock's cells have a section of their
    /// own, with their own comparison and CPU figures).
    pub fn mutex_contenders(&self) -> std::collections::BTreeSet<Contender> {
        self.cells
            .iter()
            .map(|c| c.spec.contender)
            .filter(|c| !c.is_rwlock())
            .collect()
    }

    /// Mutual-exclusion violations over every cell (each cell's summed over repetitions).
    pub fn violations(&self) -> u64 {
        self.cells.iter().map(|c| c.median.violations).sum()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn the_floor_is_the_lowest_repetition_and_spreads_span_the_repetitions() {
        let floor = |rtt_us| Floor {
            rtt_us,
            median_us: rtt_us * 2.0,
            samples: 1_000,
        };
        let cost = ServerCost {
            floors: vec![floor(59.0), floor(27.0), floor(64.0)],
            footprints: Vec::new(),
            pipe: Vec::new(),
        };
        let floor = cost.floor().unwrap();
        assert_eq!((floor.rtt_us, floor.median_us), (27.0, 54.0));
        assert!(ServerCost::default().floor().is_none());

        let spread = Spread::of([3.0, f64::NAN, 1.0, 2.0]).unwrap();
        assert_eq!((spread.min, spread.max), (1.0, 3.0));
        assert!(spread.overlaps(&Spread { min: 2.5, max: 9.0 }));
        assert!(!spread.overlaps(&Spread { min: 3.5, max: 9.0 }));
        assert!(Spread::of([]).is_none());
    }
}
