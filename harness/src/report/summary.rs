//! `summary.md`: the human-readable benchmark report. Tables per grid, the ratios against
//! rslock that the project's claims rest on ([`key_ratios`]), the Python peers beside
//! Leasehold and rslock ([`python_peers`]), the server's cost
//! ([`server_cost`]), a short verdict per strategy that allows for the spread of repetitions,
//! and the method (including how round trips were attributed), all rendered from a
//! [`BenchReport`] alone so a stored `bench.json` re-renders to the same text.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use crate::bench::contender::Contender;
use crate::bench::python_peer::library::PythonLib;
use crate::report::format::{fmt, fmt_spread, utc};
use crate::report::key_ratios::{self, KEY_CLIENTS, KEY_CS_US, key_cell};
use crate::report::metrics::{median, ratio};
use crate::report::plots::cs_label;
use crate::report::results::{BenchReport, CellResult, Spread};
use crate::report::{design_peers, python_peers, rwlock, server_cost, uncontended};
/// Jain's index at or above which a strategy is called fair (rslock tuned reaches 0.989–0.999).
const FAIR_JAIN: f64 = 0.99;
/// Client round trips per acquisition at or below which a strategy is called frugal: the
/// uncontended minimum is 2 (acquire + release); a waiter that sleeps until it is woken needs
/// about one more (queue/subscribe), and 3.5 leaves room for occasional retries. rslock's
/// default (3.98 in docs/DESIGN.md §4) is just above it, its 10 ms retry (39.5) far above.
const FRUGAL_ROUND_TRIPS: f64 = 3.5;

/// docs/DESIGN.md §4 peer baselines (loopback, 3 × 10 s medians), for the sanity-check table:
/// (contender, N=32 cs 0: acq/s, p99 ms, Jain; N=32 cs 1 ms: p99 ms, Jain, round trips/acq).
const DESIGN_BASELINE: [(Contender, [f64; 6]); 4] = [
    (
        Contender::RslockDefault,
        [6_533.0, 187.0, 0.965, 1_661.0, 0.866, 3.98],
    ),
    (
        Contender::RslockTuned,
        [6_593.0, 38.0, 0.999, 422.0, 0.989, 39.5],
    ),
    (
        Contender::Python(PythonLib::RedisPy),
        [2_561.0, 402.0, 0.960, 1_410.0, 0.864, 2.48],
    ),
    (
        Contender::Python(PythonLib::PythonRedisLock),
        [1_513.0, 112.0, 0.997, 544.0, 0.964, 5.0],
    ),
];

