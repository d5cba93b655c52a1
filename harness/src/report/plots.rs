//! Latency and scaling plots for the benchmark report, each written as SVG (for the web) and
//! PNG (for quick looks and issues) from one drawing routine, so the two never disagree.
//! Every axis names its unit and every figure has a legend; peers are drawn dashed.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::bench::contender::Contender;
use crate::bench::wait_kind::WaitKind;
use crate::error::{Error, Result};
use crate::report::results::{BenchReport, CellResult};

/// Figure size in pixels: wide enough for three panels with readable 16 px labels.
const SIZE: (u32, u32) = (1200, 700);
/// Label font size, px.
const FONT: u32 = 18;
/// Caption font size, px.
const CAPTION_FONT: u32 = 24;
/// Percentile axis extent in "nines": 4 = p99.99. Beyond that a few-second run has too few
/// samples for the value to mean more than "the max".
const MAX_NINES: f64 = 4.0;

/// A line's colour and dash pattern per contender; fixed so figures can be compared.
fn colour(contender: Contender) -> RGBColor {
    match contender {
        Contender::Leasehold(WaitKind::Spin) => RGBColor(31, 119, 180),
        Contender::Leasehold(WaitKind::PubSub) => RGBColor(44, 160, 44),
        Contender::Leasehold(WaitKind::FairQueue) => RGBColor(214, 39, 40),
        Contender::RslockDefault => RGBColor(80, 80, 80),
        Contender::RslockTuned => RGBColor(255, 127, 14),
        Contender::RedLock => RGBColor(148, 103, 189),
        Contender::RslockRedLock => RGBColor(140, 86, 75),
    }
}

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

/// One line of a figure.
struct Series {
    contender: Contender,
    points: Vec<(f64, f64)>,
}

/// One panel of a figure.
struct Panel {
    title: String,
    series: Vec<Series>,
}

/// What a figure shows.
enum Kind {
    /// x: percentile in nines, y: latency ms (log).
    LatencyPercentiles,
    /// x: clients (log₂), y: the named metric, linear from 0.
    VsClients {
        y_desc: &'static str,
        y_max: Option<f64>,
        legend: SeriesLabelPosition,
        /// Logarithmic y axis (latencies spanning decades).
        log_y: bool,
    },
}

struct Figure {
    caption: String,
    kind: Kind,
    panels: Vec<Panel>,
}

/// Writes every figure for `report` into `dir` and returns the files written.
pub fn write_all(report: &BenchReport, dir: &Path) -> Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    for (stem, figure) in figures(report) {
        written.extend(render(&figure, &dir.join(stem))?);
    }
    Ok(written)
}

fn hot(cell: &CellResult) -> bool {
    cell.spec.locks == 1
}

fn figures(report: &BenchReport) -> Vec<(String, Figure)> {
    let contenders: Vec<Contender> = report
        .cells
        .iter()
        .map(|c| c.spec.contender)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let sections: BTreeSet<u64> = report
        .cells
        .iter()
        .filter(|c| hot(c))
        .map(|c| c.spec.critical_section_us)
        .collect();
    let contended: BTreeSet<(usize, u64)> = report
        .cells
        .iter()
        .filter(|c| hot(c) && c.spec.clients > 1)
        .map(|c| (c.spec.clients, c.spec.critical_section_us))
        .collect();

    let mut out = Vec::new();
    for (clients, cs) in contended {
        let series = contenders
            .iter()
            .filter_map(|&contender| {
                let cell = report.find(|s| {
                    s.locks == 1
                        && s.clients == clients
                        && s.critical_section_us == cs
                        && s.contender == contender
                })?;
                let points = cell
                    .latency_curve
                    .iter()
                    .filter(|(p, _)| *p < 100.0)
                    .map(|&(p, us)| (nines(p), us / 1_000.0))
                    .filter(|(x, _)| *x <= MAX_NINES + 1e-9)
                    .collect::<Vec<_>>();
                (!points.is_empty()).then_some(Series { contender, points })
            })
            .collect();
        out.push((
            format!("latency_n{clients}_cs{}", cs_slug(cs)),
            Figure {
                caption: format!(
                    "Acquire latency by percentile: {clients} clients, one hot lock, critical section {}",
                    cs_label(cs)
                ),
                kind: Kind::LatencyPercentiles,
                panels: vec![Panel {
                    title: String::new(),
                    series,
                }],
            },
        ));
    }

    let per_cs = |metric: fn(&CellResult) -> Option<f64>| -> Vec<Panel> {
        sections
            .iter()
            .map(|&cs| Panel {
                title: format!("critical section {}", cs_label(cs)),
                series: contenders
                    .iter()
                    .map(|&contender| Series {
                        contender,
                        points: report
                            .cells
                            .iter()
                            .filter(|c| {
                                hot(c)
                                    && c.spec.critical_section_us == cs
                                    && c.spec.contender == contender
                            })
                            .filter_map(|c| Some((c.spec.clients as f64, metric(c)?)))
                            .collect(),
                    })
                    .filter(|s| !s.points.is_empty())
                    .collect(),
            })
            .collect()
    };
    out.push((
        "throughput_vs_clients".to_owned(),
        Figure {
            caption: "Throughput on one hot lock (median of repetitions)".to_owned(),
            kind: Kind::VsClients {
                y_desc: "acquisitions per second (acq/s)",
                y_max: None,
                legend: SeriesLabelPosition::LowerLeft,
                log_y: false,
            },
            panels: per_cs(|c| c.median.acq_per_s),
        },
    ));
    out.push((
        "fairness_vs_clients".to_owned(),
        Figure {
            caption:
                "Fairness on one hot lock: Jain's index over per-client acquisitions (1 = even)"
                    .to_owned(),
            kind: Kind::VsClients {
                y_desc: "Jain's index (unitless, 1 = fair)",
                y_max: Some(1.05),
                legend: SeriesLabelPosition::LowerLeft,
                log_y: false,
            },
            panels: per_cs(|c| c.median.jain),
        },
    ));
    out.push((
        "p99_vs_clients".to_owned(),
        Figure {
            caption: "p99 acquire latency on one hot lock (median of repetitions)".to_owned(),
            kind: Kind::VsClients {
                y_desc: "p99 acquire latency (ms, log scale)",
                y_max: None,
                legend: SeriesLabelPosition::UpperLeft,
                log_y: true,
            },
            panels: per_cs(|c| c.median.p99_us.map(|us| us / 1_000.0)),
        },
    ));
    out
}

