//! Steered exploration: a share of the budget goes to runs derived from the runs that
//! first reached a script call site, a call site in a verdict-relevant state
//! ([`crate::model::verdict_states`]) or a client path, chosen by how rarely the others reached
//! what they reached, so code and states that blind seeds seldom run get more runs.
//!
//! Plain seeds run first. Every run (in run order) that reaches a call site, a (call
//! site, state) pair or client path no earlier run reached joins the corpus. Steered runs
//! follow in rounds of [`ROUND`]: each picks a corpus member with odds proportional to its energy, the sum
//! over what it reached of one over the number of runs so far that reached the same, and
//! runs the member's next mutation ([`crate::explore::lineage`]); a steered run that reaches
//! something new joins the corpus too.
//!
//! Invariant: which runs are explored, in which order, depends only on the start, the
//! budget and the options, never on the thread count or the order runs finish in: a
//! round is scheduled from the merge, in run order, of every run before it, and its own
//! runs are merged in the order it scheduled them.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::engine::rng::SimRng;
use crate::explore::lineage::RunId;
use crate::explore::parallel;
use crate::explore::{self, ExploreOptions, SeedOutcome};
use crate::model::coverage;
use crate::model::verdict_states::VerdictState;
use crate::world::SimError;

/// Share of the runs steered unless told otherwise. Measured on 2,000 runs: a fifth or
/// three tenths reached nothing 2,000 plain seeds miss, half reached two call sites they
/// miss (`acquire.lua`'s and `rw_write_release.lua`'s purge of lapsed sibling holds),
/// losing one that a single plain seed of the 2,000 reached; wall time did not grow.
pub const DEFAULT_STEER_SHARE: f64 = 0.5;

/// Steered runs per round: the corpus and the rarity counts move on only between rounds,
/// so a round is the unit of parallel work. A fixed size (not one per thread) keeps the
/// schedule independent of the thread count; fifty keeps both threads of a small machine
/// busy while a budget of a few hundred steered runs still adapts several times.
const ROUND: usize = 50;

/// What at most this share of the plain seeds reached counts as rare in the report: at
/// 2,000 seeds, what ten or fewer reached.
pub const RARE_SHARE: f64 = 0.005;

/// How an exploration's runs split between plain seeds and steered runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Plain seeds.
    pub plain: u64,
    /// Steered runs.
    pub steered: u64,
}

impl Budget {
    /// `runs` in all, `share` of them (rounded down) steered; `share` must lie in `[0, 1)`
    /// so that at least one plain seed is there to steer from.
    pub fn new(runs: u64, share: f64) -> Result<Self, SimError> {
        if !(0.0..1.0).contains(&share) {
            return Err(SimError::SteerShare(share));
        }
        // Exact for any budget below 2^53 runs.
        let steered = (runs as f64 * share).floor() as u64;
        Ok(Self {
            plain: runs - steered.min(runs),
            steered: steered.min(runs),
        })
    }
}

/// One explored run.
#[derive(Debug)]
pub struct Explored {
    /// Which run.
    pub id: RunId,
    /// What it came to.
    pub outcome: SeedOutcome,
}

/// What steering did and what it added over the plain seeds.
#[derive(Debug, Clone, Serialize)]
pub struct SteerReport {
    /// Steered runs' share of the budget.
    pub share: f64,
    /// Plain seeds run.
    pub plain: u64,
    /// Steered runs run (fewer than asked only if no run reached anything to steer from).
    pub steered: u64,
    /// Rounds the steered runs ran in.
    pub rounds: u32,
    /// Runs that first reached something, the parents steered runs derive from.
    pub corpus: usize,
    /// Steered runs in the order they were scheduled.
    pub runs: Vec<String>,
    /// Call sites and client paths no plain seed reached (but a steered run did) or few
    /// did, with how many runs of each kind reached them (the (call site, state) pairs are
    /// summed up per state in `states`).
    pub rare: Vec<RareFeature>,
    /// Every catalogued state, with the runs of each kind that ran a script in it.
    pub states: Vec<StateReach>,
    /// Distinct (call site, state) pairs the plain seeds reached.
    pub state_sites_plain: usize,
    /// Distinct (call site, state) pairs all runs reached.
    pub state_sites_all: usize,
}

/// How many runs reached one catalogued state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StateReach {
    /// The state's name.
    pub state: &'static str,
    /// Plain seeds in which some script ran in it.
    pub plain_runs: u64,
    /// Steered runs in which some script ran in it.
    pub steered_runs: u64,
}

