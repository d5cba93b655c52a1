//! A simulated client's main task: the production `leasehold` client in a lock loop.
//!
//! Invariant: clients use only the public `leasehold` API over the simulator's seams
//! (`Client::builder().backend(..).runtime(..)`, see [`crate::workload::family`]), and record what
//! they *believe* — holding from `lock()` returning a guard until they call `unlock()` or
//! observe `lost()` — so the checker judges the client's beliefs against true time.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use futures::future::{Either, select};

use crate::workload::family::{Held, Locker};
use crate::workload::scoped::run_scoped;
use crate::workload::{Reentry, Workload};
use crate::world::ProcessMain;
use crate::world::history::{Access, HistKind};
use crate::world::process::ProcessCtx;

/// The process main that runs `work`'s lock loop (again after every restart).
pub fn process_main(work: Workload) -> ProcessMain {
    Arc::new(move |ctx: ProcessCtx| Box::pin(run_client(work, ctx)))
}

/// Lock names used by the workload.
pub fn lock_name(index: usize) -> String {
    format!("res{index}")
}

/// A duration uniform in `[lo, hi]`, drawn from the process's entropy.
pub fn uniform(ctx: &ProcessCtx, (lo, hi): (Duration, Duration)) -> Duration {
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
    let mut done = 0u64;
    while work.ops.is_none_or(|n| done < n) {
        done += 1;
        let name = next_round(&work, &ctx).await;
        if chance(&ctx, work.run_percent) {
            run_scoped(&locker, &name, &work, &ctx, uniform(&ctx, work.hold)).await;
            continue;
        }
        let acquired = match work.reentry {
            Some(Reentry::Sibling { ttl }) => {
                match acquire_with_sibling(&locker, &name, &work, &ctx, ttl).await {
                    Ok(Some(holds)) => Some(Ok(holds)),
                    Ok(None) => continue,
                    Err(err) => Some(Err(err)),
                }
            }
            _ => acquire(&locker, &name, &work, &ctx).await.map(|got| {
                got.map(|held| {
                    record_acquired(&ctx, &name, &held);
                    (held, None)
                })
            }),
        };
        let (held, sibling) = match acquired {
            Some(Ok(held)) => held,
            Some(Err(err)) => {
                ctx.recorder.record(
                    &name,
                    HistKind::AcquireFailed {
                        error: err.to_string(),
                    },
                );
                continue;
            }
            None => {
                ctx.recorder.record(
                    &name,
                    HistKind::AcquireFailed {
                        error: "cancelled: the acquire future was dropped mid-flight".to_owned(),
                    },
                );
                continue;
            }
        };
        // A writer may turn its hold into a read hold (`WriteGuard::downgrade`): its write
        // belief ends as the downgrade is asked for, and the read one starts when the
        // downgrade returns it, so the history never claims more than the client holds.
        let held = match held {
            Held::Write(write) if chance(&ctx, work.downgrade_percent) => {
                ctx.recorder.record(&name, HistKind::Released);
                ctx.recorder.record(&name, HistKind::WaitStart);
                match write.downgrade().await {
                    Ok(read) => {
                        let held = Held::Read(read);
                        record_acquired(&ctx, &name, &held);
                        held
                    }
                    Err(err) => {
                        let error = format!("downgrade: {err}");
                        ctx.recorder
                            .record(&name, HistKind::AcquireFailed { error });
                        continue;
                    }
                }
            }
            held => held,
        };
        let token = held.token();
        if let Some(Reentry::Nested {
            ttl,
            work: inner_work,
        }) = work.reentry
        {
            // The re-entries and the inner holds' releases are raced against the outer
            // hold's lost signal, as an application holding a lock watches it: if it
            // fires first, the belief ends there and whatever is in flight is dropped (an
            // inner hold whose release is dropped ends with its own lease). Each level
            // re-enters inside the last; the innermost one granted is kept for the work,
            // and they are released innermost first, as nested calls unwind.
            let reentry = async {
                let mut inner = Vec::with_capacity(usize::from(work.reentry_depth));
                // A reader may first ask to write as its owner: an upgrade, which the
                // library refuses (`UpgradeRefused`, recorded as nothing, as a refused
                // re-entry is). A write hold granted instead is kept as a re-entry, for the
                // checker to judge beside the owner's live read.
                if held.access() == Access::Shared
                    && ctx.runtime.entropy.next_u64() % 100 < u64::from(work.upgrade_percent)
                    && let Ok(hold) = locker
                        .lock_again(&name, &work, ttl, false, Access::Exclusive)
                        .await
                {
                    record_reentered(&ctx, &name, &hold);
                    inner.push(hold);
                }
                for _ in 0..work.reentry_depth {
                    let Ok(hold) = locker
                        .lock_again(&name, &work, ttl, false, held.access())
                        .await
                    else {
                        break;
                    };
                    record_reentered(&ctx, &name, &hold);
                    inner.push(hold);
                }
                if !inner.is_empty() && !inner_work.is_zero() {
                    ctx.runtime.clock.sleep(inner_work).await;
                }
                while let Some(hold) = inner.pop() {
                    let _ = hold.unlock().await;
                }
            };
            if unless_lost(&held, reentry).await.is_none() {
                ctx.recorder.record(&name, HistKind::Lost);
                let _ = held.unlock().await;
                continue;
            }
        }
        // A holder of a permit may resize the semaphore now, with permits held (its own
        // included), as an operator's resize lands on a busy semaphore; it watches its
        // lease meanwhile, as it does while re-entering.
        if matches!(held, Held::Permit(..))
            && unless_lost(&held, locker.resize(&name, &work, &ctx))
                .await
                .is_none()
        {
            ctx.recorder.record(&name, HistKind::Lost);
            let _ = held.unlock().await;
            continue;
        }
        // The first write goes out at once; its acknowledgement is not awaited, so a lost
        // reply never keeps the client from watching its lease.
        if held.writes() {
            drop(ctx.resource.write(&name, token));
        }
        // Work until the hold time passes or the lease is reported lost. The hold is polled
        // first: a process waking from a pause finishes its work before it looks at the
        // lost signal, like an application that does not re-check before every write.
        let finished = hold_for(&held, uniform(&ctx, work.hold), &work, &ctx).await;
        if finished {
            // The hold ends, as far as the client's actions go, when its last write is
            // sent; waiting for the resource's acknowledgement is not acting under the lock
            // (the fenced resource judges the write on arrival).
            if held.writes() {
                let acked = ctx.resource.write(&name, token);
                ctx.recorder.record(&name, HistKind::Released);
                acked.await;
            } else {
                ctx.recorder.record(&name, HistKind::Released);
            }
        } else {
            ctx.recorder.record(&name, HistKind::Lost);
        }
        // The outcome (LeaseLost/NotHeld/Ambiguous) is the client's business; the checker
        // judges the history.
        if let Some(sibling) = sibling {
            let _ = sibling.unlock().await;
        }
        let _ = held.unlock().await;
    }
}

