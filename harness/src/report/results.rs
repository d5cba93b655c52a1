//! The raw, serialisable results of a benchmark run (`bench.json`): per cell every repetition's
//! DESIGN section 3 metrics and their medians, plus run metadata, so a later run can be
//! compared number by number.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::bench::commandstats::Attribution;
use crate::bench::grid::GridPlan;
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
        let mean_hold_us = if acquisitions == 0 {
            0.0
        } else {
            m.total_hold.as_secs_f64() * 1e6 / acquisitions as f64
        };
        Self {
            acquisitions,
            wall_s: m.wall.as_secs_f64(),
            acq_per_s: if m.wall.is_zero() {
                0.0
            } else {
                acquisitions as f64 / m.wall.as_secs_f64()
            },
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

/// Medians over repetitions (violations and errors are summed: one is one too many).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct MedianMetrics {
    /// acq/s.
    pub acq_per_s: Option<f64>,
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
        Self {
            acq_per_s: med(|r| Some(r.acq_per_s)),
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

/// A whole benchmark run: what `bench.json` holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BenchReport {
    /// Run metadata.
    pub meta: RunMeta,
    /// Every cell, in plan order.
    pub cells: Vec<CellResult>,
}

impl BenchReport {
    /// The cell matching `pred`, if it ran.
    pub fn find(&self, pred: impl Fn(&CellSpec) -> bool) -> Option<&CellResult> {
        self.cells.iter().find(|c| pred(&c.spec))
    }

    /// Mutual-exclusion violations over every cell (each cell's summed over repetitions).
    pub fn violations(&self) -> u64 {
        self.cells.iter().map(|c| c.median.violations).sum()
    }
}
