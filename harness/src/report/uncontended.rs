//! The uncontended cells (N = 1, cs 0) repetition by repetition, each beside that
//! repetition's round-trip floor and both sides' CPU per acquisition (issue 36, item 4).
//!
//! One client alone waits a round trip for each of its two calls, so its acq/s is mostly the
//! path's speed: the same code reads 0.46× rslock on a fast path and 1.01× on a slow one.
//! Per repetition, the floor says how fast the path was and the CPU what the lock cost, so a
//! reader can tell a slow path from a slow lock.

use std::fmt::Write as _;

use crate::bench::contender::Contender;
use crate::report::format::fmt;
use crate::report::metrics::ratio;
use crate::report::results::{BenchReport, RepMetrics};

/// The peer each uncontended row is compared with: with one client there is nothing to barge
/// past, so rslock's default profile is as fair as any.
const PEER: Contender = Contender::RslockDefault;

/// The N = 1, cs 0 repetitions of `contender`.
fn reps(report: &BenchReport, contender: Contender) -> Option<&[RepMetrics]> {
    report
        .find(|s| {
            s.contender == contender
                && s.clients == 1
                && s.critical_section_us == 0
                && s.is_saturated_hot_lock()
        })
        .map(|c| c.reps.as_slice())
}

/// "94 + 88": client + Redis CPU µs per acquisition of one repetition.
fn cpu(rep: &RepMetrics) -> String {
    match (rep.client_cpu_us_per_acq, rep.server_cpu_us_per_acq) {
        (Some(c), Some(r)) => format!("{c:.0} + {r:.0}"),
        _ => "–".to_owned(),
    }
}

/// Writes the per-repetition table of the single-node contenders against [`PEER`].
pub fn write(out: &mut String, report: &BenchReport) {
    let Some(peer) = reps(report, PEER) else {
        return;
    };
    let rows: Vec<(Contender, &[RepMetrics])> = Contender::ALL
        .into_iter()
        .filter(|c| !c.is_peer() && *c != Contender::RedLock)
        .filter_map(|c| Some((c, reps(report, c)?)))
        .collect();
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "## Uncontended (N = 1, cs 0), repetition by repetition\n\n\
         One client alone spends most of each acquisition waiting for two round trips, so its \
         acq/s ratio moves with the path; the floor (p10 of sequential EVALSHAs, measured at \
         the start of the repetition) and the CPU per acquisition, client (the bench process) \
         + Redis, µs, tell a slow path from a slow lock.\n\n\
         | repetition | floor µs (median) | contender | acq/s | {} acq/s | ratio | CPU µs/acq | {} CPU µs/acq |\n\
         |---:|---:|---|---:|---:|---:|---:|---:|",
        PEER.label(),
        PEER.label(),
    );
    for (rep, floor) in report.server.floors.iter().enumerate() {
        let Some(theirs) = peer.get(rep) else {
            continue;
        };
        for (contender, ours) in &rows {
            let Some(ours) = ours.get(rep) else {
                continue;
            };
            let _ = writeln!(
                out,
                "| {} | {:.0} ({:.0}) | {} | {:.0} | {:.0} | {} | {} | {} |",
                rep + 1,
                floor.rtt_us,
                floor.median_us,
                contender.label(),
                ours.acq_per_s,
                theirs.acq_per_s,
                fmt(ratio(Some(ours.acq_per_s), Some(theirs.acq_per_s)), 2),
                cpu(ours),
                cpu(theirs),
            );
        }
    }
    let _ = writeln!(out);
}
