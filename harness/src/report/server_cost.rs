//! The server-cost section of `summary.md` (DESIGN section 3): per contender what an
//! acquisition costs Redis in CPU and commands, what one Redis core could sustain at that
//! cost, the keyspace a held lock and a queued waiter occupy, and the round-trip floor with
//! each contender's fraction of the ceiling it implies.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use crate::bench::contender::Contender;
use crate::bench::floor::FLOOR_PERCENTILE;
use crate::bench::footprint::WAITERS;
use crate::report::format::fmt;
use crate::report::key_ratios::KEY_CLIENTS;
use crate::report::metrics::ratio;
use crate::report::results::{BenchReport, MedianMetrics};

/// Clients of the uncontended column.
const UNCONTENDED: usize = 1;

fn cell(report: &BenchReport, contender: Contender, clients: usize) -> Option<&MedianMetrics> {
    report
        .find(|s| {
            s.contender == contender
                && s.clients == clients
                && s.critical_section_us == 0
                && s.is_saturated_hot_lock()
        })
        .map(|c| &c.median)
}

/// One Redis core's capacity at `cpu_us` per acquisition.
fn core_sustains(cpu_us: Option<f64>) -> Option<f64> {
    ratio(Some(1e6), cpu_us)
}

/// Writes the floor paragraph and the per-contender table.
pub fn write(out: &mut String, report: &BenchReport) {
    let _ = writeln!(out, "## Server cost per contender (cs 0, one hot lock)\n");
    let floor = report.server.floor();
    let ceiling = floor.and_then(|f| f.ceiling_per_s());
    // One client acquires and releases in turn: two round trips per acquisition.
    let single_ceiling = ceiling.map(|c| c / 2.0);
    match floor {
        Some(f) => {
            let per_rep: Vec<String> = report
                .server
                .floors
                .iter()
                .map(|f| fmt(Some(f.rtt_us), 0))
                .collect();
            let medians: Vec<String> = report
                .server
                .floors
                .iter()
                .map(|f| fmt(Some(f.median_us), 0))
                .collect();
            let _ = writeln!(
                out,
                "**Round-trip floor**: one client's sequential EVALSHA of a trivial script, \
                 {} µs: the lowest over repetitions of each one's p{FLOOR_PERCENTILE:.0} of {} \
                 round trips (a floor is a lower bound, and other load on a shared machine only \
                 adds to a round trip; per repetition: {} µs, medians {} µs), on the single \
                 node of this run. A hand-off on a hot lock needs at least the release \
                 to reach the server and the grant to reach the next holder, half a round trip \
                 each, so the one-hot-lock ceiling is 1 / RTT = **{} hand-offs/s** (DESIGN \
                 section 3). One client alone sends acquire and release in turn, two round \
                 trips, so its ceiling is 1 / (2 × RTT) = {} acq/s. RedLock rows are against \
                 the same single-node floor.\n",
                fmt(Some(f.rtt_us), 0),
                report.server.floors.first().map_or(0, |f| f.samples),
                per_rep.join(", "),
                medians.join(", "),
                fmt(ceiling, 0),
                fmt(single_ceiling, 0),
            );
        }
        None => {
            let _ = writeln!(out, "No round-trip floor was measured in this run.\n");
        }
    }
    let _ = writeln!(
        out,
        "| contender | Redis CPU µs/acq, N={UNCONTENDED} | Redis CPU µs/acq, N={KEY_CLIENTS} | one Redis core sustains, acq/s (N={KEY_CLIENTS}) | in commands µs/acq, N={KEY_CLIENTS} | server cmds/acq N={UNCONTENDED} / N={KEY_CLIENTS} | bytes per held lock (keys) | bytes per queued waiter | N={UNCONTENDED} acq/s ÷ 1/(2 RTT) | N={KEY_CLIENTS} acq/s ÷ 1/RTT | N={KEY_CLIENTS} hand-offs/s ÷ 1/RTT |"
    );
    let _ = writeln!(
        out,
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    let contenders = report.mutex_contenders();
    for &contender in &contenders {
        let one = cell(report, contender, UNCONTENDED);
        let hot = cell(report, contender, KEY_CLIENTS);
        let footprint = report.server.footprint(contender);
        let cpu_hot = hot.and_then(|m| m.server_cpu_us_per_acq);
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} / {} | {} | {} | {} | {} | {} |",
            contender.label(),
            fmt(one.and_then(|m| m.server_cpu_us_per_acq), 1),
            fmt(cpu_hot, 1),
            fmt(core_sustains(cpu_hot), 0),
            fmt(hot.and_then(|m| m.command_us_per_acq), 1),
            fmt(one.and_then(|m| m.all_commands_per_acq), 1),
            fmt(hot.and_then(|m| m.all_commands_per_acq), 1),
            footprint.map_or("–".to_owned(), |f| format!(
                "{} ({})",
                f.held_lock_bytes, f.held_lock_keys
            )),
            footprint.map_or("–".to_owned(), |f| format!(
                "{} ({} waited)",
                fmt(Some(f.waiter_bytes), 0),
                f.waiters
            )),
            fmt(ratio(one.and_then(|m| m.acq_per_s), single_ceiling), 2),
            fmt(ratio(hot.and_then(|m| m.acq_per_s), ceiling), 2),
            fmt(ratio(hot.and_then(|m| m.handoffs_per_s), ceiling), 2),
        );
    }
    let _ = writeln!(
        out,
        "\nRedis CPU is the `INFO cpu` delta (`used_cpu_sys + used_cpu_user` of the whole \
         process: command execution, networking, background threads) over the cell, summed \
         over servers, divided by acquisitions; \"one Redis core sustains\" is 1e6 / that. \
         \"In commands\" is the commandstats `usec` delta of the client-issued commands (a \
         script's includes the commands it calls). Server commands count script-internal calls \
         too. Bytes are `MEMORY USAGE … SAMPLES 0` summed over every key of a flushed server \
         (all masters for RedLock), before and while one client holds the lock, then while \
         {WAITERS} more wait for it; a waiter that keeps nothing on the server costs 0 bytes \
         (connection buffers and subscriptions are not in the keyspace).\n"
    );
    write_cpu_budget(out, report, &contenders);
}