/// Percentile → "nines": 90 → 1, 99 → 2, 99.9 → 3.
fn nines(percentile: f64) -> f64 {
    -(1.0 - percentile / 100.0).max(1e-12).log10()
}

/// "nines" tick → percentile label.
fn nines_label(x: f64) -> String {
    if (x - x.round()).abs() > 1e-6 {
        return String::new();
    }
    match x.round() as i64 {
        0 => "p0".to_owned(),
        1 => "p90".to_owned(),
        2 => "p99".to_owned(),
        3 => "p99.9".to_owned(),
        4 => "p99.99".to_owned(),
        _ => String::new(),
    }
}

fn render(figure: &Figure, stem: &Path) -> Result<Vec<PathBuf>> {
    let svg = stem.with_extension("svg");
    let png = stem.with_extension("png");
    {
        let root = SVGBackend::new(&svg, SIZE).into_drawing_area();
        draw(figure, &root).map_err(|reason| plot_error(&svg, reason))?;
        root.present()
            .map_err(|e| plot_error(&svg, e.to_string()))?;
    }
    {
        let root = BitMapBackend::new(&png, SIZE).into_drawing_area();
        draw(figure, &root).map_err(|reason| plot_error(&png, reason))?;
        root.present()
            .map_err(|e| plot_error(&png, e.to_string()))?;
    }
    Ok(vec![svg, png])
}

fn plot_error(path: &Path, reason: String) -> Error {
    Error::Report {
        what: path.display().to_string(),
        reason,
    }
}

fn draw<DB: DrawingBackend>(figure: &Figure, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(err)?;
    let root = root
        .titled(&figure.caption, ("sans-serif", CAPTION_FONT))
        .map_err(err)?;
    let areas = root.split_evenly((1, figure.panels.len().max(1)));
    for (panel, area) in figure.panels.iter().zip(areas.iter()) {
        match &figure.kind {
            Kind::LatencyPercentiles => draw_latency(panel, area)?,
            Kind::VsClients {
                y_desc,
                y_max,
                legend,
                log_y,
            } => draw_vs_clients(panel, area, y_desc, *y_max, legend.clone(), *log_y)?,
        }
    }
    Ok(())
}

fn legend_and_lines<'a, DB: DrawingBackend + 'a, CT: CoordTranslate<From = (f64, f64)>>(
    chart: &mut ChartContext<'a, DB, CT>,
    series: &[Series],
    legend: SeriesLabelPosition,
) -> Result<(), String> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    for s in series {
        let style = colour(s.contender).stroke_width(3);
        let points = s.points.clone();
        let drawn = if s.contender.is_peer() {
            chart
                .draw_series(DashedLineSeries::new(points.clone(), 10, 6, style))
                .map_err(err)?
        } else {
            chart
                .draw_series(LineSeries::new(points.clone(), style))
                .map_err(err)?
        };
        drawn
            .label(s.contender.label())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], style));
        chart
            .draw_series(
                points
                    .iter()
                    .map(|&p| Circle::new(p, 4, colour(s.contender).filled())),
            )
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .position(legend)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", FONT))
        .draw()
        .map_err(err)
}

