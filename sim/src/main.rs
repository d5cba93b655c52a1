//! `leasehold-sim`: run the DESIGN §5 scenarios, explore random fault mixes, replay a
//! seed, or benchmark the simulator. Reports go to `--out` (default `reports/`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};

use leasehold_sim::explore::{self, ExploreOptions};
use leasehold_sim::faults::Fault;
use leasehold_sim::report::{self, ExploreSummary};
use leasehold_sim::run::RunSpec;
use leasehold_sim::scenario::{self, DEFAULT_SEEDS, SCENARIOS};
use leasehold_sim::workload::Strategy;
use leasehold_sim::{bench, parallel};

#[derive(Parser)]
#[command(
    name = "leasehold-sim",
    about = "Deterministic simulation of Leasehold locks under faults"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Directory for reports.
    #[arg(long, global = true, default_value = "reports")]
    out: PathBuf,
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
        /// Number of seeds (the default is a CI-sized run: about 1–2 min on 2 cores).
        #[arg(long, default_value_t = 2000)]
        seeds: u64,
        /// First seed.
        #[arg(long, default_value_t = 0)]
        start: u64,
        #[command(flatten)]
        options: SwarmArgs,
    },
    /// Re-run one seed (with the options it was explored with), or a shrunk spec, with a full trace.
    Replay {
        /// The seed.
        seed: Option<u64>,
        /// A RunSpec JSON file (a shrunk failure) instead of a seed.
        #[arg(long)]
        spec: Option<PathBuf>,
        #[command(flatten)]
        options: SwarmArgs,
    },
    /// Measure simulated lock operations per wall second and seeds per minute.
    Bench {
        /// Number of seeds.
        #[arg(long, default_value_t = 200)]
        seeds: u64,
        /// Virtual seconds per seed.
        #[arg(long, default_value_t = 120)]
        virtual_secs: u64,
    },
}

#[derive(Args, Clone)]
struct SwarmArgs {
    /// Strategies to draw from.
    #[arg(long, value_delimiter = ',')]
    strategy: Vec<Strategy>,
    /// Fault kinds to draw from (pause, crash, partition, delay, client-drift, client-jump,
    /// node-jump, node-crash, failover, script-flush, loss), or `all`.
    #[arg(long, value_delimiter = ',', default_value = "all")]
    faults: Vec<String>,
    /// Virtual seconds per run.
    #[arg(long, default_value_t = 30)]
    horizon_secs: u64,
    /// Most clients per run.
    #[arg(long, default_value_t = 5)]
    max_clients: usize,
}

impl SwarmArgs {
    fn options(&self) -> Result<ExploreOptions, String> {
        let strategies = if self.strategy.is_empty() {
            Strategy::ALL.to_vec()
        } else {
            self.strategy.clone()
        };
        let all = ExploreOptions::default();
        let faults = if self.faults.iter().any(|f| f == "all") {
            all.faults
        } else {
            for f in &self.faults {
                if !all.faults.contains(f) {
                    return Err(format!(
                        "unknown fault kind {f:?}; known: {:?} and loss",
                        Fault::KINDS
                    ));
                }
            }
            self.faults.clone()
        };
        Ok(ExploreOptions {
            strategies,
            faults,
            max_clients: self.max_clients,
            horizon: Duration::from_secs(self.horizon_secs),
            ..all
        })
    }

    fn replay_command(&self, seed: u64) -> String {
        let mut cmd = format!("cargo run --release -p leasehold-sim -- replay {seed}");
        if !self.strategy.is_empty() {
            let names: Vec<String> = self
                .strategy
                .iter()
                .filter_map(|s| s.to_possible_value().map(|v| v.get_name().to_owned()))
                .collect();
            cmd += &format!(" --strategy {}", names.join(","));
        }
        cmd += &format!(
            " --faults {} --horizon-secs {} --max-clients {}",
            self.faults.join(","),
            self.horizon_secs,
            self.max_clients
        );
        cmd
    }
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

fn main() -> ExitCode {
    let cli = Cli::parse();
    let jobs = cli
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from));
    match run_command(&cli, jobs) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::from(2)
        }
    }
}

