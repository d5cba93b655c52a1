//! Swarm exploration: a random deployment, workload and fault mix per seed, the failures
//! among them, and a shrinker that reduces a failing run to a minimal one.
//!
//! Invariant: `swarm_spec(seed, options)` is a pure function, so the seed alone (with the
//! same options) is a replay command; a shrunk run is kept as a full `RunSpec` (JSON) that
//! replays exactly and fails the same way.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::checker::Verdict;
use crate::faults::{Fault, ProcSel, ScheduledFault};
use crate::rng::SimRng;
use crate::run::{Deployment, RunResult, RunSpec, run};
use crate::scenario::{SCENARIOS, base, liveness_bound};
use crate::workload::Strategy;
use crate::world::{RunEnd, SimError};

/// The pseudo fault kind that turns on random message loss.
pub const LOSS: &str = "loss";

/// Most clients per run unless told otherwise: enough for queues and hand-offs to form,
/// few enough that a 30 s run stays cheap.
pub const DEFAULT_MAX_CLIENTS: usize = 5;

/// Virtual seconds per run unless told otherwise: room for several fault episodes of
/// lease-sized (seconds) length and recovery from each.
pub const DEFAULT_HORIZON_SECS: u64 = 30;

/// What to explore.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExploreOptions {
    /// Strategies drawn from.
    pub strategies: Vec<Strategy>,
    /// Fault kinds drawn from (see [`Fault::KINDS`] and [`LOSS`]).
    pub faults: Vec<String>,
    /// Most clients per run.
    pub max_clients: usize,
    /// Most faults per run.
    pub max_faults: usize,
    /// Virtual length of each run.
    pub horizon: Duration,
}

impl Default for ExploreOptions {
    fn default() -> Self {
        Self {
            strategies: Strategy::ALL.to_vec(),
            faults: Fault::KINDS
                .iter()
                .map(|k| (*k).to_owned())
                .chain([LOSS.to_owned()])
                .collect(),
            max_clients: DEFAULT_MAX_CLIENTS,
            max_faults: 4,
            horizon: Duration::from_secs(DEFAULT_HORIZON_SECS),
        }
    }
}

/// Why a run counts as a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Failure {
    /// Fencing failed (token regression or reuse).
    Violation,
    /// A waiter starved while nothing hampered it.
    Starvation,
    /// Tasks spun without time passing.
    Livelock,
    /// Believed holds overlapped although no fault in the schedule can excuse it.
    UnexcusedOverlap,
}

/// Classifies a finished run.
pub fn failure_of(spec: &RunSpec, result: &RunResult) -> Option<Failure> {
    if result.end == RunEnd::Livelock {
        return Some(Failure::Livelock);
    }
    match result.findings.verdict {
        Verdict::Violation => Some(Failure::Violation),
        Verdict::Starvation => Some(Failure::Starvation),
        Verdict::SafeWithFencing => {
            let excused = spec.faults.iter().any(|f| f.fault.excuses_overlap());
            (!excused).then_some(Failure::UnexcusedOverlap)
        }
        Verdict::Safe => None,
    }
}

fn enabled(options: &ExploreOptions, kind: &str) -> bool {
    options.faults.iter().any(|k| k == kind)
}

