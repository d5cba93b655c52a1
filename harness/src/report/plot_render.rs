//! Drawing the benchmark figures with plotters, each as SVG (for the web) and PNG (for quick
//! looks and issues) from one routine, so the two never disagree. Every axis names its unit,
//! every figure has a legend, peers are drawn dashed, log axes are plotters' own (minor grid
//! lines at 2…9 × 10^k), and a series with fewer than [`MIN_POINTS_FOR_LINE`] points is drawn
//! as markers only, since a line would claim measurements between them.

use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::bench::contender::Contender;
use crate::bench::python_peer::library::PythonLib;
use crate::bench::wait_kind::WaitKind;
use crate::error::{Error, Result};

/// Figure size in pixels: wide enough for three panels with readable labels.
const SIZE: (u32, u32) = (1200, 700);
/// Label font size, px.
const FONT: u32 = 18;
/// Caption font size, px.
const CAPTION_FONT: u32 = 22;
/// Percentile axis extent in "nines": 4 = p99.99.
pub const MAX_NINES: f64 = 4.0;
/// A line joins a series' points only from this many on.
const MIN_POINTS_FOR_LINE: usize = 3;
/// Width of an error bar's whiskers, px.
const WHISKER: u32 = 8;
/// Height of one row of a figure's shared legend, px.
const LEGEND_ROW: u32 = 26;
/// Entries per row of a figure's shared legend: four of the longest label fit in the width.
const LEGEND_COLUMNS: usize = 4;
/// Length of a legend entry's line sample, px.
const LEGEND_SAMPLE: i32 = 32;

/// A line's colour per contender; fixed so figures can be compared.
fn colour(contender: Contender) -> RGBColor {
    match contender {
        Contender::Leasehold(WaitKind::Spin) => RGBColor(31, 119, 180),
        Contender::Leasehold(WaitKind::PubSub) => RGBColor(44, 160, 44),
        Contender::Leasehold(WaitKind::FairQueue) => RGBColor(214, 39, 40),
        Contender::RwLock(WaitKind::Spin) => RGBColor(23, 190, 207),
        Contender::RwLock(WaitKind::PubSub) => RGBColor(188, 189, 34),
        Contender::RwLock(WaitKind::FairQueue) => RGBColor(227, 119, 194),
        Contender::RslockDefault => RGBColor(80, 80, 80),
        Contender::RslockTuned => RGBColor(255, 127, 14),
        Contender::RedLock => RGBColor(148, 103, 189),
        Contender::RslockRedLock => RGBColor(140, 86, 75),
        Contender::Python(PythonLib::RedisPy) => RGBColor(0, 0, 128),
        Contender::Python(PythonLib::PythonRedisLock) => RGBColor(0, 128, 128),
        // The designs, in a band of browns and olives apart from the contenders above.
        Contender::Design(design) => {
            let shade = u8::try_from(design as usize * 20).unwrap_or(0);
            RGBColor(120 + shade / 2, 100 + shade / 3, 40 + shade)
        }
    }
}

/// Dash length and gap of a peer's line, px.
const PEER_DASH: (u32, u32) = (10, 6);
/// Dash length and gap of a reference line, px.
const REFERENCE_DASH: (u32, u32) = (4, 4);

/// How a line is drawn, in a panel and in the shared legend alike.
#[derive(Clone, Copy)]
struct LineLook {
    style: ShapeStyle,
    /// Dash length and gap, px; `None` for a solid line.
    dash: Option<(u32, u32)>,
}

/// A reference line's look: grey, thin, finely dashed.
fn reference_look() -> LineLook {
    LineLook {
        style: BLACK.mix(0.6).stroke_width(2),
        dash: Some(REFERENCE_DASH),
    }
}

/// A contender's line: its colour, dashed for a peer.
fn series_look(contender: Contender) -> LineLook {
    LineLook {
        style: colour(contender).stroke_width(3),
        dash: contender.is_peer().then_some(PEER_DASH),
    }
}

/// One point, with the spread of its repetitions when there is one.
#[derive(Debug, Clone, Copy)]
pub struct Point {
    /// x.
    pub x: f64,
    /// y (the median).
    pub y: f64,
    /// Smallest and largest repetition, for an error bar.
    pub range: Option<(f64, f64)>,
}

/// One series of a panel.
pub struct Series {
    /// Whose measurements.
    pub contender: Contender,
    /// Added to the legend label (e.g. the sample count).
    pub note: String,
    /// The points, in x order.
    pub points: Vec<Point>,
}