fn run_command(cli: &Cli, jobs: usize) -> Result<ExitCode, Box<dyn std::error::Error>> {
    match &cli.command {
        Command::Scenario {
            names,
            seeds,
            strategy,
        } => {
            let chosen: Vec<&'static scenario::Scenario> = if names.is_empty() {
                SCENARIOS.iter().collect()
            } else {
                names
                    .iter()
                    .map(|n| scenario::find(n).ok_or_else(|| format!("no scenario {n:?}")))
                    .collect::<Result<_, _>>()?
            };
            let strategies = if strategy.is_empty() {
                Strategy::ALL.to_vec()
            } else {
                strategy.clone()
            };
            let work: Vec<(&'static scenario::Scenario, Strategy)> = chosen
                .iter()
                .flat_map(|sc| strategies.iter().map(move |s| (*sc, *s)))
                .collect();
            let bar = progress(work.len() as u64, "scenarios");
            let cells = parallel::map(
                &work,
                jobs,
                |(sc, s)| scenario::run_cell(sc, *s, *seeds),
                || bar.inc(1),
            );
            bar.finish();
            let cells = cells.into_iter().collect::<Result<Vec<_>, _>>()?;
            let md = report::verdict_table(&cells, *seeds);
            println!("{md}");
            let a = report::write_text(&cli.out, "sim-scenarios.md", &md)?;
            let b = report::write_json(&cli.out, "sim-scenarios.json", &cells)?;
            println!("wrote {} and {}", a.display(), b.display());
            let unmet: Vec<String> = cells
                .iter()
                .filter(|c| !c.met)
                .map(|c| format!("{} × {}", c.scenario, c.strategy.name()))
                .collect();
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
            options,
        } => {
            let opts = options.options()?;
            let items: Vec<u64> = (*start..start + seeds).collect();
            let bar = progress(*seeds, "explore");
            let started = Instant::now();
            let outcomes = parallel::map(
                &items,
                jobs,
                |&seed| explore::explore_seed(seed, &opts),
                || bar.inc(1),
            );
            bar.finish();
            let mut summary = ExploreSummary {
                start: *start,
                seeds: *seeds,
                options: opts,
                verdicts: [0; 4],
                failures: Vec::new(),
                wall_secs: started.elapsed().as_secs_f64(),
            };
            for outcome in outcomes {
                let (verdict, failure) = outcome?;
                summary.verdicts[verdict as usize] += 1;
                summary.failures.extend(failure);
            }
            let md = report::explore_markdown(&summary, &|seed| options.replay_command(seed));
            println!("{md}");
            let a = report::write_text(&cli.out, "sim-explore.md", &md)?;
            let b = report::write_json(&cli.out, "sim-explore.json", &summary)?;
            println!("wrote {} and {}", a.display(), b.display());
            for f in &summary.failures {
                let p = report::write_json(
                    &cli.out.join("sim-failures"),
                    &format!("seed-{}.json", f.seed),
                    &f.shrunk,
                )?;
                println!(
                    "shrunk failure of seed {} written to {} (replay: cargo run --release -p leasehold-sim -- replay --spec {})",
                    f.seed,
                    p.display(),
                    p.display()
                );
            }
            // Known limitations (a failure its catalogued scenario expects, under the fault
            // mix that scenario names) are reported but do not fail the run.
            let unexpected = summary.unexpected().count();
            if unexpected > 0 {
                eprintln!("{unexpected} unexpected failure(s)");
                Ok(ExitCode::FAILURE)
            } else {
                Ok(ExitCode::SUCCESS)
            }
        }
        Command::Replay {
            seed,
            spec,
            options,
        } => {
            let mut spec: RunSpec = match (seed, spec) {
                (_, Some(path)) => serde_json::from_str(&std::fs::read_to_string(path)?)?,
                (Some(seed), None) => explore::swarm_spec(*seed, &options.options()?),
                (None, None) => return Err("give a SEED or --spec FILE".into()),
            };
            spec.trace = true;
            let (result, failure) = explore::run_and_classify(&spec)?;
            let name = format!("sim-replay-{}.trace", spec.seed);
            let path = report::write_text(&cli.out, &name, &result.trace)?;
            println!("seed {}: {} ({:?})", spec.seed, result.verdict(), failure);
            for d in explore::details(&result) {
                println!("  {d}");
            }
            println!("faults: {}", serde_json::to_string(&spec.faults)?);
            println!(
                "trace ({} bytes) written to {}",
                result.trace.len(),
                path.display()
            );
            Ok(if failure.is_some() {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            })
        }
        Command::Bench {
            seeds,
            virtual_secs,
        } => {
            let bar = progress(*seeds, "bench");
            let r = bench::bench(*seeds, Duration::from_secs(*virtual_secs), jobs, || {
                bar.inc(1)
            })?;
            bar.finish();
            let md = bench::markdown(&r);
            println!("{md}");
            let a = report::write_text(&cli.out, "sim-bench.md", &md)?;
            let b = report::write_json(&cli.out, "sim-bench.json", &r)?;
            println!("wrote {} and {}", a.display(), b.display());
            Ok(ExitCode::SUCCESS)
        }
    }
}
