//! Mixed wait strategies on one lock name: counted and warned about, since they starve or
//! deadlock each other.
//!
//! The scripts flag a busy attempt that met waiters of another strategy (`{0, ms, 1}`):
//! - a mutex `PubSub` attempt finding fair-queue waiters, which a fair hand-off never wakes,
//!   so the queue can starve it;
//! - a read-write lock writer that waits by `Spin` or `PubSub` finding a live fair line, or
//!   a `FairQueue` reader held back by such a writer's intent. The fair line's head and the
//!   writer's intent then block each other at a free lock: the writer is refused while a
//!   live entry heads the line, and the reader while the intent stands. Nothing breaks the
//!   tie once a holder's lease ends without a release (no release, no hand-off): a deadlock
//!   until one of them gives up.
//!
//! Invariant: a flagged attempt is counted every time (`leasehold_mixed_strategy_total`),
//! and warned about once per name and process, so an operator sees it without a flood.

use std::collections::HashSet;
use std::sync::{LazyLock, Mutex};

use crate::metrics::{self, Labels};

/// Lock names this process has warned about mixing strategies on: one warning per name is
/// for an operator to act on, one per attempt would flood the log. Grows by at most the
/// names that are mixed, which a deployment fixes.
static WARNED: LazyLock<Mutex<HashSet<String>>> = LazyLock::new(Mutex::default);

/// Which mix an attempt met, for the warning.
#[derive(Clone, Copy)]
pub(crate) enum Mix {
    /// A mutex `PubSub` attempt behind fair-queue waiters.
    PubSubBehindQueue,
    /// A read-write lock's fair line against a `Spin` or `PubSub` writer's intent.
    LineAgainstIntent,
}

/// An attempt on `name` met waiters of another strategy: counts it, and warns the first
/// time for this name.
pub(crate) fn found_mixed(name: &str, labels: Labels, mix: Mix) {
    metrics::mixed_strategy(labels);
    // A poisoned set only costs the warning (the counter still counts).
    let first = WARNED
        .lock()
        .is_ok_and(|mut warned| warned.insert(name.to_owned()));
    if first {
        match mix {
            Mix::PubSubBehindQueue => tracing::warn!(
                name,
                "PubSub waiter found fair-queue waiters on this lock: with mixed strategies \
                 on one name the queue can starve PubSub waiters; use one wait strategy per \
                 name"
            ),
            Mix::LineAgainstIntent => tracing::warn!(
                name,
                "read-write lock waiters of the fair line and Spin or PubSub writers meet on \
                 this lock: the line's head and a writer's intent block each other, a \
                 deadlock once a holder's lease ends without a release; use one wait \
                 strategy per name"
            ),
        }
    }
}
