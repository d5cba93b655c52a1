//! What every example shares: where Redis is, and how a run's outcome is reported (the
//! whole error chain, so "cannot connect" is never reduced to a bare "backend error").

use std::future::Future;
use std::process::ExitCode;

/// An example's result: any error, sendable across tasks.
pub type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// The Redis URLs: the arguments, else `LEASEHOLD_URLS` (comma-separated) or
/// `LEASEHOLD_URL`, else `defaults`.
pub fn urls(defaults: &[&str]) -> Vec<String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if !args.is_empty() {
        return args;
    }
    match std::env::var("LEASEHOLD_URLS").or_else(|_| std::env::var("LEASEHOLD_URL")) {
        Ok(list) => list.split(',').map(|url| url.trim().to_owned()).collect(),
        Err(_) => defaults.iter().map(|url| (*url).to_owned()).collect(),
    }
}

/// Runs the example `name` on a fresh tokio runtime with its Redis URLs (see [`urls`]),
/// prints `NAME: OK` or the failure with its causes, and turns that into the exit code.
pub fn run<F, Fut>(name: &str, defaults: &[&str], example: F) -> ExitCode
where
    F: FnOnce(Vec<String>) -> Fut,
    Fut: Future<Output = Result<()>>,
{
    let outcome = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime.block_on(example(urls(defaults))),
        Err(err) => Err(err.into()),
    };
    match outcome {
        Ok(()) => {
            println!("{name}: OK");
            ExitCode::SUCCESS
        }
        Err(err) => {
            let mut message = err.to_string();
            let mut source = err.source();
            while let Some(cause) = source {
                message = format!("{message}: {cause}");
                source = cause.source();
            }
            eprintln!("{name} failed: {message}");
            ExitCode::FAILURE
        }
    }
}
