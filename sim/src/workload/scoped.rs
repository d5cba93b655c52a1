//! Scoped use of the mutex (`Mutex::run`): the client's work is the hold. The library
//! acquires, runs the work while it watches the lease, and releases; the work finishes
//! inside its lease, outlives it (with the watchdog off, or when a fault keeps the
//! renewals from landing, the library drops it at its next await point and answers
//! `LeaseLost`), or panics (the guard is dropped while the panic unwinds, and its release
//! goes out in the background).
//!
//! Invariant: the belief recorded is the work's: it starts when the library hands the work
//! its guard and ends when the work returns, panics, or is dropped for a lost lease
//! (recorded as lost, at the drop), so the checker judges what the work did under the
//! lease, not what the caller was told afterwards.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::FutureExt;
use leasehold::Guard;

use crate::workload::Workload;
use crate::workload::family::{Locker, mutex_claim};
use crate::world::history::{Access, HistKind};
use crate::world::process::ProcessCtx;

/// How one scoped work ends, as drawn.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// It returns after the hold time.
    Finish,
    /// It works for three leases before it returns.
    Outlive,
    /// It panics halfway through the hold time.
    Panic,
}

/// The work's belief: recorded lost when dropped before it ended (the library dropped the
/// work for a lost lease).
struct Belief<'a> {
    ctx: &'a ProcessCtx,
    name: &'a str,
    ended: bool,
}

impl Belief<'_> {
    /// The work stopped acting under the lock.
    fn end(&mut self) {
        self.ended = true;
        self.ctx.recorder.record(self.name, HistKind::Released);
    }
}

impl Drop for Belief<'_> {
    fn drop(&mut self) {
        if !self.ended {
            self.ctx.recorder.record(self.name, HistKind::Lost);
        }
    }
}

/// One scoped acquire of mutex `name` (a single-node mutex run): `Mutex::run` with work
/// that writes to the fenced resource at its start and end and ends as drawn.
pub async fn run_scoped(
    locker: &Locker,
    name: &str,
    work: &Workload,
    ctx: &ProcessCtx,
    hold: Duration,
) {
    let Some(mutex) = locker.mutex(name, work) else {
        return;
    };
    let ending = match ctx.runtime.entropy.next_u64() % 3 {
        0 => Ending::Finish,
        1 => Ending::Outlive,
        _ => Ending::Panic,
    };
    let granted = AtomicBool::new(false);
    let scoped = mutex.run(async |guard: &Guard| {
        granted.store(true, Ordering::Relaxed);
        let token = guard.fencing_token().get();
        let claim = mutex_claim(name, guard);
        ctx.recorder.acquired(name, token, Access::Exclusive, claim);
        let mut belief = Belief {
            ctx,
            name,
            ended: false,
        };
        drop(ctx.resource.write(name, token));
        let clock = &ctx.runtime.clock;
        match ending {
            Ending::Finish => clock.sleep(hold).await,
            Ending::Outlive => clock.sleep(work.ttl * 3).await,
            Ending::Panic => {
                clock.sleep(hold / 2).await;
                belief.end();
                // Unwinds without the panic hook's message: the run's log stays readable.
                std::panic::resume_unwind(Box::new("the scoped work panicked (drawn)"));
            }
        }
        let acked = ctx.resource.write(name, token);
        belief.end();
        acked.await;
    });
    let outcome = AssertUnwindSafe(scoped).catch_unwind().await;
    if let Ok(Err(err)) = outcome
        && !granted.load(Ordering::Relaxed)
    {
        let error = err.to_string();
        ctx.recorder.record(name, HistKind::AcquireFailed { error });
    }
}