/// One panel of a figure.
pub struct Panel {
    /// Panel title.
    pub title: String,
    /// Its series.
    pub series: Vec<Series>,
    /// A horizontal reference line (label, y), e.g. the round-trip ceiling.
    pub reference: Option<(String, f64)>,
}

/// What a figure's axes are.
pub enum Kind {
    /// x: percentile in nines, y: latency ms (log).
    LatencyPercentiles,
    /// x: clients (log₂), y: the named metric. Every panel shows the same contenders, so
    /// one legend under the panels names them all and hides no point (a legend inside a
    /// panel covered measurements wherever it went).
    VsClients {
        /// y axis description with its unit.
        y_desc: &'static str,
        /// y range: `None` from 0 to the data, `Some` fixed.
        y_range: Option<(f64, f64)>,
        /// Logarithmic y axis (latencies spanning decades).
        log_y: bool,
    },
}

/// One figure: caption, axes and panels side by side.
pub struct Figure {
    /// Caption over all panels.
    pub caption: String,
    /// Axes.
    pub kind: Kind,
    /// Panels.
    pub panels: Vec<Panel>,
}

/// Writes `figure` as `stem.svg` and `stem.png`.
pub fn render(figure: &Figure, stem: &Path) -> Result<Vec<PathBuf>> {
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
    let (panels, legend) = match figure.kind {
        Kind::LatencyPercentiles => (root, None),
        Kind::VsClients { .. } => {
            let entries = legend_entries(figure);
            let rows = entries.len().div_ceil(LEGEND_COLUMNS) as u32;
            let (_, height) = root.dim_in_pixel();
            let (panels, strip) =
                root.split_vertically(height.saturating_sub(rows * LEGEND_ROW + 8));
            (panels, Some((strip, entries)))
        }
    };
    let areas = panels.split_evenly((1, figure.panels.len().max(1)));
    for (panel, area) in figure.panels.iter().zip(areas.iter()) {
        match &figure.kind {
            Kind::LatencyPercentiles => draw_latency(panel, area)?,
            Kind::VsClients {
                y_desc,
                y_range,
                log_y,
            } => draw_vs_clients(panel, area, y_desc, *y_range, *log_y)?,
        }
    }
    if let Some((strip, entries)) = legend {
        draw_shared_legend(&strip, &entries)?;
    }
    Ok(())
}

/// One entry of a figure's shared legend.
enum LegendEntry {
    /// A contender's series.
    Series(Contender),
    /// A panel's reference line, by its label.
    Reference(String),
}

/// The entries of a figure's shared legend: each reference line and contender once, in the
/// order the panels first show them.
fn legend_entries(figure: &Figure) -> Vec<LegendEntry> {
    let mut references: Vec<String> = Vec::new();
    let mut contenders: Vec<Contender> = Vec::new();
    for panel in &figure.panels {
        if let Some((label, _)) = &panel.reference
            && !references.contains(label)
        {
            references.push(label.clone());
        }
        for s in &panel.series {
            if !contenders.contains(&s.contender) {
                contenders.push(s.contender);
            }
        }
    }
    references
        .into_iter()
        .map(LegendEntry::Reference)
        .chain(contenders.into_iter().map(LegendEntry::Series))
        .collect()
}

/// Draws `entries` in rows of [`LEGEND_COLUMNS`] across `strip`, each a line sample drawn as
/// its series is (peers dashed) and its label.
fn draw_shared_legend<DB: DrawingBackend>(
    strip: &DrawingArea<DB, Shift>,
    entries: &[LegendEntry],
) -> Result<(), String> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let (width, _) = strip.dim_in_pixel();
    let column = (width / LEGEND_COLUMNS as u32) as i32;
    let font = TextStyle::from(("sans-serif", FONT - 2).into_font())
        .pos(Pos::new(HPos::Left, VPos::Center));
    for (i, entry) in entries.iter().enumerate() {
        let x = 24 + (i % LEGEND_COLUMNS) as i32 * column;
        let y = (i / LEGEND_COLUMNS) as i32 * LEGEND_ROW as i32 + LEGEND_ROW as i32 / 2;
        let (look, label) = match entry {
            LegendEntry::Reference(label) => (reference_look(), label.clone()),
            LegendEntry::Series(c) => (series_look(*c), c.label().to_owned()),
        };
        let sample = [(x, y), (x + LEGEND_SAMPLE, y)];
        match look.dash {
            Some((size, gap)) => strip.draw(&DashedPathElement::new(sample, size, gap, look.style)),
            None => strip.draw(&PathElement::new(sample.to_vec(), look.style)),
        }
        .map_err(err)?;
        let text = Text::new(label, (x + LEGEND_SAMPLE + 8, y), font.clone());
        strip.draw(&text).map_err(err)?;
    }
    Ok(())
}

