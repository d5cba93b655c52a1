//! The history of one real-fault run, in the simulator's vocabulary ([`HistEvent`]), stamped
//! by one monotonic clock shared by every client of the run.
//!
//! Invariant: events are appended in stamp order (the stamp is taken under the lock), so the
//! simulator's checker judges the real timeline exactly as it judges a virtual one.

use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use leasehold_sim::history::{HistEvent, HistKind};
use leasehold_sim::net::ProcId;

/// Collects the observations of every client and of the protected resource.
#[derive(Debug)]
pub struct RunHistory {
    start: Instant,
    events: Mutex<Vec<HistEvent>>,
}

impl Default for RunHistory {
    fn default() -> Self {
        Self::new()
    }
}

impl RunHistory {
    /// An empty history whose time zero is now.
    pub fn new() -> Self {
        Self {
            start: Instant::now(),
            events: Mutex::new(Vec::new()),
        }
    }

    /// Nanoseconds since the run started.
    pub fn now_ns(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Appends what `proc` observed about `lock` now; returns the stamp.
    pub fn record(&self, proc: ProcId, lock: &str, kind: HistKind) -> u64 {
        // A panic while holding this lock cannot leave a half-pushed event behind, so a
        // poisoned mutex still guards a consistent vector.
        let mut events = self.events.lock().unwrap_or_else(PoisonError::into_inner);
        let at = self.now_ns();
        tracing::trace!(at_ms = at / 1_000_000, proc, ?kind, "history");
        events.push(HistEvent {
            at,
            proc,
            incarnation: 0,
            lock: lock.to_owned(),
            kind,
        });
        at
    }

    /// A copy of the history so far, in time order.
    pub fn events(&self) -> Vec<HistEvent> {
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// A stamp (or a span of stamps) in ns as the milliseconds the reports show.
pub fn ms_from_ns(ns: u64) -> f64 {
    ns as f64 / 1e6
}
