//! The Python peers' section of `summary.md`: redis-py's lock and python-redis-lock at the key
//! point (N = [`KEY_CLIENTS`], one hot lock), each metric beside Leasehold's FairQueue and
//! PubSub and rslock's default profile from the same run, as ratios of theirs ÷ the Python
//! peer's, and the pipe round trip every Python acquisition pays on top, so a reader can
//! subtract it. A ratio whose two sides' repetition spreads overlap reads as noise.

use std::fmt::Write as _;

use crate::bench::contender::Contender;
use crate::bench::python_peer::install::{PYTHON_REDIS_LOCK_VERSION, REDIS_PY_VERSION};
use crate::bench::python_peer::library::PythonLib;
use crate::bench::wait_kind::WaitKind;
use crate::report::format::fmt;
use crate::report::key_ratios::{
    self, KEY_CLIENTS, KEY_CS_US, KeyRatio, LATENCY_METRICS, Metric, THROUGHPUT_METRICS,
};
use crate::report::metrics::{median, ratio};
use crate::report::plots::cs_label;
use crate::report::results::BenchReport;

/// What each Python peer is set beside: Leasehold's fair default and its PubSub strategy, and
/// the Rust polling peer.
const BESIDE: [Contender; 3] = [
    Contender::Leasehold(WaitKind::FairQueue),
    Contender::Leasehold(WaitKind::PubSub),
    Contender::RslockDefault,
];

/// Writes the section, if any Python peer ran.
pub fn write(out: &mut String, report: &BenchReport) {
    let peers: Vec<Contender> = PythonLib::ALL
        .into_iter()
        .map(Contender::Python)
        .filter(|&c| report.find(|s| s.contender == c).is_some())
        .collect();
    if peers.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "## Python peers (each client a process of its own)\n\n\
         **{}**: redis-py {REDIS_PY_VERSION}'s `redis.lock.Lock`, as its README shows \
         (`r.lock(name, timeout=ttl, blocking=True)`): `SET NX PX`, retried after its default \
         0.1 s sleep. **{}**: python-redis-lock {PYTHON_REDIS_LOCK_VERSION} \
         (`redis_lock.Lock(r, name, expire=ttl)`, `acquire(blocking=True)`): a GET, `SET NX \
         EX`, and on failure a BLPOP on the signal list its release script pushes one element \
         to, so a release wakes one waiter. Both from PyPI; each benchmark client is a \
         `python3` process with its own connection, driven over its stdin and stdout \
         (`harness/peers/lock_peer.py`). Their client CPU counts the worker processes \
         (`/proc/<pid>/stat`) besides the bench process.\n",
        Contender::Python(PythonLib::RedisPy).label(),
        Contender::Python(PythonLib::PythonRedisLock).label(),
    );
    write_pipe(out, report);
    table(out, report, &peers, "the Python peer");
}

/// The ratio table of `peers` at the key point, each metric beside [`BESIDE`]'s, as their
/// value ÷ the peer's (`who` names the peer in the header).
pub(super) fn table(out: &mut String, report: &BenchReport, peers: &[Contender], who: &str) {
    let _ = write!(
        out,
        "Ratios are the other contender's value ÷ {who}'s, in the same run, N = \
         {KEY_CLIENTS}, one hot lock; \"better\" and \"worse\" are the other contender's.\n\n\
         | comparison | {who} |"
    );
    for other in BESIDE {
        let _ = write!(out, " {} | ÷ {who} |", other.label());
    }
    let _ = writeln!(out, "\n|---|---:|{}", "---:|---|".repeat(BESIDE.len()));
    for &peer in peers {
        for metric in &THROUGHPUT_METRICS {
            row(out, report, peer, 0, metric);
        }
        for metric in &LATENCY_METRICS {
            row(out, report, peer, KEY_CS_US, metric);
        }
        cpu_row(out, report, peer);
    }
    let _ = writeln!(out);
}

