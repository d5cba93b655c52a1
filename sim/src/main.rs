//! `leasehold-sim`: run the docs/DESIGN.md §5 scenarios, explore random fault mixes (whole,
//! or one shard of them, and merge the shards), replay a seed, or benchmark the simulator. Reports go to `--out`, by default a fresh directory
//! under `target/` (the committed `reports/` is written only when asked for by name); the
//! jobs themselves live in [`leasehold_sim::report::jobs`], this file only parses, draws and prints.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};

use leasehold_sim::explore;
use leasehold_sim::explore::lineage::RunId;
use leasehold_sim::explore::shard::Shard;
use leasehold_sim::explore::steer::{Budget, DEFAULT_STEER_SHARE};
use leasehold_sim::report::design_check::{self, DEFAULT_CHECK_EXPLORE_SEEDS, DesignCheck};
use leasehold_sim::report::design_shard;
use leasehold_sim::report::designs::{self, DEFAULT_DESIGN_SEEDS, FAULT_CLASSES, Row};
use leasehold_sim::report::jobs::{
    self, DEFAULT_BENCH_SEEDS, DEFAULT_BENCH_VIRTUAL_SECS, ExploreFiles, ScenarioPlan, SwarmArgs,
};
use leasehold_sim::report::shard::{self, ShardPlan};
use leasehold_sim::report::{self, ExploreSummary, merge};
use leasehold_sim::scenario::run::RunSpec;
use leasehold_sim::scenario::{self, DEFAULT_SEEDS};
use leasehold_sim::workload::Strategy;
use leasehold_sim::workload::designs::Design;
use leasehold_sim::workload::designs::file::{DesignFile, DesignFileError};

/// The simulator allocates for every simulated message, reply and Lua string: mimalloc
/// serves them about a fifth faster than the system allocator (`sim-bench`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Seeds `explore` runs unless told otherwise: a CI-sized run, about 1–2 min on 2 cores.
const DEFAULT_EXPLORE_SEEDS: u64 = 2000;

/// Where a run without `--out` writes: one fresh directory per run below it, so trying the
/// simulator never overwrites the committed `reports/`.
const DEFAULT_OUT_ROOT: &str = "target/leasehold-sim";

#[derive(Parser)]
#[command(
    name = "leasehold-sim",
    about = "Deterministic simulation of Leasehold locks under faults"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Directory for reports (default: a fresh
    /// `target/leasehold-sim/<command>-<unix seconds>-<pid>`).
    #[arg(long, global = true)]
    out: Option<PathBuf>,
    /// Worker threads (default: available cores).
    #[arg(long, global = true)]
    jobs: Option<usize>,
}