impl SteerReport {
    /// The states no run reached.
    pub fn unreached(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.states
            .iter()
            .filter(|s| s.plain_runs + s.steered_runs == 0)
            .map(|s| s.state)
    }

    /// What steered runs reached that no plain seed did.
    pub fn added(&self) -> impl Iterator<Item = &RareFeature> {
        self.rare
            .iter()
            .filter(|f| f.plain_runs == 0 && f.steered_runs > 0)
    }
}

/// A call site or client path few plain seeds reached.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RareFeature {
    /// `site` (a script call site) or `path` (a client path).
    pub kind: &'static str,
    /// `acquire.lua:132` with its code, or the client mark.
    pub what: String,
    /// Plain seeds that reached it.
    pub plain_runs: u64,
    /// Steered runs that reached it.
    pub steered_runs: u64,
    /// The first steered run that reached it (its replay id), if any did.
    pub first_steered: Option<String>,
}

/// Something a run can reach first: a call site (script file and line), a call site in a
/// verdict-relevant state, or a client path.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
enum Feature {
    Site(String, u32),
    State(String, u32, VerdictState),
    Path(String),
}

fn features_of(outcome: &SeedOutcome) -> Vec<Feature> {
    let sites = outcome.coverage.sites().into_iter();
    let states = outcome.coverage.state_sites().into_iter();
    let paths = outcome.client_marks.iter().cloned().map(Feature::Path);
    sites
        .map(|(script, line)| Feature::Site(script, line))
        .chain(states.map(|(script, line, state)| Feature::State(script, line, state)))
        .chain(paths)
        .collect()
}

/// A run that first reached something, and how many children it has had.
struct Member {
    id: RunId,
    reached: Vec<Feature>,
    children: u32,
}

/// Runs per feature (plain and steered apart), the first steered run reaching each, and
/// the corpus, built by merging runs in run order.
#[derive(Default)]
struct Tally {
    plain: BTreeMap<Feature, u64>,
    steered: BTreeMap<Feature, (u64, RunId)>,
    corpus: Vec<Member>,
    /// Per state, the plain and the steered runs that ran a script in it.
    states: BTreeMap<VerdictState, (u64, u64)>,
}

impl Tally {
    fn runs(&self, feature: &Feature) -> u64 {
        self.plain.get(feature).copied().unwrap_or(0)
            + self.steered.get(feature).map_or(0, |(n, _)| *n)
    }

    fn merge(&mut self, id: &RunId, outcome: &SeedOutcome) {
        let reached = features_of(outcome);
        let new = reached.iter().any(|f| self.runs(f) == 0);
        for state in outcome.coverage.states() {
            let (plain, steered) = self.states.entry(state).or_default();
            *if id.is_plain() { plain } else { steered } += 1;
        }
        for feature in &reached {
            if id.is_plain() {
                *self.plain.entry(feature.clone()).or_default() += 1;
            } else {
                self.steered
                    .entry(feature.clone())
                    .or_insert_with(|| (0, id.clone()))
                    .0 += 1;
            }
        }
        if new {
            self.corpus.push(Member {
                id: id.clone(),
                reached,
                children: 0,
            });
        }
    }

    /// Every catalogued state with the plain and the steered runs that reached it.
    fn state_reach(&self) -> Vec<StateReach> {
        VerdictState::ALL
            .iter()
            .map(|state| {
                let (plain_runs, steered_runs) =
                    self.states.get(state).copied().unwrap_or_default();
                StateReach {
                    state: state.name(),
                    plain_runs,
                    steered_runs,
                }
            })
            .collect()
    }

    /// A member's energy: what it reached, each thing weighted by one over the runs that
    /// reached it.
    fn energy(&self, member: &Member) -> f64 {
        member
            .reached
            .iter()
            .map(|f| 1.0 / self.runs(f).max(1) as f64)
            .sum()
    }

    /// The next `n` steered runs: children of corpus members drawn by energy.
    fn schedule(&mut self, n: usize, rng: &mut SimRng) -> Vec<RunId> {
        let energies: Vec<f64> = self.corpus.iter().map(|m| self.energy(m)).collect();
        let total: f64 = energies.iter().sum();
        (0..n)
            .filter_map(|_| {
                let mut left = unit(rng) * total;
                let last = self.corpus.len().checked_sub(1)?;
                let pick = energies
                    .iter()
                    .position(|e| {
                        left -= e;
                        left < 0.0
                    })
                    .unwrap_or(last);
                let member = self.corpus.get_mut(pick)?;
                member.children += 1;
                Some(member.id.child(member.children - 1))
            })
            .collect()
    }
}

