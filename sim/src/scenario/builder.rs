//! Scenarios written in code, outside the compiled-in catalogue: a builder for
//! [`Scenario`] that a test, an example or another crate uses to state a fault schedule
//! and what it expects, then runs it with [`run_cell`](super::run_cell) like any named
//! scenario.
//!
//! Invariant: a built scenario is the same value the catalogue holds (a run per strategy
//! and seed, an expectation per strategy), so it is run and judged by the very code that
//! runs and judges the catalogue.

use super::shape::{Expect, Scenario, all, base};
use crate::checker::Verdict;
use crate::scenario::run::RunSpec;
use crate::workload::Strategy;

/// Builds a [`Scenario`]; start it with [`Scenario::builder`].
///
/// Defaults: the run is [`base`] (3 clients contending for one lock with 1 s leases for 12
/// virtual seconds, no faults), the expectation is at worst [`Verdict::Safe`] for every
/// strategy, the summary is empty, and the scenario names no docs/DESIGN.md item (0) and no
/// swarm signature (it is not a known limitation).
#[derive(Debug, Clone, Copy)]
pub struct ScenarioBuilder {
    scenario: Scenario,
}

impl Scenario {
    /// A builder for a scenario called `name` (its name in tables and messages).
    pub fn builder(name: &'static str) -> ScenarioBuilder {
        ScenarioBuilder {
            scenario: Scenario {
                name,
                design_item: 0,
                summary: "",
                build: base,
                expect: all(Expect::AtWorst(Verdict::Safe)),
            },
        }
    }
}

impl ScenarioBuilder {
    /// What the scenario does and why its expectation holds.
    pub fn summary(mut self, summary: &'static str) -> Self {
        self.scenario.summary = summary;
        self
    }

    /// The docs/DESIGN.md §5 item it covers.
    pub fn design_item(mut self, item: u8) -> Self {
        self.scenario.design_item = item;
        self
    }

    /// The run for a strategy and a seed, usually [`base`] with faults added: the same
    /// strategy and seed must give the same spec, so a failing seed replays.
    pub fn run(mut self, build: fn(Strategy, u64) -> RunSpec) -> Self {
        self.scenario.build = build;
        self
    }

    /// Expects `expect` for every strategy.
    pub fn expect_all(mut self, expect: Expect) -> Self {
        self.scenario.expect = all(expect);
        self
    }

    /// Expects `expect` for `strategy` (after [`expect_all`](Self::expect_all), to single
    /// one out).
    pub fn expect(mut self, strategy: Strategy, expect: Expect) -> Self {
        if let Some(index) = Strategy::ALL.iter().position(|s| *s == strategy) {
            self.scenario.expect[index] = expect;
        }
        self
    }

    /// The scenario.
    pub fn build(self) -> Scenario {
        self.scenario
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::scenario::{find, run_cell};
    use crate::world::faults::{Fault, ProcSel, ScheduledFault};

    /// Seeds enough to see the pause bite on every strategy, few enough for a unit test.
    const SEEDS: u64 = 2;

    fn holder_pause(strategy: Strategy, seed: u64) -> RunSpec {
        let mut spec = base(strategy, seed);
        spec.faults = vec![ScheduledFault {
            at_ms: 2_000,
            fault: Fault::Pause {
                who: ProcSel::Holder,
                ms: 3_000,
            },
        }];
        spec
    }

    #[test]
    fn a_built_scenario_runs_as_the_catalogue_one() {
        let built = Scenario::builder("my-holder-pause")
            .summary("The holder stops for 3 s, past its 1 s lease.")
            .run(holder_pause)
            .expect_all(Expect::Exactly(Verdict::ExclusionBroken))
            .build();
        let named = find("holder-pause").unwrap();
        for strategy in [Strategy::Spin, Strategy::RedLock] {
            assert_eq!(built.spec(strategy, 1), named.spec(strategy, 1));
            let cell = run_cell(&built, strategy, SEEDS).unwrap();
            assert_eq!(cell.scenario, "my-holder-pause");
            assert_eq!(cell.worst, Some(Verdict::ExclusionBroken), "{strategy:?}");
            assert!(cell.met);
        }
    }

    #[test]
    fn defaults_expect_a_safe_base_run_and_one_strategy_can_differ() {
        let pending = Expect::Pending("not yet");
        let built = Scenario::builder("quiet")
            .expect(Strategy::RedLock, pending)
            .build();
        assert_eq!(built.spec(Strategy::Spin, 3), base(Strategy::Spin, 3));
        assert_eq!(built.expect(Strategy::Spin), Expect::AtWorst(Verdict::Safe));
        assert_eq!(built.expect(Strategy::RedLock), pending);
        assert_eq!(built.design_item, 0);
    }
}