#[derive(Subcommand)]
enum Command {
    /// Run named scenarios (all by default) and write the verdict table.
    Scenario {
        /// Scenario names; empty runs all.
        names: Vec<String>,
        /// Seeds per scenario and strategy.
        #[arg(long, default_value_t = DEFAULT_SEEDS)]
        seeds: u64,
        /// Strategies (default: all).
        #[arg(long, value_delimiter = ',')]
        strategy: Vec<Strategy>,
    },
    /// Random fault mixes over many seeds; failures are shrunk and written with a replay command.
    Explore {
        /// Number of runs, plain seeds and steered runs together (the default is a CI-sized
        /// run: about 1–2 min on 2 cores).
        #[arg(long, default_value_t = DEFAULT_EXPLORE_SEEDS)]
        seeds: u64,
        /// First seed.
        #[arg(long, default_value_t = 0)]
        start: u64,
        /// Share of the runs steered: mutations of the runs that first reached a script
        /// call site, a client path or a verdict-relevant state at a call site, favouring
        /// what few runs reached (0 turns steering off; the rest are plain seeds from
        /// START).
        #[arg(long, default_value_t = DEFAULT_STEER_SHARE)]
        steer: f64,
        /// Report failing seeds without shrinking them (the mutation gate only needs to
        /// know which seeds fail).
        #[arg(long)]
        no_shrink: bool,
        /// Run only the I-th of N disjoint slices of the seeds (from 1: `2/4`), for
        /// `merge` to put together; plain seeds only (needs `--steer 0`).
        #[arg(long, value_name = "I/N")]
        shard: Option<Shard>,
        #[command(flatten)]
        options: SwarmArgs,
    },
    /// Merge the reports of every shard of one exploration (`explore --shard I/N`) into
    /// one, as the exploration unsharded would have written it.
    Merge {
        /// The shards' report directories, one per shard, in any order.
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
    },
    /// Re-run one seed or steered run (with the options it was explored with), or a shrunk spec, with a full trace and a picture (SVG timeline).
    Replay {
        /// The seed, or a steered run's id (`17/0/3`).
        seed: Option<RunId>,
        /// A RunSpec JSON file (a shrunk failure) instead of a seed.
        #[arg(long)]
        spec: Option<PathBuf>,
        /// Replay this named scenario's run for SEED (with the first `--strategy` given)
        /// instead of a swarm run.
        #[arg(long)]
        scenario: Option<String>,
        /// Replay the run for SEED of this fault class of the design matrix (`designs`),
        /// for `--design` or else the first `--strategy` given, as its cell runs it.
        #[arg(long, conflicts_with = "scenario")]
        class: Option<String>,
        /// The lock design whose clients a `--class` run uses instead of Leasehold's.
        #[arg(long, requires = "class")]
        design: Option<Design>,
        #[command(flatten)]
        options: SwarmArgs,
    },
    /// Run the verdict matrix: lock designs (Leasehold's strategies and the classic
    /// designs) against every fault class, and write designs.md with a picture per failing
    /// cell.
    Designs {
        /// Seeds per cell.
        #[arg(long, default_value_t = DEFAULT_DESIGN_SEEDS)]
        seeds: u64,
        /// Only these classic designs (default: Leasehold's strategies and every design).
        #[arg(long, value_delimiter = ',')]
        design: Vec<Design>,
    },
    /// Check a lock design of your own, described in a design file.
    Design {
        #[command(subcommand)]
        action: DesignAction,
    },
    /// Measure simulated lock operations per wall second and seeds per minute.
    Bench {
        /// Number of seeds.
        #[arg(long, default_value_t = DEFAULT_BENCH_SEEDS)]
        seeds: u64,
        /// Virtual seconds per seed.
        #[arg(long, default_value_t = DEFAULT_BENCH_VIRTUAL_SECS)]
        virtual_secs: u64,
    },
}

#[derive(Subcommand)]
enum DesignAction {
    /// Run the design file's design against every fault class and plain exploration;
    /// write its matrix row, each failure's spec and picture, a report and JUnit XML;
    /// fail when something it lists under `must_survive` broke it.
    Check {
        /// The design file (TOML).
        file: PathBuf,
        /// Seeds per fault class.
        #[arg(long, default_value_t = DEFAULT_DESIGN_SEEDS)]
        seeds: u64,
        /// Plain exploration seeds.
        #[arg(long, default_value_t = DEFAULT_CHECK_EXPLORE_SEEDS)]
        explore_seeds: u64,
        /// Run only the I-th of N slices of the exploration's seeds (e.g. 2/4) and write
        /// the shard's record; `leasehold-sim merge` puts the N shards' directories back
        /// together into the whole check (its report, JUnit file and exit code).
        #[arg(long)]
        shard: Option<Shard>,
    },
}

fn progress(len: u64, what: &str) -> ProgressBar {
    let bar = ProgressBar::new(len);
    if let Ok(style) = ProgressStyle::with_template(
        "{msg} [{elapsed_precise}] {bar:40} {pos}/{len} ({per_sec}, eta {eta})",
    ) {
        bar.set_style(style);
    }
    bar.set_message(what.to_owned());
    bar
}

impl Command {
    /// The subcommand's name, which starts its default report directory's name.
    fn name(&self) -> &'static str {
        match self {
            Self::Scenario { .. } => "scenario",
            Self::Explore { .. } => "explore",
            Self::Merge { .. } => "merge",
            Self::Replay { .. } => "replay",
            Self::Designs { .. } => "designs",
            Self::Design { .. } => "design-check",
            Self::Bench { .. } => "bench",
        }
    }
}

/// A directory no earlier run wrote: named for the command, the time and this process.
fn default_out(command: &Command) -> PathBuf {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    Path::new(DEFAULT_OUT_ROOT).join(format!("{}-{secs}-{}", command.name(), std::process::id()))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let jobs = cli.jobs.unwrap_or_else(jobs::default_jobs);
    let out = cli.out.clone().unwrap_or_else(|| default_out(&cli.command));
    println!("reports go to {}", out.display());
    match run_command(&cli.command, &out, jobs) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::from(2)
        }
    }
}

