//! What the clients and the protected resource observed, in true (virtual) time.
//!
//! Invariant: events are appended in the order they happen in virtual time, stamped by the
//! simulator (never by a client's skewed clock), so the checker judges the real timeline.

use serde::Serialize;

use crate::net::ProcId;

/// One observation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HistEvent {
    /// Virtual time in nanoseconds.
    pub at: u64,
    /// The process.
    pub proc: ProcId,
    /// Its incarnation (a restarted process is a new holder).
    pub incarnation: u32,
    /// Lock name.
    pub lock: String,
    /// What happened.
    pub kind: HistKind,
}

/// Kinds of observation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum HistKind {
    /// The client started waiting for the lock.
    WaitStart,
    /// `lock()` returned a guard with this fencing token.
    Acquired {
        /// The guard's fencing token.
        token: u64,
    },
    /// A second hold of the owner the client holds the lock as was granted (re-entry):
    /// it must join the held epoch, with that epoch's token.
    Reentered {
        /// The second hold's fencing token.
        token: u64,
    },
    /// `lock()` failed (timeout or error) and the client gave up this attempt.
    AcquireFailed {
        /// The error's display text.
        error: String,
    },
    /// The client stopped believing it holds the lock (called `unlock()`).
    Released,
    /// The guard's lost-lease signal fired and the client stopped working.
    Lost,
    /// The process crashed: whatever it held is orphaned, whatever it waited for abandoned.
    Crashed,
    /// A fault hampers this process (pause, partition, slow link, Redis outage) until
    /// `until` (virtual ns): its waits are not judged for liveness.
    Impaired {
        /// End of the impairment.
        until: u64,
    },
    /// The resource received a write.
    Write {
        /// Token presented.
        token: u64,
        /// Highest token the resource had seen before this write.
        highest: u64,
        /// Whether the fenced resource accepted it (`token >= highest`).
        accepted: bool,
    },
}