/// Starts a round of `work`'s lock loop, whichever lock it runs: thinks for the think
/// time, picks the lock name and records that the client starts waiting for it.
pub async fn next_round(work: &Workload, ctx: &ProcessCtx) -> String {
    ctx.runtime.clock.sleep(uniform(ctx, work.think)).await;
    let name = lock_name(ctx.runtime.entropy.next_u64() as usize % work.locks.max(1));
    ctx.recorder.record(&name, HistKind::WaitStart);
    name
}

/// Whether a draw of `percent` percent comes up (no draw at all for 0, so workloads
/// without the option keep their random streams).
fn chance(ctx: &ProcessCtx, percent: u8) -> bool {
    percent > 0 && ctx.runtime.entropy.next_u64() % 100 < u64::from(percent)
}

/// One acquire as `work` says: waiting or in one attempt (`try_percent`), and, for a
/// cancelled one (`cancel`), dropped after a random delay unless it finished first
/// (`None`): the library must release whatever the dropped acquire was granted.
async fn acquire(
    locker: &Locker,
    name: &str,
    work: &Workload,
    ctx: &ProcessCtx,
) -> Option<leasehold::Result<Held>> {
    let once = chance(ctx, work.try_percent);
    let attempt = Box::pin(locker.lock(name, work, ctx, once));
    let Some(cancel) = work.cancel.filter(|c| chance(ctx, c.percent)) else {
        return Some(attempt.await);
    };
    let delay = uniform(ctx, (Duration::ZERO, cancel.within));
    match select(attempt, ctx.runtime.clock.sleep(delay)).await {
        Either::Left((got, _)) => Some(got),
        Either::Right(_) => None,
    }
}