/// Writes where the machine's CPUs go per acquisition at N = 32, cs 0: the clients and the
/// Redis servers share the machine's cores, so once those are busy a contender's throughput
/// is bounded by what both sides together spend on one acquisition.
fn write_cpu_budget(out: &mut String, report: &BenchReport, contenders: &BTreeSet<Contender>) {
    let cpus = report.meta.cpus;
    let _ = writeln!(
        out,
        "### Where the {cpus} CPUs go (N={KEY_CLIENTS}, cs 0, one hot lock)\n\n\
         | contender | bench process CPU µs/acq | Redis CPU µs/acq | both, µs/acq | {cpus} CPUs at that cost sustain, acq/s | measured acq/s | measured ÷ sustained |\n\
         |---|---:|---:|---:|---:|---:|---:|"
    );
    for &contender in contenders {
        let hot = cell(report, contender, KEY_CLIENTS);
        let client = hot.and_then(|m| m.client_cpu_us_per_acq);
        let server = hot.and_then(|m| m.server_cpu_us_per_acq);
        let both = client.zip(server).map(|(c, s)| c + s);
        let sustained = ratio(Some(cpus as f64 * 1e6), both);
        let measured = hot.and_then(|m| m.acq_per_s);
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} |",
            contender.label(),
            fmt(client, 1),
            fmt(server, 1),
            fmt(both, 1),
            fmt(sustained, 0),
            fmt(measured, 0),
            fmt(ratio(measured, sustained), 2),
        );
    }
    let _ = writeln!(
        out,
        "\nThe bench process's CPU is its `/proc/self/stat` utime + stime delta over the cell \
         (10 ms ticks): every client of the contender, their runtime, and the bench's own \
         recording, which costs every contender alike; a Python peer's adds its worker \
         processes' deltas, where its clients run. The clients and the Redis containers \
         share this machine's {cpus} CPUs, so \"sustain\" is {cpus} × 10⁶ ÷ (both): a ratio \
         near 1 means the contender ran out of CPU, not of round trips, and it is faster \
         only by costing less per acquisition on one side or the other.\n"
    );
}
