//! The panels of a picture, top to bottom: the heading, the full-run overview strip, the
//! detail panel (time axis, fault rows, problem markers, then per lock its client and
//! server lanes), the legend and the numbered list of problems.
//!
//! Invariant: a lane never draws more than about one mark per [`MERGE_PX`] of its width:
//! marks of one look closer than that merge into one, whose tooltip counts them and gives
//! the stretch they cover.

use std::collections::BTreeSet;

use crate::checker::Problem;
use crate::model::NodeId;
use crate::world::net::Target;

use super::bands::Band;
use super::lanes::{Group, Lane, Look, Mark, Owner};
use super::svg::{Scale, Svg, secs, tick_label};
use super::{excuse, problem_name, problem_summary, scale};

/// Width of the lane-label column, px: fits "group 0 master".
pub(super) const LABEL_WIDTH: f64 = 110.0;
/// Space around the picture's edges, px.
pub(super) const MARGIN: f64 = 10.0;
/// Height of a detail lane, px: a token's digits fit in a bar.
const LANE_HEIGHT: f64 = 16.0;
/// Space between lanes, px.
const LANE_GAP: f64 = 4.0;
/// How far a fault band reaches above and below its lane, px: half the gap, so it shows
/// around a hold without touching the next lane's band.
const BAND_OVERHANG: f64 = LANE_GAP / 2.0;
/// A fault's cap over the marks it covers takes the top 1/CAP_SHARE of the lane: visible,
/// yet the mark's colour stays readable beneath.
const CAP_SHARE: f64 = 4.0;
/// Height of an overview lane, px: enough to see a bar, small enough that ten lanes take
/// a thumb's height.
const OVERVIEW_LANE_HEIGHT: f64 = 4.0;
/// Height of a row of the axis, the fault rows, the problem row and a lock's header, px.
const ROW_HEIGHT: f64 = 16.0;
/// Marks narrower than this (px) merge with marks of their look this close: finer detail
/// than a couple of pixels is noise on screen and bytes on disk.
const MERGE_PX: f64 = 2.0;
/// Width of an average character of the 11 px sans-serif text, px, to fit labels.
const CHAR_WIDTH: f64 = 6.2;
/// Rows of fault labels at most; faults beyond them share the last row.
const MAX_FAULT_ROWS: usize = 8;
/// Problems listed in full at most (the checker keeps the first few of each kind).
const MAX_LISTED: usize = 24;

const STYLE: &str = "text{font-family:sans-serif;font-size:11px;fill:#222}\
.title{font-size:15px;font-weight:bold}.page{fill:#fff}.lane{fill:#f2f2f2}\
.hold{fill:#3d72c9}.lost{fill:#8e44ad}.crashed{fill:#555}.wait{fill:#aabbd6}\
.server{fill:#2e8b57}.gone{stroke:#d81b60;stroke-width:3}.rejected{stroke:#000;stroke-width:2}\
.band{fill:#f5c518;fill-opacity:.6}.lasting{fill-opacity:.2}.cap{fill:#d9a400}.fault{fill:#d9a400}\
.grid{stroke:#ddd}.problem{stroke:#d62728;stroke-width:2}\
.excused{stroke:#ff9f1c;stroke-dasharray:4 2}.window{fill:none;stroke:#333;stroke-dasharray:3 2}\
.bad{fill:#d62728;font-weight:bold}.ok{fill:#b36b00;font-weight:bold}\
.token{fill:#fff;font-size:9px}.small{font-size:9px;fill:#555}.head{font-weight:bold}";

/// The picture being drawn, top to bottom.
pub(super) struct Canvas<'a> {
    svg: Svg,
    groups: &'a [Group],
    bands: &'a [Band],
    problems: &'a [Problem],
    /// Nodes with a lane of their own.
    node_lanes: BTreeSet<NodeId>,
    /// Where the next panel starts, px.
    y: f64,
}

impl<'a> Canvas<'a> {
    pub(super) fn new(
        svg: Svg,
        groups: &'a [Group],
        bands: &'a [Band],
        problems: &'a [Problem],
    ) -> Self {
        let node_lanes = groups
            .iter()
            .flat_map(|g| &g.lanes)
            .filter_map(|l| match l.owner {
                Owner::Server(Target::Node(node)) => Some(node),
                _ => None,
            })
            .collect();
        Self {
            svg,
            groups,
            bands,
            problems,
            node_lanes,
            y: MARGIN,
        }
    }