/// Uniform in `[0, 1)`.
fn unit(rng: &mut SimRng) -> f64 {
    const RESOLUTION: u64 = 1 << 53;
    rng.below(RESOLUTION) as f64 / RESOLUTION as f64
}

/// Keeps the schedule's draws apart from any seed's.
const SCHEDULE_SALT: u64 = 0x5354_4545_5200_0000;

/// Explores plain seeds `start..start + budget.plain`, then `budget.steered` steered runs,
/// on `jobs` threads (`tick` after each run); returns every run in run order and what
/// steering did.
pub fn explore(
    start: u64,
    budget: Budget,
    options: &ExploreOptions,
    shrink_failures: bool,
    jobs: usize,
    tick: impl Fn() + Sync,
) -> Result<(Vec<Explored>, SteerReport), SimError> {
    let run_all = |ids: Vec<RunId>| -> Result<Vec<Explored>, SimError> {
        let outcomes = parallel::map(
            &ids,
            jobs,
            |id| explore::explore_run(id, options, shrink_failures),
            &tick,
        );
        ids.into_iter()
            .zip(outcomes)
            .map(|(id, outcome)| {
                Ok(Explored {
                    id,
                    outcome: outcome?,
                })
            })
            .collect()
    };
    let mut tally = Tally::default();
    let mut explored = run_all((start..start + budget.plain).map(RunId::plain).collect())?;
    for run in &explored {
        tally.merge(&run.id, &run.outcome);
    }
    let mut schedule = SimRng::new(start ^ budget.plain.rotate_left(32) ^ SCHEDULE_SALT);
    let mut steered = Vec::new();
    let mut rounds = 0;
    while (steered.len() as u64) < budget.steered {
        let left = usize::try_from(budget.steered - steered.len() as u64).unwrap_or(ROUND);
        let ids = tally.schedule(left.min(ROUND), &mut schedule);
        if ids.is_empty() {
            break;
        }
        rounds += 1;
        steered.extend(ids.iter().map(ToString::to_string));
        for run in run_all(ids)? {
            tally.merge(&run.id, &run.outcome);
            explored.push(run);
        }
    }
    let report = SteerReport {
        share: (budget.steered as f64 / (budget.plain + budget.steered).max(1) as f64),
        plain: budget.plain,
        steered: steered.len() as u64,
        rounds,
        corpus: tally.corpus.len(),
        runs: steered,
        rare: rare(&tally, budget.plain),
        states: tally.state_reach(),
        state_sites_plain: state_sites(tally.plain.keys()),
        state_sites_all: state_sites(tally.plain.keys().chain(tally.steered.keys())),
    };
    Ok((explored, report))
}

/// What an exploration's plain seeds reached, kept so that the reaches of disjoint ranges
/// of plain seeds add up to the reach of them all (`explore --shard`, then `merge`): per
/// call site, (call site, state) pair and client path, the plain seeds that reached it and
/// the first of them; per state, the plain seeds in which a script ran in it.
///
/// Invariant: [`PlainReach::report`] of the reaches of `a..b` and `b..c` added is the
/// steering report [`explore`] gives for the plain seeds `a..c` and no steered run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlainReach {
    /// Every feature some plain seed reached, in feature order.
    features: Vec<FirstReach>,
    /// Every state some plain seed ran a script in, with how many did.
    states: Vec<(VerdictState, u64)>,
}

/// A feature, the plain seeds that reached it, and the lowest of them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct FirstReach {
    feature: Feature,
    runs: u64,
    first: u64,
}

impl PlainReach {
    /// The reach of the plain seeds among `explored` (given in run order), counted as
    /// [`Tally::merge`] counts them.
    pub fn of(explored: &[Explored]) -> Self {
        let mut reach = Self::default();
        let mut features: BTreeMap<Feature, (u64, u64)> = BTreeMap::new();
        let mut states: BTreeMap<VerdictState, u64> = BTreeMap::new();
        for run in explored.iter().filter(|r| r.id.is_plain()) {
            for feature in features_of(&run.outcome) {
                features.entry(feature).or_insert((0, run.id.seed)).0 += 1;
            }
            for state in run.outcome.coverage.states() {
                *states.entry(state).or_default() += 1;
            }
        }
        reach.set(features, states);
        reach
    }

