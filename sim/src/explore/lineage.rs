//! A run's lineage: a plain seed, or a chain of mutations of one, and how the chain
//! derives the run's spec.
//!
//! Steered exploration ([`crate::explore::steer`]) spends runs near runs that reached rare code. A
//! spec is drawn from a stream of random words; a mutation takes the words its parent's
//! spec consumed, re-draws one to three of them (or every word from some point on, or
//! none), and draws the child's spec from the edited words with the same code that draws
//! a plain seed's spec. So a steered spec is as valid as any plain one (its liveness bound
//! and fault schedule agree), and it mostly keeps its parent's shape.
//!
//! Invariant: a [`RunId`] alone (with the exploration's options) rebuilds its spec: each
//! step's edits and run seed are functions of the root seed and the steps up to it, so
//! `replay 17/0/3` replays what exploration ran, and `17` is plain seed 17 as before.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use crate::engine::rng::SimRng;
use crate::world::SimError;

/// Which run: a plain seed, followed by the mutation numbers that lead from it (empty
/// for the plain seed itself).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct RunId {
    /// The plain seed the chain starts from.
    pub seed: u64,
    /// Mutation numbers: `k` is the child (counting from 0) of the run the steps before name.
    pub steps: Vec<u32>,
}

impl RunId {
    /// Plain seed `seed`.
    pub fn plain(seed: u64) -> Self {
        Self {
            seed,
            steps: Vec::new(),
        }
    }

    /// Whether this is a plain seed rather than a steered run.
    pub fn is_plain(&self) -> bool {
        self.steps.is_empty()
    }

    /// Mutation `k` (counting from 0) of this run.
    pub fn child(&self, k: u32) -> Self {
        let mut steps = self.steps.clone();
        steps.push(k);
        Self {
            seed: self.seed,
            steps,
        }
    }

    /// The id in a form fit for a file name: `17-0-3`.
    pub fn file_stem(&self) -> String {
        self.to_string().replace('/', "-")
    }
}

/// Written `17` for a plain seed and `17/0/3` for mutation 3 of mutation 0 of seed 17.
impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.seed)?;
        for step in &self.steps {
            write!(f, "/{step}")?;
        }
        Ok(())
    }
}

impl FromStr for RunId {
    type Err = SimError;

    fn from_str(text: &str) -> Result<Self, SimError> {
        let bad = || SimError::RunId(text.to_owned());
        let mut parts = text.split('/');
        let seed = parts.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
        let steps = parts
            .map(|p| p.parse().map_err(|_| bad()))
            .collect::<Result<_, _>>()?;
        Ok(Self { seed, steps })
    }
}

/// What `draw` makes of `id`: first of the root seed's own stream, `SimRng::new(root)`
/// (exactly what a plain seed draws from), then, per step, of the previous draw's
/// consumed words as that step edits them. `draw(run_seed, stream)` gets the seed of
/// the run itself: the plain seed, or one mixed from the chain for a steered run, so a
/// child never repeats its parent's timing.
pub fn derive<T>(id: &RunId, root: u64, mut draw: impl FnMut(u64, &mut SimRng) -> T) -> T {
    let mut stream = SimRng::taped(Vec::new(), root);
    let mut drawn = draw(id.seed, &mut stream);
    for depth in 1..=id.steps.len() {
        let chain = &id.steps[..depth];
        let mut edits = SimRng::new(mix(id.seed ^ EDIT_SALT, chain));
        let words = mutate(stream.into_tape(), &mut edits);
        stream = SimRng::taped(words, edits.next_u64());
        drawn = draw(mix(id.seed ^ RUN_SALT, chain), &mut stream);
    }
    drawn
}

/// Salts that keep a step's edits and its run seed independent of each other.
const EDIT_SALT: u64 = 0x4544_4954_5300_0000;
const RUN_SALT: u64 = 0x5255_4e53_4545_4400;

/// A word determined by `seed` and every step of `chain`.
fn mix(seed: u64, chain: &[u32]) -> u64 {
    let mut rng = SimRng::new(seed);
    for step in chain {
        rng = rng.fork(u64::from(*step) + 1);
    }
    rng.next_u64()
}

/// In percent of mutations: the words stay and only the run's own seed (its timing)
/// changes; or one to [`MOST_POINT_EDITS`] words are re-drawn; the rest re-draw every word
/// from a point on. Timing and point edits keep the parent's shape (strategy, lock kind,
/// clients, most faults); a re-drawn tail keeps what is drawn first (the workload) and
/// replaces the faults and buggification drawn after it.
const TIMING_ONLY_PERCENT: u64 = 30;
const POINT_PERCENT: u64 = 80;

/// Most words one point mutation re-draws.
const MOST_POINT_EDITS: u64 = 3;

/// `words` as one mutation edits them.
fn mutate(mut words: Vec<u64>, rng: &mut SimRng) -> Vec<u64> {
    if words.is_empty() {
        return words;
    }
    match rng.below(100) {
        p if p < TIMING_ONLY_PERCENT => {}
        p if p < POINT_PERCENT => {
            for _ in 0..rng.between(1, MOST_POINT_EDITS) {
                let i = rng.index(words.len());
                words[i] = rng.next_u64();
            }
        }
        _ => words.truncate(rng.index(words.len())),
    }
    words
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// A toy draw: the run seed and eight words.
    fn eight(seed: u64, rng: &mut SimRng) -> (u64, Vec<u64>) {
        (seed, (0..8).map(|_| rng.below(1_000)).collect())
    }

    #[test]
    fn ids_read_back_as_written() {
        for text in ["17", "17/0/3", "0/12"] {
            assert_eq!(text.parse::<RunId>().unwrap().to_string(), text);
        }
        assert_eq!(RunId::plain(17).child(0).child(3).to_string(), "17/0/3");
        assert_eq!(RunId::plain(17).child(0).file_stem(), "17-0");
        for bad in ["", "x", "17/", "17/-1", "17/a"] {
            assert!(bad.parse::<RunId>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_plain_id_draws_what_the_seed_draws_and_a_chain_always_the_same() {
        let plain = derive(&RunId::plain(5), 99, eight);
        assert_eq!(plain, eight(5, &mut SimRng::new(99)));
        let child = RunId::plain(5).child(2).child(0);
        let a = derive(&child, 99, eight);
        assert_eq!(a, derive(&child, 99, eight));
        assert_ne!(a.0, 5, "a steered run has a seed of its own");
        let siblings: Vec<_> = (0..6)
            .map(|k| derive(&RunId::plain(5).child(k), 99, eight))
            .collect();
        assert!(siblings.iter().all(|s| s.0 != plain.0));
        assert!(siblings.windows(2).all(|w| w[0] != w[1]));
    }

    #[test]
    fn most_mutations_keep_most_of_the_parents_words() {
        let parent = derive(&RunId::plain(1), 7, eight).1;
        let kept: Vec<usize> = (0..100)
            .map(|k| {
                let child = derive(&RunId::plain(1).child(k), 7, eight).1;
                parent.iter().zip(&child).filter(|(a, b)| a == b).count()
            })
            .collect();
        let close = kept.iter().filter(|&&n| n >= 5).count();
        assert!(close >= 60, "{kept:?}");
        assert!(kept.iter().any(|&n| n < 5), "some re-draw a tail: {kept:?}");
    }
}