/// Draws a panel's series and reference line, and its own legend at `legend` unless the
/// figure has a shared one (`None`).
fn series_and_legend<'a, DB, X, Y>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    panel: &Panel,
    legend: Option<SeriesLabelPosition>,
) -> Result<(), String>
where
    DB: DrawingBackend + 'a,
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    if let Some((label, y)) = &panel.reference {
        let (x0, x1) = (chart.x_range().start, chart.x_range().end);
        let LineLook { style, .. } = reference_look();
        let (size, gap) = REFERENCE_DASH;
        chart
            .draw_series(DashedLineSeries::new(
                vec![(x0, *y), (x1, *y)],
                size,
                gap,
                style,
            ))
            .map_err(err)?
            .label(label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], style));
    }
    for s in &panel.series {
        let colour = colour(s.contender);
        let LineLook { style, dash } = series_look(s.contender);
        let xy: Vec<(f64, f64)> = s.points.iter().map(|p| (p.x, p.y)).collect();
        let label = format!("{}{}", s.contender.label(), s.note);
        let annotation = if xy.len() < MIN_POINTS_FOR_LINE {
            chart
                .draw_series(xy.iter().map(|&p| Circle::new(p, 6, colour.filled())))
                .map_err(err)?
        } else if let Some((size, gap)) = dash {
            chart
                .draw_series(DashedLineSeries::new(xy.clone(), size, gap, style))
                .map_err(err)?
        } else {
            chart
                .draw_series(LineSeries::new(xy.clone(), style))
                .map_err(err)?
        };
        annotation
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], style));
        if xy.len() >= MIN_POINTS_FOR_LINE {
            chart
                .draw_series(xy.iter().map(|&p| Circle::new(p, 4, colour.filled())))
                .map_err(err)?;
        }
        chart
            .draw_series(s.points.iter().filter_map(|p| {
                let (lo, hi) = p.range?;
                Some(ErrorBar::new_vertical(
                    p.x,
                    lo,
                    p.y,
                    hi,
                    colour.stroke_width(2),
                    WHISKER,
                ))
            }))
            .map_err(err)?;
    }
    let Some(legend) = legend else {
        return Ok(());
    };
    chart
        .configure_series_labels()
        .position(legend)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", FONT - 2))
        .draw()
        .map_err(err)
}

/// Smallest and largest y of a panel, error bars included.
fn y_extent(panel: &Panel) -> Option<(f64, f64)> {
    let ys = panel.series.iter().flat_map(|s| {
        s.points.iter().flat_map(|p| {
            let (lo, hi) = p.range.unwrap_or((p.y, p.y));
            [lo, p.y, hi]
        })
    });
    let ys = ys.chain(panel.reference.iter().map(|r| r.1));
    ys.fold(None, |acc: Option<(f64, f64)>, y| {
        Some(acc.map_or((y, y), |(lo, hi)| (lo.min(y), hi.max(y))))
    })
}

fn draw_latency<DB: DrawingBackend>(
    panel: &Panel,
    area: &DrawingArea<DB, Shift>,
) -> Result<(), String> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let (lo, hi) = match y_extent(panel) {
        Some((lo, hi)) if hi > 0.0 => ((lo / 2.0).max(0.001), hi * 2.0),
        _ => (0.001, 1.0),
    };
    // The tail axis ends at the next whole nine past the deepest point drawn.
    let deepest = panel
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.x))
        .fold(1.0f64, f64::max);
    let x_hi = (deepest + 1e-6).ceil().min(MAX_NINES);
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, ("sans-serif", FONT))
        .margin(16)
        .x_label_area_size(56)
        .y_label_area_size(80)
        .build_cartesian_2d(0.0..x_hi + 0.1, (lo..hi).log_scale())
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_labels(9)
        .x_label_formatter(&|x| nines_label(*x))
        .y_label_formatter(&|y| log_label(*y))
        .x_desc("percentile (log scale of 1 − p)")
        .y_desc("acquire latency (ms, log scale)")
        .label_style(("sans-serif", FONT))
        .axis_desc_style(("sans-serif", FONT))
        .draw()
        .map_err(err)?;
    series_and_legend(&mut chart, panel, Some(SeriesLabelPosition::UpperLeft))
}

