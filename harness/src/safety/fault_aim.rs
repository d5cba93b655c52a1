//! Aiming a fault at a hold and excusing whom it hampers: waiting (bounded) for a holder or
//! for the next hand-off, and marking the clients a fault impairs in the history.
//!
//! Invariant: every wait here is bounded by [`HOLDER_WAIT`], so a fault is injected even
//! when nobody holds (the fault log then says so) and no cell hangs on a quiet lock.

use std::time::{Duration, Instant};

use leasehold_sim::world::history::HistKind;

use crate::safety::run_history::RunHistory;
use crate::safety::worker::Board;

/// How long to look for a holder to aim a mid-hold fault at before injecting anyway.
pub(super) const HOLDER_WAIT: Duration = Duration::from_secs(2);

/// Waits (bounded) until somebody holds the lock, so a mid-hold fault hits a holder.
pub(super) async fn wait_for_holder(board: &Board) -> Option<usize> {
    let deadline = Instant::now() + HOLDER_WAIT;
    while Instant::now() < deadline {
        if let Some(holder) = board.holder() {
            return Some(holder);
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    None
}

/// Waits (bounded, busy-yielding so the fault follows the grant at once) until the lock
/// changes hands from whoever holds now; returns the new holder.
pub(super) async fn wait_for_next_grant(board: &Board) -> Option<usize> {
    let first = board.holder();
    let deadline = Instant::now() + HOLDER_WAIT;
    while board.holder().is_none_or(|h| Some(h) == first) && Instant::now() < deadline {
        tokio::task::yield_now().await;
    }
    board.holder()
}

/// Marks `procs` as hampered from now until `until_ns`, so the checker does not judge
/// their waits during an outage as starvation (as the simulator does for its faults).
pub(super) fn impair(history: &RunHistory, procs: impl IntoIterator<Item = usize>, until_ns: u64) {
    for proc in procs {
        history.record(proc, "", HistKind::Impaired { until: until_ns });
    }
}

/// Who held the lock when a fault was injected, for the fault log ("c2", or nobody yet).
pub(super) fn holder_label(holder: Option<usize>) -> String {
    holder.map_or_else(|| "no client".to_owned(), |c| format!("c{c}"))
}
