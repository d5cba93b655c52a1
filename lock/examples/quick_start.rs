//! Quick start: connect, take a lock, pass its fencing token on, unlock.
//!
//! Run against a local redis-server (7.0+):
//! `cargo run -p leasehold --example quick_start [-- redis://127.0.0.1:6379]`
//! (or set `LEASEHOLD_URL`).

#[path = "support/mod.rs"]
mod support;

use std::process::ExitCode;
use std::time::Duration;

use leasehold::{Client, Error};

use support::Result;

/// Where Redis is when neither an argument nor `LEASEHOLD_URL` says otherwise.
const DEFAULT_URL: &str = "redis://127.0.0.1:6379";

/// How long to wait for the lock before giving up (nobody else should hold it).
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(2);

fn main() -> ExitCode {
    support::run("quick_start", &[DEFAULT_URL], quick_start)
}

async fn quick_start(urls: Vec<String>) -> Result<()> {
    let url = urls[0].clone();
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
