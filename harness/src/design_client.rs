//! A classic design's client on real Redis: the simulator's design code
//! ([`DesignLock`]) over one [`leasehold::RedisBackend`] per node or master, tokio's spawner
//! and randomness, and the machine's wall clock ([`design_runtime`]), as the
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
use leasehold::backend::Backend;
use leasehold::runtime::{Clock, Runtime};
use leasehold_sim::workload::designs::{Design, DesignLock, Lease, Which};

use crate::error::{Error, Result};

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

/// `design`'s client on the servers at `urls` (one node, or RedLock's masters), with its
/// own connections and `rt` (made by [`design_runtime`]); `name` names the lock in errors.
pub async fn connect(
    design: Design,
    lease: Lease,
    urls: &[String],
    rt: &Runtime,
    name: &str,
) -> Result<DesignLock> {
    let mut backends: Vec<Arc<dyn Backend>> = Vec::with_capacity(urls.len());
    for url in urls {
        let backend = leasehold::RedisBackend::connect(url)
            .await
            .map_err(|err| Error::redis(url, err))?;
        backends.push(Arc::new(backend));
    }
    DesignLock::new(Which::Builtin(design), lease, rt, &backends).map_err(|err| Error::Lock {
        name: name.to_owned(),
        reason: format!("{}: {err}", design.name()),
    })
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
