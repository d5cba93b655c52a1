//! `leasehold`: look at and, in an emergency, clear Leasehold locks on a live Redis.
//!
//! Built with the `cli` feature (`cargo install --path lock --features cli`). Everything
//! but `release` only reads. Exit codes: 0 success, 1 runtime failure (the message names
//! the server), 2 usage error (including a lock name the library would reject).

mod error;
mod inspect;
mod layout;
mod list;
mod release;
mod target;
mod watch;

use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};

use crate::error::CliError;
use crate::layout::Family;
use crate::target::TargetArgs;

/// Default `watch` period: fast enough to follow a hand-off, one cheap read per second.
const DEFAULT_WATCH_INTERVAL: &str = "1s";

/// Inspect, list, watch and force-release Leasehold locks.
#[derive(Debug, Parser)]
#[command(name = "leasehold", version)]
struct Cli {
    #[command(flatten)]
    target: TargetArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Show a lock: holder and holds, lease left, last fencing token, fair queue with
    /// deadlines; also the read-write lock and semaphore of that name when they exist.
    Inspect {
        /// The lock name, as passed to `client.mutex(name)`.
        name: String,
        /// `text` for people, `json` for scripts.
        #[arg(long, value_enum, default_value_t = inspect::Output::Text)]
        output: inspect::Output,
    },
    /// List lock names that have keys on the server (SCAN, never KEYS).
    List {
        /// Glob on the lock name (`*`, `?`, `[abc]`), e.g. `orders:*`.
        #[arg(default_value = "*")]
        pattern: String,
        /// SCAN page-size hint: larger means fewer round trips, each a little longer.
        #[arg(long, default_value_t = list::DEFAULT_SCAN_COUNT)]
        count: u32,
    },
    /// Print `inspect` repeatedly until Ctrl-C (or `--times`).
    Watch {
        /// The lock name.
        name: String,
        /// Time between rounds (e.g. `500ms`, `2s`).
        #[arg(long, default_value = DEFAULT_WATCH_INTERVAL, value_parser = parse_duration)]
        interval: Duration,
        /// Stop after this many rounds.
        #[arg(long)]
        times: Option<u64>,
    },
    /// Delete a lock's holders and waiters (after showing them and asking for y/N).
    ///
    /// Removes the lock hash, the fair queue and the waiters hash of the chosen family.
    /// The fence key is kept on purpose: the next holder's token is max(last + 1, server
    /// time), so keeping the last token guarantees the new token is higher than the evicted
    /// holder's, and a resource that rejects stale tokens keeps refusing that holder's late
    /// writes should it still be alive. Only use this when the holder is known dead: a
    /// living holder loses its lock at its next renewal, not at once.
    Release {
        /// Required: acknowledges that this breaks mutual exclusion for a live holder.
        #[arg(long, required = true)]
        force: bool,
        /// Do not ask for confirmation on stdin.
        #[arg(long, short)]
        yes: bool,
        /// Which lock family of the name to release.
        #[arg(long, value_enum, default_value_t = Family::Mutex)]
        kind: Family,
        /// The lock name.
        name: String,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => return fail(&CliError::Io(err)),
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => fail(&err),
    }
}

async fn run(cli: Cli) -> Result<(), CliError> {
    let target = &cli.target;
    match cli.command {
        Command::Inspect { name, output } => inspect::run(target, &name, output).await,
        Command::List { pattern, count } => list::run(target, &pattern, count).await,
        Command::Watch {
            name,
            interval,
            times,
        } => watch::run(target, &name, interval, times).await,
        Command::Release {
            force: _,
            yes,
            kind,
            name,
        } => release::run(target, &name, kind, yes).await,
    }
}

fn fail(err: &CliError) -> ExitCode {
    eprintln!("error: {err}");
    err.exit_code()
}

/// Parses `250ms`, `2s`, `1m` or a bare number of seconds.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration like 500ms or 2s"))?;
    let seconds = match unit {
        "ms" => value / 1000.0,
        "" | "s" => value,
        "m" => value * 60.0,
        _ => return Err(format!("unknown unit {unit:?} (use ms, s or m)")),
    };
    Duration::try_from_secs_f64(seconds)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| format!("{text:?} must be a positive duration"))
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn parses_durations() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("2"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("1m"), Ok(Duration::from_secs(60)));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("fast").is_err());
    }
}
