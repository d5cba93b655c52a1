//! The benchmark grids: which cells run, how long and how often. The quick grid answers
//! "did anything regress" in a few minutes, with enough repetitions to show its own noise;
//! the full grid is DESIGN section 4's protocol (every cell 3 × 10 s, medians reported).
//! Read-write lock contenders get their own cells (client counts × read shares × critical
//! sections); mutex contenders get the mutex tables; the classic designs get the hot lock's
//! cells at [`DESIGN_CLIENTS`] only.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::bench::contender::Contender;
use crate::bench::workload::CellSpec;

/// Critical sections of the full grid, µs: none, 1 ms, 10 ms.
const FULL_CRITICAL_SECTIONS_US: [u64; 3] = [0, 1_000, 10_000];
/// Client counts of the full grid.
const FULL_CLIENTS: [usize; 4] = [1, 8, 32, 128];
/// Quick grid: the uncontended floor, light contention and the DESIGN section 4 comparison
/// point.
const QUICK_CLIENTS: [usize; 3] = [1, 8, 32];
/// Quick grid critical sections, µs.
const QUICK_CRITICAL_SECTIONS_US: [u64; 2] = [0, 1_000];
/// Lock counts of the spread-contention tables (besides the one hot lock): 8 spreads 32
/// clients so that some acquisitions still collide, 64 so that few do.
const FULL_SPREAD_LOCKS: [usize; 2] = [8, 64];
/// The quick grid's spread-contention table.
const QUICK_SPREAD_LOCKS: [usize; 1] = [8];
/// Critical section of the spread-contention and think-time tables, µs.
const SPREAD_CRITICAL_SECTION_US: u64 = 1_000;
/// Client counts of the spread-contention table.
const FULL_SPREAD_CLIENTS: [usize; 3] = [8, 32, 128];
/// Client count of the quick spread-contention and think-time tables (DESIGN section 4's).
const QUICK_SPREAD_CLIENTS: [usize; 1] = [32];
/// Think time of the think-time table, µs: 32 clients each holding ~1 ms then thinking 20 ms
/// offer the lock about two thirds of its capacity, the contended-but-not-saturated regime
/// of a real service rather than a tight loop.
pub const THINK_US: u64 = 20_000;
/// Client counts of the read-write lock cells in the full grid (issue 36: 8, 32 and 128).
const FULL_RWLOCK_CLIENTS: [usize; 3] = [8, 32, 128];
/// Client counts of the read-write lock cells in the quick grid at every read share: 128
/// clients connect and drain for about a second per run, so the quick grid runs them at
/// [`QUICK_RWLOCK_WIDE_READ_PERCENT`] only, to keep the section within ~3 minutes.
const QUICK_RWLOCK_CLIENTS: [usize; 2] = [8, 32];
/// The read share at which the quick grid also runs 128 clients: 60 %, the share of the
/// issue's headline comparison and the one with more writes, where a line matters most.
const QUICK_RWLOCK_WIDE_CLIENTS: usize = 128;
/// See [`QUICK_RWLOCK_WIDE_CLIENTS`].
const QUICK_RWLOCK_WIDE_READ_PERCENT: u8 = 60;
/// Read shares of the read-write lock cells, percent (issue 36: mostly reads, and a
/// write-heavier mix).
const RWLOCK_READ_PERCENTS: [u8; 2] = [60, 90];
/// Critical sections of the read-write lock cells, µs, in both grids.
const RWLOCK_CRITICAL_SECTIONS_US: [u64; 2] = [0, 1_000];
/// Client counts of the classic designs' cells (one hot lock, in both grids, at each of the
/// grid's critical sections up to 1 ms): the uncontended floor and the comparison point.
/// The designs are the comparison here, not the product: 7 designs × 4 cells × 3 × 2 s add
/// under 3 minutes to the quick grid, where its whole mutex table would add 6.
const DESIGN_CLIENTS: [usize; 2] = [1, 32];
/// The longest critical section of the designs' cells, µs.
const DESIGN_MAX_CRITICAL_SECTION_US: u64 = 1_000;

/// Quick repetitions: 3, the fewest that give a median and a spread.
const QUICK_REPETITIONS: usize = 3;
/// Quick cells run 2 s: 56 mutex cells × 3 repetitions ≈ 6 min with setup, measured to keep
/// the main job under 15 minutes on 2 cores; 2 s still give every one of 32 clients dozens of
/// acquisitions at cs 1 ms. The 20 read-write lock cells add 132 s (`bench --only rwlock`,
/// on a loaded machine). The two Python peers add 16 mutex cells, 96 s measured, plus
/// starting their up to 32 worker processes each once per run (pooled across cells).
const QUICK_DURATION: Duration = Duration::from_secs(2);
/// DESIGN section 4: 3 × 10 s, medians.
const FULL_DURATION: Duration = Duration::from_secs(10);
/// DESIGN section 4 repetitions.
const FULL_REPETITIONS: usize = 3;

