//! `summary.md`'s read-write lock section: the read-write lock's FIFO line (FairQueue) against
//! its PubSub strategy, within one run. Issue 36's targets come first, each with its goal and
//! a verdict, then a table per critical section and read share, then the ratios cell by cell.
//!
//! A target's verdict needs evidence that the cell measured what the target is about: both
//! sides ran without client errors and served reads and writes. Otherwise it says so
//! ("inconclusive") instead of judging.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use crate::bench::contender::Contender;
use crate::bench::wait_kind::WaitKind;
use crate::report::format::{fmt, fmt_spread};
use crate::report::key_ratios::{KEY_CLIENTS, KEY_CS_US, reading};
use crate::report::metrics::ratio;
use crate::report::plots::cs_label;
use crate::report::results::{BenchReport, CellResult, MedianMetrics};

/// The line under test.
const FAIR: Contender = Contender::RwLock(WaitKind::FairQueue);
/// What it is compared with: the read-write lock's strategy before the line.
const PUBSUB: Contender = Contender::RwLock(WaitKind::PubSub);
/// Read share of the headline comparison, percent.
const HEADLINE_READ_PERCENT: u8 = 60;
/// Issue 36: FairQueue's p99 at least this many times lower than PubSub's at the headline
/// cell.
const P99_GOAL: f64 = 10.0;
/// Issue 36: FairQueue's throughput at least this fraction of PubSub's at the headline cell.
const THROUGHPUT_GOAL: f64 = 1.0;
/// Issue 36: FairQueue's client round trips per acquisition at most this (acquire + release,
/// plus one to join the line when the lock is taken).
const ROUND_TRIPS_GOAL: f64 = 3.0;

/// The read-write lock cell of `contender` at (`clients`, `read_percent`, `cs`).
fn cell(
    report: &BenchReport,
    contender: Contender,
    clients: usize,
    read_percent: u8,
    cs: u64,
) -> Option<&MedianMetrics> {
    report
        .find(|s| {
            s.contender == contender
                && s.clients == clients
                && s.read_percent == read_percent
                && s.critical_section_us == cs
                && s.locks == 1
                && s.think_us == 0
        })
        .map(|c| &c.median)
}

/// Why a cell cannot judge a target, if it cannot: missing, client errors, or not both reads
/// and writes served.
fn missing_evidence(m: Option<&MedianMetrics>) -> Option<String> {
    let Some(m) = m else {
        return Some("not measured".to_owned());
    };
    if m.errors > 0 {
        return Some(format!("inconclusive: {} client errors", m.errors));
    }
    let served = |v: Option<f64>| v.is_some_and(|v| v > 0.0);
    if !served(m.read_acq_per_s) || !served(m.write_acq_per_s) {
        return Some("inconclusive: reads and writes were not both served".to_owned());
    }
    None
}

/// "met" or "not met" for `value` against `goal`, or why it cannot be judged.
fn verdict(
    sides: &[Option<&MedianMetrics>],
    value: Option<f64>,
    goal: f64,
    at_least: bool,
) -> String {
    if let Some(why) = sides.iter().find_map(|m| missing_evidence(*m)) {
        return why;
    }
    match value {
        None => "inconclusive: no value".to_owned(),
        Some(v) if (at_least && v >= goal) || (!at_least && v <= goal) => "**met**".to_owned(),
        Some(_) => "**not met**".to_owned(),
    }
}

/// Writes the section, if the run has read-write lock cells.
pub fn write(out: &mut String, report: &BenchReport) {
    let cells: Vec<&CellResult> = report
        .cells
        .iter()
        .filter(|c| c.spec.contender.is_rwlock())
        .collect();
    if cells.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "## Read-write lock: FairQueue against PubSub\n\n\
         One hot read-write lock (`client.rwlock(name)`); each client loops: draw read or write \
         by the cell's read share (a generator seeded by the client's index, so both strategies \
         see the same sequence), acquire, critical section, release. **{}** is the FIFO line \
         (a release hands the lock to the line's head: a writer alone, or a run of readers \
         together), **{}** the strategy it replaces as the default. Ratios are within this run. \
         A violation is a writer inside together with anybody else, or a reader beside a \
         writer (readers together are fine). CPU is client (the bench process) + Redis, µs per \
         acquisition.\n",
        FAIR.label(),
        PUBSUB.label(),
    );
    write_headline(out, report);
    let groups: BTreeSet<(u64, u8)> = cells
        .iter()
        .map(|c| (c.spec.critical_section_us, c.spec.read_percent))
        .collect();
    for &(cs, read_percent) in &groups {
        let _ = writeln!(out, "### cs {}, {read_percent} % reads\n", cs_label(cs));
        write_table(
            out,
            cells.iter().copied().filter(|c| {
                c.spec.critical_section_us == cs && c.spec.read_percent == read_percent
            }),
        );
    }
    write_ratios(out, report, &cells);
}