fn draw_latency<DB: DrawingBackend>(
    panel: &Panel,
    area: &DrawingArea<DB, Shift>,
) -> Result<(), String> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let values = panel
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1));
    let (lo, hi) = values.fold((f64::MAX, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let (lo, hi) = if hi <= 0.0 {
        (0.001, 1.0)
    } else {
        ((lo / 2.0).max(0.001), hi * 2.0)
    };
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, ("sans-serif", FONT))
        .margin(16)
        .x_label_area_size(56)
        .y_label_area_size(80)
        .build_cartesian_2d(0.0..MAX_NINES + 0.1, (lo..hi).log_scale())
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_labels(9)
        .x_label_formatter(&|x| nines_label(*x))
        .y_label_formatter(&|y| format_ms(*y))
        .x_desc("percentile (log scale of 1 − p)")
        .y_desc("acquire latency (ms, log scale)")
        .label_style(("sans-serif", FONT))
        .axis_desc_style(("sans-serif", FONT))
        .draw()
        .map_err(err)?;
    legend_and_lines(&mut chart, &panel.series, SeriesLabelPosition::UpperLeft)
}

fn draw_vs_clients<DB: DrawingBackend>(
    panel: &Panel,
    area: &DrawingArea<DB, Shift>,
    y_desc: &str,
    y_max: Option<f64>,
    legend: SeriesLabelPosition,
    log_y: bool,
) -> Result<(), String> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    // x is log₂(clients) so 1, 8, 32, 128 sit evenly; labels show the client count. A log y
    // axis is drawn the same way: values become log₁₀ and the labels undo it.
    let series: Vec<Series> = panel
        .series
        .iter()
        .map(|s| Series {
            contender: s.contender,
            points: s
                .points
                .iter()
                .filter(|&&(_, y)| !log_y || y > 0.0)
                .map(|&(n, y)| (n.log2(), if log_y { y.log10() } else { y }))
                .collect(),
        })
        .collect();
    let x_hi = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .fold(1.0f64, f64::max)
        .ceil();
    let ys = || series.iter().flat_map(|s| s.points.iter().map(|p| p.1));
    let (y_lo, y_hi) = if log_y {
        let lo = ys().fold(f64::MAX, f64::min);
        let hi = ys().fold(f64::MIN, f64::max);
        if lo > hi {
            (0.0, 1.0)
        } else {
            (lo.floor(), hi.ceil().max(lo.floor() + 1.0))
        }
    } else {
        let top = ys().fold(0.0f64, f64::max);
        (
            0.0,
            y_max.unwrap_or(if top > 0.0 { top * 1.15 } else { 1.0 }),
        )
    };
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, ("sans-serif", FONT))
        .margin(16)
        .x_label_area_size(56)
        .y_label_area_size(90)
        .build_cartesian_2d(-0.4..x_hi + 0.4, y_lo..y_hi)
        .map_err(err)?;
    let y_label = |y: &f64| {
        if !log_y {
            format_number(*y)
        } else if (y - y.round()).abs() < 1e-6 {
            format_ms(10f64.powf(y.round()))
        } else {
            String::new()
        }
    };
    chart
        .configure_mesh()
        .x_labels((x_hi as usize + 2) * 2)
        .y_labels(if log_y {
            ((y_hi - y_lo) as usize + 1) * 2
        } else {
            10
        })
        .x_label_formatter(&|x| {
            if (x - x.round()).abs() < 1e-6 && *x >= 0.0 {
                format!("{}", 2f64.powf(x.round()) as u64)
            } else {
                String::new()
            }
        })
        .y_label_formatter(&y_label)
        .x_desc("concurrent clients (log₂ scale)")
        .y_desc(y_desc)
        .label_style(("sans-serif", FONT))
        .axis_desc_style(("sans-serif", FONT))
        .draw()
        .map_err(err)?;
    legend_and_lines(&mut chart, &series, legend)
}

fn format_ms(ms: f64) -> String {
    if ms >= 10.0 {
        format!("{ms:.0}")
    } else if ms >= 1.0 {
        format!("{ms:.1}")
    } else {
        format!("{ms:.3}")
    }
}

fn format_number(v: f64) -> String {
    if v == 0.0 {
        "0".to_owned()
    } else if v >= 10_000.0 {
        format!("{:.0}k", v / 1_000.0)
    } else if v >= 10.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn nines_map_percentiles_to_a_tail_axis() {
        assert!((nines(90.0) - 1.0).abs() < 1e-9);
        assert!((nines(99.9) - 3.0).abs() < 1e-9);
        assert_eq!(nines_label(2.0), "p99");
        assert_eq!(nines_label(2.5), "");
    }

    #[test]
    fn critical_section_labels() {
        assert_eq!(cs_label(0), "0 ms");
        assert_eq!(cs_label(10_000), "10 ms");
        assert_eq!(cs_slug(1_000), "1ms");
    }
}