/// The run for `seed`: strategy, clients, fault kinds (a random subset of the allowed ones,
/// swarm-style) and the fault schedule all come from the seed.
pub fn swarm_spec(seed: u64, options: &ExploreOptions) -> RunSpec {
    let mut rng = SimRng::new(seed ^ 0x5157_4152_4d00_0000);
    let strategy = options
        .strategies
        .get(rng.index(options.strategies.len().max(1)))
        .copied()
        .unwrap_or(Strategy::PubSub);
    let mut spec = base(strategy, seed);
    spec.horizon = options.horizon;
    spec.clients = rng.between(2, options.max_clients.max(2) as u64) as usize;
    if rng.chance(0.5) {
        spec.workload.hold = (Duration::from_millis(200), Duration::from_millis(1_500));
    }
    spec.workload.watchdog = rng.chance(0.8);
    spec.workload.locks = if rng.chance(0.8) { 1 } else { 2 };
    // Swarm testing: each run only draws from a random subset of the fault kinds, so some
    // runs concentrate on one kind and others mix several.
    let kinds: Vec<&str> = Fault::KINDS
        .iter()
        .copied()
        .filter(|k| enabled(options, k) && rng.chance(0.5))
        .collect();
    if enabled(options, LOSS) && rng.chance(0.3) {
        spec.net.loss = rng.between(1, 30) as f64 / 1_000.0;
    }
    if kinds.contains(&"failover") {
        spec.deployment = Deployment::replicated_for(strategy, rng.between(1, 2) as usize);
        spec.net.repl_lag = Duration::from_millis(rng.between(1, 500));
    }
    // Node faults hit one of the independent masters (always node 0 on one node).
    let masters = Deployment::master_count(strategy);
    let horizon_ms = u64::try_from(options.horizon.as_millis()).unwrap_or(u64::MAX);
    let count = if kinds.is_empty() {
        0
    } else {
        rng.between(1, options.max_faults.max(1) as u64)
    };
    for _ in 0..count {
        let kind = kinds[rng.index(kinds.len())];
        let at_ms = rng.between(500, horizon_ms.saturating_sub(3_000).max(500));
        let who = match rng.below(3) {
            0 => ProcSel::Holder,
            1 => ProcSel::Waiter,
            _ => ProcSel::Id(rng.index(spec.clients)),
        };
        let proc = rng.index(spec.clients);
        let fault = match kind {
            "pause" => Fault::Pause {
                who,
                ms: rng.between(50, 4_000),
            },
            "crash" => Fault::Crash {
                who,
                restart_after_ms: rng.chance(0.7).then(|| rng.between(10, 3_000)),
            },
            "partition" => Fault::Isolate {
                who,
                ms: rng.between(50, 4_000),
            },
            "delay" => Fault::Slow {
                who,
                extra_ms: rng.between(1, 2_000),
                ms: rng.between(50, 4_000),
            },
            "client-drift" => Fault::ClientClockDrift {
                proc,
                ppm: rng.between(0, 600_000) as i64 - 300_000,
            },
            "client-jump" => Fault::ClientClockJump {
                proc,
                by_ms: rng.between(1, 3_000) as i64,
            },
            // Forward only: a backward step stretches every lease on the node, which the
            // liveness bound would (rightly, but uninterestingly) flag.
            "node-jump" => Fault::NodeClockJump {
                node: rng.index(masters),
                by_ms: rng.between(1, 5_000) as i64,
            },
            "node-crash" => Fault::NodeCrash {
                node: rng.index(masters),
                restart_after_ms: Some(rng.between(10, 3_000)),
            },
            "failover" => Fault::Failover {
                group: 0,
                restart_after_ms: Some(rng.between(100, 3_000)),
            },
            _ => Fault::ScriptFlush {
                node: rng.index(masters),
            },
        };
        spec.faults.push(ScheduledFault { at_ms, fault });
    }
    spec.faults.sort_by_key(|f| f.at_ms);
    spec.check.liveness_bound = liveness_bound(strategy, spec.workload.ttl)
        + Duration::from_millis(u64::from(spec.net.loss > 0.0) * 2_000);
    spec
}

/// The catalogued scenario whose known limitation explains `failure` of `spec`: the
/// scenario expects this failure for the strategy, every fault kind of its swarm signature
/// occurs in the run, and the failure needs them — without the signature's faults the run
/// no longer fails this way (one extra run). `None` means the failure is unexpected.
pub fn known_limitation(
    spec: &RunSpec,
    failure: Failure,
) -> Result<Option<&'static str>, SimError> {
    let verdict = match failure {
        Failure::Violation => Verdict::Violation,
        Failure::Starvation => Verdict::Starvation,
        Failure::Livelock | Failure::UnexcusedOverlap => return Ok(None),
    };
    for sc in SCENARIOS {
        let has = |kind: &&str| spec.faults.iter().any(|f| f.fault.kind() == *kind);
        if !sc.known_limitation(spec.workload.strategy, verdict)
            || !sc.swarm_signature.iter().all(has)
        {
            continue;
        }
        let mut without = spec.clone();
        without
            .faults
            .retain(|f| !sc.swarm_signature.contains(&f.fault.kind()));
        if run_and_classify(&without)?.1 != Some(failure) {
            return Ok(Some(sc.name));
        }
    }
    Ok(None)
}

/// A failing seed, shrunk.
#[derive(Debug, Clone, Serialize)]
pub struct FailureReport {
    /// The seed.
    pub seed: u64,
    /// The strategy it drew.
    pub strategy: Strategy,
    /// How it failed.
    pub failure: Failure,
    /// The scenario documenting this failure as a known limitation, if any.
    pub known_limitation: Option<&'static str>,
    /// What the checker said about the original run.
    pub details: Vec<String>,
    /// The minimal failing run found (the original run for an expected failure).
    pub shrunk: RunSpec,
    /// Runs the shrinker spent.
    pub shrink_runs: u32,
}

