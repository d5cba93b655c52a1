//! Who takes the lock in a safety cell: Leasehold with one of its strategies, the rslock
//! peer (one node, or its RedLock over the same masters), or one of the classic lock
//! designs the simulator also runs (`leasehold_sim::workload::designs`, the same code
//! against real Redis), so all of them face the same faults.
//!
//! Invariant: a subject names the topology it runs on through [`Subject::strategy`], so a
//! peer row always shares its containers with the Leasehold rows it is compared with.

use leasehold_sim::workload::Strategy;
use leasehold_sim::workload::designs::Design;
use serde::{Deserialize, Serialize};

/// The client library (and strategy) of one row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Subject {
    /// Leasehold's lock with this strategy.
    Leasehold(Strategy),
    /// rslock 0.10: `SET NX PX` on one node, or its RedLock quorum over the masters.
    Rslock {
        /// Over the RedLock masters instead of one node.
        redlock: bool,
    },
    /// A classic lock design, its client the simulator's design client over real Redis.
    Design(Design),
}

impl Subject {
    /// The strategy whose topology the row runs on (and, for Leasehold, whose simulator
    /// cell it is compared with).
    pub fn strategy(self) -> Strategy {
        match self {
            Subject::Leasehold(strategy) => strategy,
            Subject::Rslock { redlock: true } => Strategy::RedLock,
            Subject::Rslock { redlock: false } => Strategy::Spin,
            Subject::Design(design) => design.strategy(),
        }
    }

    /// The table label.
    pub fn label(self) -> &'static str {
        match self {
            Subject::Leasehold(strategy) => strategy.name(),
            Subject::Rslock { redlock: false } => "rslock",
            Subject::Rslock { redlock: true } => "rslock RedLock",
            Subject::Design(design) => design.name(),
        }
    }
}
