//! The comparisons the project's claims rest on, at N = [`KEY_CLIENTS`] on one hot lock, each
//! naming the peer profile it uses. The headline compares at (about) equal fairness: rslock
//! with its 10 ms retry, because at cs 0 rslock's default profile mostly lets one client
//! re-acquire its own lock (barging), which no fair lock may do. The default profile's ratios
//! follow, marked as such. A ratio whose two sides' repetition spreads overlap is read as
//! noise, not as a difference.

use std::fmt::Write as _;

use crate::bench::contender::Contender;
use crate::bench::wait_kind::WaitKind;
use crate::report::format::fmt;
use crate::report::metrics::ratio;
use crate::report::plots::cs_label;
use crate::report::results::{BenchReport, MedianMetrics, Spread};

/// The comparison point of docs/DESIGN.md §4.
pub const KEY_CLIENTS: usize = 32;
/// Critical section of the latency/fairness/round-trip comparison, µs.
pub const KEY_CS_US: u64 = 1_000;

/// The medians of the saturated one-hot-lock cell of `contender` at N = [`KEY_CLIENTS`], `cs`.
pub fn key_cell(report: &BenchReport, contender: Contender, cs: u64) -> Option<&MedianMetrics> {
    report
        .find(|s| {
            s.contender == contender
                && s.clients == KEY_CLIENTS
                && s.critical_section_us == cs
                && s.is_saturated_hot_lock()
        })
        .map(|c| &c.median)
}

/// A compared metric: its name, median, spread, display scale, direction and decimals.
pub(crate) struct Metric {
    pub(crate) name: &'static str,
    value: fn(&MedianMetrics) -> Option<f64>,
    spread: fn(&MedianMetrics) -> Option<Spread>,
    scale: f64,
    higher_is_better: bool,
    digits: u8,
}

/// FairQueue's comparisons at cs 1 ms.
pub(crate) const LATENCY_METRICS: [Metric; 4] = [
    Metric {
        name: "p99 acquire latency, ms",
        value: |m| m.p99_us,
        spread: |m| m.p99_us_spread,
        scale: 1e-3,
        higher_is_better: false,
        digits: 1,
    },
    Metric {
        name: "worst client's mean wait, ms",
        value: |m| m.worst_client_wait_us,
        spread: |m| m.worst_client_wait_us_spread,
        scale: 1e-3,
        higher_is_better: false,
        digits: 1,
    },
    Metric {
        name: "Jain's index",
        value: |m| m.jain,
        spread: |m| m.jain_spread,
        scale: 1.0,
        higher_is_better: true,
        digits: 3,
    },
    Metric {
        name: "client round trips / acquisition",
        value: |m| m.client_round_trips_per_acq,
        spread: |_| None,
        scale: 1.0,
        higher_is_better: false,
        digits: 2,
    },
];

/// Every strategy's throughput comparisons at cs 0.
pub(crate) const THROUGHPUT_METRICS: [Metric; 2] = [
    Metric {
        name: "acq/s",
        value: |m| m.acq_per_s,
        spread: |m| m.acq_per_s_spread,
        scale: 1.0,
        higher_is_better: true,
        digits: 0,
    },
    Metric {
        name: "hand-offs/s",
        value: |m| m.handoffs_per_s,
        spread: |m| m.handoffs_per_s_spread,
        scale: 1.0,
        higher_is_better: true,
        digits: 0,
    },
];

/// One comparison: a leasehold number beside a named peer profile's.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyRatio {
    /// What is compared, e.g. "FairQueue, cs 1 ms: Jain's index".
    pub label: String,
    /// The peer profile compared with.
    pub peer: Contender,
    /// Leasehold's value.
    pub ours: Option<f64>,
    /// The peer's value.
    pub theirs: Option<f64>,
    /// `ours ÷ theirs`.
    pub ratio: Option<f64>,
    /// Whether a higher value is the better one.
    pub higher_is_better: bool,
    /// The two sides' repetition spreads overlap: the difference may be noise.
    pub within_noise: bool,
    /// Decimals the values are shown with.
    pub digits: u8,
    /// CPU per acquisition of the two cells compared, leasehold's then the peer's: the bench
    /// process's and Redis's, µs. Beside an acq/s ratio it tells a slow path (same CPU) from
    /// a costly lock (more CPU), which the ratio alone cannot once the round trip is fast.
    pub cpu: [CpuPerAcq; 2],
}

/// The CPU one cell's acquisitions cost, µs each (medians over repetitions).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CpuPerAcq {
    /// The bench process: the contender's clients and their runtime.
    pub client: Option<f64>,
    /// The Redis process(es).
    pub redis: Option<f64>,
}

impl CpuPerAcq {
    fn of(m: &MedianMetrics) -> Self {
        Self {
            client: m.client_cpu_us_per_acq,
            redis: m.server_cpu_us_per_acq,
        }
    }

    /// "94 + 88", or "–" where either side was not measured.
    pub fn cell(&self) -> String {
        match (self.client, self.redis) {
            (Some(c), Some(r)) => format!("{c:.0} + {r:.0}"),
            _ => "–".to_owned(),
        }
    }
}

impl KeyRatio {
    /// "9.67× lower (better)", "1.02× higher (within the spread of repetitions)", or "n/a".
    pub fn reading(&self) -> String {
        reading(self.ratio, self.higher_is_better, self.within_noise)
    }

    /// One line: "label: ours vs theirs (peer; reading)".
    pub fn line(&self) -> String {
        format!(
            "{}: {} vs {} ({}; {})",
            self.label,
            fmt(self.ours, self.digits),
            fmt(self.theirs, self.digits),
            self.peer.label(),
            self.reading()
        )
    }
}