    /// The document, `width` px wide.
    pub(super) fn finish(self, width: f64) -> String {
        self.svg.finish((width, self.y + MARGIN), STYLE)
    }

    pub(super) fn heading(&mut self, title: &str, end: u64) {
        self.y += ROW_HEIGHT;
        self.svg.text((MARGIN, self.y), "title", title, "");
        self.y += ROW_HEIGHT;
        let line = format!(
            "{:.1} s of virtual time; {}. Hover over a mark for its exact times, tokens and detail.",
            end as f64 / 1e9,
            problem_summary(self.problems)
        );
        self.svg.text((MARGIN, self.y), "", &line, "");
        self.y += ROW_HEIGHT / 2.0;
    }

    fn covers(&self, band: &Band, lane: &Lane) -> bool {
        band.covers(lane.owner, &|n| self.node_lanes.contains(&n))
    }

    /// The whole run in one thin row per lane, with the detail window outlined.
    pub(super) fn overview(&mut self, end: u64, (from, to): (u64, u64)) {
        let scale = scale(0, end);
        self.y += ROW_HEIGHT;
        self.svg.text(
            (MARGIN, self.y),
            "head",
            "whole run",
            "the full run, merged",
        );
        self.axis_labels(&scale);
        let top = self.y + LANE_GAP;
        let mut y = top;
        let bands: Vec<&Band> = self.bands.iter().collect();
        for group in self.groups {
            for lane in &group.lanes {
                self.lane_back(lane, &scale, &bands, (y, OVERVIEW_LANE_HEIGHT), false);
                self.lane_row(lane, &scale, (y, OVERVIEW_LANE_HEIGHT), false);
                y += OVERVIEW_LANE_HEIGHT + 1.0;
            }
            y += LANE_GAP;
        }
        for (i, p) in self.problems.iter().enumerate() {
            let class = if p.excused {
                "problem excused"
            } else {
                "problem"
            };
            let x = scale.x(p.at);
            self.svg.line((x, top, x, y), class, &problem_name(i, p));
        }
        let (x0, x1) = (scale.x(from), scale.x(to));
        let title = format!("the detail below: {} to {}", secs(from), secs(to));
        self.svg
            .rect((x0, top - 2.0, x1 - x0, y - top + 2.0), "window", &title);
        self.y = y;
    }

    /// Tick labels of `scale` on the current row.
    fn axis_labels(&mut self, scale: &Scale) {
        let ticks = scale.ticks();
        let step = match ticks.as_slice() {
            [a, b, ..] => b - a,
            _ => scale.to - scale.from,
        };
        for t in ticks {
            let label = tick_label(t, step);
            self.svg
                .text((scale.x(t) - 8.0, self.y), "small", &label, "");
        }
    }

