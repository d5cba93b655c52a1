//! A simulated client's main task: the production `leasehold` client in a lock loop.
//!
//! Invariant: clients use only the public `leasehold` API over the simulator's seams
//! (`Client::builder().backend(..).runtime(..)`, see [`crate::family`]), and record what
//! they *believe* — holding from `lock()` returning a guard until they call `unlock()` or
//! observe `lost()` — so the checker judges the client's beliefs against true time.

use std::sync::Arc;
use std::time::Duration;

use futures::future::{Either, select};

use crate::family::Locker;
use crate::history::HistKind;
use crate::process::ProcessCtx;
use crate::workload::Workload;
use crate::world::ProcessMain;

/// The process main that runs `work`'s lock loop (again after every restart).
pub fn process_main(work: Workload) -> ProcessMain {
    Arc::new(move |ctx: ProcessCtx| Box::pin(run_client(work, ctx)))
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
