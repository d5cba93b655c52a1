//! The history of one real-fault run, in the simulator's vocabulary ([`HistEvent`]), stamped
//! by one monotonic clock shared by every client of the run.
//!
//! Invariant: [`RunHistory::events`] returns the events in stamp order (a worker process's
//! observations arrive after their stamp; the sort is stable, so each process keeps its own
//! order), so the simulator's checker judges the real timeline exactly as it judges a
//! virtual one.

use std::sync::{Mutex, PoisonError};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use leasehold_sim::world::history::{HistEvent, HistKind};
use leasehold_sim::world::net::ProcId;

/// Collects the observations of every client and of the protected resource.
#[derive(Debug)]
pub struct RunHistory {
    start: Instant,
    /// The wall-clock time of `start` (ns since the Unix epoch), to place a worker
    /// process's stamps.
    start_unix_ns: u64,
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
        Self::starting_at(Instant::now())
    }

    /// An empty history whose time zero is `start` (tries run side by side share theirs).
    pub fn starting_at(start: Instant) -> Self {
        let unix_now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        let since_start = u64::try_from(start.elapsed().as_nanos()).unwrap_or(0);
        Self {
            start,
            start_unix_ns: unix_now.saturating_sub(since_start),
            events: Mutex::new(Vec::new()),
        }
    }

    /// The run time (ns) of a wall-clock stamp (ns since the Unix epoch).
    pub fn run_ns_of_unix(&self, unix_ns: u64) -> u64 {
        unix_ns.saturating_sub(self.start_unix_ns)
    }

    /// Appends what `proc` observed about `lock` at run time `at` (a stamp taken elsewhere).
    pub fn record_at(&self, proc: ProcId, lock: &str, kind: HistKind, at: u64) {
        let mut events = self.events.lock().unwrap_or_else(PoisonError::into_inner);
        events.push(HistEvent {
            at,
            proc,
            incarnation: 0,
            lock: lock.to_owned(),
            kind,
        });
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
        let mut events = self
            .events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        events.sort_by_key(|e| e.at);
        events
    }
}

/// A stamp (or a span of stamps) in ns as the milliseconds the reports show.
pub fn ms_from_ns(ns: u64) -> f64 {
    ns as f64 / 1e6
}
