//! A fair work queue: workers take turns on one lock in the order they arrived.
//!
//! With [`WaitStrategy::FairQueue`] a waiter joins a queue in Redis, and each release hands
//! the lock straight to the queue's head and wakes only that waiter: no thundering herd,
//! no barging, first come first served. Here one worker holds the lock while four more
//! line up one after another (before the next starts, `Mutex::inspect` shows the queue
//! in Redis one entry longer, so the arrival order is certain); they then run in exactly
//! that order.
//!
//! `cargo run -p leasehold --example fair_work_queue [-- redis://127.0.0.1:6379]`

#[path = "support/mod.rs"]
mod support;

use std::process::ExitCode;
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use leasehold::{Client, Mutex, WaitStrategy};

use support::Result;

/// Where Redis is when neither an argument nor `LEASEHOLD_URL` says otherwise.
const DEFAULT_URL: &str = "redis://127.0.0.1:6379";

/// Workers that queue behind the first holder.
const WAITING_WORKERS: usize = 4;

/// A queue entry expires this long after its waiter's last refresh (a crashed worker holds
/// up the line at most this long); live waiters refresh it several times per period.
const ENTRY_TIMEOUT: Duration = Duration::from_secs(2);

/// Bound on each wait: the whole line is through in well under a second.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);

/// How long each worker "works" while holding the lock.
const JOB: Duration = Duration::from_millis(50);

/// How often to look at the queue while waiting for a worker to join it, and for how long.
const QUEUE_POLL: Duration = Duration::from_millis(10);
const QUEUE_JOIN_LIMIT: Duration = Duration::from_secs(3);

fn main() -> ExitCode {
    support::run("fair_work_queue", &[DEFAULT_URL], fair_work_queue)
}

async fn fair_work_queue(urls: Vec<String>) -> Result<()> {
    let url = urls[0].clone();
    let name = "leasehold-example:work-queue";
    let fair = WaitStrategy::FairQueue {
        entry_timeout: ENTRY_TIMEOUT,
    };
    let first = Client::connect(&url).await?;
    let observer = first.mutex(name);
    let held = first.mutex(name).wait(fair).lock().await?;
    println!("worker 0 holds {name:?}; workers 1..={WAITING_WORKERS} line up");

    let order = Arc::new(StdMutex::new(Vec::new()));
    let mut workers = Vec::new();
    for worker in 1..=WAITING_WORKERS {
        // Each worker is its own client, as separate processes would be.
        let client = Client::connect(&url).await?;
        let mutex = client.mutex(name).wait(fair);
        let order = Arc::clone(&order);
        workers.push(tokio::spawn(async move {
            let guard = mutex.lock_within(ACQUIRE_TIMEOUT).await?;
            if let Ok(mut order) = order.lock() {
                order.push(worker);
            }
            println!("worker {worker} runs its job");
            tokio::time::sleep(JOB).await;
            guard.unlock().await?;
            Ok::<_, leasehold::Error>(client)
        }));
        wait_for_queue_length(&observer, worker).await?;
    }

    held.unlock().await?;
    for worker in workers {
        worker.await??;
    }
    let order = order.lock().map_err(|_| "a worker panicked")?.clone();
    let expected: Vec<usize> = (1..=WAITING_WORKERS).collect();
    if order != expected {
        return Err(format!("workers ran in order {order:?}, expected {expected:?}").into());
    }
    println!("workers ran in arrival order {order:?}");
    Ok(())
}

/// Waits until the lock's fair queue in Redis has `length` entries, read with
/// [`Mutex::inspect`] (which never changes the lock).
async fn wait_for_queue_length(mutex: &Mutex, length: usize) -> Result<()> {
    let deadline = tokio::time::Instant::now() + QUEUE_JOIN_LIMIT;
    loop {
        let queued = mutex.inspect().await?.queue.len();
        if queued >= length {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(format!("worker {length} did not join the queue").into());
        }
        tokio::time::sleep(QUEUE_POLL).await;
    }
}
