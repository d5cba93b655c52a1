//! Which figures the benchmark report has and what goes into them: latency by percentile per
//! contended cell, and throughput, hand-offs, fairness and p99 against the client count, with
//! the repetitions' spread as error bars and the round-trip ceiling as a reference line. How
//! they are drawn is [`plot_render`]'s business.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::bench::contender::Contender;
use crate::error::Result;
use crate::report::plot_render::{self, Figure, Kind, MAX_NINES, Panel, Point, Series};
use crate::report::results::{BenchReport, CellResult, Spread};

/// A percentile is drawn only while at least this many samples lie beyond it; past that the
/// curve would show single samples (p99.99 of 2,000 samples is just the maximum).
const MIN_TAIL_SAMPLES: f64 = 10.0;
/// Horizontal offset between contenders at one client count, in log₂ units, so their error
/// bars do not hide each other.
const DODGE: f64 = 0.06;
/// Jain axis granularity: the lower end is rounded down to this.
const JAIN_STEP: f64 = 0.05;

/// `1 ms`, `0 ms` …: critical-section labels for titles and file names.
pub fn cs_label(cs_us: u64) -> String {
    if cs_us.is_multiple_of(1_000) {
        format!("{} ms", cs_us / 1_000)
    } else {
        format!("{cs_us} µs")
    }
}

fn cs_slug(cs_us: u64) -> String {
    cs_label(cs_us).replace(' ', "").replace('µ', "u")
}

/// Writes every figure for `report` into `dir`, file names starting with `prefix`, and returns
/// the files written.
pub fn write_all(report: &BenchReport, dir: &Path, prefix: &str) -> Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    for (stem, figure) in figures(report) {
        written.extend(plot_render::render(
            &figure,
            &dir.join(format!("{prefix}{stem}")),
        )?);
    }
    Ok(written)
}

/// Percentile → "nines": 90 → 1, 99 → 2, 99.9 → 3.
fn nines(percentile: f64) -> f64 {
    -(1.0 - percentile / 100.0).max(1e-12).log10()
}

/// The deepest percentile (in nines) `samples` support.
fn supported_nines(samples: u64) -> f64 {
    (samples as f64 / MIN_TAIL_SAMPLES)
        .max(1.0)
        .log10()
        .min(MAX_NINES)
}

fn latency_figures(report: &BenchReport, contenders: &[Contender]) -> Vec<(String, Figure)> {
    let contended: BTreeSet<(usize, u64)> = report
        .cells
        .iter()
        .filter(|c| c.spec.is_saturated_hot_lock() && c.spec.clients > 1)
        .map(|c| (c.spec.clients, c.spec.critical_section_us))
        .collect();
    let mut out = Vec::new();
    for (clients, cs) in contended {
        let series = contenders
            .iter()
            .filter_map(|&contender| {
                let cell = report.find(|s| {
                    s.is_saturated_hot_lock()
                        && s.clients == clients
                        && s.critical_section_us == cs
                        && s.contender == contender
                })?;
                let deepest = supported_nines(cell.samples);
                let points: Vec<Point> = cell
                    .latency_curve
                    .iter()
                    .filter(|(p, _)| *p < 100.0)
                    .map(|&(p, us)| Point {
                        x: nines(p),
                        y: us / 1_000.0,
                        range: None,
                    })
                    .filter(|p| p.x <= deepest + 1e-9)
                    .collect();
                (!points.is_empty()).then(|| Series {
                    contender,
                    note: format!(" (n = {})", cell.samples),
                    points,
                })
            })
            .collect();
        out.push((
            format!("latency_n{clients}_cs{}", cs_slug(cs)),
            Figure {
                caption: format!(
                    "Acquire latency, {clients} clients, one hot lock, cs {}: {} repetitions \
                     pooled, curves end {MIN_TAIL_SAMPLES} samples before the maximum",
                    cs_label(cs),
                    report.meta.plan.repetitions,
                ),
                kind: Kind::LatencyPercentiles,
                panels: vec![Panel {
                    title: String::new(),
                    series,
                    reference: None,
                }],
            },
        ));
    }
    out
}

/// A metric drawn against the client count: median and spread.
type Metric = fn(&CellResult) -> (Option<f64>, Option<Spread>);

