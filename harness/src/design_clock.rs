//! The clock a classic design's client reads on real Redis: the machine's wall clock, as the
//! clients of those designs' descriptions read theirs (`setnx-getset` stores its holder's
//! expiry in the key, `zset-queue` scores its line by its waiters' clocks, and every client
//! compares with what others stored).
//!
//! Invariant: every design client of a run, in the harness's process or a worker process
//! of its own, reads the same wall clock, so their stored times are comparable as the
//! simulator's process clocks are (one virtual time, each process's own skew on top). A
//! clock per client counting from its own creation (`leasehold`'s `TokioClock`) would skew
//! the clients by their start-up order, a fault no row names.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::future::BoxFuture;
use leasehold::runtime::{Clock, Runtime};

/// The wall clock: time since the Unix epoch, timers on tokio's.
#[derive(Debug, Clone, Copy, Default)]
struct WallClock;

impl Clock for WallClock {
    fn now(&self) -> Duration {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
    }

    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        Box::pin(tokio::time::sleep(duration))
    }
}

/// The seams of a design's client: tokio's spawner and randomness, and the wall clock.
/// Must be called from inside a tokio runtime, as [`Runtime::tokio`].
pub fn design_runtime() -> Runtime {
    Runtime {
        clock: Arc::new(WallClock),
        ..Runtime::tokio()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn two_design_clients_read_one_clock() {
        let (a, b) = (design_runtime(), design_runtime());
        tokio::time::sleep(Duration::from_millis(20)).await;
        let c = design_runtime();
        let (ta, tc) = (a.clock.now(), c.clock.now());
        // A clock counting from its creation would put `a` 20 ms ahead of `c`.
        assert!(tc >= ta, "{ta:?} {tc:?}");
        assert!(b.clock.now() >= ta);
        assert!(
            ta > Duration::from_secs(1_600_000_000),
            "{ta:?} reads the epoch"
        );
    }
}