/// Runs `spec` and classifies it.
pub fn run_and_classify(spec: &RunSpec) -> Result<(RunResult, Option<Failure>), SimError> {
    let result = run(spec)?;
    let failure = failure_of(spec, &result);
    Ok((result, failure))
}

/// Explores one seed: runs its swarm spec and, if it fails, classifies the failure as a
/// known limitation or not; only unexpected failures are shrunk (an expected one replays
/// from its seed, and shrinking it would cost CI time for nothing new).
pub fn explore_seed(
    seed: u64,
    options: &ExploreOptions,
) -> Result<(Verdict, Option<FailureReport>), SimError> {
    let spec = swarm_spec(seed, options);
    let (result, failure) = run_and_classify(&spec)?;
    let Some(failure) = failure else {
        return Ok((result.verdict(), None));
    };
    let known = known_limitation(&spec, failure)?;
    let (shrunk, shrink_runs) = match known {
        Some(_) => (spec.clone(), 0),
        None => shrink(&spec, failure)?,
    };
    Ok((
        result.verdict(),
        Some(FailureReport {
            seed,
            strategy: spec.workload.strategy,
            failure,
            known_limitation: known,
            details: details(&result),
            shrunk,
            shrink_runs,
        }),
    ))
}

/// Most runs the shrinker may spend.
const SHRINK_BUDGET: u32 = 150;

/// Greedily removes faults, clients and run time while the run still fails the same way.
pub fn shrink(spec: &RunSpec, failure: Failure) -> Result<(RunSpec, u32), SimError> {
    let mut best = spec.clone();
    let mut runs = 0u32;
    let still_fails = |candidate: &RunSpec, runs: &mut u32| -> Result<bool, SimError> {
        *runs += 1;
        Ok(run_and_classify(candidate)?.1 == Some(failure))
    };
    let mut progress = true;
    while progress && runs < SHRINK_BUDGET {
        progress = false;
        let mut i = 0;
        while i < best.faults.len() && runs < SHRINK_BUDGET {
            let mut candidate = best.clone();
            candidate.faults.remove(i);
            if still_fails(&candidate, &mut runs)? {
                best = candidate;
                progress = true;
            } else {
                i += 1;
            }
        }
        if best.net.loss > 0.0 && runs < SHRINK_BUDGET {
            let mut candidate = best.clone();
            candidate.net.loss = 0.0;
            if still_fails(&candidate, &mut runs)? {
                best = candidate;
                progress = true;
            }
        }
        let fault_procs = best.faults.iter().filter_map(|f| match f.fault {
            Fault::Pause {
                who: ProcSel::Id(p),
                ..
            }
            | Fault::Crash {
                who: ProcSel::Id(p),
                ..
            }
            | Fault::Isolate {
                who: ProcSel::Id(p),
                ..
            }
            | Fault::Slow {
                who: ProcSel::Id(p),
                ..
            }
            | Fault::ClientClockDrift { proc: p, .. }
            | Fault::ClientClockJump { proc: p, .. } => Some(p),
            _ => None,
        });
        let min_clients = fault_procs.max().map_or(2, |p| (p + 1).max(2));
        if best.clients > min_clients && runs < SHRINK_BUDGET {
            let mut candidate = best.clone();
            candidate.clients -= 1;
            if still_fails(&candidate, &mut runs)? {
                best = candidate;
                progress = true;
            }
        }
        let last_fault = best.faults.iter().map(|f| f.at_ms).max().unwrap_or(0);
        let floor = Duration::from_millis(last_fault) + Duration::from_secs(5);
        let shorter = best.horizon / 4 * 3;
        if shorter >= floor && runs < SHRINK_BUDGET {
            let mut candidate = best.clone();
            candidate.horizon = shorter;
            if still_fails(&candidate, &mut runs)? {
                best = candidate;
                progress = true;
            }
        }
    }
    Ok((best, runs))
}

/// Checker details worth showing for a failure.
pub fn details(result: &RunResult) -> Vec<String> {
    let f = &result.findings;
    let mut out: Vec<String> = f
        .token_problems
        .iter()
        .chain(&f.starvations)
        .cloned()
        .collect();
    for o in &f.overlaps {
        out.push(format!(
            "{}: c{}.{} held [{:.3}s, {:.3}s] token {} while c{}.{} held from {:.3}s token {}",
            o.lock,
            o.first.proc,
            o.first.incarnation,
            o.first.start as f64 / 1e9,
            o.first.end as f64 / 1e9,
            o.first.token,
            o.second.proc,
            o.second.incarnation,
            o.second.start as f64 / 1e9,
            o.second.token
        ));
    }
    if result.end == RunEnd::Livelock {
        out.push("livelock: tasks kept running without virtual time advancing".to_owned());
    }
    out
}
