//! What the simulated clients do: the production `leasehold` client in a lock loop.
//!
//! Invariant: clients use only the public `leasehold` API over the simulator's seams
//! (`Client::builder().backend(..).runtime(..)`, see [`crate::family`]), and record what
//! they *believe* —
//! holding from `lock()` returning a guard until they call `unlock()` or observe `lost()`
//! — so the checker judges the client's beliefs against true time.

use std::sync::Arc;
use std::time::Duration;

use futures::future::{Either, select};
use leasehold::WaitStrategy;
use serde::{Deserialize, Serialize};

use crate::family::Locker;
use crate::history::HistKind;
use crate::process::ProcessCtx;
use crate::world::ProcessMain;

/// The lock algorithms under test.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, clap::ValueEnum,
)]
pub enum Strategy {
    /// Single node, jittered exponential backoff polling.
    Spin,
    /// Single node, wake on the release message.
    PubSub,
    /// Single node, FIFO queue with server-side hand-off.
    FairQueue,
    /// N independent masters with a quorum (`leasehold::RedLock`, one client per master).
    RedLock,
}

impl Strategy {
    /// Every strategy, in table order.
    pub const ALL: [Strategy; 4] = [Self::Spin, Self::PubSub, Self::FairQueue, Self::RedLock];

    /// The table name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Spin => "Spin",
            Self::PubSub => "PubSub",
            Self::FairQueue => "FairQueue",
            Self::RedLock => "RedLock",
        }
    }

    /// The single-node wait strategy (RedLock retries with its own random delay; each of
    /// its per-master clients keeps the default).
    pub(crate) fn wait(self) -> WaitStrategy {
        match self {
            Self::Spin => WaitStrategy::spin(),
            Self::FairQueue => WaitStrategy::fair_queue(),
            Self::PubSub | Self::RedLock => WaitStrategy::PubSub,
        }
    }
}

/// One client's behaviour.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Workload {
    /// Wait strategy.
    pub strategy: Strategy,
    /// Lease TTL.
    pub ttl: Duration,
    /// Whether the watchdog renews the lease.
    pub watchdog: bool,
    /// Hold time range (uniform), in true-ish time (the client's own clock).
    pub hold: (Duration, Duration),
    /// Pause between operations (uniform).
    pub think: (Duration, Duration),
    /// Give up waiting after this long (none: wait forever).
    pub acquire_timeout: Option<Duration>,
    /// Operations per client incarnation (none: until the horizon).
    pub ops: Option<u64>,
    /// Number of distinct lock names clients pick from.
    pub locks: usize,
}

impl Workload {
    /// A contended default: 1 s leases, 20-200 ms holds, short think times, one lock.
    pub fn contended(strategy: Strategy) -> Self {
        Self {
            strategy,
            ttl: Duration::from_secs(1),
            watchdog: true,
            hold: (Duration::from_millis(20), Duration::from_millis(200)),
            think: (Duration::from_millis(0), Duration::from_millis(50)),
            acquire_timeout: Some(Duration::from_secs(10)),
            ops: None,
            locks: 1,
        }
    }

    /// The process main for this workload.
    pub fn main(self) -> ProcessMain {
        Arc::new(move |ctx: ProcessCtx| Box::pin(run_client(self, ctx)))
    }
}

/// Lock names used by the workload.
pub fn lock_name(index: usize) -> String {
    format!("res{index}")
}

fn uniform(ctx: &ProcessCtx, (lo, hi): (Duration, Duration)) -> Duration {
    if hi <= lo {
        return lo;
    }
    lo + ctx.runtime.jitter(hi - lo)
}

async fn run_client(work: Workload, ctx: ProcessCtx) {
    let locker = match Locker::build(&work, &ctx) {
        Ok(locker) => locker,
        Err(err) => {
            tracing::warn!(proc = ctx.id, %err, "client build failed");
            return;
        }
    };
    let clock = Arc::clone(&ctx.runtime.clock);
    let mut done = 0u64;
    while work.ops.is_none_or(|n| done < n) {
        done += 1;
        clock.sleep(uniform(&ctx, work.think)).await;
        let name = lock_name(ctx.runtime.entropy.next_u64() as usize % work.locks.max(1));
        ctx.recorder.record(&name, HistKind::WaitStart);
        let held = match locker.lock(&name, &work, &ctx).await {
            Ok(held) => held,
            Err(err) => {
                ctx.recorder.record(
                    &name,
                    HistKind::AcquireFailed {
                        error: err.to_string(),
                    },
                );
                continue;
            }
        };
        let token = held.token();
        ctx.recorder.record(&name, HistKind::Acquired { token });
        // The first write goes out at once; its acknowledgement is not awaited, so a lost
        // reply never keeps the client from watching its lease.
        drop(ctx.resource.write(&name, token));
        // Work until the hold time passes or the lease is reported lost. The hold is polled
        // first: a process waking from a pause finishes its work before it looks at the
        // lost signal, like an application that does not re-check before every write.
        let hold = clock.sleep(uniform(&ctx, work.hold));
        let finished = matches!(select(hold, Box::pin(held.lost())).await, Either::Left(_));
        if finished {
            // The hold ends, as far as the client's actions go, when its last write is
            // sent; waiting for the resource's acknowledgement is not acting under the lock
            // (the fenced resource judges the write on arrival).
            let acked = ctx.resource.write(&name, token);
            ctx.recorder.record(&name, HistKind::Released);
            acked.await;
        } else {
            ctx.recorder.record(&name, HistKind::Lost);
        }
        // The outcome (LeaseLost/NotHeld/Ambiguous) is the client's business; the checker
        // judges the history.
        let _ = held.unlock().await;
    }
}
