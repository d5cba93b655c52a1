//! Rate limiting with a semaphore: at most N calls to a fragile service at once, across
//! every process that shares the semaphore's name.
//!
//! Each permit is a lease of its own, so a crashed caller's permit comes back when its
//! lease ends. Twelve calls compete for three permits; the example counts how many run at
//! the same moment and checks the limit held (and was reached).
//!
//! `cargo run -p leasehold --example semaphore_rate_limit [-- redis://127.0.0.1:6379]`

#[path = "support/mod.rs"]
mod support;

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use leasehold::Client;

use support::Result;

/// Where Redis is when neither an argument nor `LEASEHOLD_URL` says otherwise.
const DEFAULT_URL: &str = "redis://127.0.0.1:6379";

/// Concurrent calls the service tolerates.
const PERMITS: u32 = 3;

/// Calls to make.
const CALLS: usize = 12;

/// Duration of one call to the service.
const CALL: Duration = Duration::from_millis(100);

/// Bound on waiting for a permit: all calls are through in about half a second.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);

/// Clients sharing the semaphore (as separate processes would).
const CLIENTS: usize = 3;

fn main() -> ExitCode {
    support::run("semaphore_rate_limit", &[DEFAULT_URL], semaphore_rate_limit)
}

async fn semaphore_rate_limit(urls: Vec<String>) -> Result<()> {
    let url = urls[0].clone();
    let name = "leasehold-example:rate-limit";
    let mut clients = Vec::new();
    for _ in 0..CLIENTS {
        clients.push(Client::connect(&url).await?);
    }

    let running = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let mut calls = Vec::new();
    for call in 0..CALLS {
        let semaphore = clients[call % CLIENTS].semaphore(name, PERMITS);
        let (running, peak) = (Arc::clone(&running), Arc::clone(&peak));
        calls.push(tokio::spawn(async move {
            let permit = semaphore.acquire_within(ACQUIRE_TIMEOUT).await?;
            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
            peak.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(CALL).await; // the rate-limited call
            running.fetch_sub(1, Ordering::SeqCst);
            permit.release().await
        }));
    }
    for call in calls {
        call.await??;
    }

    let peak = peak.load(Ordering::SeqCst);
    println!("{CALLS} calls through {PERMITS} permits: at most {peak} ran at once");
    if peak > PERMITS as usize {
        return Err(format!("{peak} calls ran at once, above the {PERMITS} permits").into());
    }
    if peak < PERMITS as usize {
        return Err(format!("only {peak} calls ever ran at once: permits went unused").into());
    }
    Ok(())
}