/// The pipe paragraph: the round trip each repetition measured, and what to subtract.
fn write_pipe(out: &mut String, report: &BenchReport) {
    let pipe = &report.server.pipe;
    if pipe.is_empty() {
        let _ = writeln!(
            out,
            "The pipe to the workers was not measured in this run.\n"
        );
        return;
    }
    let medians: Vec<f64> = pipe.iter().map(|p| p.median_us).collect();
    let p99s: Vec<f64> = pipe.iter().map(|p| p.p99_us).collect();
    let each = |values: &[f64]| {
        values
            .iter()
            .map(|v| fmt(Some(*v), 0))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let _ = writeln!(
        out,
        "**Pipe round trip** (bench ⇄ Python worker, a `ping` that touches no Redis, {} \
         sequential round trips at the start of each repetition): median **{} µs**, p99 {} µs \
         (medians over repetitions; per repetition: medians {} µs, p99 {} µs). Every acquire of \
         a Python peer includes one such round trip and every acquisition (acquire and release) \
         two, which the in-process contenders do not pay: subtract one median from the Python \
         rows' latencies, and at most two per acquisition from their hold and hand-off gap, to \
         compare the libraries rather than the harness's way of driving them.\n",
        pipe.first().map_or(0, |p| p.samples),
        fmt(median(&medians), 0),
        fmt(median(&p99s), 0),
        each(&medians),
        each(&p99s),
    );
}

/// One metric of `peer` beside each of [`BESIDE`].
fn row(out: &mut String, report: &BenchReport, peer: Contender, cs: u64, metric: &Metric) {
    let compared: Vec<Option<KeyRatio>> = BESIDE
        .iter()
        .map(|&other| key_ratios::compare(report, other, peer, cs, metric))
        .collect();
    let Some(theirs) = compared.iter().flatten().map(|r| r.theirs).next() else {
        return;
    };
    let digits = compared
        .iter()
        .flatten()
        .map(|r| r.digits)
        .next()
        .unwrap_or(0);
    let _ = write!(
        out,
        "| {}, cs {}: {} | {} |",
        peer.label(),
        cs_label(cs),
        metric.name,
        fmt(theirs, digits)
    );
    for compared in &compared {
        match compared {
            Some(r) => {
                let _ = write!(out, " {} | {} |", fmt(r.ours, r.digits), r.reading());
            }
            None => out.push_str(" – | – |"),
        }
    }
    out.push('\n');
}

/// CPU per acquisition at cs 0, client (with the Python workers) + Redis, and the ratio of
/// the totals.
fn cpu_row(out: &mut String, report: &BenchReport, peer: Contender) {
    let Some(throughput) = THROUGHPUT_METRICS.first() else {
        return;
    };
    let compared: Vec<Option<KeyRatio>> = BESIDE
        .iter()
        .map(|&other| key_ratios::compare(report, other, peer, 0, throughput))
        .collect();
    let Some(theirs) = compared.iter().flatten().map(|r| r.cpu[1]).next() else {
        return;
    };
    let total = |c: key_ratios::CpuPerAcq| c.client.zip(c.redis).map(|(a, b)| a + b);
    let _ = write!(
        out,
        "| {}, cs {}: CPU µs/acq, client + Redis | {} |",
        peer.label(),
        cs_label(0),
        theirs.cell()
    );
    for compared in &compared {
        match compared {
            Some(r) => {
                let _ = write!(
                    out,
                    " {} | {} |",
                    r.cpu[0].cell(),
                    key_ratios::reading(ratio(total(r.cpu[0]), total(theirs)), false, false)
                );
            }
            None => out.push_str(" – | – |"),
        }
    }
    out.push('\n');
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::bench::grid::{GridPlan, GridSize};
    use crate::bench::python_peer::pipe_overhead::PipeOverhead;
    use crate::bench::workload::CellSpec;
    use crate::report::results::{CellResult, MedianMetrics, RunMeta, ServerCost, Spread};

    const REDIS_PY: Contender = Contender::Python(PythonLib::RedisPy);
    const FAIR_QUEUE: Contender = Contender::Leasehold(WaitKind::FairQueue);

    fn cell(contender: Contender, cs: u64, acq: f64, p99_ms: f64) -> CellResult {
        CellResult {
            spec: CellSpec {
                contender,
                clients: KEY_CLIENTS,
                critical_section_us: cs,
                locks: 1,
                think_us: 0,
                offered_per_s: 0,
                read_percent: 0,
            },
            reps: Vec::new(),
            median: MedianMetrics {
                repetitions: 3,
                acq_per_s: Some(acq),
                acq_per_s_spread: Some(Spread {
                    min: acq * 0.9,
                    max: acq * 1.1,
                }),
                p99_us: Some(p99_ms * 1_000.0),
                jain: Some(0.9),
                client_cpu_us_per_acq: Some(acq / 10.0),
                server_cpu_us_per_acq: Some(acq / 20.0),
                ..MedianMetrics::default()
            },
            latency_curve: Vec::new(),
            samples: 0,
        }
    }

    fn render(cells: Vec<CellResult>, pipe: Vec<PipeOverhead>) -> String {
        let report = BenchReport {
            meta: RunMeta {
                started_unix_s: 0,
                elapsed_s: 0.0,
                plan: GridPlan::new(GridSize::Quick, &[]),
                topology: String::new(),
                redis_version: String::new(),
                cpus: 2,
                commandstats_method: String::new(),
            },
            cells,
            server: ServerCost {
                pipe,
                ..ServerCost::default()
            },
        };
        let mut out = String::new();
        write(&mut out, &report);
        out
    }

    #[test]
    fn sets_each_python_metric_beside_the_others_as_their_ratio() {
        let pipe = |median_us, p99_us| PipeOverhead {
            median_us,
            p99_us,
            samples: 1_000,
        };
        let out = render(
            vec![
                cell(REDIS_PY, 0, 100.0, 50.0),
                cell(FAIR_QUEUE, 0, 400.0, 5.0),
                cell(REDIS_PY, KEY_CS_US, 80.0, 900.0),
                cell(FAIR_QUEUE, KEY_CS_US, 300.0, 9.0),
            ],
            vec![pipe(90.0, 300.0), pipe(120.0, 500.0), pipe(100.0, 200.0)],
        );
        let line = |needle: &str| {
            out.lines()
                .find(|l| l.contains(needle))
                .unwrap_or_else(|| panic!("no line with {needle:?} in\n{out}"))
        };
        // The pipe: medians over repetitions, each repetition listed.
        let pipe_line = line("**Pipe round trip**");
        assert!(
            pipe_line.contains("median **100 µs**, p99 300 µs"),
            "{pipe_line}"
        );
        assert!(pipe_line.contains("medians 90, 120, 100 µs"), "{pipe_line}");
        // 400 against 100 acq/s, spreads apart: FairQueue 4× higher, the better side.
        let acq = line("redis-py Lock (0.1 s sleep), cs 0 ms: acq/s |");
        assert!(
            acq.contains("| 100 | 400 | 4.00× higher (better) |"),
            "{acq}"
        );
        // p99 9 ms against 900 ms: 100× lower, better (no spreads given).
        let p99 = line("cs 1 ms: p99 acquire latency, ms |");
        assert!(
            p99.contains("| 900.0 | 9.0 | 100.00× lower (better) |"),
            "{p99}"
        );
        // PubSub and rslock did not run: their columns say so.
        assert!(acq.ends_with("| – | – | – | – |"), "{acq}");
        // CPU: 10 + 5 against 40 + 20 µs per acquisition: FairQueue 4× higher, worse.
        let cpu = line("redis-py Lock (0.1 s sleep), cs 0 ms: CPU");
        assert!(
            cpu.contains("| 10 + 5 | 40 + 20 | 4.00× higher (worse) |"),
            "{cpu}"
        );
        // python-redis-lock did not run: no rows of its own.
        assert!(
            !out.contains("python-redis-lock (BLPOP hand-off), cs"),
            "{out}"
        );
    }

    #[test]
    fn a_run_without_python_peers_has_no_section_and_an_unmeasured_pipe_says_so() {
        assert!(render(vec![cell(FAIR_QUEUE, 0, 400.0, 5.0)], Vec::new()).is_empty());
        let out = render(vec![cell(REDIS_PY, 0, 100.0, 50.0)], Vec::new());
        assert!(
            out.contains("The pipe to the workers was not measured"),
            "{out}"
        );
    }
}