fn write_headline(out: &mut String, report: &BenchReport) {
    let (n, cs) = (KEY_CLIENTS, KEY_CS_US);
    let fair = cell(report, FAIR, n, HEADLINE_READ_PERCENT, cs);
    let pubsub = cell(report, PUBSUB, n, HEADLINE_READ_PERCENT, cs);
    let _ = writeln!(
        out,
        "### Issue 36 targets\n\n\
         | target | FairQueue | PubSub | FairQueue ÷ PubSub | reading | goal | verdict |\n\
         |---|---:|---:|---:|---|---|---|"
    );
    let at = format!(
        "N={n}, {HEADLINE_READ_PERCENT} % reads, cs {}",
        cs_label(cs)
    );
    let p99 = |m: Option<&MedianMetrics>| m.and_then(|m| m.p99_us).map(|v| v / 1_000.0);
    let p99_ratio = ratio(p99(fair), p99(pubsub));
    let _ = writeln!(
        out,
        "| rwlock FairQueue against rwlock PubSub, {at}: p99 acquire latency, ms | {} | {} | {} \
         | {} | ≥ {P99_GOAL}× lower | {} |",
        fmt_spread(
            fair.and_then(|m| m.p99_us),
            fair.and_then(|m| m.p99_us_spread),
            1e-3,
            2
        ),
        fmt_spread(
            pubsub.and_then(|m| m.p99_us),
            pubsub.and_then(|m| m.p99_us_spread),
            1e-3,
            2
        ),
        fmt(p99_ratio, 3),
        reading(p99_ratio, false, overlap(fair, pubsub, |m| m.p99_us_spread)),
        verdict(&[fair, pubsub], p99_ratio.map(|r| 1.0 / r), P99_GOAL, true),
    );
    let acq = |m: Option<&MedianMetrics>| m.and_then(|m| m.acq_per_s);
    let acq_ratio = ratio(acq(fair), acq(pubsub));
    let _ = writeln!(
        out,
        "| rwlock FairQueue against rwlock PubSub, {at}: throughput, acq/s | {} | {} | {} | {} \
         | ≥ {THROUGHPUT_GOAL:.1}× | {} |",
        fmt_spread(acq(fair), fair.and_then(|m| m.acq_per_s_spread), 1.0, 0),
        fmt_spread(acq(pubsub), pubsub.and_then(|m| m.acq_per_s_spread), 1.0, 0),
        fmt(acq_ratio, 3),
        reading(
            acq_ratio,
            true,
            overlap(fair, pubsub, |m| m.acq_per_s_spread)
        ),
        verdict(&[fair, pubsub], acq_ratio, THROUGHPUT_GOAL, true),
    );
    let read_percents: BTreeSet<u8> = report
        .cells
        .iter()
        .filter(|c| c.spec.contender.is_rwlock())
        .map(|c| c.spec.read_percent)
        .collect();
    for read_percent in read_percents {
        let fair = cell(report, FAIR, n, read_percent, cs);
        let pubsub = cell(report, PUBSUB, n, read_percent, cs);
        let rt = |m: Option<&MedianMetrics>| m.and_then(|m| m.client_round_trips_per_acq);
        let rt_ratio = ratio(rt(fair), rt(pubsub));
        let _ = writeln!(
            out,
            "| rwlock FairQueue RT/acq, N={n}, {read_percent} % reads, cs {} | {} | {} | {} | {} \
             | ≤ {ROUND_TRIPS_GOAL:.0} | {} |",
            cs_label(cs),
            fmt(rt(fair), 2),
            fmt(rt(pubsub), 2),
            fmt(rt_ratio, 3),
            reading(rt_ratio, false, false),
            verdict(&[fair], rt(fair), ROUND_TRIPS_GOAL, false),
        );
    }
    let _ = writeln!(out);
}