    /// Adds `other`, the reach of other plain seeds.
    pub fn add(&mut self, other: &Self) {
        let mut features: BTreeMap<Feature, (u64, u64)> = BTreeMap::new();
        for f in self.features.iter().chain(&other.features) {
            let (runs, first) = features.entry(f.feature.clone()).or_insert((0, f.first));
            *runs += f.runs;
            *first = (*first).min(f.first);
        }
        let mut states: BTreeMap<VerdictState, u64> = BTreeMap::new();
        for (state, runs) in self.states.iter().chain(&other.states) {
            *states.entry(*state).or_default() += runs;
        }
        self.set(features, states);
    }

    fn set(
        &mut self,
        features: BTreeMap<Feature, (u64, u64)>,
        states: BTreeMap<VerdictState, u64>,
    ) {
        self.features = features
            .into_iter()
            .map(|(feature, (runs, first))| FirstReach {
                feature,
                runs,
                first,
            })
            .collect();
        self.states = states.into_iter().collect();
    }

    /// The steering report of an exploration of `plain` plain seeds with this reach and no
    /// steered run. Its corpus is every seed that was the first to reach something.
    pub fn report(&self, plain: u64) -> SteerReport {
        let tally = Tally {
            plain: self
                .features
                .iter()
                .map(|f| (f.feature.clone(), f.runs))
                .collect(),
            states: self
                .states
                .iter()
                .map(|(state, runs)| (*state, (*runs, 0)))
                .collect(),
            ..Tally::default()
        };
        let firsts: BTreeSet<u64> = self.features.iter().map(|f| f.first).collect();
        SteerReport {
            share: 0.0,
            plain,
            steered: 0,
            rounds: 0,
            corpus: firsts.len(),
            runs: Vec::new(),
            rare: rare(&tally, plain),
            states: tally.state_reach(),
            state_sites_plain: state_sites(tally.plain.keys()),
            state_sites_all: state_sites(tally.plain.keys()),
        }
    }
}

/// How many distinct (call site, state) pairs are among `features`.
fn state_sites<'a>(features: impl Iterator<Item = &'a Feature>) -> usize {
    features
        .filter(|f| matches!(f, Feature::State(..)))
        .collect::<BTreeSet<_>>()
        .len()
}