/// Holds `held` for `hold` of the client's time, or until the lease is reported lost (or,
/// with an extending workload, an extension fails); whether the hold ran its course.
async fn hold_for(held: &Held, hold: Duration, work: &Workload, ctx: &ProcessCtx) -> bool {
    let clock = &ctx.runtime.clock;
    let step = if work.extend { work.ttl / 2 } else { hold };
    let mut left = hold;
    loop {
        let nap = left.min(step);
        if unless_lost(held, clock.sleep(nap)).await.is_none() {
            return false;
        }
        left = left.saturating_sub(nap);
        if left.is_zero() {
            return true;
        }
        // The lease may run out while the extension is in flight: lost() still ends the
        // belief then, as it would for an application awaiting extend() beside it.
        if !matches!(unless_lost(held, held.extend()).await, Some(Ok(()))) {
            return false;
        }
    }
}

/// `work`'s output, unless `held`'s lost signal fires first (`None`): an application
/// holding a lock watches that signal while it waits on anything else. `work` is polled
/// first, so a process waking from a pause finishes what it was doing before it looks.
async fn unless_lost<T>(held: &Held, work: impl Future<Output = T>) -> Option<T> {
    match select(pin!(work), pin!(held.lost())).await {
        Either::Left((out, _)) => Some(out),
        Either::Right(_) => None,
    }
}

/// Records that `held` was granted, with what the servers must show while it is believed.
fn record_acquired(ctx: &ProcessCtx, name: &str, held: &Held) {
    ctx.recorder
        .acquired(name, held.token(), held.access(), held.claim(name));
}

/// Records that `hold` re-entered the epoch the process holds, with its token and id.
fn record_reentered(ctx: &ProcessCtx, name: &str, hold: &Held) {
    let (token, hold) = (hold.token(), hold.hold_id());
    ctx.recorder
        .record(name, HistKind::Reentered { token, hold });
}

/// The main acquire and a sibling of the same owner, racing: the first grant is the
/// process's hold (recorded as acquired), and the second must re-enter its epoch (recorded
/// with its token, for the checker to compare). While the second waits, the process
/// watches the first one's lost signal, as an application holding a lock does: if it
/// fires, the belief ends there (recorded as lost), the second acquire is dropped and the
/// first released, and there is nothing to hold (`None`).
async fn acquire_with_sibling(
    locker: &Locker,
    name: &str,
    work: &Workload,
    ctx: &ProcessCtx,
    ttl: Duration,
) -> leasehold::Result<Option<(Held, Option<Held>)>> {
    let main = Box::pin(locker.lock(name, work, ctx, false));
    let sibling = Box::pin(locker.lock_again(name, work, ttl, true, Access::Exclusive));
    let (first, rest) = match select(main, sibling).await {
        Either::Left((first, rest)) => (first, Either::Right(rest)),
        Either::Right((first, rest)) => (first, Either::Left(rest)),
    };
    let Ok(first) = first else {
        let only = rest.await?;
        record_acquired(ctx, name, &only);
        return Ok(Some((only, None)));
    };
    record_acquired(ctx, name, &first);
    let Some(second) = unless_lost(&first, rest).await.map(Result::ok) else {
        ctx.recorder.record(name, HistKind::Lost);
        let _ = first.unlock().await;
        return Ok(None);
    };
    if let Some(second) = &second {
        record_reentered(ctx, name, second);
    }
    Ok(Some((first, second)))
}
