//! A picture of a run, as Jepsen's timelines give one: an SVG with, per lock, a lane per
//! client showing what it believed (holds with their tokens, waits), a lane per server
//! target showing what the lock scripts' replies show it held, the faults that landed as
//! bands over the lanes they hit, and each problem the checker found marked at its instant,
//! named, with whether a fault excused it.
//!
//! Why it exists: a reader should see why a run failed without reading its trace. The
//! picture is drawn only from what the checker judged (the history, the fault log and the
//! problems), so it shows the same run the verdict speaks of.
//!
//! Invariant: the file stays small however long the run. Marks narrower than a couple of
//! pixels merge with their neighbours, and a long run is drawn as a full-run overview strip
//! above a detail window around its first unexcused problem (its first problem, if every
//! one was excused).

mod bands;
mod draw;
mod lanes;
mod svg;

use crate::checker::{FAULT_TOUCHED, Problem};
use crate::scenario::run::{RunResult, RunSpec};
use crate::world::history::{FaultMark, HistEvent};

use bands::Band;
use draw::Canvas;
use svg::{Scale, Svg, secs};

/// What a picture is drawn from.
#[derive(Debug, Clone, Copy)]
pub struct Scene<'a> {
    /// The heading: which run this is.
    pub title: &'a str,
    /// The run's history.
    pub history: &'a [HistEvent],
    /// The faults that landed.
    pub faults: &'a [FaultMark],
    /// What the checker found.
    pub problems: &'a [Problem],
    /// When the run ended, virtual ns.
    pub end: u64,
}

impl<'a> Scene<'a> {
    /// The scene of `result`, a run of `spec`, headed `title`.
    pub fn of_run(title: &'a str, spec: &RunSpec, result: &'a RunResult) -> Self {
        Self {
            title,
            history: &result.history,
            faults: &result.fault_log,
            problems: &result.findings.problems,
            end: u64::try_from(spec.horizon.as_nanos()).unwrap_or(u64::MAX),
        }
    }
}

/// Width of the picture, px: a laptop screen's.
const WIDTH: f64 = 1200.0;

/// Runs at most this long (virtual ns) are drawn whole: a scenario's 5 s run reads well at
/// [`WIDTH`] (a 1 s lease is about 200 px).
const WHOLE_RUN_NS: u64 = 10_000_000_000;

/// Context a detail window shows before its problem, virtual ns: two of the catalogue's
/// 1 s leases, so the hold that outlived its lease and the grant before it show.
const CONTEXT_BEFORE_NS: u64 = 2_000_000_000;

/// Context a detail window shows after its problem, virtual ns: one lease, to show how
/// the clients came out of it.
const CONTEXT_AFTER_NS: u64 = 1_000_000_000;

/// The picture of `scene`, as an SVG document.
pub fn render(scene: &Scene<'_>) -> String {
    let groups = lanes::groups(scene.history, scene.end);
    let bands: Vec<Band> = scene
        .faults
        .iter()
        .map(|m| Band::of(m, scene.end))
        .collect();
    let (from, to) = window(scene, &groups, &bands);
    let mut canvas = Canvas::new(Svg::new(), &groups, &bands, scene.problems);
    canvas.heading(scene.title, scene.end);
    if (from, to) != (0, scene.end) {
        canvas.overview(scene.end, (from, to));
    }
    canvas.detail(from, to);
    canvas.legend();
    canvas.problem_list();
    canvas.finish(WIDTH)
}

/// The stretch the detail panel shows: the whole run when it is short or had no problem;
/// otherwise the context around the first unexcused problem (else the first problem),
/// widened to the start of every fault acting then and every hold of its lock believed
/// then, so the cause shows beside the anomaly.
fn window(scene: &Scene<'_>, groups: &[lanes::Group], bands: &[Band]) -> (u64, u64) {
    let focus = scene
        .problems
        .iter()
        .filter(|p| !p.excused)
        .min_by_key(|p| p.at)
        .or_else(|| scene.problems.iter().min_by_key(|p| p.at));
    let Some(focus) = focus.filter(|_| scene.end > WHOLE_RUN_NS) else {
        return (0, scene.end);
    };
    let acting = bands
        .iter()
        .filter(|b| b.from <= focus.at && focus.at <= b.to && b.to < scene.end)
        .map(|b| b.from);
    let believed = groups
        .iter()
        .filter(|g| g.lock == focus.lock)
        .flat_map(|g| &g.lanes)
        .flat_map(|l| &l.marks)
        .filter(|m| m.look.holds() && m.from <= focus.at && focus.at <= m.to)
        .map(|m| m.from);
    let start = acting
        .chain(believed)
        .fold(focus.at.saturating_sub(CONTEXT_BEFORE_NS), u64::min);
    (
        start,
        focus.at.saturating_add(CONTEXT_AFTER_NS).min(scene.end),
    )
}

/// The scale of the plot area (right of the lane labels) over `[from, to]`.
fn scale(from: u64, to: u64) -> Scale {
    Scale {
        from,
        to: to.max(from + 1),
        left: draw::LABEL_WIDTH,
        width: WIDTH - draw::LABEL_WIDTH - draw::MARGIN,
    }
}

/// "N problems, M not excused", for headings.
fn problem_summary(problems: &[Problem]) -> String {
    let unexcused = problems.iter().filter(|p| !p.excused).count();
    match problems.len() {
        0 => "no problems".to_owned(),
        n => format!("{n} problem(s), {unexcused} not excused"),
    }
}

/// How a problem's excuse reads: whether one of the faults that touched it excuses it.
fn excuse(problem: &Problem) -> String {
    let touched = problem.touched_by.join(", ");
    match (problem.excused, touched.is_empty()) {
        // A rule of its own (a token's issuing node) names itself and its evidence.
        (true, _) if problem.rule != Some(FAULT_TOUCHED) => format!(
            "excused by {}: {}",
            problem.rule.unwrap_or_default(),
            problem.excuse.as_deref().unwrap_or_default()
        ),
        (true, _) => format!("excused (touched by {touched})"),
        (false, true) => "not excused (touched by no fault)".to_owned(),
        (false, false) => format!("not excused (touched by {touched}, which does not excuse it)"),
    }
}

/// A problem's one-line name: its kind, lock, instant and excuse.
fn problem_name(index: usize, problem: &Problem) -> String {
    format!(
        "#{} {:?} on {} at {}: {}",
        index + 1,
        problem.kind,
        problem.lock,
        secs(problem.at),
        excuse(problem)
    )
}

#[cfg(test)]
mod tests;
