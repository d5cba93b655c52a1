//! Which hold each acquisition asks for: exclusive (a mutex, or a read-write lock's write
//! hold) or shared (a read hold). A read-write cell's clients draw it per acquisition from the
//! cell's read share, each from its own seeded generator, so every contender sees the same
//! sequence of reads and writes per client and a rerun repeats it.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::error::Error;

/// Mixed into the client index to seed [`AccessMix`]: [`PoissonArrivals`] seeds by the bare
/// index, and two generators with one seed would tie a client's arrival gaps to its choice of
/// reads and writes.
///
/// [`PoissonArrivals`]: crate::bench::arrivals::PoissonArrivals
const ACCESS_SEED_SALT: u64 = 0x5eed_0f4e_ad00;

/// Percent is out of this many.
const PERCENT: u64 = 100;

/// One acquisition's kind of hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Access {
    /// Shared with other readers: a read-write lock's read hold.
    Read,
    /// Alone: a mutex, or a read-write lock's write hold.
    Write,
}

/// One client's sequence of reads and writes.
#[derive(Debug)]
pub struct AccessMix {
    rng: StdRng,
    read_percent: u64,
}

impl AccessMix {
    /// Reads with probability `read_percent` % (100 and above: reads only; 0: writes only),
    /// reproducible per `client`.
    pub fn new(read_percent: u8, client: usize) -> Self {
        Self {
            rng: StdRng::seed_from_u64(client as u64 ^ ACCESS_SEED_SALT),
            read_percent: u64::from(read_percent).min(PERCENT),
        }
    }

    /// The next acquisition's hold. The modulo's bias (2⁶⁴ mod 100 of 2⁶⁴ draws) is far
    /// below anything a benchmark can see.
    pub fn next_access(&mut self) -> Access {
        if self.rng.next_u64() % PERCENT < self.read_percent {
            Access::Read
        } else {
            Access::Write
        }
    }
}

/// The error for a read asked of a lock that only has exclusive holds (a mutex, rslock).
pub fn no_read_hold(name: &str) -> Error {
    Error::Lock {
        name: name.to_owned(),
        reason: "a read hold asked of a lock without read holds (only the read-write lock has \
                 them)"
            .to_owned(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn reads(mix: &mut AccessMix, draws: usize) -> usize {
        (0..draws)
            .filter(|_| mix.next_access() == Access::Read)
            .count()
    }

    #[test]
    fn the_read_share_is_kept_within_sampling_noise() {
        // 10,000 draws at 60 %: standard deviation ~49, so ±250 is five of them.
        let n = reads(&mut AccessMix::new(60, 3), 10_000);
        assert!((5_750..=6_250).contains(&n), "{n} reads of 10,000");
        let n = reads(&mut AccessMix::new(90, 3), 10_000);
        assert!((8_850..=9_150).contains(&n), "{n} reads of 10,000");
    }

    #[test]
    fn the_extremes_are_pure() {
        assert_eq!(reads(&mut AccessMix::new(0, 1), 1_000), 0);
        assert_eq!(reads(&mut AccessMix::new(100, 1), 1_000), 1_000);
        assert_eq!(reads(&mut AccessMix::new(200, 1), 1_000), 1_000);
    }

    #[test]
    fn a_client_repeats_its_sequence_and_clients_differ() {
        let seq = |client| {
            let mut mix = AccessMix::new(60, client);
            (0..64).map(|_| mix.next_access()).collect::<Vec<_>>()
        };
        assert_eq!(seq(7), seq(7));
        assert_ne!(seq(7), seq(8));
    }
}