/// Whether the two cells' repetition ranges of a metric overlap.
fn overlap(
    a: Option<&MedianMetrics>,
    b: Option<&MedianMetrics>,
    spread: fn(&MedianMetrics) -> Option<crate::report::results::Spread>,
) -> bool {
    matches!((a.and_then(spread), b.and_then(spread)), (Some(a), Some(b)) if a.overlaps(&b))
}

fn write_table<'a>(out: &mut String, cells: impl Iterator<Item = &'a CellResult>) {
    let _ = writeln!(
        out,
        "| N | contender | acq/s | reads/s | writes/s | p99 ms | write p99 ms | worst client's mean wait ms | Jain | client RT/acq | CPU µs/acq | violations | errors |\n\
         |---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    let mut cells: Vec<&CellResult> = cells.collect();
    cells.sort_by_key(|c| (c.spec.clients, c.spec.contender));
    for c in cells {
        let m = &c.median;
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            c.spec.clients,
            c.spec.contender.label(),
            fmt_spread(m.acq_per_s, m.acq_per_s_spread, 1.0, 0),
            fmt(m.read_acq_per_s, 0),
            fmt(m.write_acq_per_s, 0),
            fmt_spread(m.p99_us, m.p99_us_spread, 1e-3, 2),
            fmt_spread(m.write_p99_us, m.write_p99_us_spread, 1e-3, 2),
            fmt_spread(
                m.worst_client_wait_us,
                m.worst_client_wait_us_spread,
                1e-3,
                2
            ),
            fmt_spread(m.jain, m.jain_spread, 1.0, 3),
            fmt(m.client_round_trips_per_acq, 2),
            cpu(m),
            m.violations,
            m.errors,
        );
    }
    let _ = writeln!(out);
}

/// "94 + 88": client + Redis CPU µs per acquisition.
fn cpu(m: &MedianMetrics) -> String {
    match (m.client_cpu_us_per_acq, m.server_cpu_us_per_acq) {
        (Some(c), Some(r)) => format!("{c:.0} + {r:.0}"),
        _ => "–".to_owned(),
    }
}

