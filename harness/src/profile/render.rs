//! `cpu-profile.md`: the per-acquisition CPU of both sides, the client's split by category
//! and the server's by script, one table per cell, contenders side by side.

use std::fmt::Write as _;

use crate::bench::contender::Contender;
use crate::profile::perf::{self, Folded};
use crate::profile::{CLIENTS, CONTENDERS, ProfileReport, ProfiledCell};

/// The report's file name (the summary links it).
pub const MARKDOWN: &str = "cpu-profile.md";
/// The raw results' file name.
pub const JSON: &str = "cpu-profile.json";

/// Renders the whole report.
pub fn markdown(report: &ProfileReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Where the CPU of an acquisition goes\n\n\
         Written by `leasehold-harness profile` (issue 36, item 1): {} repetitions of {} s per \
         cell against one single-node Redis container, contenders interleaved within each \
         repetition, cs 0 on one hot lock; medians, with every repetition's value in brackets, \
         and the perf samples of all repetitions pooled. \
         Round-trip floor of this node: {:.0} µs. Load average at the start: {} on {} CPUs \
         (other builders share the machine), so compare shares and ratios within this run, \
         not absolute µs across runs. Took {:.0} s.\n",
        report.repetitions,
        report.seconds,
        report.floor_us,
        report
            .load_at_start
            .map_or("unknown".to_owned(), |l| format!("{l:.2}")),
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        report.elapsed_s,
    );
    totals(&mut out, report);
    for &clients in &CLIENTS {
        let cells: Vec<&ProfiledCell> = CONTENDERS
            .iter()
            .filter_map(|&c| {
                report
                    .cells
                    .iter()
                    .find(|p| p.contender == c && p.clients == clients)
            })
            .collect();
        client_table(&mut out, clients, &cells, report.perf_missing.as_deref());
        server_table(&mut out, clients, &cells);
    }
    let _ = writeln!(
        out,
        "## Method\n\n\
         - **Client CPU** is the bench process's `/proc/self/stat` utime + stime over the \
         measured window (10 ms ticks), divided by acquisitions: the clients, their tokio \
         runtime and the bench's own recording. Its split comes from `perf record -e cpu-clock \
         -F 999 -g` attached to the process for the same run (its connecting and warm-up \
         included), its stacks unwound by frame pointers, which a release build keeps only where \
         the compiler chose to (Rust omits them by default): a stack may stop short, so *incl.* \
         shares are lower bounds (build with `RUSTFLAGS=\"-C force-frame-pointers=yes\"` for \
         whole stacks). A sample's *self* category is that of the frame nearest the leaf that \
         a category claims (so allocation under the \
         watchdog counts as allocation, and self shares add up to 100 %); *incl.* counts every \
         sample with a frame of the category anywhere on the stack (so shares overlap). \
         Categories match a frame by the path it starts with, so inlined code counts where it \
         was inlined: a spawned or instrumented future (the watchdog's loop, the attempt loop, \
         the unlock) is mostly inlined into tracing's `Instrumented::poll` or tokio's task \
         harness, which is why the watchdog shows almost nothing of its own. The thread \
         wake-ups (futex, eventfd) that rslock, which spawns no task per lock, almost never \
         pays at N = 1 are the likeliest trace of the watchdog's spawn and stop, but this \
         profile does not separate them. Kernel frames are skipped, so a system call's time, \
         the TCP stack under it included, lands on the C library wrapper that entered the kernel: on \
         this machine the clients reach Redis over a bridge, and the sender's `writev` also \
         runs the delivery of the packet into Redis's socket.\n\
         - **Redis CPU** is the `INFO cpu` delta (sys + user) over the measured window; the \
         main thread's share of it comes from `used_cpu_*_main_thread` over a window that also \
         holds the clients' connecting. With io-threads off (the default), the main thread does \
         the socket reads and writes too, so \"other threads\" is background work only.\n\
         - **Per script** comes from a separate {} s pass with `slowlog-log-slower-than 0`: \
         each command's execution time, grouped by script SHA (named from the lock crate's \
         catalogue; rslock's unlock script shows as its SHA). The slowlog lists the commands a \
         script calls as well; they are marked \"inside a script\" and their time is already in \
         their script's. \"Outside commands\" is the Redis CPU less the time of the commands \
         the clients sent: reading, parsing and answering the \
         requests, the event loop, and (for PubSub) publishing to subscribers.\n",
        super::SCRIPT_PASS.as_secs(),
    );
    out
}

fn totals(out: &mut String, report: &ProfileReport) {
    let _ = writeln!(
        out,
        "## Both sides per acquisition\n\n\
         | N | contender | acq/s | client CPU µs/acq (each repetition) | Redis CPU µs/acq (each \
         repetition) | main thread, median repetition | \
         both µs/acq | both ÷ rslock default |\n|---:|---|---:|---:|---:|---:|---:|---:|"
    );
    for cell in &report.cells {
        let both = cell.client_us + median(&cell.server_us_reps);
        let peer = report
            .cells
            .iter()
            .find(|p| p.contender == Contender::RslockDefault && p.clients == cell.clients)
            .map(|p| p.client_us + median(&p.server_us_reps));
        let _ = writeln!(
            out,
            "| {} | {} | {:.0} | {:.1} ({}) | {:.1} ({}) | {} | {:.1} | {} |",
            cell.clients,
            cell.contender.label(),
            cell.acq_per_s,
            cell.client_us,
            each(&cell.client_us_reps),
            median(&cell.server_us_reps),
            each(&cell.server_us_reps),
            cell.server
                .main_thread_us
                .map_or("–".to_owned(), |m| format!("{m:.1}")),
            both,
            peer.filter(|p| *p > 0.0)
                .map_or("–".to_owned(), |p| format!("{:.2}", both / p)),
        );
    }
    let _ = writeln!(out);
}