/// The headline ratios, at equal fairness ([`Contender::fair_peer`]).
pub fn key_ratios(report: &BenchReport) -> Vec<KeyRatio> {
    ratios(report, Contender::fair_peer)
}

/// The same comparisons against rslock's default (barging) profile, single node only (for
/// RedLock both choices are the same peer).
pub fn barging_ratios(report: &BenchReport) -> Vec<KeyRatio> {
    ratios(report, Contender::peer)
        .into_iter()
        .filter(|r| r.peer == Contender::RslockDefault)
        .collect()
}

fn ratios(report: &BenchReport, peer_of: fn(Contender) -> Contender) -> Vec<KeyRatio> {
    let fair_queue = Contender::Leasehold(WaitKind::FairQueue);
    let mut out = Vec::new();
    for metric in &LATENCY_METRICS {
        out.extend(compare(
            report,
            fair_queue,
            peer_of(fair_queue),
            KEY_CS_US,
            metric,
        ));
    }
    for contender in Contender::ALL.into_iter().filter(|c| !c.is_peer()) {
        for metric in &THROUGHPUT_METRICS {
            out.extend(compare(report, contender, peer_of(contender), 0, metric));
        }
    }
    out
}

/// `contender` against `peer` on `metric` in their N = [`KEY_CLIENTS`], `cs` cells, if both ran.
pub(crate) fn compare(
    report: &BenchReport,
    contender: Contender,
    peer: Contender,
    cs: u64,
    metric: &Metric,
) -> Option<KeyRatio> {
    let ours = key_cell(report, contender, cs)?;
    let theirs = key_cell(report, peer, cs)?;
    let value = |m: &MedianMetrics| (metric.value)(m).map(|v| v * metric.scale);
    let within_noise = match ((metric.spread)(ours), (metric.spread)(theirs)) {
        (Some(a), Some(b)) => a.overlaps(&b),
        _ => false,
    };
    Some(KeyRatio {
        label: format!(
            "{}, cs {}: {}",
            contender.label(),
            cs_label(cs),
            metric.name
        ),
        peer,
        ours: value(ours),
        theirs: value(theirs),
        ratio: ratio(value(ours), value(theirs)),
        higher_is_better: metric.higher_is_better,
        within_noise,
        digits: metric.digits,
        cpu: [CpuPerAcq::of(ours), CpuPerAcq::of(theirs)],
    })
}

/// Writes both ratio tables.
pub fn write(out: &mut String, report: &BenchReport) {
    let _ = writeln!(
        out,
        "## Key ratios at equal fairness (N = {KEY_CLIENTS}, one hot lock)\n\n\
         Each ratio names the peer profile it uses. Single-node strategies are compared with \
         **{}**, the fairer rslock profile (its Jain's index is in the tables below; the \
         default profile barges); RedLock with **{}**, rslock's only RedLock profile here. \
         Hand-offs/s count only acquisitions by a client other than the previous holder, so a \
         lock that lets its holder re-acquire (barging) gets no credit for it. A reading \
         \"within the spread\" means the two sides' ranges over the repetitions overlap. The \
         CPU columns give each side's cost per acquisition in the compared cell, client (the \
         bench process) + Redis, µs: where a ratio moves between runs with the round trip, \
         the CPU says whether the lock or the path was slow (where it goes: \
         [cpu-profile.md](cpu-profile.md), written by `leasehold-harness profile`).\n",
        Contender::RslockTuned.label(),
        Contender::RslockRedLock.label(),
    );
    table(out, &key_ratios(report));
    let barging = barging_ratios(report);
    if !barging.is_empty() {
        let _ = writeln!(
            out,
            "### Against {} (barging: not equal fairness)\n",
            Contender::RslockDefault.label()
        );
        table(out, &barging);
    }
}

fn table(out: &mut String, rows: &[KeyRatio]) {
    let _ = writeln!(
        out,
        "| comparison | leasehold | peer profile | peer | ratio leasehold ÷ peer | reading | \
         leasehold CPU µs/acq (client + Redis) | peer CPU µs/acq |"
    );
    let _ = writeln!(out, "|---|---:|---|---:|---:|---|---:|---:|");
    for row in rows {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            row.label,
            fmt(row.ours, row.digits),
            row.peer.label(),
            fmt(row.theirs, row.digits),
            fmt(row.ratio, 3),
            row.reading(),
            row.cpu[0].cell(),
            row.cpu[1].cell(),
        );
    }
    let _ = writeln!(out);
}

/// "12.3× lower (better)" from a leasehold ÷ peer ratio; a difference inside the noise says so.
pub fn reading(r: Option<f64>, higher_is_better: bool, within_noise: bool) -> String {
    let Some(r) = r.filter(|r| *r > 0.0 && r.is_finite()) else {
        return "n/a".to_owned();
    };
    let better = if higher_is_better { r >= 1.0 } else { r <= 1.0 };
    let factor = if r >= 1.0 { r } else { 1.0 / r };
    let direction = if r >= 1.0 { "higher" } else { "lower" };
    let verdict = match (within_noise, better) {
        (true, _) => "within the spread of repetitions",
        (false, true) => "better",
        (false, false) => "worse",
    };
    format!("{factor:.2}× {direction} ({verdict})")
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn reads_ratios_in_the_right_direction() {
        assert_eq!(reading(Some(0.5), false, false), "2.00× lower (better)");
        assert_eq!(reading(Some(0.5), true, false), "2.00× lower (worse)");
        assert_eq!(reading(Some(1.5), true, false), "1.50× higher (better)");
        assert_eq!(reading(None, true, false), "n/a");
    }

    #[test]
    fn overlapping_spreads_are_not_a_difference() {
        assert_eq!(
            reading(Some(1.1), true, true),
            "1.10× higher (within the spread of repetitions)"
        );
    }
}