/// Prints where an exploration (whole, a shard or merged) wrote `files`; fails when any
/// failure of `summary` is unexpected.
fn explored(summary: &ExploreSummary, files: &ExploreFiles) -> ExitCode {
    println!("{}", jobs::wrote_line(&files.reports));
    for (run, p) in &files.failures {
        println!(
            "failing run of seed {run} written to {} (replay: cargo run --release -p leasehold-sim -- replay --spec {})",
            p.display(),
            p.display()
        );
    }
    for p in &files.pictures {
        println!("picture written to {}", p.display());
    }
    // Known limitations (a failure its catalogued scenario expects, under the fault mix
    // that scenario names) are reported but do not fail the run.
    let unexpected = summary.unexpected().count();
    if unexpected > 0 {
        eprintln!("{unexpected} unexpected failure(s)");
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// The design file at `file`, its `must_survive` checked against the fault classes.
fn load_design(file: &Path) -> Result<DesignFile, DesignFileError> {
    let classes: Vec<&str> = FAULT_CLASSES.iter().map(|c| c.name).collect();
    DesignFile::load(file, &classes)
}

/// Writes a design check's report and turns its verdict into the exit code.
fn checked(check: &mut DesignCheck, out: &Path) -> Result<ExitCode, Box<dyn std::error::Error>> {
    let written = check.write(out)?;
    println!("{}", check.markdown());
    println!("{}", jobs::wrote_line(&written));
    Ok(if check.passed() {
        ExitCode::SUCCESS
    } else {
        eprintln!("{}: an item under must_survive broke it", check.design);
        ExitCode::FAILURE
    })
}

fn run_command(
    command: &Command,
    out: &Path,
    jobs: usize,
) -> Result<ExitCode, Box<dyn std::error::Error>> {
    match command {
        Command::Scenario {
            names,
            seeds,
            strategy,
        } => {
            let plan = ScenarioPlan::new(names, strategy, *seeds)?;
            let bar = progress(plan.cell_count() as u64, "scenarios");
            let table = jobs::run_scenarios(&plan, jobs, || bar.inc(1));
            bar.finish();
            let table = table?;
            println!("{}", table.markdown());
            println!("{}", jobs::wrote_line(&table.write(out)?));
            let unmet = table.unmet();
            if unmet.is_empty() {
                Ok(ExitCode::SUCCESS)
            } else {
                eprintln!("expectations not met: {}", unmet.join(", "));
                Ok(ExitCode::FAILURE)
            }
        }
        Command::Explore {
            seeds,
            start,
            steer,
            no_shrink,
            shard: Some(shard),
            options,
        } => {
            // Check the flags before the bar appears.
            options.options()?;
            let plan = ShardPlan::new(*shard, *start, *seeds, *steer)?;
            let bar = progress(plan.runs(), &format!("explore {shard}"));
            let run = shard::run_shard(&plan, options, !*no_shrink, jobs, || bar.inc(1));
            bar.finish();
            let run = run?;
            println!("{}", jobs::explore_markdown(&run.summary, options));
            let files = shard::write_shard(&run, out)?;
            Ok(explored(&run.summary, &files))
        }
        Command::Explore {
            seeds,
            start,
            steer,
            no_shrink,
            shard: None,
            options,
        } => {
            // Check the flags before the bar appears.
            options.options()?;
            let budget = Budget::new(*seeds, *steer)?;
            let bar = progress(*seeds, "explore");
            let summary =
                jobs::run_explore_steered(*start, budget, options, !*no_shrink, jobs, || {
                    bar.inc(1)
                });
            bar.finish();
            let summary = summary?;
            println!("{}", jobs::explore_markdown(&summary, options));
            let files = jobs::write_explore(&summary, options, out)?;
            Ok(explored(&summary, &files))
        }
        Command::Merge { dirs } if dirs.iter().all(|d| design_shard::is_shard_dir(d)) => {
            let mut check = design_shard::merge(dirs, jobs)?;
            checked(&mut check, out)
        }
        Command::Merge { dirs } => {
            let merged = merge::merge(dirs)?;
            println!("{}", jobs::explore_markdown(&merged.summary, &merged.swarm));
            let files = merge::write_merged(&merged, out)?;
            Ok(explored(&merged.summary, &files))
        }
        Command::Replay {
            seed,
            spec: spec_path,
            scenario,
            class,
            design,
            options,
        } => {
            let mut spec: RunSpec = match (seed, spec_path, scenario) {
                (_, Some(path), _) => serde_json::from_str(&std::fs::read_to_string(path)?)?,
                (Some(run), None, Some(name)) => {
                    let scenario =
                        scenario::find(name).ok_or_else(|| format!("no scenario named {name}"))?;
                    if !run.is_plain() {
                        return Err(format!("a scenario replays a plain seed, not {run}").into());
                    }
                    let strategy = options.strategy.first().copied().unwrap_or(Strategy::Spin);
                    scenario.spec(strategy, run.seed)
                }
                (Some(run), None, None) if class.is_some() || design.is_some() => {
                    let class = designs::find_class(class.as_deref().unwrap_or_default())?;
                    if !run.is_plain() {
                        return Err(format!("a fault class replays a plain seed, not {run}").into());
                    }
                    let row = match design {
                        Some(design) => Row::Other(*design),
                        None => Row::Leasehold(
                            options.strategy.first().copied().unwrap_or(Strategy::Spin),
                        ),
                    };
                    class.spec(&row, run.seed)?
                }
                (Some(run), None, None) => explore::spec_for(run, &options.options()?),
                (None, None, _) => return Err("give a SEED or --spec FILE".into()),
            };
            // A steered run goes by its id; its spec's seed is one mixed from the id.
            let run = match (seed, spec_path) {
                (Some(run), None) if !run.is_plain() => run.clone(),
                _ => RunId::plain(spec.seed),
            };
            spec.trace = true;
            let (result, findings) = explore::run_and_classify(&spec)?;
            let name = format!("sim-replay-{}.trace", run.file_stem());
            let path = report::write_text(out, &name, &result.trace)?;
            println!(
                "seed {run}: {} ({:?})",
                result.verdict(),
                explore::target_of(&findings)
            );
            for d in explore::details(&result) {
                println!("  {d}");
            }
            println!("faults: {}", serde_json::to_string(&spec.faults)?);
            println!(
                "trace ({} bytes) written to {}",
                result.trace.len(),
                path.display()
            );
            let title = format!(
                "seed {run} ({}): {}",
                spec.workload.strategy.name(),
                result.verdict()
            );
            let name = format!("sim-replay-{}.svg", run.file_stem());
            let picture = jobs::write_picture(out, &name, &title, &spec, &result)?;
            println!("picture written to {}", picture.display());
            Ok(if !findings.is_empty() {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            })
        }
        Command::Designs { seeds, design } => {
            let rows = if design.is_empty() {
                Row::all()
            } else {
                design.iter().map(|d| Row::Other(*d)).collect()
            };
            let bar = progress(
                rows.len() as u64 * FAULT_CLASSES.len() as u64 * seeds,
                "designs",
            );
            let matrix = designs::run_matrix(&rows, *seeds, jobs, || bar.inc(1));
            bar.finish();
            let mut matrix = matrix?;
            println!("{}", jobs::wrote_line(&matrix.write(out)?));
            println!("{}", matrix.markdown());
            Ok(ExitCode::SUCCESS)
        }
        Command::Design {
            action:
                DesignAction::Check {
                    file,
                    seeds,
                    explore_seeds,
                    shard: Some(shard),
                },
        } => {
            let design = load_design(file)?;
            let range = shard.seeds(0, *explore_seeds);
            let bar = progress(
                range.end - range.start,
                &format!("design check {} {shard}", design.name),
            );
            let run = design_shard::run_shard(
                &design,
                file,
                *seeds,
                *explore_seeds,
                *shard,
                jobs,
                || bar.inc(1),
            );
            bar.finish();
            let run = run?;
            let path = run.write(out)?;
            println!(
                "shard {shard}: seeds {}..{}, {} with an unexpected failure; merge the shards' directories with `leasehold-sim merge`",
                range.start, range.end, run.exploration.failing
            );
            println!("{}", jobs::wrote_line(&[path]));
            Ok(ExitCode::SUCCESS)
        }
        Command::Design {
            action:
                DesignAction::Check {
                    file,
                    seeds,
                    explore_seeds,
                    shard: None,
                },
        } => {
            let design = load_design(file)?;
            let bar = progress(
                FAULT_CLASSES.len() as u64 * seeds + explore_seeds,
                &format!("design check {}", design.name),
            );
            let check =
                design_check::run_check(&design, file, *seeds, *explore_seeds, jobs, || bar.inc(1));
            bar.finish();
            checked(&mut check?, out)
        }
        Command::Bench {
            seeds,
            virtual_secs,
        } => {
            let bar = progress(*seeds, "bench");
            let r = jobs::run_bench(*seeds, *virtual_secs, jobs, || bar.inc(1));
            bar.finish();
            let r = r?;
            println!("{}", leasehold_sim::report::bench::markdown(&r));
            println!("{}", jobs::wrote_line(&jobs::write_bench(&r, out)?));
            Ok(ExitCode::SUCCESS)
        }
    }
}