    /// The detail panel over `[from, to]`.
    pub(super) fn detail(&mut self, from: u64, to: u64) {
        let scale = scale(from, to);
        let bands: Vec<&Band> = self
            .bands
            .iter()
            .filter(|b| scale.shows(b.from, b.to))
            .collect();
        let rows = fault_rows(&bands, &scale);
        let lanes: usize = self.groups.iter().map(|g| g.lanes.len()).sum();
        let row_count = rows.iter().max().map_or(0, |r| r + 1);
        let height = ROW_HEIGHT * (2 + row_count + self.groups.len()) as f64
            + (LANE_HEIGHT + LANE_GAP) * lanes as f64;
        self.y += ROW_HEIGHT * 1.5;
        self.svg
            .text((MARGIN, self.y), "head", "time (s)", "virtual time");
        for t in scale.ticks() {
            let x = scale.x(t);
            self.svg
                .line((x, self.y + 3.0, x, self.y + height), "grid", "");
        }
        self.axis_labels(&scale);
        // Fault labels, each on its row.
        for (band, row) in bands.iter().zip(&rows) {
            let y = self.y + ROW_HEIGHT * (*row + 1) as f64;
            let (x0, x1) = (scale.x(band.from), scale.x(band.to));
            self.svg.rect(
                (x0, y - 9.0, (x1 - x0).max(MERGE_PX), 10.0),
                "fault",
                &band.note,
            );
            self.svg.text((x0 + 3.0, y), "", &band.label, &band.note);
        }
        if row_count > 0 {
            self.svg.text(
                (MARGIN, self.y + ROW_HEIGHT),
                "head",
                "faults",
                "faults that landed",
            );
        }
        self.y += ROW_HEIGHT * (row_count + 1) as f64;
        let problem_row = self.y;
        self.svg.text(
            (MARGIN, problem_row),
            "head",
            "problems",
            "what the checker found",
        );
        let mut last_label = f64::MIN;
        for (i, p) in self.problems.iter().enumerate() {
            if !scale.shows(p.at, p.at) {
                continue;
            }
            let x = scale.x(p.at);
            if x - last_label >= CHAR_WIDTH * 3.0 {
                let class = if p.excused { "ok" } else { "bad" };
                let text = format!("#{}", i + 1);
                let tooltip = format!("{}\n{}", problem_name(i, p), p.detail);
                self.svg
                    .text((x - 4.0, problem_row), class, &text, &tooltip);
                last_label = x;
            }
        }
        for group in self.groups {
            self.group(group, &scale, &bands, problem_row);
        }
    }

    /// A lock's lanes, its fault bands and its problems' lines.
    fn group(&mut self, group: &Group, scale: &Scale, bands: &[&Band], problem_row: f64) {
        self.y += ROW_HEIGHT;
        let header = format!("lock {}", group.lock);
        self.svg.text((MARGIN, self.y), "head", &header, "");
        let top = self.y + LANE_GAP;
        for lane in &group.lanes {
            let y = self.y + LANE_GAP;
            self.lane_back(lane, scale, bands, (y, LANE_HEIGHT), true);
            self.svg.text(
                (MARGIN, y + LANE_HEIGHT - 4.0),
                "",
                &lane.label(),
                lane_title(lane),
            );
            self.lane_row(lane, scale, (y, LANE_HEIGHT), true);
            self.cap(lane, scale, bands, (y, LANE_HEIGHT));
            self.y += LANE_HEIGHT + LANE_GAP;
        }
        for (i, p) in self.problems.iter().enumerate() {
            if p.lock != group.lock || !scale.shows(p.at, p.at) {
                continue;
            }
            let class = if p.excused {
                "problem excused"
            } else {
                "problem"
            };
            let x = scale.x(p.at);
            let tooltip = format!("{}\n{}", problem_name(i, p), p.detail);
            self.svg
                .line((x, problem_row + 3.0, x, self.y.max(top)), class, &tooltip);
        }
    }

    /// One lane's background and the bands of the faults that hit it, in the row at `y` of
    /// `height`; tooltips only when `detailed`.
    fn lane_back(
        &mut self,
        lane: &Lane,
        scale: &Scale,
        bands: &[&Band],
        (y, height): (f64, f64),
        detailed: bool,
    ) {
        let (x0, x1) = (scale.x(scale.from), scale.x(scale.to));
        self.svg.rect((x0, y, x1 - x0, height), "lane", "");
        let covering: Vec<&Band> = bands
            .iter()
            .copied()
            .filter(|b| self.covers(b, lane))
            .collect();
        // Behind the marks, and a little taller than the lane, so a hold under a fault
        // keeps its colour and the band still shows above and below it.
        let overhang = BAND_OVERHANG.min(height / 4.0);
        for band in covering {
            let class = if band.lasting { "band lasting" } else { "band" };
            let (x0, x1) = (scale.x(band.from), scale.x(band.to));
            let rect = (
                x0,
                y - overhang,
                (x1 - x0).max(MERGE_PX),
                height + 2.0 * overhang,
            );
            let title = if detailed { band.note.as_str() } else { "" };
            self.svg.rect(rect, class, title);
        }
    }

