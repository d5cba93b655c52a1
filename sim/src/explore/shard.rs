//! A shard of an exploration: `I/N`, the I-th of N disjoint slices of its plain seeds, so
//! that N machines (a CI matrix, a set of jobs) can run one exploration between them.
//!
//! Invariant: the N shards of `start..start + seeds` are contiguous, disjoint and together
//! the whole range, in order: shard I runs exactly the seeds I-th in line, whoever runs
//! it, so merging the N reports in shard order sees the seeds in the order one unsharded
//! run does.

use std::fmt;
use std::ops::Range;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::world::SimError;

/// The `index`-th (from 1) of `count` slices of an exploration's plain seeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Shard {
    /// Which slice, from 1.
    pub index: u32,
    /// How many slices.
    pub count: u32,
}

impl Shard {
    /// The plain seeds of `start..start + seeds` this shard runs: the `index`-th of
    /// `count` near-equal contiguous blocks (their lengths differ by at most one; with
    /// fewer seeds than shards, some are empty).
    pub fn seeds(&self, start: u64, seeds: u64) -> Range<u64> {
        let edge = |i: u32| {
            // Below 2^64 · 2^32, so exact in u128; the quotient is at most `seeds`.
            let offset = u128::from(seeds) * u128::from(i) / u128::from(self.count);
            start + u64::try_from(offset).unwrap_or(seeds)
        };
        edge(self.index - 1)..edge(self.index)
    }
}

/// Written `2/4`.
impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl FromStr for Shard {
    type Err = SimError;

    fn from_str(text: &str) -> Result<Self, SimError> {
        let bad = |why| SimError::Shard {
            text: text.to_owned(),
            why,
        };
        let (index, count) = text.split_once('/').ok_or_else(|| bad("no '/'"))?;
        let index: u32 = index
            .trim()
            .parse()
            .map_err(|_| bad("I is not a whole number"))?;
        let count: u32 = count
            .trim()
            .parse()
            .map_err(|_| bad("N is not a whole number"))?;
        match (index, count) {
            (_, 0) => Err(bad("N is 0")),
            (0, _) => Err(bad("I counts from 1")),
            (i, n) if i > n => Err(bad("I is above N")),
            (index, count) => Ok(Self { index, count }),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn a_shard_reads_back_as_written_and_bad_ones_say_why() {
        assert_eq!("2/4".parse::<Shard>().unwrap().to_string(), "2/4");
        assert_eq!(
            "1/1".parse::<Shard>().unwrap(),
            Shard { index: 1, count: 1 }
        );
        for (text, why) in [
            ("0/4", "I counts from 1"),
            ("5/4", "I is above N"),
            ("1/0", "N is 0"),
            ("0/0", "N is 0"),
            ("abc", "no '/'"),
            ("", "no '/'"),
            ("a/4", "I is not a whole number"),
            ("-1/4", "I is not a whole number"),
            ("1/4/2", "N is not a whole number"),
            ("2/", "N is not a whole number"),
        ] {
            match text.parse::<Shard>() {
                Err(SimError::Shard { why: said, .. }) => assert_eq!(said, why, "{text:?}"),
                other => panic!("{text:?}: {other:?}"),
            }
        }
        let message = "5/4".parse::<Shard>().unwrap_err().to_string();
        assert!(
            message.contains("\"5/4\"") && message.contains("e.g. 2/4"),
            "{message}"
        );
    }

    #[test]
    fn the_shards_split_the_seeds_into_disjoint_contiguous_blocks_in_order() {
        for (start, seeds, count) in [(0, 400, 4), (7, 10, 3), (5, 2, 4), (0, 0, 2), (3, 1, 1)] {
            let ranges: Vec<Range<u64>> = (1..=count)
                .map(|index| Shard { index, count }.seeds(start, seeds))
                .collect();
            assert_eq!(ranges[0].start, start);
            assert_eq!(ranges.last().unwrap().end, start + seeds);
            assert!(ranges.windows(2).all(|w| w[0].end == w[1].start));
            let lengths: Vec<u64> = ranges.iter().map(|r| r.end - r.start).collect();
            let (least, most) = (lengths.iter().min(), lengths.iter().max());
            assert!(most.unwrap() - least.unwrap() <= 1, "{lengths:?}");
        }
        let huge = Shard { index: 3, count: 3 }.seeds(u64::MAX - 10, 10);
        assert_eq!(huge.end, u64::MAX);
    }
}