fn write_ratios(out: &mut String, report: &BenchReport, cells: &[&CellResult]) {
    let points: BTreeSet<(u64, u8, usize)> = cells
        .iter()
        .map(|c| {
            (
                c.spec.critical_section_us,
                c.spec.read_percent,
                c.spec.clients,
            )
        })
        .collect();
    let _ = writeln!(
        out,
        "### FairQueue ÷ PubSub, cell by cell\n\n\
         Below 1 is FairQueue lower; for acq/s and Jain higher is better, for the rest lower.\n\n\
         | cs | reads | N | acq/s | p99 | write p99 | worst client's mean wait | Jain | client RT/acq |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for (cs, read_percent, n) in points {
        let fair = cell(report, FAIR, n, read_percent, cs);
        let pubsub = cell(report, PUBSUB, n, read_percent, cs);
        let r = |f: fn(&MedianMetrics) -> Option<f64>| {
            fmt(ratio(fair.and_then(f), pubsub.and_then(f)), 2)
        };
        let _ = writeln!(
            out,
            "| {} | {read_percent} % | {n} | {} | {} | {} | {} | {} | {} |",
            cs_label(cs),
            r(|m| m.acq_per_s),
            r(|m| m.p99_us),
            r(|m| m.write_p99_us),
            r(|m| m.worst_client_wait_us),
            r(|m| m.jain),
            r(|m| m.client_round_trips_per_acq),
        );
    }
    let _ = writeln!(out);
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::bench::grid::{GridPlan, GridSize};
    use crate::bench::workload::CellSpec;
    use crate::report::results::{RunMeta, ServerCost};

    fn cell_result(contender: Contender, read_percent: u8, p99_ms: f64, acq: f64) -> CellResult {
        CellResult {
            spec: CellSpec {
                contender,
                clients: KEY_CLIENTS,
                critical_section_us: KEY_CS_US,
                locks: 1,
                think_us: 0,
                offered_per_s: 0,
                read_percent,
            },
            reps: Vec::new(),
            median: MedianMetrics {
                repetitions: 3,
                acq_per_s: Some(acq),
                read_acq_per_s: Some(acq * 0.6),
                write_acq_per_s: Some(acq * 0.4),
                p99_us: Some(p99_ms * 1_000.0),
                write_p99_us: Some(p99_ms * 2_000.0),
                jain: Some(0.99),
                client_round_trips_per_acq: Some(if contender == FAIR { 2.9 } else { 3.4 }),
                client_cpu_us_per_acq: Some(90.0),
                server_cpu_us_per_acq: Some(40.0),
                ..MedianMetrics::default()
            },
            latency_curve: Vec::new(),
            samples: 0,
        }
    }

    fn report(cells: Vec<CellResult>) -> BenchReport {
        BenchReport {
            meta: RunMeta {
                started_unix_s: 0,
                elapsed_s: 0.0,
                plan: GridPlan::new(GridSize::Quick, &Contender::RWLOCK),
                topology: String::new(),
                redis_version: String::new(),
                cpus: 2,
                commandstats_method: String::new(),
            },
            cells,
            server: ServerCost::default(),
        }
    }

    fn render(report: &BenchReport) -> String {
        let mut out = String::new();
        write(&mut out, report);
        out
    }

    #[test]
    fn renders_the_targets_with_their_verdicts_and_a_table_per_cell() {
        let out = render(&report(vec![
            cell_result(FAIR, 60, 4.0, 900.0),
            cell_result(PUBSUB, 60, 80.0, 850.0),
            cell_result(FAIR, 90, 3.0, 2_000.0),
            cell_result(PUBSUB, 90, 20.0, 2_100.0),
        ]));
        assert!(
            out.starts_with("## Read-write lock: FairQueue against PubSub\n"),
            "{out}"
        );
        let line = |needle: &str| {
            out.lines()
                .find(|l| l.contains(needle))
                .unwrap_or_else(|| panic!("no line with {needle:?} in\n{out}"))
        };
        // p99 4 ms against 80 ms: 20× lower, goal 10×.
        let p99 = line("60 % reads, cs 1 ms: p99");
        assert!(
            p99.contains("| 0.050 |") && p99.contains("20.00× lower"),
            "{p99}"
        );
        assert!(p99.ends_with("| **met** |"), "{p99}");
        // 900 against 850 acq/s: 1.06×, goal 1.0×.
        let acq = line("60 % reads, cs 1 ms: throughput");
        assert!(
            acq.contains("| 1.059 |") && acq.ends_with("| **met** |"),
            "{acq}"
        );
        // Round trips per read share: 2.9 ≤ 3.
        let rt = line("RT/acq, N=32, 90 % reads");
        assert!(
            rt.contains("| 2.90 | 3.40 |") && rt.ends_with("| **met** |"),
            "{rt}"
        );
        assert!(out.contains("### cs 1 ms, 60 % reads\n"), "{out}");
        assert!(out.contains("### cs 1 ms, 90 % reads\n"), "{out}");
        let row = line("| 32 | leasehold rwlock FairQueue | 900 | 540 | 360 | 4.00 | 8.00 |");
        assert!(row.contains("| 90 + 40 | 0 | 0 |"), "{row}");
        // Cell by cell: FairQueue's acq/s over PubSub's, p99 and write p99 ratios.
        assert!(
            out.contains("| 1 ms | 60 % | 32 | 1.06 | 0.05 | 0.05 |"),
            "{out}"
        );
    }

    #[test]
    fn a_target_without_evidence_is_not_judged() {
        // PubSub's side missing: nothing to compare with.
        let out = render(&report(vec![cell_result(FAIR, 60, 4.0, 900.0)]));
        assert!(out.contains("| not measured |"), "{out}");
        // FairQueue failed every acquire (its clients errored).
        let mut failed = cell_result(FAIR, 60, 4.0, 900.0);
        failed.median.errors = 32;
        let out = render(&report(vec![failed, cell_result(PUBSUB, 60, 80.0, 850.0)]));
        assert!(out.contains("| inconclusive: 32 client errors |"), "{out}");
        assert!(!out.contains("**met**"), "{out}");
        // Writes only: not the mix the target is about.
        let mut writes_only = cell_result(FAIR, 60, 4.0, 900.0);
        writes_only.median.read_acq_per_s = Some(0.0);
        let out = render(&report(vec![
            writes_only,
            cell_result(PUBSUB, 60, 80.0, 850.0),
        ]));
        assert!(
            out.contains("inconclusive: reads and writes were not both served"),
            "{out}"
        );
        // No read-write lock cells: no section.
        assert!(render(&report(Vec::new())).is_empty());
    }
}