/// Whether a slowlog row is a command a client sent (a script, a subscription, a plain
/// command the contender sends itself) rather than one a script called, which the slowlog
/// lists too and whose time its script's already includes.
fn top_level(contender: Contender, name: &str) -> bool {
    let scripts = leasehold::script::scripts();
    scripts.all().iter().any(|s| s.name() == name)
        || name.starts_with("sha ")
        || contender.direct_commands().contains(&name)
        || matches!(name, "subscribe" | "unsubscribe")
}

/// The median of a repetition's values (the middle one; the upper of two).
fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied().unwrap_or(0.0)
}

/// "79 / 89 / 85": every repetition's value.
fn each(values: &[f64]) -> String {
    let all: Vec<String> = values.iter().map(|v| format!("{v:.0}")).collect();
    all.join(" / ")
}

fn client_table(out: &mut String, clients: usize, cells: &[&ProfiledCell], missing: Option<&str>) {
    let _ = writeln!(out, "## Client CPU by category, N = {clients}, cs 0\n");
    if let Some(why) = missing {
        let _ = writeln!(out, "No profile: {why}.\n");
        return;
    }
    let mut header = "| category |".to_owned();
    let mut rule = "|---|".to_owned();
    for cell in cells {
        let _ = write!(
            header,
            " {} self µs/acq (share) | incl. |",
            cell.contender.label()
        );
        rule.push_str("---:|---:|");
    }
    let _ = writeln!(out, "{header}\n{rule}");
    for name in perf::category_names() {
        let mut row = format!("| {name} |");
        for cell in cells {
            let (own, incl) = cell.perf.as_ref().map_or((None, None), |f| shares(f, name));
            let us = |s: Option<f64>| s.map(|s| s * cell.client_us);
            let _ = write!(
                row,
                " {} | {} |",
                own.zip(us(own)).map_or("–".to_owned(), |(s, u)| format!(
                    "{u:.1} ({:.0} %)",
                    s * 100.0
                )),
                us(incl).map_or("–".to_owned(), |u| format!("{u:.1}")),
            );
        }
        let _ = writeln!(out, "{row}");
    }
    let mut row = "| samples |".to_owned();
    for cell in cells {
        let _ = write!(row, " {} | |", cell.perf.as_ref().map_or(0, |f| f.samples));
    }
    let _ = writeln!(out, "{row}\n");
}

/// The self and inclusive shares of `name` in `folded`.
fn shares(folded: &Folded, name: &str) -> (Option<f64>, Option<f64>) {
    let total = folded.samples.max(1) as f64;
    let get = |m: &std::collections::BTreeMap<String, u64>| {
        Some(m.get(name).copied().unwrap_or(0) as f64 / total)
    };
    (get(&folded.self_samples), get(&folded.inclusive_samples))
}

fn server_table(out: &mut String, clients: usize, cells: &[&ProfiledCell]) {
    let _ = writeln!(
        out,
        "## Redis CPU by script, N = {clients}, cs 0\n\n\
         | contender | top-level command or script | calls/acq | µs per call | µs/acq | share of Redis CPU |\n\
         |---|---|---:|---:|---:|---:|"
    );
    for cell in cells {
        let process = cell.server.process_us.max(f64::MIN_POSITIVE);
        let mut inside = 0.0;
        for script in &cell.server.scripts {
            let us = script.calls_per_acq * script.us_per_call;
            let top = top_level(cell.contender, &script.name);
            if top {
                inside += us;
            }
            let _ = writeln!(
                out,
                "| {} | {}{} | {:.2} | {:.1} | {:.1} | {:.0} % |",
                cell.contender.label(),
                script.name,
                if top { "" } else { " (inside a script)" },
                script.calls_per_acq,
                script.us_per_call,
                us,
                us / process * 100.0
            );
        }
        let outside = (cell.server.process_us - inside).max(0.0);
        let _ = writeln!(
            out,
            "| {} | outside commands (I/O, parsing, event loop) | | | {:.1} | {:.0} % |",
            cell.contender.label(),
            outside,
            outside / process * 100.0
        );
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "Commands per acquisition as commandstats counts them (script-internal calls \
         included), N = {clients}:\n"
    );
    for cell in cells {
        let mut calls: Vec<(&String, &f64)> = cell
            .server
            .calls
            .iter()
            .filter(|(_, n)| **n >= 0.01)
            .collect();
        calls.sort_by(|a, b| b.1.total_cmp(a.1));
        let list: Vec<String> = calls
            .iter()
            .map(|(name, n)| {
                let us = cell.server.command_us.get(*name).copied().unwrap_or(0.0);
                format!("{name} {n:.2} ({us:.1} µs)")
            })
            .collect();
        let _ = writeln!(out, "- {}: {}", cell.contender.label(), list.join(", "));
    }
    let _ = writeln!(out);
}