fn vs_clients_panels(
    report: &BenchReport,
    contenders: &[Contender],
    metric: Metric,
    reference: impl Fn(u64) -> Option<(String, f64)>,
) -> Vec<Panel> {
    let sections: BTreeSet<u64> = report
        .cells
        .iter()
        .filter(|c| c.spec.is_saturated_hot_lock())
        .map(|c| c.spec.critical_section_us)
        .collect();
    let mid = (contenders.len().max(1) - 1) as f64 / 2.0;
    sections
        .into_iter()
        .map(|cs| Panel {
            title: format!("critical section {}", cs_label(cs)),
            series: contenders
                .iter()
                .enumerate()
                .map(|(i, &contender)| Series {
                    contender,
                    note: String::new(),
                    points: report
                        .cells
                        .iter()
                        .filter(|c| {
                            c.spec.is_saturated_hot_lock()
                                && c.spec.critical_section_us == cs
                                && c.spec.contender == contender
                        })
                        .filter_map(|c| {
                            let (y, spread) = metric(c);
                            Some(Point {
                                x: c.spec.clients as f64 * 2f64.powf((i as f64 - mid) * DODGE),
                                y: y?,
                                range: spread.map(|s| (s.min, s.max)),
                            })
                        })
                        .collect(),
                })
                .filter(|s| !s.points.is_empty())
                .collect(),
            reference: reference(cs),
        })
        .collect()
}

fn figures(report: &BenchReport) -> Vec<(String, Figure)> {
    // The classic designs run at two client counts only: their numbers are summary.md's
    // table, not lines over N.
    let contenders: Vec<Contender> = report
        .cells
        .iter()
        .map(|c| c.spec.contender)
        .filter(|c| !matches!(c, Contender::Design(_)))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut out = latency_figures(report, &contenders);
    let reps = report.meta.plan.repetitions;
    let of_reps = if reps > 1 {
        format!("median of {reps} repetitions, bars from the smallest to the largest")
    } else {
        "one run per cell, no spread".to_owned()
    };
    let ceiling = report.server.floor().and_then(|f| f.ceiling_per_s());
    let ceiling_line = |cs: u64| {
        ceiling
            .filter(|_| cs == 0)
            .map(|c| ("round-trip ceiling 1 / RTT".to_owned(), c))
    };
    let none = |_: u64| None;
    let vs = |y_desc, y_range, log_y| Kind::VsClients {
        y_desc,
        y_range,
        log_y,
    };
    out.push((
        "throughput_vs_clients".to_owned(),
        Figure {
            caption: format!("Throughput on one hot lock ({of_reps})"),
            kind: vs("acquisitions per second", None, false),
            panels: vs_clients_panels(
                report,
                &contenders,
                |c| (c.median.acq_per_s, c.median.acq_per_s_spread),
                ceiling_line,
            ),
        },
    ));
    out.push((
        "handoffs_vs_clients".to_owned(),
        Figure {
            caption: format!("Hand-offs (holder changes) per second on one hot lock ({of_reps})"),
            kind: vs("hand-offs per second", None, false),
            panels: vs_clients_panels(
                report,
                &contenders,
                |c| (c.median.handoffs_per_s, c.median.handoffs_per_s_spread),
                ceiling_line,
            ),
        },
    ));
    let lowest_jain = report
        .cells
        .iter()
        .filter_map(|c| c.median.jain_spread.map(|s| s.min).or(c.median.jain))
        .fold(1.0f64, f64::min);
    let jain_floor = (((lowest_jain - 0.02) / JAIN_STEP).floor() * JAIN_STEP).clamp(0.0, 0.95);
    out.push((
        "fairness_vs_clients".to_owned(),
        Figure {
            caption: format!(
                "Fairness on one hot lock: Jain's index over per-client acquisitions ({of_reps})"
            ),
            kind: vs("Jain's index (1 = even)", Some((jain_floor, 1.005)), false),
            panels: vs_clients_panels(
                report,
                &contenders,
                |c| (c.median.jain, c.median.jain_spread),
                none,
            ),
        },
    ));
    out.push((
        "p99_vs_clients".to_owned(),
        Figure {
            caption: format!("p99 acquire latency on one hot lock ({of_reps})"),
            kind: vs("p99 acquire latency (ms, log scale)", None, true),
            panels: vs_clients_panels(
                report,
                &contenders,
                |c| {
                    let ms = |us: f64| us / 1_000.0;
                    (
                        c.median.p99_us.map(ms),
                        c.median.p99_us_spread.map(|s| Spread {
                            min: ms(s.min),
                            max: ms(s.max),
                        }),
                    )
                },
                none,
            ),
        },
    ));
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn nines_map_percentiles_to_a_tail_axis() {
        assert!((nines(90.0) - 1.0).abs() < 1e-9);
        assert!((nines(99.9) - 3.0).abs() < 1e-9);
    }

    #[test]
    fn curves_stop_where_samples_run_out() {
        // 2,000 samples: 10 lie beyond p99.5, so the curve may reach log10(200) ≈ 2.3 nines.
        assert!((supported_nines(2_000) - 200f64.log10()).abs() < 1e-9);
        assert!((supported_nines(10_000_000) - MAX_NINES).abs() < 1e-9);
        assert!(supported_nines(5).abs() < 1e-9);
    }

    #[test]
    fn critical_section_labels() {
        assert_eq!(cs_label(0), "0 ms");
        assert_eq!(cs_label(10_000), "10 ms");
        assert_eq!(cs_slug(1_000), "1ms");
    }
}
