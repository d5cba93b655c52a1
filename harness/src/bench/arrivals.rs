//! Open-loop arrivals: when a client *intends* to start each acquisition, as a Poisson process
//! (exponential gaps), independent of how long earlier acquisitions took.
//!
//! A closed loop (ask again as soon as the last release returned) lets a slow lock slow down
//! its own offered load, so its latency figures omit the requests that would have queued up
//! meanwhile (coordinated omission). Measuring each acquisition from its intended start, and
//! starting late ones at once, charges that queueing to the lock.

use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// One client's intended start times.
#[derive(Debug)]
pub struct PoissonArrivals {
    rng: StdRng,
    mean_gap: Duration,
    next: Instant,
}

impl PoissonArrivals {
    /// Arrivals at `per_s` per second on average from `start`, reproducible from `seed`.
    /// `None` for a rate that is not a positive finite number.
    pub fn new(per_s: f64, start: Instant, seed: u64) -> Option<Self> {
        (per_s.is_finite() && per_s > 0.0).then(|| Self {
            rng: StdRng::seed_from_u64(seed),
            mean_gap: Duration::from_secs_f64(1.0 / per_s),
            next: start,
        })
    }

    /// The next intended start.
    pub fn next_start(&mut self) -> Instant {
        // 53 random bits: a uniform draw in [0, 1) with f64's full precision.
        let uniform = (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        self.next += exponential_gap(uniform, self.mean_gap);
        self.next
    }
}

/// The gap of an exponential distribution with mean `mean` at quantile `uniform` ∈ [0, 1)
/// (inverse transform: −ln(1 − u) · mean).
fn exponential_gap(uniform: f64, mean: Duration) -> Duration {
    let u = uniform.clamp(0.0, 1.0 - f64::EPSILON);
    mean.mul_f64(-(1.0 - u).ln())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn gaps_follow_the_exponential_quantiles() {
        let mean = Duration::from_millis(10);
        assert_eq!(exponential_gap(0.0, mean), Duration::ZERO);
        // The median of an exponential is ln 2 · mean.
        let median = exponential_gap(0.5, mean).as_secs_f64();
        assert!((median - 0.010 * std::f64::consts::LN_2).abs() < 1e-9);
        assert!(exponential_gap(0.999_999, mean) > mean * 10);
    }

    #[test]
    fn the_mean_rate_is_the_one_asked_for() {
        let start = Instant::now();
        let mut arrivals = PoissonArrivals::new(1_000.0, start, 7).unwrap();
        let n = 20_000;
        let mut last = start;
        for _ in 0..n {
            let next = arrivals.next_start();
            assert!(next >= last, "intended starts never go back");
            last = next;
        }
        let rate = n as f64 / last.duration_since(start).as_secs_f64();
        assert!((rate - 1_000.0).abs() < 50.0, "{rate} per s");
    }

    #[test]
    fn refuses_rates_that_are_not_positive() {
        assert!(PoissonArrivals::new(0.0, Instant::now(), 1).is_none());
        assert!(PoissonArrivals::new(f64::NAN, Instant::now(), 1).is_none());
    }
}
