//! Local clocks as functions of true (virtual) time: offset, drift and jumps.
//!
//! Invariant: a clock's reading is a pure function of virtual time and of the clock faults
//! scheduled for it, fixed before the run starts, so every timer deadline can be inverted
//! exactly ("when does this clock read T?") and a replay sees the same readings.

use std::time::Duration;

/// Parts per million: 1_000_000 ppm is a clock running at double speed.
const PPM: i128 = 1_000_000;

/// Slowest allowed rate (a clock must keep moving forward).
const MIN_RATE_PPM: i64 = -900_000;

/// One linear piece: from virtual `start`, the clock reads `local_at_start` and advances
/// `1 + rate_ppm / 1e6` local nanoseconds per virtual nanosecond.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Segment {
    start: u64,
    local_at_start: i128,
    rate_ppm: i64,
}

impl Segment {
    fn local(&self, t: u64) -> i128 {
        let elapsed = i128::from(t - self.start);
        self.local_at_start + elapsed * (PPM + i128::from(self.rate_ppm)) / PPM
    }
}

/// A clock change applied at a virtual instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClockChange {
    /// The reading steps by this many nanoseconds (negative: backwards).
    Jump(i64),
    /// From now on the clock runs fast (positive) or slow (negative) by this many ppm.
    Drift(i64),
}

/// A clock: a piecewise-linear map from virtual nanoseconds to local nanoseconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClockModel {
    segments: Vec<Segment>,
    monotonic: bool,
}

impl ClockModel {
    /// A clock that reads `offset` at virtual time zero and never deviates.
    /// A `monotonic` clock (a process's `Instant`) never steps backwards.
    pub fn new(offset: Duration, monotonic: bool) -> Self {
        Self {
            segments: vec![Segment {
                start: 0,
                local_at_start: offset.as_nanos() as i128,
                rate_ppm: 0,
            }],
            monotonic,
        }
    }

    fn segment_at(&self, t: u64) -> &Segment {
        let i = self.segments.partition_point(|s| s.start <= t);
        // `segments[0].start == 0`, so `i >= 1` for every `t`.
        &self.segments[i.saturating_sub(1)]
    }

    /// Applies `change` at virtual time `at`. Changes must be applied in time order.
    pub fn apply(&mut self, at: u64, change: ClockChange) {
        let current = *self.segment_at(at);
        let local = current.local(at);
        let next = match change {
            ClockChange::Jump(by) => {
                let by = if self.monotonic { by.max(0) } else { by };
                Segment {
                    start: at,
                    local_at_start: (local + i128::from(by)).max(0),
                    rate_ppm: current.rate_ppm,
                }
            }
            ClockChange::Drift(ppm) => Segment {
                start: at,
                local_at_start: local,
                rate_ppm: ppm.max(MIN_RATE_PPM),
            },
        };
        self.segments.retain(|s| s.start < at);
        self.segments.push(next);
    }

    /// The highest reading over virtual `[0, until]`, in nanoseconds: after a step back
    /// the clock reads below what it once showed. Every rate moves the clock forward, so
    /// each piece peaks where it ends.
    pub fn peak_nanos(&self, until: u64) -> u64 {
        let ends = self.segments.iter().skip(1).map(|s| s.start.min(until));
        self.segments
            .iter()
            .filter(|s| s.start <= until)
            .zip(ends.chain(std::iter::once(until)))
            .map(|(s, end)| s.local(end))
            .max()
            .map_or(0, |peak| u64::try_from(peak.max(0)).unwrap_or(u64::MAX))
    }

    /// The reading at virtual time `t`, in nanoseconds.
    pub fn local_nanos(&self, t: u64) -> u64 {
        u64::try_from(self.segment_at(t).local(t).max(0)).unwrap_or(u64::MAX)
    }

    /// The virtual time at which the clock has advanced `local` nanoseconds past its
    /// reading at `now` (a timer armed on it at `now`).
    pub fn after(&self, now: u64, local: u64) -> u64 {
        self.when_reads(now, self.local_nanos(now).saturating_add(local))
    }

    /// The earliest virtual time `>= from` at which the clock reads at least `target`.
    pub fn when_reads(&self, from: u64, target: u64) -> u64 {
        let target = i128::from(target);
        let first = self
            .segments
            .partition_point(|s| s.start <= from)
            .saturating_sub(1);
        for (i, seg) in self.segments.iter().enumerate().skip(first) {
            let begin = seg.start.max(from);
            if seg.local(begin) >= target {
                return begin;
            }
            let rate = PPM + i128::from(seg.rate_ppm);
            // Smallest elapsed with local_at_start + elapsed*rate/PPM >= target.
            let needed = target - seg.local_at_start;
            let elapsed = (needed * PPM + rate - 1) / rate;
            let t = seg.start as i128 + elapsed;
            let end = self.segments.get(i + 1).map(|s| i128::from(s.start));
            if end.is_none_or(|end| t < end) {
                return u64::try_from(t.max(i128::from(begin))).unwrap_or(u64::MAX);
            }
        }
        u64::MAX
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn perfect_clock_reads_offset_plus_elapsed() {
        let clock = ClockModel::new(Duration::from_nanos(5), true);
        assert_eq!(clock.local_nanos(10), 15);
        assert_eq!(clock.when_reads(0, 15), 10);
    }

    #[test]
    fn fast_clock_reaches_deadlines_early() {
        let mut clock = ClockModel::new(Duration::ZERO, true);
        clock.apply(0, ClockChange::Drift(100_000)); // 10% fast
        assert_eq!(clock.local_nanos(1_000), 1_100);
        assert_eq!(clock.when_reads(0, 1_100), 1_000);
    }

    #[test]
    fn jump_forward_fires_pending_deadlines() {
        let mut clock = ClockModel::new(Duration::ZERO, false);
        clock.apply(100, ClockChange::Jump(1_000));
        assert_eq!(clock.local_nanos(100), 1_100);
        assert_eq!(clock.when_reads(0, 500), 100);
        assert_eq!(clock.when_reads(0, 50), 50);
    }

    #[test]
    fn a_step_back_leaves_the_peak_behind() {
        let mut clock = ClockModel::new(Duration::ZERO, false);
        clock.apply(100, ClockChange::Jump(-80));
        clock.apply(200, ClockChange::Jump(-10));
        // 100 at the first step, 120 at the second, 160 at 250.
        assert_eq!(clock.local_nanos(150), 70);
        assert_eq!(clock.peak_nanos(150), 100);
        assert_eq!(clock.peak_nanos(250), 160);
        assert_eq!(clock.peak_nanos(50), 50);
    }

    #[test]
    fn monotonic_clock_ignores_backward_jumps() {
        let mut clock = ClockModel::new(Duration::ZERO, true);
        clock.apply(100, ClockChange::Jump(-50));
        assert_eq!(clock.local_nanos(100), 100);
    }
}
