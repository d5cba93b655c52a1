//! RedLock over five independent masters: a lock counts only once a majority (3 of 5)
//! granted it within its validity, so it survives the loss of any two masters.
//!
//! Pass the five URLs as arguments or comma-separated in `LEASEHOLD_URLS`; the default is
//! five local servers on ports 6379..=6383, e.g. started with
//! `for p in 6379 6380 6381 6382 6383; do redis-server --port $p --daemonize yes; done`.
//!
//! `cargo run -p leasehold --example redlock_five_masters [-- URL URL URL URL URL]`

#[path = "support/mod.rs"]
mod support;

use std::process::ExitCode;

use leasehold::{Client, Error, RedLock};

use support::Result;

/// Default masters: five local redis-servers on consecutive ports.
const DEFAULT_URLS: [&str; 5] = [
    "redis://127.0.0.1:6379",
    "redis://127.0.0.1:6380",
    "redis://127.0.0.1:6381",
    "redis://127.0.0.1:6382",
    "redis://127.0.0.1:6383",
];

fn main() -> ExitCode {
    support::run("redlock_five_masters", &DEFAULT_URLS, redlock)
}

async fn redlock(urls: Vec<String>) -> Result<()> {
    let name = "leasehold-example:redlock";

    // One client per master: the masters are independent, not replicas of each other.
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    for url in &urls {
        ours.push(Client::connect(url).await?);
        theirs.push(Client::connect(url).await?);
    }
    let lock = RedLock::new(ours, name);
    let guard = lock.lock().await?;
    println!(
        "locked {name:?} on {} of {} masters (quorum {}), fencing token {}",
        guard.granted(),
        urls.len(),
        lock.quorum(),
        guard.fencing_token()
    );
    if guard.granted() < lock.quorum() {
        return Err("the guard reports fewer grants than the quorum".into());
    }

    // Another party cannot gather a quorum while the lock is held.
    match RedLock::new(theirs.clone(), name).try_lock().await {
        Err(Error::WouldBlock { .. }) => println!("a second party is refused while it is held"),
        Ok(_) => return Err("a second party got the lock while it was held".into()),
        Err(err) => return Err(err.into()),
    }

    guard.unlock().await?;
    let next = RedLock::new(theirs, name).try_lock().await?;
    println!(
        "after unlock the second party holds it, token {} (higher)",
        next.fencing_token()
    );
    next.unlock().await?;
    Ok(())
}
