//! `leasehold-harness`: the command line over the harness library. One subcommand per job
//! (`bench` today; `safety` and `all` slot in as further `Command` arms with their own args
//! struct and `run_*` function); the CLI owns the terminal, the library only reports progress.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use leasehold_harness::bench::contender::{Contender, WaitKind};
use leasehold_harness::bench::grid::{GridPlan, GridSize};
use leasehold_harness::bench::runner::{self, Progress, RedisSource};
use leasehold_harness::report;
use leasehold_harness::report::plots::cs_label;

/// Redraw rate of the progress bar's elapsed-time display.
const PROGRESS_TICK: Duration = Duration::from_millis(250);

#[derive(Debug, Parser)]
#[command(
    name = "leasehold-harness",
    version,
    about = "Leasehold's containers, benchmarks and reports"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Log filter for the library's tracing output (stderr), e.g. `info` or `leasehold=debug`.
    #[arg(long, global = true, default_value = "warn")]
    log: String,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Contention benchmarks against the container topologies, with rslock as the peer.
    Bench(BenchArgs),
    /// Re-render summary.md and the plots from a stored bench.json.
    Render(RenderArgs),
    /// Safety under real faults: the DESIGN §5 scenarios against containers, beside the
    /// simulator's verdicts (reports/safety.md and safety.json).
    Safety(SafetyArgs),
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
    #[arg(long, default_value_t = 2)]
    sim_seeds: u64,
}

#[derive(Debug, Args)]
struct BenchArgs {
    /// Run the full grid (N 1/8/32/128 × cs 0/1/10 ms, 3 × 10 s per cell, medians) instead of
    /// the quick one (N 1/32 × cs 0/1 ms, 5 s per cell; about 3 minutes).
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
    /// Only these contenders (default: all).
    #[arg(long, value_enum, value_delimiter = ',')]
    only: Vec<ContenderArg>,
    /// Development only: benchmark this running Redis instead of starting containers.
    #[arg(long)]
    redis_url: Option<String>,
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
}

impl From<ContenderArg> for Contender {
    fn from(arg: ContenderArg) -> Self {
        match arg {
            ContenderArg::Spin => Contender::Leasehold(WaitKind::Spin),
            ContenderArg::Pubsub => Contender::Leasehold(WaitKind::PubSub),
            ContenderArg::FairQueue => Contender::Leasehold(WaitKind::FairQueue),
            ContenderArg::RslockDefault => Contender::RslockDefault,
            ContenderArg::RslockTuned => Contender::RslockTuned,
            ContenderArg::RedLock => Contender::RedLock,
            ContenderArg::RslockRedLock => Contender::RslockRedLock,
        }
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(&cli.log))
        .with_writer(std::io::stderr)
        .init();
    let outcome = match cli.command {
        Command::Bench(args) => run_bench(args).await,
        Command::Render(args) => run_render(&args),
        Command::Safety(args) => run_safety(args).await,
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn run_bench(args: BenchArgs) -> leasehold_harness::Result<()> {
    let contenders: Vec<Contender> = if args.only.is_empty() {
        Contender::ALL.to_vec()
    } else {
        args.only.iter().map(|&c| c.into()).collect()
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
    let bar = ProgressBar::new(plan.total_runs() as u64);
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.enable_steady_tick(PROGRESS_TICK);
    let mut on_progress = |event: Progress| match event {
        Progress::Setup(what) => bar.set_message(what),
        Progress::CellStarted {
            spec, repetition, ..
        } => bar.set_message(format!(
            "{} N={} cs {}{} (rep {})",
            spec.contender.label(),
            spec.clients,
            cs_label(spec.critical_section_us),
            if spec.locks > 1 {
                format!(" over {} locks", spec.locks)
            } else {
                String::new()
            },
            repetition + 1
        )),
        Progress::CellFinished { spec, metrics, .. } => {
            let line = format!(
                "  {:<24} N={:<3} cs {:<5} locks {:<2} {:>9.0} acq/s  p99 {:>9.2} ms  Jain {:.3}  RT/acq {:>6}  violations {}",
                spec.contender.label(),
                spec.clients,
                cs_label(spec.critical_section_us),
                spec.locks,
                metrics.acq_per_s,
                metrics.p99_us / 1_000.0,
                metrics.jain,
                metrics
                    .client_round_trips_per_acq
                    .map_or("–".to_owned(), |v| format!("{v:.2}")),
                metrics.violations,
            );
            // A hidden bar (not a terminal: CI logs) swallows println; print directly then.
            if bar.is_hidden() {
                println!("{line}");
            } else {
                bar.println(line);
            }
            bar.inc(1);
        }
    };
    let result = runner::run(&plan, &source, &mut on_progress).await;
    bar.finish_and_clear();
    let report = result?;
    let written = report::write(&report, &args.out)?;
    print_written(&args.out, &written, report.meta.elapsed_s);
    Ok(())
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

async fn run_safety(args: SafetyArgs) -> leasehold_harness::Result<()> {
    use leasehold_harness::safety::{report as safety_report, run as safety_run, scenario};
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
    };
    let total: usize = plan
        .scenarios
        .iter()
        .map(|s| {
            s.strategies
                .iter()
                .filter(|st| plan.strategies.is_empty() || plan.strategies.contains(st))
                .count()
        })
        .sum();
    let bar = ProgressBar::new(total as u64);
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.enable_steady_tick(PROGRESS_TICK);
    let mut on_progress = |event: safety_run::Progress<'_>| match event {
        safety_run::Progress::Setup(what) => bar.set_message(what),
        safety_run::Progress::CellStarted(name, strategy) => {
            bar.set_message(format!("{name} / {}", strategy.name()));
        }
        safety_run::Progress::CellFinished(cell) => {
            let line = format!(
                "  {:<30} {:<9} real: {:<17} sim expects: {:<22} agree: {:?}",
                cell.scenario,
                cell.strategy.name(),
                cell.real.to_string(),
                cell.sim_expected.as_deref().unwrap_or("-"),
                cell.agreement,
            );
            if bar.is_hidden() {
                println!("{line}");
            } else {
                bar.println(line);
            }
            bar.inc(1);
        }
    };
    let result = safety_run::run(&plan, &mut on_progress).await;
    bar.finish_and_clear();
    let report = result?;
    let written = safety_report::write(&report, &args.out)?;
    println!(
        "safety run took {:.0} s; wrote {} files to {}:",
        report.elapsed_s,
        written.len(),
        args.out.display()
    );
    for path in &written {
        println!("  {}", path.display());
    }
    Ok(())
}
