//! Leasehold's waiting strategies as benchmark data: a plain, ordered, serialisable name for
//! each (docs/DESIGN.md §2), so reports can key on it, and the library's strategy it stands for.
//!
//! It sits below both [`contender`](super::contender) (which names contenders by it) and
//! [`leasehold_client`](super::leasehold_client) (which turns it into a `WaitStrategy`), so
//! neither has to import the other.

use leasehold::WaitStrategy;
use serde::{Deserialize, Serialize};

/// Leasehold's waiting strategies (docs/DESIGN.md §2), mirrored here so reports can name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum WaitKind {
    /// Exponential backoff with full jitter.
    Spin,
    /// Wake on the release notification, TTL-bounded fallback.
    PubSub,
    /// FIFO queue, release hands over to the head inside the release script.
    FairQueue,
}

impl WaitKind {
    /// The library's strategy with its default parameters.
    pub fn strategy(self) -> WaitStrategy {
        match self {
            WaitKind::Spin => WaitStrategy::spin(),
            WaitKind::PubSub => WaitStrategy::PubSub,
            WaitKind::FairQueue => WaitStrategy::fair_queue(),
        }
    }
}