/// Which grid to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum GridSize {
    /// A few minutes: N ∈ {1, 8, 32}, cs ∈ {0, 1 ms}, 8 locks and a think-time cell at
    /// N = 32, 3 × 2 s each; read-write lock cells at N ∈ {8, 32} × 60/90 % reads and
    /// N = 128 at 60 %, cs ∈ {0, 1 ms}.
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
    /// The plan for `size` over `contenders`: the mutex cells for the mutex contenders, then
    /// the read-write lock cells for the read-write lock contenders.
    pub fn new(size: GridSize, contenders: &[Contender]) -> Self {
        let (rwlocks, mutexes): (Vec<Contender>, Vec<Contender>) =
            contenders.iter().partition(|c| c.is_rwlock());
        let (designs, mutexes): (Vec<Contender>, Vec<Contender>) = mutexes
            .into_iter()
            .partition(|c| matches!(c, Contender::Design(_)));
        let contenders = mutexes.as_slice();
        let (clients, sections, spread_locks, spread_clients, duration, repetitions): (
            &[usize],
            &[u64],
            &[usize],
            &[usize],
            _,
            _,
        ) = match size {
            GridSize::Quick => (
                &QUICK_CLIENTS,
                &QUICK_CRITICAL_SECTIONS_US,
                &QUICK_SPREAD_LOCKS,
                &QUICK_SPREAD_CLIENTS,
                QUICK_DURATION,
                QUICK_REPETITIONS,
            ),
            GridSize::Full => (
                &FULL_CLIENTS,
                &FULL_CRITICAL_SECTIONS_US,
                &FULL_SPREAD_LOCKS,
                &FULL_SPREAD_CLIENTS,
                FULL_DURATION,
                FULL_REPETITIONS,
            ),
        };
        let cell = |contender, clients, critical_section_us, locks, think_us| CellSpec {
            contender,
            clients,
            critical_section_us,
            locks,
            think_us,
            offered_per_s: 0,
            read_percent: 0,
        };
        let mut cells = Vec::new();
        for &critical_section_us in sections {
            for &n in clients {
                for &contender in contenders {
                    cells.push(cell(contender, n, critical_section_us, 1, 0));
                }
                // The designs' cells beside the others' at the same point, so drift hits
                // them alike.
                if DESIGN_CLIENTS.contains(&n)
                    && critical_section_us <= DESIGN_MAX_CRITICAL_SECTION_US
                {
                    for &design in &designs {
                        cells.push(cell(design, n, critical_section_us, 1, 0));
                    }
                }
            }
        }
        for &locks in spread_locks {
            for &n in spread_clients {
                for &contender in contenders {
                    cells.push(cell(contender, n, SPREAD_CRITICAL_SECTION_US, locks, 0));
                }
            }
        }
        for &contender in contenders {
            cells.push(cell(
                contender,
                QUICK_SPREAD_CLIENTS[0],
                SPREAD_CRITICAL_SECTION_US,
                1,
                THINK_US,
            ));
        }
        for (critical_section_us, clients, read_percent) in rwlock_points(size) {
            for &contender in &rwlocks {
                cells.push(CellSpec {
                    read_percent,
                    ..cell(contender, clients, critical_section_us, 1, 0)
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

    /// Cell runs in total (cells × repetitions) of the read-write lock cells.
    pub fn rwlock_runs(&self) -> usize {
        self.cells
            .iter()
            .filter(|c| c.contender.is_rwlock())
            .count()
            * self.repetitions
    }

    /// Turns every cell without think time into an open-loop cell offered `per_s` acquisitions
    /// per second in total (Poisson arrivals); think-time cells stay closed loops, since their
    /// pauses already set the offered load.
    pub fn open_loop(&mut self, per_s: u64) {
        for cell in self.cells.iter_mut().filter(|c| c.think_us == 0) {
            cell.offered_per_s = per_s;
        }
    }

    /// Cell runs in total (cells × repetitions), for progress reporting.
    pub fn total_runs(&self) -> usize {
        self.cells.len() * self.repetitions
    }
}

/// The read-write lock cells' (critical section µs, clients, read %) for `size`.
fn rwlock_points(size: GridSize) -> Vec<(u64, usize, u8)> {
    let mut points = Vec::new();
    for cs in RWLOCK_CRITICAL_SECTIONS_US {
        for read_percent in RWLOCK_READ_PERCENTS {
            let clients: Vec<usize> = match size {
                GridSize::Full => FULL_RWLOCK_CLIENTS.to_vec(),
                GridSize::Quick if read_percent == QUICK_RWLOCK_WIDE_READ_PERCENT => {
                    let mut all = QUICK_RWLOCK_CLIENTS.to_vec();
                    all.push(QUICK_RWLOCK_WIDE_CLIENTS);
                    all
                }
                GridSize::Quick => QUICK_RWLOCK_CLIENTS.to_vec(),
            };
            points.extend(clients.into_iter().map(|n| (cs, n, read_percent)));
        }
    }
    points
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::bench::python_peer::library::PythonLib;

    #[test]
    fn the_designs_run_the_hot_locks_cells_at_two_client_counts_only() {
        let designs: Vec<Contender> = Contender::DESIGNS.to_vec();
        for size in [GridSize::Quick, GridSize::Full] {
            let plan = GridPlan::new(size, &designs);
            assert_eq!(plan.cells.len(), designs.len() * 4, "{size:?}");
            for cell in &plan.cells {
                assert!(DESIGN_CLIENTS.contains(&cell.clients), "{cell:?}");
                assert!(cell.critical_section_us <= DESIGN_MAX_CRITICAL_SECTION_US);
                assert_eq!((cell.locks, cell.think_us), (1, 0), "{cell:?}");
            }
        }
        // Within the budget's spirit: under 3 minutes of measured time in the quick grid.
        let quick = GridPlan::new(GridSize::Quick, &designs);
        assert!(quick.duration * quick.total_runs() as u32 <= Duration::from_secs(180));
    }

    #[test]
    fn quick_grid_fits_the_time_budget_with_a_spread() {
        let plan = GridPlan::new(GridSize::Quick, &Contender::ALL);
        assert!(plan.repetitions >= 3, "a spread needs 3 repetitions");
        let measured = plan.duration * plan.total_runs() as u32;
        assert!(measured <= Duration::from_secs(440), "{measured:?}");
        assert!(plan.cells.iter().any(|c| c.think_us > 0));
        assert!(plan.cells.iter().any(|c| c.clients == 8 && c.locks == 1));
        assert!(plan.cells.iter().any(|c| c.clients == 32
            && c.critical_section_us == 1_000
            && c.locks == 1
            && c.contender == Contender::RslockDefault));
        // The Python peers run beside rslock at the key point, at both critical sections.
        for lib in PythonLib::ALL {
            for cs in QUICK_CRITICAL_SECTIONS_US {
                assert!(plan.cells.iter().any(|c| c.clients == 32
                    && c.critical_section_us == cs
                    && c.is_saturated_hot_lock()
                    && c.contender == Contender::Python(lib)));
            }
        }
    }

    #[test]
    fn rwlock_cells_fit_their_budget_and_hold_the_headline_cell() {
        let all: Vec<Contender> = Contender::ALL
            .into_iter()
            .chain(Contender::RWLOCK)
            .collect();
        let plan = GridPlan::new(GridSize::Quick, &all);
        // ~3 minutes of wall time for the section: measured time plus about a second of
        // connecting and draining per run.
        let runs = plan.rwlock_runs() as u32;
        let wall = (plan.duration + Duration::from_secs(1)) * runs;
        assert!(wall <= Duration::from_secs(180), "{wall:?}");
        for contender in Contender::RWLOCK {
            let at = |clients, read_percent, cs| {
                plan.cells.iter().any(|c| {
                    c.contender == contender
                        && c.clients == clients
                        && c.read_percent == read_percent
                        && c.critical_section_us == cs
                })
            };
            assert!(at(32, 60, 1_000) && at(32, 90, 0) && at(8, 90, 1_000));
            assert!(at(128, 60, 1_000) && !at(128, 90, 1_000));
        }
        // Mutex contenders only write; read-write contenders only run read-write cells.
        for cell in &plan.cells {
            assert_eq!(
                cell.contender.is_rwlock(),
                cell.read_percent > 0,
                "{cell:?}"
            );
        }
        let full = GridPlan::new(GridSize::Full, &Contender::RWLOCK);
        assert_eq!(full.cells.len(), 3 * 2 * 2 * Contender::RWLOCK.len());
        assert!(full.cells.iter().all(|c| c.contender.is_rwlock()));
    }

    #[test]
    fn open_loop_leaves_think_time_cells_closed() {
        let mut plan = GridPlan::new(GridSize::Quick, &Contender::ALL);
        plan.open_loop(2_000);
        for cell in &plan.cells {
            let expected = if cell.think_us == 0 { 2_000 } else { 0 };
            assert_eq!(cell.offered_per_s, expected, "{cell:?}");
        }
    }

    #[test]
    fn full_grid_covers_every_combination_three_times() {
        let plan = GridPlan::new(GridSize::Full, &Contender::ALL);
        assert_eq!(plan.repetitions, 3);
        let hot = plan.cells.iter().filter(|c| c.locks == 1).count();
        let think = plan.cells.iter().filter(|c| c.think_us > 0).count();
        assert_eq!(
            hot - think,
            FULL_CLIENTS.len() * FULL_CRITICAL_SECTIONS_US.len() * Contender::ALL.len()
        );
        for locks in FULL_SPREAD_LOCKS {
            assert!(
                plan.cells
                    .iter()
                    .any(|c| c.locks == locks && c.clients == 128)
            );
        }
    }
}
