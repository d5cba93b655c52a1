//! `summary.md`: the human-readable benchmark report. Tables per grid, the ratios against
//! rslock that the project's claims rest on, a short verdict per strategy, and the method
//! (including how round trips were attributed), all rendered from a [`BenchReport`] alone so a
//! stored `bench.json` re-renders to the same text.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use crate::bench::contender::Contender;
use crate::bench::wait_kind::WaitKind;
use crate::report::metrics::ratio;
use crate::report::plots::cs_label;
use crate::report::results::{BenchReport, CellResult, MedianMetrics};

/// The comparison point of docs/DESIGN.md §4.
const KEY_CLIENTS: usize = 32;
/// Critical section of the latency/fairness/round-trip comparison, µs.
const KEY_CS_US: u64 = 1_000;
/// Jain's index at or above which a strategy is called fair (rslock tuned reaches 0.989–0.999).
const FAIR_JAIN: f64 = 0.99;
/// Client round trips per acquisition at or below which a strategy is called frugal: the
/// uncontended minimum is 2 (acquire + release); a waiter that sleeps until it is woken needs
/// about one more (queue/subscribe), and 3.5 leaves room for occasional retries. rslock's
/// default (3.98 in docs/DESIGN.md §4) is just above it, its 10 ms retry (39.5) far above.
const FRUGAL_ROUND_TRIPS: f64 = 3.5;

/// docs/DESIGN.md §4 peer baselines (loopback, 3 × 10 s medians), for the sanity-check table:
/// (contender, N=32 cs 0: acq/s, p99 ms, Jain; N=32 cs 1 ms: p99 ms, Jain, round trips/acq).
const DESIGN_BASELINE: [(Contender, [f64; 6]); 2] = [
    (
        Contender::RslockDefault,
        [6_533.0, 187.0, 0.965, 1_661.0, 0.866, 3.98],
    ),
    (
        Contender::RslockTuned,
        [6_593.0, 38.0, 0.999, 422.0, 0.989, 39.5],
    ),
];

