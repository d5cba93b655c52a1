//! The benchmark grids: which cells run, how long and how often. The quick grid answers
//! "did anything regress" in a few minutes; the full grid is DESIGN section 4's protocol
//! (every cell 3 × 10 s, medians reported).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::bench::contender::Contender;
use crate::bench::workload::CellSpec;

/// Critical sections of the full grid, µs: none, 1 ms, 10 ms.
const FULL_CRITICAL_SECTIONS_US: [u64; 3] = [0, 1_000, 10_000];
/// Client counts of the full grid.
const FULL_CLIENTS: [usize; 4] = [1, 8, 32, 128];
/// Quick grid: the uncontended floor and the DESIGN section 4 comparison point.
const QUICK_CLIENTS: [usize; 2] = [1, 32];
/// Quick grid critical sections, µs.
const QUICK_CRITICAL_SECTIONS_US: [u64; 2] = [0, 1_000];
/// Locks in the spread-contention table: enough that most acquisitions do not collide at 32
/// clients, few enough that some still do.
pub const SPREAD_LOCKS: usize = 8;
/// Critical section of the spread-contention table, µs.
const SPREAD_CRITICAL_SECTION_US: u64 = 1_000;
/// Client counts of the spread-contention table.
const FULL_SPREAD_CLIENTS: [usize; 3] = [8, 32, 128];
/// Quick cells run 5 s once: 25 cells ≈ 2.5 min with setup, inside the 3–5 minute budget.
const QUICK_DURATION: Duration = Duration::from_secs(5);
/// DESIGN section 4: 3 × 10 s, medians.
const FULL_DURATION: Duration = Duration::from_secs(10);
/// DESIGN section 4 repetitions.
const FULL_REPETITIONS: usize = 3;

/// Which grid to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum GridSize {
    /// A few minutes: N ∈ {1, 32}, cs ∈ {0, 1 ms}, one run each.
    Quick,
    /// Everything, DESIGN section 4 protocol.
    Full,
}

/// The cells to run and the protocol to run them with.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GridPlan {
    /// Grid name.
    pub size: GridSize,
    /// Cells in run order (interleaved contenders, so drift over time hits all alike).
    pub cells: Vec<CellSpec>,
    /// Measured time per cell run.
    pub duration: Duration,
    /// Runs per cell; the report takes medians.
    pub repetitions: usize,
}

impl GridPlan {
    /// The plan for `size` over `contenders`.
    pub fn new(size: GridSize, contenders: &[Contender]) -> Self {
        let (clients, sections, spread_clients, duration, repetitions): (
            &[usize],
            &[u64],
            &[usize],
            _,
            _,
        ) = match size {
            GridSize::Quick => (
                &QUICK_CLIENTS,
                &QUICK_CRITICAL_SECTIONS_US,
                &[32],
                QUICK_DURATION,
                1,
            ),
            GridSize::Full => (
                &FULL_CLIENTS,
                &FULL_CRITICAL_SECTIONS_US,
                &FULL_SPREAD_CLIENTS,
                FULL_DURATION,
                FULL_REPETITIONS,
            ),
        };
        let mut cells = Vec::new();
        for &critical_section_us in sections {
            for &n in clients {
                for &contender in contenders {
                    cells.push(CellSpec {
                        contender,
                        clients: n,
                        critical_section_us,
                        locks: 1,
                    });
                }
            }
        }
        for &n in spread_clients {
            for &contender in contenders {
                cells.push(CellSpec {
                    contender,
                    clients: n,
                    critical_section_us: SPREAD_CRITICAL_SECTION_US,
                    locks: SPREAD_LOCKS,
                });
            }
        }
        Self {
            size,
            cells,
            duration,
            repetitions,
        }
    }

    /// Cell runs in total (cells × repetitions), for progress reporting.
    pub fn total_runs(&self) -> usize {
        self.cells.len() * self.repetitions
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn quick_grid_fits_the_time_budget() {
        let plan = GridPlan::new(GridSize::Quick, &Contender::ALL);
        let measured = plan.duration * plan.total_runs() as u32;
        assert!(measured <= Duration::from_secs(180), "{measured:?}");
        assert!(plan.cells.iter().any(|c| c.clients == 32
            && c.critical_section_us == 1_000
            && c.locks == 1
            && c.contender == Contender::RslockDefault));
    }

    #[test]
    fn full_grid_covers_every_combination_three_times() {
        let plan = GridPlan::new(GridSize::Full, &Contender::ALL);
        assert_eq!(plan.repetitions, 3);
        let hot = plan.cells.iter().filter(|c| c.locks == 1).count();
        assert_eq!(
            hot,
            FULL_CLIENTS.len() * FULL_CRITICAL_SECTIONS_US.len() * Contender::ALL.len()
        );
    }
}
