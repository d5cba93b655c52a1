//! A node's controllable wall clock: a host directory bind-mounted at the node's
//! [`CLOCK_DIR`](crate::topology::clock_library::CLOCK_DIR), holding the file the preloaded clock
//! library reads: an offset and, while the clock drifts, a rate and the instant it runs from.
//!
//! Invariant: the file always holds the whole current shift, replaced atomically (write a
//! temporary file, rename), so the server never reads a half-written line; the library
//! re-reads it whenever it changes, so a jump or a new rate takes effect on the server's
//! next clock read. Every change is rebased on the shift reached at that instant, so
//! changing the rate never makes the clock jump, and a jump moves it by exactly its amount.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::{Error, Result};
use crate::topology::clock_library::OFFSET_FILE_NAME;

/// Parts per million: the drift rate's unit, as in the file.
const PPM: i128 = 1_000_000;

/// What the file says: the clock reads real time + `offset_us` + (real − `since_us`) ×
/// `ppm` / 10⁶ (the format of `harness/clock/clock_offset.c`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Shift {
    offset_us: i64,
    ppm: i64,
    since_us: i64,
}

impl Shift {
    /// The shift (µs) at the real instant `real_us`.
    fn at(self, real_us: i64) -> i64 {
        let elapsed = i128::from(real_us.saturating_sub(self.since_us).max(0));
        let drift = elapsed * i128::from(self.ppm) / PPM;
        let total = i128::from(self.offset_us) + drift;
        i64::try_from(total).unwrap_or(if total < 0 { i64::MIN } else { i64::MAX })
    }

    /// The same clock, described from `real_us` on: the drift so far folded into the offset.
    fn rebased(self, real_us: i64) -> Shift {
        Shift {
            offset_us: self.at(real_us),
            ppm: self.ppm,
            since_us: real_us,
        }
    }

    /// The file's line; the original one-number format while the clock does not drift.
    fn line(self) -> String {
        if self.ppm == 0 {
            self.offset_us.to_string()
        } else {
            format!("{} {} {}", self.offset_us, self.ppm, self.since_us)
        }
    }
}

/// Real time now in µs since the epoch: the host's CLOCK_REALTIME, which is the clock the
/// library shifts (containers share the host kernel's wall clock).
fn real_us() -> i64 {
    // A host clock before 1970 would be a broken machine; 0 then only moves `since`.
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

/// The host side of one node's clock (the directory is removed on drop).
#[derive(Debug)]
pub(crate) struct NodeClock {
    dir: PathBuf,
    /// What the file says now.
    shift: Mutex<Shift>,
}

impl NodeClock {
    /// A fresh directory for the node `name`, real time (offset 0, no drift).
    pub(crate) fn create(name: &str) -> Result<Self> {
        let dir = std::env::temp_dir().join(format!("leasehold-clock-{name}"));
        std::fs::create_dir_all(&dir)
            .map_err(|err| Error::io(format!("creating {}", dir.display()), err))?;
        let clock = NodeClock {
            dir,
            shift: Mutex::new(Shift::default()),
        };
        clock.write(Shift::default())?;
        Ok(clock)
    }

    /// Host directory to bind-mount at [`CLOCK_DIR`](crate::topology::clock_library::CLOCK_DIR).
    pub(crate) fn host_dir(&self) -> &Path {
        &self.dir
    }

    /// How far the clock is ahead of real time now, drift included (ms).
    pub(crate) fn offset_ms(&self) -> i64 {
        self.current().at(real_us()) / 1_000
    }

    /// The drift rate in parts per million (0: the clock runs at real speed).
    pub(crate) fn drift_ppm(&self) -> i64 {
        self.current().ppm
    }

    /// Sets the offset to `ms` (negative: behind real time); a drift runs on from there.
    pub(crate) fn set_ms(&self, ms: i64) -> Result<()> {
        self.update(|shift, now| Shift {
            offset_us: ms.saturating_mul(1_000),
            ..shift.rebased(now)
        })
    }

    /// Moves the clock by `ms` from where it is now.
    pub(crate) fn jump_ms(&self, ms: i64) -> Result<()> {
        self.update(|shift, now| {
            let at = shift.rebased(now);
            Shift {
                offset_us: at.offset_us.saturating_add(ms.saturating_mul(1_000)),
                ..at
            }
        })
    }

    /// Makes the clock run `ppm` parts per million fast (negative: slow) from now on, from
    /// where it is now (0: it keeps its offset and runs at real speed again).
    pub(crate) fn set_drift_ppm(&self, ppm: i64) -> Result<()> {
        self.update(|shift, now| Shift {
            ppm,
            ..shift.rebased(now)
        })
    }

    /// Back to real time: no offset, no drift.
    pub(crate) fn reset(&self) -> Result<()> {
        self.update(|_, _| Shift::default())
    }

    fn current(&self) -> Shift {
        *self.shift.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Replaces the shift with `next(current, now)`, file first.
    fn update(&self, next: impl FnOnce(Shift, i64) -> Shift) -> Result<()> {
        let mut shift = self.shift.lock().unwrap_or_else(PoisonError::into_inner);
        let replaced = next(*shift, real_us());
        self.write(replaced)?;
        *shift = replaced;
        Ok(())
    }

    fn write(&self, shift: Shift) -> Result<()> {
        let file = self.dir.join(OFFSET_FILE_NAME);
        let staging = self.dir.join(format!(".{OFFSET_FILE_NAME}.new"));
        std::fs::write(&staging, shift.line())
            .and_then(|()| std::fs::rename(&staging, &file))
            .map_err(|err| Error::io(format!("writing {}", file.display()), err))
    }
}

impl Drop for NodeClock {
    fn drop(&mut self) {
        if let Err(err) = std::fs::remove_dir_all(&self.dir) {
            tracing::debug!(dir = %self.dir.display(), %err, "could not remove a node clock directory");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Shift;

    const SECOND_US: i64 = 1_000_000;

    #[test]
    fn a_drift_accrues_from_its_instant_and_rebasing_keeps_the_reading() {
        let fast = Shift {
            offset_us: 5_000,
            ppm: 300_000,
            since_us: 10 * SECOND_US,
        };
        assert_eq!(fast.at(9 * SECOND_US), 5_000, "no drift before its instant");
        assert_eq!(fast.at(12 * SECOND_US), 5_000 + 600_000);
        let later = fast.rebased(12 * SECOND_US);
        assert_eq!(later.at(12 * SECOND_US), fast.at(12 * SECOND_US));
        assert_eq!(later.at(20 * SECOND_US), fast.at(20 * SECOND_US));
    }

    #[test]
    fn the_file_keeps_the_one_number_format_without_drift() {
        let still = Shift {
            offset_us: -10_000_000,
            ..Shift::default()
        };
        assert_eq!(still.line(), "-10000000");
        let fast = Shift {
            offset_us: 1,
            ppm: 9_000,
            since_us: 2,
        };
        assert_eq!(fast.line(), "1 9000 2");
    }
}