/// Renders the whole summary.
pub fn render(report: &BenchReport, files: &[String]) -> String {
    let mut out = String::new();
    let meta = &report.meta;
    let _ = writeln!(out, "# Leasehold contention benchmark\n");
    let _ = writeln!(
        out,
        "Run: **{:?} grid**, {} repetitions × {} s per cell, Redis {} ({}), {} CPUs on the \
         client machine, started {} UTC, took {:.0} s in total including container start-up.\n",
        meta.plan.size,
        meta.plan.repetitions,
        meta.plan.duration.as_secs(),
        if meta.redis_version.is_empty() {
            "?"
        } else {
            &meta.redis_version
        },
        meta.topology,
        meta.cpus,
        utc(meta.started_unix_s),
        meta.elapsed_s,
    );
    let _ = writeln!(
        out,
        "Every client has its own connection (as separate processes would) and loops acquire → \
         critical section → release; all contenders' clients share one process and its \
         allocator (mimalloc). Metrics are DESIGN section 3's; each number is the median \
         over the repetitions, with the smallest and largest in brackets where they differ \
         (violations and errors are summed).\n"
    );

    let offered = report.cells.iter().map(|c| c.spec.offered_per_s).max();
    if let Some(per_s) = offered.filter(|&r| r > 0) {
        let _ = writeln!(
            out,
            "**Open loop**: every cell without think time was offered {per_s} acquisitions per \
             second in total, as Poisson arrivals split evenly over its clients; latency counts \
             from each acquisition's intended start, so a lock that falls behind is charged the \
             queueing (no coordinated omission). acq/s cannot exceed the offered rate.\n"
        );
    }
    write_violations(&mut out, report);
    key_ratios::write(&mut out, report);
    python_peers::write(&mut out, report);
    design_peers::write(&mut out, report);
    uncontended::write(&mut out, report);
    write_verdicts(&mut out, report);
    server_cost::write(&mut out, report);

    let sections: BTreeSet<u64> = report
        .cells
        .iter()
        .filter(|c| c.spec.is_saturated_hot_lock())
        .map(|c| c.spec.critical_section_us)
        .collect();
    for cs in sections {
        let cells = || {
            report
                .cells
                .iter()
                .filter(move |c| c.spec.is_saturated_hot_lock() && c.spec.critical_section_us == cs)
        };
        let _ = writeln!(
            out,
            "## One hot lock, critical section {}{}\n",
            cs_label(cs),
            held(cells(), cs)
        );
        write_table(&mut out, cells());
    }
    let thinking: BTreeSet<(u64, u64)> = report
        .cells
        .iter()
        .filter(|c| c.spec.locks == 1 && c.spec.think_us > 0)
        .map(|c| (c.spec.critical_section_us, c.spec.think_us))
        .collect();
    for (cs, think) in thinking {
        let _ = writeln!(
            out,
            "## One hot lock with think time {}, critical section {}\n\n\
             After each release a client thinks {} (measured like the critical section) before \
             it asks again, so the lock is contended but not saturated; acq/s is bounded by the \
             clients' demand, and latency is what a service with pauses between requests sees.\n",
            cs_label(think),
            cs_label(cs),
            cs_label(think),
        );
        write_table(
            &mut out,
            report.cells.iter().filter(|c| {
                c.spec.locks == 1 && c.spec.think_us == think && c.spec.critical_section_us == cs
            }),
        );
    }
    let spread: BTreeSet<(usize, u64)> = report
        .cells
        .iter()
        .filter(|c| c.spec.locks > 1)
        .map(|c| (c.spec.locks, c.spec.critical_section_us))
        .collect();
    for (locks, cs) in spread {
        let _ = writeln!(
            out,
            "## Spread over {locks} locks (round-robin per client), critical section {}\n\n\
             acq/s counts all {locks} locks together; the hand-off gap is per lock \
             ({locks} × wall time / acquisitions − mean hold).\n",
            cs_label(cs)
        );
        write_table(
            &mut out,
            report
                .cells
                .iter()
                .filter(|c| c.spec.locks == locks && c.spec.critical_section_us == cs),
        );
    }
    rwlock::write(&mut out, report);
    write_baseline_check(&mut out, report);
    write_method(&mut out, report, files);
    out
}

fn write_violations(out: &mut String, report: &BenchReport) {
    let violations = report.violations();
    let errors: u64 = report.cells.iter().map(|c| c.median.errors).sum();
    let _ = writeln!(
        out,
        "**Mutual-exclusion violations: {violations}** over {} cells{}. **Client errors: {errors}.**\n",
        report.cells.len(),
        if violations == 0 {
            " (must be 0: it is)"
        } else {
            " — MUST BE 0, investigate"
        },
    );
}

/// How a contender's fairness reads over its repetitions at the key point.
fn fairness(spread: Option<Spread>, median: Option<f64>) -> &'static str {
    match spread {
        Some(s) if s.min >= FAIR_JAIN => "fair",
        Some(s) if s.max < FAIR_JAIN => "not fair",
        Some(_) => "fair in some repetitions only",
        None if median.unwrap_or(0.0) >= FAIR_JAIN => "fair",
        None => "not fair",
    }
}

