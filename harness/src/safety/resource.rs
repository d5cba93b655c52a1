//! The protected resource of a safety run: an in-process store that every holder writes to
//! with its fencing token.
//!
//! Invariant: in [`Fencing::Fenced`] mode a write is accepted only if its token is at least
//! the highest token accepted so far (a re-entrant holder keeps its token); in
//! [`Fencing::Unfenced`] mode everything is accepted and stale writes are merely counted —
//! the corruption an unfenced resource would suffer.

use std::sync::{Arc, Mutex, PoisonError};

use leasehold_sim::world::history::HistKind;
use leasehold_sim::world::net::ProcId;
use serde::Serialize;

use crate::safety::run_history::RunHistory;

/// Whether the resource checks fencing tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Fencing {
    /// Rejects tokens below the highest seen.
    Fenced,
    /// Accepts every write (a resource that ignores tokens).
    Unfenced,
}

/// What the resource has seen.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ResourceStats {
    /// Writes received.
    pub writes: u64,
    /// Writes accepted.
    pub accepted: u64,
    /// Writes with a token below the highest seen that were rejected (fenced mode).
    pub stale_rejected: u64,
    /// Writes with a token below the highest seen that were accepted (unfenced mode).
    pub stale_accepted: u64,
    /// Highest token seen.
    pub highest: u64,
}

/// A fenced (or deliberately unfenced) resource shared by every client of a run.
#[derive(Debug)]
pub struct Resource {
    fencing: Fencing,
    history: Arc<RunHistory>,
    stats: Mutex<ResourceStats>,
}

impl Resource {
    /// A fresh resource that records every write in `history`.
    pub fn new(fencing: Fencing, history: Arc<RunHistory>) -> Self {
        Self {
            fencing,
            history,
            stats: Mutex::new(ResourceStats::default()),
        }
    }

    /// `proc` writes under `lock` with `token`; returns whether the write was accepted.
    pub fn write(&self, proc: ProcId, lock: &str, token: u64) -> bool {
        // Judging and recording under one lock keeps the history's write order the
        // resource's order; the guarded counters are consistent even after a panic.
        let mut stats = self.stats.lock().unwrap_or_else(PoisonError::into_inner);
        let highest = stats.highest;
        let stale = token < highest;
        let accepted = match self.fencing {
            Fencing::Fenced => !stale,
            Fencing::Unfenced => true,
        };
        stats.writes += 1;
        if accepted {
            stats.accepted += 1;
            stats.highest = stats.highest.max(token);
        }
        match (stale, accepted) {
            (true, true) => stats.stale_accepted += 1,
            (true, false) => stats.stale_rejected += 1,
            _ => {}
        }
        self.history.record(
            proc,
            lock,
            HistKind::Write {
                token,
                highest,
                accepted,
            },
        );
        accepted
    }

    /// Counters so far.
    pub fn stats(&self) -> ResourceStats {
        *self.stats.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn fenced_rejects_stale_and_accepts_equal() {
        let r = Resource::new(Fencing::Fenced, Arc::new(RunHistory::new()));
        assert!(r.write(0, "l", 5));
        assert!(r.write(0, "l", 5));
        assert!(r.write(1, "l", 7));
        assert!(!r.write(0, "l", 5));
        let s = r.stats();
        assert_eq!(
            (s.writes, s.accepted, s.stale_rejected, s.stale_accepted),
            (4, 3, 1, 0)
        );
    }

    #[test]
    fn unfenced_accepts_and_counts_stale() {
        let r = Resource::new(Fencing::Unfenced, Arc::new(RunHistory::new()));
        assert!(r.write(1, "l", 7));
        assert!(r.write(0, "l", 5));
        let s = r.stats();
        assert_eq!((s.stale_rejected, s.stale_accepted, s.highest), (0, 1, 7));
    }
}
