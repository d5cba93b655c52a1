//! A long job that stops as soon as its lock's lease is lost, with `Mutex::run`.
//!
//! The job is a batch of steps, each a write to the protected resource. First the job runs
//! with its watchdog renewing the lease: every step runs and `run` unlocks at the end.
//! Then it runs again with the watchdog off and a lease shorter than the job (a stand-in
//! for renewals that stop getting through): when the lease's local validity ends, `run`
//! drops the job's future at its next await point — no step starts after the lease is
//! gone — and returns `Error::LeaseLost`. (Had the job finished first, its value would
//! come back beside the unlock's finding, even one that found the lease gone.)
//!
//! `cargo run -p leasehold --example scoped_long_job [-- redis://127.0.0.1:6379]`

#[path = "support/mod.rs"]
mod support;

use std::process::ExitCode;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use leasehold::{Client, Error};

use support::Result;

/// Where Redis is when neither an argument nor `LEASEHOLD_URL` says otherwise.
const DEFAULT_URL: &str = "redis://127.0.0.1:6379";

/// Steps of the job, and how long each takes: 20 × 50 ms = 1 s in all.
const STEPS: u32 = 20;
const STEP: Duration = Duration::from_millis(50);

/// The second run's lease: shorter than the job, so it runs out part-way.
const SHORT_TTL: Duration = Duration::from_millis(400);

fn main() -> ExitCode {
    support::run("scoped_long_job", &[DEFAULT_URL], scoped_long_job)
}

/// The job: `STEPS` steps, counting each one done in `done`.
async fn job(done: &AtomicU32) -> u32 {
    for _ in 0..STEPS {
        tokio::time::sleep(STEP).await;
        done.fetch_add(1, Ordering::SeqCst);
    }
    STEPS
}

async fn scoped_long_job(urls: Vec<String>) -> Result<()> {
    let client = Client::connect(&urls[0]).await?;
    let name = "leasehold-example:scoped-job";

    let done = AtomicU32::new(0);
    let ran = client.mutex(name).run(async |_| job(&done).await).await?;
    // The job finished: its value is ours whatever the unlock found, and the unlock's
    // finding says whether the lease held to the end.
    ran.lease.into_unlock()?;
    println!(
        "with the watchdog: all {} steps ran under the lease, then run unlocked",
        ran.value
    );

    let done = AtomicU32::new(0);
    let outcome = client
        .mutex(name)
        .ttl(SHORT_TTL)
        .watchdog(false)
        .run(async |guard| {
            println!("second run holds token {}", guard.fencing_token());
            job(&done).await
        })
        .await;
    let ran = done.load(Ordering::SeqCst);
    match outcome {
        Err(Error::LeaseLost { name }) if ran < STEPS => {
            println!("lease on {name:?} lost after {ran} of {STEPS} steps: the job was stopped");
        }
        other => {
            return Err(format!("expected LeaseLost part-way, got {other:?} ({ran} steps)").into());
        }
    }
    // Nothing of the stopped job goes on in the background.
    tokio::time::sleep(STEP * 3).await;
    if done.load(Ordering::SeqCst) != ran {
        return Err("a step ran after the lease was lost".into());
    }
    // The dropped guard's release runs in the background; the lock is free again soon.
    client
        .mutex(name)
        .lock_within(SHORT_TTL * 5)
        .await?
        .unlock()
        .await?;
    Ok(())
}