fn write_verdicts(out: &mut String, report: &BenchReport) {
    let _ = writeln!(out, "## Verdict per strategy\n");
    for contender in report.mutex_contenders() {
        let peer = contender.fair_peer();
        let violations: u64 = report
            .cells
            .iter()
            .filter(|c| c.spec.contender == contender)
            .map(|c| c.median.violations)
            .sum();
        let cs1 = key_cell(report, contender, KEY_CS_US);
        let cs0 = key_cell(report, contender, 0);
        let mut line = format!("- **{}**: ", contender.label());
        if let Some(m) = cs1 {
            let rt = m.client_round_trips_per_acq.unwrap_or(f64::INFINITY);
            let _ = write!(
                line,
                "{} and {} at N={KEY_CLIENTS}, cs {}: Jain {}, p99 {} ms{}, worst client's mean \
                 wait {} ms, {} client round trips/acq ({} commands/acq incl. scripts)",
                fairness(m.jain_spread, m.jain),
                if rt <= FRUGAL_ROUND_TRIPS {
                    "frugal"
                } else {
                    "chatty"
                },
                cs_label(KEY_CS_US),
                fmt_spread(m.jain, m.jain_spread, 1.0, 3),
                fmt_spread(m.p99_us, m.p99_us_spread, 1e-3, 1),
                versus(
                    m.p99_us,
                    m.p99_us_spread,
                    key_cell(report, peer, KEY_CS_US).map(|p| (p.p99_us, p.p99_us_spread)),
                    contender
                ),
                fmt(m.worst_client_wait_us.map(|v| v / 1_000.0), 1),
                fmt(m.client_round_trips_per_acq, 2),
                fmt(m.all_commands_per_acq, 2),
            );
        } else {
            line.push_str("not measured at the key point");
        }
        if let Some(m) = cs0 {
            let _ = write!(
                line,
                "; cs 0: {} hand-offs/s{} of {} acq/s, hand-off gap {} µs",
                fmt_spread(m.handoffs_per_s, m.handoffs_per_s_spread, 1.0, 0),
                versus(
                    m.handoffs_per_s,
                    m.handoffs_per_s_spread,
                    key_cell(report, peer, 0).map(|p| (p.handoffs_per_s, p.handoffs_per_s_spread)),
                    contender
                ),
                fmt(m.acq_per_s, 0),
                fmt(m.handoff_gap_us, 0),
            );
        }
        let _ = write!(
            line,
            "; {}.",
            if violations == 0 {
                "no exclusion violations".to_owned()
            } else {
                format!("**{violations} exclusion violations**")
            }
        );
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(
        out,
        "\n(\"fair\" = Jain ≥ {FAIR_JAIN} in every repetition, \"not fair\" = below it in every \
         one; \"frugal\" = ≤ {FRUGAL_ROUND_TRIPS} client round trips per acquisition, the \
         uncontended minimum being 2. Ratios are against each strategy's equal-fairness peer; \
         \"within noise\" when the repetition ranges overlap.)\n"
    );
}

/// " (0.25× rslock (10 ms retry))", with "within noise" when the spreads overlap.
fn versus(
    ours: Option<f64>,
    ours_spread: Option<Spread>,
    peer: Option<(Option<f64>, Option<Spread>)>,
    contender: Contender,
) -> String {
    if contender.fair_peer() == contender {
        return String::new();
    }
    let Some((theirs, theirs_spread)) = peer else {
        return String::new();
    };
    let noise = matches!((ours_spread, theirs_spread), (Some(a), Some(b)) if a.overlaps(&b));
    match ratio(ours, theirs) {
        Some(r) => format!(
            " ({r:.2}× {}{})",
            contender.fair_peer().label(),
            if noise { ", within noise" } else { "" }
        ),
        None => String::new(),
    }
}

/// " (held 1,012 µs on average, measured)" for a section whose cells measured their holds.
fn held<'a>(cells: impl Iterator<Item = &'a CellResult>, cs: u64) -> String {
    if cs == 0 {
        return String::new();
    }
    let holds: Vec<f64> = cells.filter_map(|c| c.median.mean_section_us).collect();
    match (
        median(&holds),
        holds
            .iter()
            .copied()
            .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v)))),
    ) {
        (Some(mid), Some(top)) if mid > 0.0 => format!(
            " (measured hold inside it: median over cells {} µs, at most {} µs)",
            fmt(Some(mid), 0),
            fmt(Some(top), 0)
        ),
        _ => String::new(),
    }
}

fn write_table<'a>(out: &mut String, cells: impl Iterator<Item = &'a CellResult>) {
    let _ = writeln!(
        out,
        "| N | contender | acq/s | hand-offs/s | p50 ms | p99 ms | max ms | worst client's mean wait ms | hand-off gap µs | Jain | min/max per client | client RT/acq | all cmds/acq | violations | errors |"
    );
    let _ = writeln!(
        out,
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    let mut cells: Vec<&CellResult> = cells.collect();
    cells.sort_by_key(|c| (c.spec.clients, c.spec.contender));
    for c in cells {
        let m = &c.median;
        let ms = |v: Option<f64>| v.map(|us| us / 1_000.0);
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {}/{} | {} | {} | {} | {} |",
            c.spec.clients,
            c.spec.contender.label(),
            fmt_spread(m.acq_per_s, m.acq_per_s_spread, 1.0, 0),
            fmt_spread(m.handoffs_per_s, m.handoffs_per_s_spread, 1.0, 0),
            fmt(ms(m.p50_us), 3),
            fmt_spread(m.p99_us, m.p99_us_spread, 1e-3, 2),
            fmt(ms(m.max_us), 1),
            fmt_spread(
                m.worst_client_wait_us,
                m.worst_client_wait_us_spread,
                1e-3,
                2
            ),
            fmt(m.handoff_gap_us, 0),
            fmt_spread(m.jain, m.jain_spread, 1.0, 3),
            fmt(m.min_count, 0),
            fmt(m.max_count, 0),
            fmt(m.client_round_trips_per_acq, 2),
            fmt(m.all_commands_per_acq, 2),
            m.violations,
            m.errors,
        );
    }
    let _ = writeln!(out);
}