    /// A cap over the marks of a lane where a fault that hit it acted, so a hold under a
    /// pause shows it (lasting clock changes aside: they would cap the rest of the run).
    fn cap(&mut self, lane: &Lane, scale: &Scale, bands: &[&Band], (y, height): (f64, f64)) {
        let acting: Vec<(f64, f64)> = bands
            .iter()
            .filter(|b| !b.lasting && self.covers(b, lane))
            .map(|b| (scale.x(b.from), scale.x(b.to)))
            .collect();
        for (x0, x1) in acting {
            let rect = (x0, y, (x1 - x0).max(MERGE_PX), height / CAP_SHARE);
            self.svg.rect(rect, "cap", "");
        }
    }

    /// One lane's marks in the row at `y` of `height`; tooltips and tokens only when
    /// `detailed`.
    fn lane_row(&mut self, lane: &Lane, scale: &Scale, (y, height): (f64, f64), detailed: bool) {
        // Waits first: holds are drawn over the tail of the wait they end.
        let order = [
            Look::Wait,
            Look::Server,
            Look::Hold,
            Look::Lost,
            Look::Crashed,
            Look::Gone,
            Look::Rejected,
        ];
        for look in order {
            let marks: Vec<&Mark> = lane
                .marks
                .iter()
                .filter(|m| m.look == look && scale.shows(m.from, m.to))
                .collect();
            for drawn in merged(&marks, scale) {
                let title = if detailed {
                    drawn.title()
                } else {
                    String::new()
                };
                let class = look.class();
                if look.instant() {
                    self.svg.line(
                        (drawn.x0, y - 1.0, drawn.x0, y + height + 1.0),
                        class,
                        &title,
                    );
                } else if look == Look::Wait {
                    let h = (height / 4.0).max(1.0);
                    let w = (drawn.x1 - drawn.x0).max(1.0);
                    self.svg
                        .rect((drawn.x0, y + (height - h) / 2.0, w, h), class, &title);
                } else {
                    let w = (drawn.x1 - drawn.x0).max(1.0);
                    self.svg.rect((drawn.x0, y, w, height), class, &title);
                    let token = drawn.token();
                    if detailed && token.len() as f64 * CHAR_WIDTH * 0.8 < w - 4.0 {
                        self.svg
                            .text((drawn.x0 + 2.0, y + height - 4.0), "token", &token, &title);
                    }
                }
            }
        }
    }

    /// Swatches naming every look, band and marker.
    pub(super) fn legend(&mut self) {
        self.y += ROW_HEIGHT * 1.5;
        self.svg.text((MARGIN, self.y), "head", "legend", "");
        let entries: [(&str, &str, bool); 11] = [
            ("hold", "believed hold (token inside)", false),
            ("lost", "hold ended by lost()", false),
            ("crashed", "hold ended by a crash", false),
            ("wait", "waiting", false),
            ("server", "server held (replies)", false),
            ("gone", "oracle: lease gone", true),
            ("rejected", "stale write rejected", true),
            ("band", "fault acting (capped over marks)", false),
            ("band lasting", "lasting clock change", false),
            ("problem", "problem, not excused", true),
            ("problem excused", "problem, excused", true),
        ];
        let mut x = LABEL_WIDTH;
        for (class, name, is_line) in entries {
            let width = 14.0 + 6.0 + name.len() as f64 * CHAR_WIDTH;
            if x + width > super::WIDTH - MARGIN {
                x = LABEL_WIDTH;
                self.y += ROW_HEIGHT;
            }
            if is_line {
                self.svg
                    .line((x + 7.0, self.y - 10.0, x + 7.0, self.y + 2.0), class, "");
            } else {
                self.svg.rect((x, self.y - 9.0, 14.0, 10.0), class, "");
            }
            self.svg.text((x + 20.0, self.y), "", name, "");
            x += width + 12.0;
        }
    }