/// Every feature that steered runs reached and no plain seed did, and every one at most
/// [`RARE_SHARE`] of the plain seeds reached, call sites first.
fn rare(tally: &Tally, plain: u64) -> Vec<RareFeature> {
    let most = (plain as f64 * RARE_SHARE).floor() as u64;
    let features: BTreeSet<&Feature> = tally.plain.keys().chain(tally.steered.keys()).collect();
    features
        .into_iter()
        .filter_map(|feature| {
            let plain_runs = tally.plain.get(feature).copied().unwrap_or(0);
            let steered = tally.steered.get(feature);
            let (kind, what) = match feature {
                _ if plain_runs > most => return None,
                Feature::Site(script, line) => {
                    let code = coverage::code_at(script, *line).unwrap_or_default();
                    ("site", format!("{script}:{line} `{code}`"))
                }
                // Summed up per state in the report's states table, not a row per pair.
                Feature::State(..) => return None,
                Feature::Path(mark) => ("path", mark.clone()),
            };
            Some(RareFeature {
                kind,
                what,
                plain_runs,
                steered_runs: steered.map_or(0, |(n, _)| *n),
                first_steered: steered.map(|(_, first)| first.to_string()),
            })
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::checker::Verdict;
    use crate::model::coverage::Coverage;

    /// An outcome that took the client paths `marks` and nothing else.
    fn took(marks: &[&str]) -> SeedOutcome {
        SeedOutcome {
            verdict: Verdict::Safe,
            failure: None,
            coverage: Coverage::default(),
            client_marks: marks.iter().map(|m| (*m).to_owned()).collect(),
            problem_counts: Vec::new(),
            linear_reach: crate::checker::linear::Reach::default(),
            scopes: Vec::new(),
            drawn: crate::explore::params::Drawn::of(&crate::scenario::base(
                crate::workload::Strategy::Spin,
                0,
            )),
        }
    }

    /// An outcome whose release script run reached lines 4 and 9 in `states`.
    fn found(states: &[VerdictState]) -> SeedOutcome {
        let mut outcome = took(&[]);
        let release = leasehold::script::scripts().release.sha();
        let lines = BTreeSet::from([4, 9]);
        outcome.coverage.add(release, &lines);
        outcome.coverage.add_states(release, &lines, states);
        outcome
    }

    #[test]
    fn a_state_counts_once_per_run_by_kind_and_a_rare_pair_is_steered_to() {
        let (dead, cut) = (
            VerdictState::ReleaseWithDeadSibling,
            VerdictState::HandOffLeaseCut,
        );
        let mut tally = Tally::default();
        tally.merge(&RunId::plain(0), &found(&[cut]));
        tally.merge(&RunId::plain(1), &found(&[cut]));
        tally.merge(&RunId::plain(2), &found(&[cut, dead]));
        tally.merge(&RunId::plain(2).child(0), &found(&[dead]));
        let reach = tally.state_reach();
        assert_eq!(reach.len(), VerdictState::ALL.len());
        let runs = |name: &str| {
            let row = reach.iter().find(|r| r.state == name).unwrap();
            (row.plain_runs, row.steered_runs)
        };
        assert_eq!(runs(cut.name()), (3, 0));
        assert_eq!(runs(dead.name()), (1, 1));
        assert_eq!(runs(VerdictState::Reentry.name()), (0, 0));
        // The same lines in a new state make a run new: seed 2 joins the corpus for it.
        let corpus: Vec<String> = tally.corpus.iter().map(|m| m.id.to_string()).collect();
        assert_eq!(corpus, ["0", "2"]);
        let ids = tally.schedule(40, &mut SimRng::new(1));
        let from_rare = ids.iter().filter(|id| id.seed == 2).count();
        // Lines and cut pairs are common to both; seed 2's dead pairs (2 runs each) add 1.
        assert!(from_rare > 20, "{from_rare} of 40");
        assert_eq!(state_sites(tally.plain.keys()), 4);
    }

    #[test]
    fn a_budget_keeps_a_plain_seed_to_steer_from() {
        assert_eq!(
            Budget::new(1_000, 0.2).unwrap(),
            Budget {
                plain: 800,
                steered: 200
            }
        );
        assert_eq!(
            Budget::new(1, 0.5).unwrap(),
            Budget {
                plain: 1,
                steered: 0
            }
        );
        assert_eq!(Budget::new(7, 0.0).unwrap().steered, 0);
        for bad in [1.0, -0.1, f64::NAN] {
            assert!(Budget::new(10, bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn runs_reaching_something_new_join_the_corpus_and_the_rarest_is_steered_most() {
        let mut tally = Tally::default();
        let runs = [
            (RunId::plain(0), took(&["common"])),
            (RunId::plain(1), took(&["common"])),
            (RunId::plain(2), took(&["common", "rare"])),
            (RunId::plain(3), took(&["common"])),
        ];
        for (id, outcome) in &runs {
            tally.merge(id, outcome);
        }
        let corpus: Vec<String> = tally.corpus.iter().map(|m| m.id.to_string()).collect();
        assert_eq!(corpus, ["0", "2"]);
        let ids = tally.schedule(40, &mut SimRng::new(1));
        let from_rare = ids.iter().filter(|id| id.seed == 2).count();
        // Energies 1/4 and 1/4 + 1: seed 2 should get about 5/6 of the runs.
        assert!((28..40).contains(&from_rare), "{from_rare} of 40");
        // Each parent's children are numbered in the order they were scheduled.
        let children: BTreeSet<u32> = ids
            .iter()
            .filter(|id| id.seed == 2)
            .map(|id| id.steps[0])
            .collect();
        assert_eq!(children, (0..from_rare as u32).collect());

        tally.merge(&RunId::plain(2).child(0), &took(&["rare", "new"]));
        tally.merge(&RunId::plain(2).child(1), &took(&["rare"]));
        assert_eq!(tally.corpus.len(), 3);
        let rare = rare(&tally, 4);
        let rows: Vec<(&str, u64, u64, Option<&str>)> = rare
            .iter()
            .map(|f| {
                (
                    f.what.as_str(),
                    f.plain_runs,
                    f.steered_runs,
                    f.first_steered.as_deref(),
                )
            })
            .collect();
        // With 4 plain seeds nothing they reached counts as rare, only the new path.
        assert_eq!(rows, [("new", 0, 1, Some("2/0"))]);
    }
}