fn write_baseline_check(out: &mut String, report: &BenchReport) {
    let _ = writeln!(out, "## Peer sanity check against DESIGN section 4\n");
    let _ = writeln!(
        out,
        "The design's peer numbers were taken on loopback with 3 × 10 s; this run's peer rows \
         should land in the same region (containers add a bridge hop, quick runs are short, and \
         the Python peers here also pay the pipe to their worker processes).\n"
    );
    let _ = writeln!(
        out,
        "| peer | source | cs 0: acq/s | cs 0: p99 ms | cs 0: Jain | cs 1 ms: p99 ms | cs 1 ms: Jain | cs 1 ms: client RT/acq |"
    );
    let _ = writeln!(out, "|---|---|---:|---:|---:|---:|---:|---:|");
    for (peer, design) in DESIGN_BASELINE {
        let _ = writeln!(
            out,
            "| {} | DESIGN §4 | {} | {} | {} | {} | {} | {} |",
            peer.label(),
            fmt(Some(design[0]), 0),
            fmt(Some(design[1]), 0),
            fmt(Some(design[2]), 3),
            fmt(Some(design[3]), 0),
            fmt(Some(design[4]), 3),
            fmt(Some(design[5]), 2),
        );
        let cs0 = key_cell(report, peer, 0);
        let cs1 = key_cell(report, peer, KEY_CS_US);
        let _ = writeln!(
            out,
            "| {} | this run | {} | {} | {} | {} | {} | {} |",
            peer.label(),
            fmt(cs0.and_then(|m| m.acq_per_s), 0),
            fmt(cs0.and_then(|m| m.p99_us).map(|v| v / 1_000.0), 0),
            fmt(cs0.and_then(|m| m.jain), 3),
            fmt(cs1.and_then(|m| m.p99_us).map(|v| v / 1_000.0), 0),
            fmt(cs1.and_then(|m| m.jain), 3),
            fmt(cs1.and_then(|m| m.client_round_trips_per_acq), 2),
        );
    }
    let _ = writeln!(out);
}

fn write_method(out: &mut String, report: &BenchReport, files: &[String]) {
    let _ = writeln!(out, "## Method\n");
    let _ = writeln!(
        out,
        "- **acq/s** = acquisitions / wall time; wall time runs from the common start (all \
         clients connected and warmed up) to the last release. After the deadline no client \
         starts a new acquisition, but waits in progress complete and count.\n\
         - **acquire latency**: from a client starting to wait until it holds the lock, \
         hdrhistogram µs (3 significant digits); tables show ms.\n\
         - **hand-off gap** = wall time / acquisitions − mean hold time, where a hold runs from \
         acquire returning to release returning as the client sees it, so it can be slightly \
         negative when release replies overlap the next holder's grant.\n\
         - **fairness**: Jain's index over per-client acquisition counts, plus min/max count.\n\
         - **critical section**: tokio's timer sleeps to about 2 ms before the end, a \
         blocking-pool thread sleeps the rest on the OS timer, and a yield loop makes sure it \
         is never shorter; the hold really spent inside is measured and shown in each section's \
         heading (tokio's sleep alone rounds up to its next 1 ms tick: a 1 ms section held \
         2.1–2.3 ms).\n\
         - **hand-offs/s**: acquisitions by a client other than the lock's previous holder, as \
         the exclusion monitor sees them, per second of wall time.\n\
         - **worst client's mean wait**: each client's total acquire wait ÷ its acquisitions, \
         the largest over clients (a starved client shows here even when p99 hides it).\n\
         - **violations**: each client marks enter/exit of its critical section on a shared \
         per-lock slot (compare-and-swap); finding the slot occupied on entry is an overlap.\n\
         - **round trips per acquisition**: {}\n",
        report.meta.commandstats_method
    );
    if !files.is_empty() {
        let _ = writeln!(out, "Files of this run: {}.\n", files.join(", "));
    }
}