    /// Every problem, numbered as its marker, named with its excuse, with its detail.
    pub(super) fn problem_list(&mut self) {
        self.y += ROW_HEIGHT * 1.5;
        self.svg.text((MARGIN, self.y), "head", "problems", "");
        if self.problems.is_empty() {
            self.y += ROW_HEIGHT;
            self.svg
                .text((MARGIN, self.y), "", "none: the checker found nothing", "");
        }
        let wrap = ((super::WIDTH - 2.0 * MARGIN - 20.0) / CHAR_WIDTH) as usize;
        for (i, p) in self.problems.iter().enumerate().take(MAX_LISTED) {
            self.y += ROW_HEIGHT;
            let class = if p.excused { "ok" } else { "bad" };
            self.svg
                .text((MARGIN, self.y), class, &problem_name(i, p), &excuse(p));
            for line in wrapped(&p.detail, wrap) {
                self.y += ROW_HEIGHT - 2.0;
                self.svg.text((MARGIN + 20.0, self.y), "", &line, "");
            }
        }
        if self.problems.len() > MAX_LISTED {
            self.y += ROW_HEIGHT;
            let more = format!(
                "… and {} more (the replay command prints them all)",
                self.problems.len() - MAX_LISTED
            );
            self.svg.text((MARGIN, self.y), "", &more, "");
        }
    }
}

/// What a lane's label says on hover.
fn lane_title(lane: &Lane) -> &'static str {
    match lane.owner {
        Owner::Client(_) => "what this client believed (every incarnation of it)",
        Owner::Server(_) => "what this target held, as the lock scripts' replies show",
    }
}

/// The row of each band's label: the first row where it does not run into an earlier
/// label or band (the last row when none is free).
fn fault_rows(bands: &[&Band], scale: &Scale) -> Vec<usize> {
    let mut ends: Vec<f64> = Vec::new();
    bands
        .iter()
        .map(|b| {
            let x0 = scale.x(b.from);
            let x1 = scale
                .x(b.to)
                .max(x0 + (b.label.len() as f64 + 2.0) * CHAR_WIDTH);
            let row = ends
                .iter()
                .position(|end| *end <= x0)
                .unwrap_or(ends.len())
                .min(MAX_FAULT_ROWS - 1);
            match ends.get_mut(row) {
                Some(end) => *end = end.max(x1),
                None => ends.push(x1),
            }
            row
        })
        .collect()
}

/// Marks drawn as one: their pixel span, and the marks in it.
struct Drawn<'m> {
    x0: f64,
    x1: f64,
    marks: Vec<&'m Mark>,
}

impl Drawn<'_> {
    fn title(&self) -> String {
        match self.marks.as_slice() {
            [one] => one.note.clone(),
            many => {
                let from = many.iter().map(|m| m.from).min().unwrap_or(0);
                let to = many.iter().map(|m| m.to).max().unwrap_or(0);
                format!(
                    "{} marks merged (each narrower than {MERGE_PX} px at this scale) from {} to {}; first: {}",
                    many.len(),
                    secs(from),
                    secs(to),
                    many.first().map_or("", |m| m.note.as_str())
                )
            }
        }
    }

    /// The token a lone hold's bar prints; empty for merged marks.
    fn token(&self) -> String {
        match self.marks.as_slice() {
            [one] => one.token.map_or_else(String::new, |t| format!("t{t}")),
            _ => String::new(),
        }
    }
}

/// `marks` (of one look, sorted by start) as drawn at `scale`: a mark narrower than
/// [`MERGE_PX`] joins the previous drawn mark when it starts within [`MERGE_PX`] of its
/// end, and so does any mark after a narrow one.
fn merged<'m>(marks: &[&'m Mark], scale: &Scale) -> Vec<Drawn<'m>> {
    let mut out: Vec<Drawn<'m>> = Vec::new();
    for mark in marks {
        let (x0, x1) = (scale.x(mark.from), scale.x(mark.to));
        let narrow = x1 - x0 < MERGE_PX;
        match out.last_mut() {
            Some(last) if x0 <= last.x1 + MERGE_PX && (narrow || last.x1 - last.x0 < MERGE_PX) => {
                last.x1 = last.x1.max(x1);
                last.marks.push(mark);
            }
            _ => out.push(Drawn {
                x0,
                x1,
                marks: vec![mark],
            }),
        }
    }
    out
}

/// `text` cut into lines of at most `width` characters, at spaces where it can be.
fn wrapped(text: &str, width: usize) -> Vec<String> {
    let mut lines = vec![String::new()];
    for word in text.split(' ') {
        let Some(line) = lines.last_mut() else {
            continue;
        };
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(word.to_owned());
        } else {
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(word);
        }
    }
    lines
}