fn draw_vs_clients<DB: DrawingBackend>(
    panel: &Panel,
    area: &DrawingArea<DB, Shift>,
    y_desc: &str,
    y_range: Option<(f64, f64)>,
    log_y: bool,
) -> Result<(), String> {
    let x_hi = panel
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.x))
        .fold(2.0f64, f64::max);
    // log₂ x axis: 1, 2, 4 … clients evenly spaced, with room for the dodged markers.
    let x = (0.7..x_hi * 1.4).log_scale().base(2.0);
    let extent = y_extent(panel);
    if log_y {
        let (lo, hi) = match extent {
            Some((lo, hi)) if lo > 0.0 => (lo / 1.5, hi * 1.5),
            _ => (0.001, 1.0),
        };
        vs_clients_chart(panel, area, y_desc, x, (lo..hi).log_scale(), log_label)
    } else {
        let (lo, hi) = y_range.unwrap_or_else(|| {
            let top = extent.map_or(0.0, |e| e.1);
            (0.0, if top > 0.0 { top * 1.15 } else { 1.0 })
        });
        vs_clients_chart(panel, area, y_desc, x, lo..hi, number_label)
    }
}

fn vs_clients_chart<DB, X, Y>(
    panel: &Panel,
    area: &DrawingArea<DB, Shift>,
    y_desc: &str,
    x: X,
    y: Y,
    y_label: fn(f64) -> String,
) -> Result<(), String>
where
    DB: DrawingBackend,
    X: AsRangedCoord<Value = f64>,
    Y: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, ("sans-serif", FONT))
        .margin(16)
        .x_label_area_size(56)
        .y_label_area_size(90)
        .build_cartesian_2d(x, y)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_label_formatter(&|x| clients_label(*x))
        .y_label_formatter(&|y| y_label(*y))
        .x_desc("concurrent clients (log₂ scale)")
        .y_desc(y_desc)
        .label_style(("sans-serif", FONT))
        .axis_desc_style(("sans-serif", FONT))
        .draw()
        .map_err(err)?;
    series_and_legend(&mut chart, panel, None)
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

/// A log axis labels its decades and their 2× and 5× only, so minor lines stay unlabelled.
fn log_label(v: f64) -> String {
    let mantissa = v / 10f64.powf(v.log10().floor());
    if [1.0, 2.0, 5.0].iter().any(|m| (mantissa - m).abs() < 1e-6) {
        number_label(v)
    } else {
        String::new()
    }
}

/// Whole client counts only (the log₂ axis also ticks between them).
fn clients_label(x: f64) -> String {
    let n = x.round();
    if (x - n).abs() < 1e-6 && n >= 1.0 && (n as u64).is_power_of_two() {
        format!("{n}")
    } else {
        String::new()
    }
}

fn number_label(v: f64) -> String {
    if v == 0.0 {
        "0".to_owned()
    } else if v >= 10_000.0 {
        format!("{:.0}k", v / 1_000.0)
    } else if v >= 10.0 {
        format!("{v:.0}")
    } else if v >= 0.01 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_and_log_axes_label_only_their_marks() {
        assert_eq!(nines_label(2.0), "p99");
        assert_eq!(nines_label(2.5), "");
        assert_eq!(log_label(20.0), "20");
        assert_eq!(log_label(0.5), "0.50");
        assert_eq!(log_label(0.002), "0.002");
        assert_eq!(log_label(30.0), "");
        assert_eq!(clients_label(32.0), "32");
        assert_eq!(clients_label(3.0), "");
    }

    #[test]
    fn the_shared_legend_names_each_line_once() {
        let panel = |reference: Option<&str>, contenders: &[Contender]| Panel {
            title: String::new(),
            series: contenders
                .iter()
                .map(|&contender| Series {
                    contender,
                    note: String::new(),
                    points: Vec::new(),
                })
                .collect(),
            reference: reference.map(|r| (r.to_owned(), 1.0)),
        };
        let spin = Contender::Leasehold(WaitKind::Spin);
        let figure = Figure {
            caption: String::new(),
            kind: Kind::LatencyPercentiles,
            panels: vec![
                panel(Some("ceiling"), &[spin, Contender::RslockDefault]),
                panel(None, &[Contender::RslockDefault, Contender::RedLock]),
            ],
        };
        let names: Vec<String> = legend_entries(&figure)
            .iter()
            .map(|e| match e {
                LegendEntry::Reference(label) => label.clone(),
                LegendEntry::Series(c) => c.label().to_owned(),
            })
            .collect();
        let expected = [
            "ceiling",
            spin.label(),
            Contender::RslockDefault.label(),
            Contender::RedLock.label(),
        ];
        assert_eq!(names, expected);
    }
}
