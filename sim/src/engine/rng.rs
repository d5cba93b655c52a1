//! The simulator's only source of randomness: a seeded xoshiro256** generator.
//!
//! Invariant: every random choice in a run (scheduling, delays, faults, client entropy)
//! is drawn from generators derived from the run's seed, so a seed replays byte for byte.
//! The algorithm is spelled out here rather than taken from `rand` so that a dependency
//! upgrade can never silently change which trace a published seed reproduces.
//!
//! A taped generator ([`SimRng::taped`]) plays given words back before its own stream and
//! keeps every word it handed out: exploration draws a steered run's spec from a recorded
//! stream with a few words changed ([`crate::explore::lineage`]).

/// A small, fast, seedable PRNG (xoshiro256**, seeded through SplitMix64).
#[derive(Debug, Clone)]
pub struct SimRng {
    state: [u64; 4],
    /// Words to play back first and the record of every word handed out; only drawing a
    /// swarm spec uses one, the simulation itself never does.
    tape: Option<Box<Tape>>,
}

/// The words a taped generator plays back, extended by each word it generates.
#[derive(Debug, Clone)]
struct Tape {
    words: Vec<u64>,
    /// Words handed out so far.
    next: usize,
}

/// SplitMix64 step: expands one seed word into well-mixed state words.
fn splitmix64(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// One xoshiro256** step.
fn xoshiro(s: &mut [u64; 4]) -> u64 {
    let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
    let t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = s[3].rotate_left(45);
    result
}

impl SimRng {
    /// A generator whose whole stream is a function of `seed`.
    pub fn new(seed: u64) -> Self {
        let mut x = seed;
        Self {
            state: [
                splitmix64(&mut x),
                splitmix64(&mut x),
                splitmix64(&mut x),
                splitmix64(&mut x),
            ],
            tape: None,
        }
    }

    /// A generator that hands out `words` first, then the stream of `SimRng::new(then)`,
    /// recording what it hands out. With no words it draws exactly what `SimRng::new(then)`
    /// draws.
    pub fn taped(words: Vec<u64>, then: u64) -> Self {
        Self {
            tape: Some(Box::new(Tape { words, next: 0 })),
            ..Self::new(then)
        }
    }

    /// The words a taped generator handed out so far, in order (played back or generated);
    /// empty for a generator that is not taped.
    pub fn into_tape(self) -> Vec<u64> {
        self.tape.map_or_else(Vec::new, |tape| {
            let mut words = tape.words;
            words.truncate(tape.next);
            words
        })
    }

    /// An independent generator for a named purpose, so adding draws in one subsystem
    /// does not shift the stream of another.
    pub fn fork(&mut self, salt: u64) -> Self {
        Self::new(self.next_u64() ^ salt.wrapping_mul(0x9E37_79B9_7F4A_7C15))
    }

    /// The next uniformly distributed `u64`.
    pub fn next_u64(&mut self) -> u64 {
        let Some(tape) = self.tape.as_deref_mut() else {
            return xoshiro(&mut self.state);
        };
        let word = match tape.words.get(tape.next) {
            Some(&word) => word,
            None => {
                let word = xoshiro(&mut self.state);
                tape.words.push(word);
                word
            }
        };
        tape.next += 1;
        word
    }

    /// Uniform in `[0, bound)`; `bound == 0` yields 0.
    pub fn below(&mut self, bound: u64) -> u64 {
        if bound == 0 {
            return 0;
        }
        // Lemire's multiply-shift; the tiny bias (< 2^-64 * bound) is irrelevant here.
        ((u128::from(self.next_u64()) * u128::from(bound)) >> 64) as u64
    }

    /// Uniform in `[lo, hi]` (inclusive); returns `lo` when `hi <= lo`.
    pub fn between(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        lo + self.below(hi - lo + 1)
    }

    /// True with probability `p` (clamped to `[0, 1]`).
    pub fn chance(&mut self, p: f64) -> bool {
        if p <= 0.0 {
            return false;
        }
        if p >= 1.0 {
            return true;
        }
        self.unit() < p
    }

    /// Uniform in `[0, 1)`: 53 random bits.
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Log-uniform in `[lo, hi]` (`lo >= 1`): each power of two in the range is as likely
    /// as any other, so small magnitudes are drawn as often as large ones.
    pub fn log_between(&mut self, lo: u64, hi: u64) -> u64 {
        let lo = lo.max(1);
        if hi <= lo {
            return lo;
        }
        let span = (hi as f64 / lo as f64).ln();
        let drawn = (lo as f64 * (span * self.unit()).exp()).round() as u64;
        drawn.clamp(lo, hi)
    }

    /// A uniformly chosen index into a collection of `len` items (`len > 0`).
    pub fn index(&mut self, len: usize) -> usize {
        self.below(len as u64) as usize
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn log_between_stays_in_range_and_favours_no_magnitude() {
        let mut rng = SimRng::new(11);
        let draws: Vec<u64> = (0..4_000).map(|_| rng.log_between(1, 2_000)).collect();
        assert!(draws.iter().all(|d| (1..=2_000).contains(d)));
        // About a third of the decades lie below 13: a uniform draw puts 0.6% there.
        let small = draws.iter().filter(|&&d| d < 13).count();
        assert!((1_000..1_700).contains(&small), "{small} of 4000 below 13");
        assert_eq!(rng.log_between(5, 5), 5);
    }

    #[test]
    fn same_seed_same_stream() {
        let mut a = SimRng::new(7);
        let mut b = SimRng::new(7);
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
    }

    #[test]
    fn a_tape_plays_its_words_back_then_continues_and_records_both() {
        let mut plain = SimRng::new(9);
        let mut taped = SimRng::taped(Vec::new(), 9);
        let first: Vec<u64> = (0..5).map(|_| taped.next_u64()).collect();
        assert_eq!(first, (0..5).map(|_| plain.next_u64()).collect::<Vec<_>>());
        assert_eq!(taped.into_tape(), first);

        let mut edited = SimRng::taped(vec![1, 2, 3], 4);
        let mut fresh = SimRng::new(4);
        assert_eq!(edited.next_u64(), 1);
        assert_eq!(edited.next_u64(), 2);
        // Two of three words handed out: the third, never drawn, is not on the record.
        assert_eq!(edited.clone().into_tape(), vec![1, 2]);
        assert_eq!(edited.next_u64(), 3);
        let next = edited.next_u64();
        assert_eq!(next, fresh.next_u64());
        assert_eq!(edited.into_tape(), vec![1, 2, 3, next]);
        assert!(SimRng::new(4).into_tape().is_empty());
    }

    #[test]
    fn bounded_draws_stay_in_range() {
        let mut rng = SimRng::new(1);
        for _ in 0..1000 {
            assert!(rng.below(10) < 10);
            let x = rng.between(5, 9);
            assert!((5..=9).contains(&x));
        }
        assert_eq!(rng.below(0), 0);
        assert_eq!(rng.between(3, 3), 3);
    }
}