/// Renders the whole summary.
pub fn render(report: &BenchReport, files: &[String]) -> String {
    let mut out = String::new();
    let meta = &report.meta;
    let _ = writeln!(out, "# Leasehold contention benchmark\n");
    let _ = writeln!(
        out,
        "Run: **{:?} grid**, {} × {} s per cell, Redis {} ({}), {} CPUs on the client machine, \
         started {} UTC, took {:.0} s in total including container start-up.\n",
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
         critical section → release. Metrics are DESIGN section 3's; with several repetitions \
         each number is the median over them (violations and errors are summed).\n"
    );

    write_violations(&mut out, report);
    write_key_ratios(&mut out, report);
    write_verdicts(&mut out, report);

    let sections: BTreeSet<u64> = report
        .cells
        .iter()
        .filter(|c| c.spec.locks == 1)
        .map(|c| c.spec.critical_section_us)
        .collect();
    for cs in sections {
        let _ = writeln!(out, "## One hot lock, critical section {}\n", cs_label(cs));
        write_table(
            &mut out,
            report
                .cells
                .iter()
                .filter(|c| c.spec.locks == 1 && c.spec.critical_section_us == cs),
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

fn key_cell(report: &BenchReport, contender: Contender, cs: u64) -> Option<&MedianMetrics> {
    report
        .find(|s| {
            s.contender == contender
                && s.clients == KEY_CLIENTS
                && s.critical_section_us == cs
                && s.locks == 1
        })
        .map(|c| &c.median)
}

/// A key-ratio row: name, metric, whether higher is better, decimals shown.
type KeyRow = (&'static str, fn(&MedianMetrics) -> Option<f64>, bool, u8);

/// One comparison the project's claims rest on: a leasehold number beside rslock's.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyRatio {
    /// What is compared, e.g. "FairQueue, cs 1 ms: Jain's index".
    pub label: String,
    /// Leasehold's value.
    pub ours: Option<f64>,
    /// rslock's value.
    pub theirs: Option<f64>,
    /// `ours ÷ theirs`.
    pub ratio: Option<f64>,
    /// Whether a higher value is the better one.
    pub higher_is_better: bool,
    /// Decimals the values are shown with.
    digits: u8,
    /// Decimals the ratio is shown with.
    ratio_digits: u8,
}

impl KeyRatio {
    /// "9.67× lower (better)", or "n/a".
    pub fn reading(&self) -> String {
        reading(self.ratio, self.higher_is_better)
    }

    /// One line: "label: ours vs theirs (reading)".
    pub fn line(&self) -> String {
        format!(
            "{}: {} vs {} ({})",
            self.label,
            fmt(self.ours, self.digits),
            fmt(self.theirs, self.digits),
            self.reading()
        )
    }
}

/// The key ratios against rslock at N = `KEY_CLIENTS` on one hot lock: FairQueue's
/// latency, fairness and round trips at cs 1 ms, then each strategy's throughput at cs 0.
pub fn key_ratios(report: &BenchReport) -> Vec<KeyRatio> {
    let peer_cs1 = key_cell(report, Contender::RslockDefault, KEY_CS_US);
    let fair = key_cell(report, Contender::Leasehold(WaitKind::FairQueue), KEY_CS_US);
    let rows: [KeyRow; 3] = [
        (
            "p99 acquire latency, ms",
            |m| m.p99_us.map(|v| v / 1_000.0),
            false,
            1,
        ),
        ("Jain's index", |m| m.jain, true, 3),
        (
            "client round trips / acquisition",
            |m| m.client_round_trips_per_acq,
            false,
            2,
        ),
    ];
    let mut out: Vec<KeyRatio> = rows
        .into_iter()
        .map(|(name, metric, higher_is_better, digits)| {
            let ours = fair.and_then(metric);
            let theirs = peer_cs1.and_then(metric);
            KeyRatio {
                label: format!("FairQueue, cs {}: {name}", cs_label(KEY_CS_US)),
                ours,
                theirs,
                ratio: ratio(ours, theirs),
                higher_is_better,
                digits,
                ratio_digits: 3,
            }
        })
        .collect();
    for contender in Contender::ALL.into_iter().filter(|c| !c.is_peer()) {
        let ours = key_cell(report, contender, 0).and_then(|m| m.acq_per_s);
        let theirs = key_cell(report, contender.peer(), 0).and_then(|m| m.acq_per_s);
        out.push(KeyRatio {
            label: format!(
                "{}, cs 0 ms: throughput, acq/s (vs {})",
                contender.label(),
                contender.peer().label()
            ),
            ours,
            theirs,
            ratio: ratio(ours, theirs),
            higher_is_better: true,
            digits: 0,
            ratio_digits: 2,
        });
    }
    out
}

fn write_key_ratios(out: &mut String, report: &BenchReport) {
    let _ = writeln!(
        out,
        "## Key ratios against rslock (N = {KEY_CLIENTS}, one hot lock)\n"
    );
    let _ = writeln!(
        out,
        "| comparison | leasehold | rslock (default retry) | ratio leasehold ÷ rslock | reading |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---|");
    for row in key_ratios(report) {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} |",
            row.label,
            fmt(row.ours, row.digits),
            fmt(row.theirs, row.digits),
            fmt(row.ratio, row.ratio_digits),
            row.reading(),
        );
    }
    let _ = writeln!(out);
}

/// "12.3× better" / "1.10× worse" from a leasehold ÷ rslock ratio.
fn reading(r: Option<f64>, higher_is_better: bool) -> String {
    let Some(r) = r else {
        return "n/a".to_owned();
    };
    if r <= 0.0 {
        return "n/a".to_owned();
    }
    let better = if higher_is_better { r >= 1.0 } else { r <= 1.0 };
    let factor = if r >= 1.0 { r } else { 1.0 / r };
    let direction = match (higher_is_better, r >= 1.0) {
        (true, true) | (false, true) => "higher",
        _ => "lower",
    };
    format!(
        "{factor:.2}× {direction} ({})",
        if better { "better" } else { "worse" }
    )
}

fn write_verdicts(out: &mut String, report: &BenchReport) {
    let _ = writeln!(out, "## Verdict per strategy\n");
    let contenders: BTreeSet<Contender> = report.cells.iter().map(|c| c.spec.contender).collect();
    for contender in contenders {
        let peer_cs1 = key_cell(report, contender.peer(), KEY_CS_US);
        let peer_cs0 = key_cell(report, contender.peer(), 0);
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
            let jain = m.jain.unwrap_or(0.0);
            let rt = m.client_round_trips_per_acq.unwrap_or(f64::INFINITY);
            let character = match (jain >= FAIR_JAIN, rt <= FRUGAL_ROUND_TRIPS) {
                (true, true) => "fair and frugal",
                (true, false) => "fair but chatty",
                (false, true) => "frugal but unfair",
                (false, false) => "neither fair nor frugal",
            };
            let _ = write!(
                line,
                "{character} at N={KEY_CLIENTS}, cs {}: p99 {} ms{}, Jain {}, {} client round trips/acq ({} commands/acq incl. scripts)",
                cs_label(KEY_CS_US),
                fmt(m.p99_us.map(|v| v / 1_000.0), 1),
                versus(m.p99_us, peer_cs1.and_then(|p| p.p99_us), contender),
                fmt(m.jain, 3),
                fmt(m.client_round_trips_per_acq, 2),
                fmt(m.all_commands_per_acq, 2),
            );
        } else {
            line.push_str("not measured at the key point");
        }
        if let Some(m) = cs0 {
            let _ = write!(
                line,
                "; cs 0: {} acq/s{}, hand-off gap {} µs",
                fmt(m.acq_per_s, 0),
                versus(m.acq_per_s, peer_cs0.and_then(|p| p.acq_per_s), contender),
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
        "\n(\"fair\" = Jain ≥ {FAIR_JAIN}; \"frugal\" = ≤ {FRUGAL_ROUND_TRIPS} client round trips per acquisition; the uncontended minimum is 2.)\n"
    );
}

fn versus(ours: Option<f64>, peer: Option<f64>, contender: Contender) -> String {
    if contender.peer() == contender {
        return String::new();
    }
    match ratio(ours, peer) {
        Some(r) => format!(" ({r:.2}× {})", contender.peer().label()),
        None => String::new(),
    }
}

fn write_table<'a>(out: &mut String, cells: impl Iterator<Item = &'a CellResult>) {
    let _ = writeln!(
        out,
        "| N | contender | acq/s | p50 ms | p99 ms | max ms | hand-off gap µs | Jain | min/max per client | client RT/acq | all cmds/acq | violations | errors |"
    );
    let _ = writeln!(
        out,
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    let mut cells: Vec<&CellResult> = cells.collect();
    cells.sort_by_key(|c| (c.spec.clients, c.spec.contender));
    for c in cells {
        let m = &c.median;
        let ms = |v: Option<f64>| v.map(|us| us / 1_000.0);
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {}/{} | {} | {} | {} | {} |",
            c.spec.clients,
            c.spec.contender.label(),
            fmt(m.acq_per_s, 0),
            fmt(ms(m.p50_us), 3),
            fmt(ms(m.p99_us), 2),
            fmt(ms(m.max_us), 1),
            fmt(m.handoff_gap_us, 0),
            fmt(m.jain, 3),
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
        "The design's peer numbers were taken on loopback with 3 × 10 s; this run's rslock rows \
         should land in the same region (containers add a bridge hop, quick runs are short).\n"
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
         - **critical section** is a `tokio::time::sleep` (millisecond timer granularity: a \
         1 ms section holds ~1–2 ms); the hand-off gap uses measured holds, so it is unaffected.\n\
         - **violations**: each client marks enter/exit of its critical section on a shared \
         per-lock slot (compare-and-swap); finding the slot occupied on entry is an overlap.\n\
         - **round trips per acquisition**: {}\n",
        report.meta.commandstats_method
    );
    if !files.is_empty() {
        let _ = writeln!(out, "Files of this run: {}.\n", files.join(", "));
    }
}

fn fmt(value: Option<f64>, digits: u8) -> String {
    match value {
        None => "–".to_owned(),
        Some(v) if !v.is_finite() => "–".to_owned(),
        Some(v) => {
            let s = format!("{v:.prec$}", prec = usize::from(digits));
            if digits == 0 && v.abs() >= 10_000.0 {
                thousands(&s)
            } else {
                s
            }
        }
    }
}

/// `12345` → `12,345` for readability of large counts.
fn thousands(digits: &str) -> String {
    let (sign, digits) = digits
        .strip_prefix('-')
        .map_or(("", digits), |rest| ("-", rest));
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    format!("{sign}{out}")
}

/// Unix seconds → `YYYY-MM-DD HH:MM` (UTC), via the civil-from-days algorithm, so the report
/// needs no date crate.
fn utc(unix_s: u64) -> String {
    let days = (unix_s / 86_400) as i64;
    let secs = unix_s % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}",
        secs / 3_600,
        (secs % 3_600) / 60
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn formats_large_numbers_with_separators() {
        assert_eq!(fmt(Some(69_123.4), 0), "69,123");
        assert_eq!(fmt(Some(6_533.0), 0), "6533");
        assert_eq!(fmt(None, 2), "–");
    }

    #[test]
    fn reads_ratios_in_the_right_direction() {
        assert_eq!(reading(Some(0.5), false), "2.00× lower (better)");
        assert_eq!(reading(Some(0.5), true), "2.00× lower (worse)");
        assert_eq!(reading(Some(1.5), true), "1.50× higher (better)");
        assert_eq!(reading(None, true), "n/a");
    }

    #[test]
    fn converts_unix_time_to_utc() {
        assert_eq!(utc(0), "1970-01-01 00:00");
        assert_eq!(utc(1_700_000_000), "2023-11-14 22:13");
    }
}
