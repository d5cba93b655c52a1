//! Quick start: connect, take a lock, pass its fencing token on, unlock.
//!
//! Run against a local redis-server (7.0+):
//! `cargo run -p leasehold --example quick_start [-- redis://127.0.0.1:6379]`
//! (or set `LEASEHOLD_URL`).

use std::process::ExitCode;
use std::time::Duration;

use leasehold::{Client, Error};

/// Where Redis is when neither an argument nor `LEASEHOLD_URL` says otherwise.
const DEFAULT_URL: &str = "redis://127.0.0.1:6379";

/// How long to wait for the lock before giving up (nobody else should hold it).
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(2);

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => {
            println!("quick_start: OK");
            ExitCode::SUCCESS
        }
        Err(err) => {
            // The whole chain: "backend error" alone would hide "connection refused".
            let mut message = err.to_string();
            let mut source = err.source();
            while let Some(cause) = source {
                message = format!("{message}: {cause}");
                source = cause.source();
            }
            eprintln!("quick_start failed: {message}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<()> {
    let url = std::env::args()
        .nth(1)
        .or_else(|| std::env::var("LEASEHOLD_URL").ok())
        .unwrap_or_else(|| DEFAULT_URL.to_owned());
    let name = "leasehold-example:quick-start";

    let client = Client::connect(&url).await?;
    let guard = client.mutex(name).lock_within(ACQUIRE_TIMEOUT).await?;
    println!(
        "locked {name:?} on {url}; fencing token {} (send it with every write you protect)",
        guard.fencing_token()
    );

    // A second client (think: another process) is refused while the lease is held.
    let other = Client::connect(&url).await?;
    match other.mutex(name).try_lock().await {
        Err(Error::WouldBlock { .. }) => println!("a second client is refused while it is held"),
        Ok(_) => return Err("a second client got the lock while it was held".into()),
        Err(err) => return Err(err.into()),
    }

    // The watchdog renewed the lease in the background; unlocking frees it at once.
    guard.unlock().await?;
    let next = other.mutex(name).try_lock().await?;
    println!(
        "after unlock the second client holds it, with a higher token {}",
        next.fencing_token()
    );
    next.unlock().await?;
    Ok(())
}
