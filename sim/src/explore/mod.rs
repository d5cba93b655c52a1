//! The explore room: swarm exploration. The draw of deployments, parameters and faults
//! ([`params`], [`groups`], [`links`], [`lookups`], [`memory`], [`node_clocks`],
//! [`operations`]), what a whole exploration drew ([`drawn`]), steering towards rare code
//! and states ([`steer`]) with a steered run's [`lineage`], the slices of an exploration
//! run apart ([`shard`]), the worker threads ([`parallel`]), the shrinker ([`shrink`]), and
//! below, the swarm.
//!
//! Swarm exploration: a random deployment, workload and fault mix per seed, the failures
//! among them, and a shrinker that reduces a failing run to a minimal one.
//!
//! Invariant: `swarm_spec(seed, options)` is a pure function, so the seed alone (with the
//! same options) is a replay command, and so is a steered run's id (`spec_for`, see
//! [`crate::explore::lineage`]); a shrunk run is kept as a full `RunSpec` (JSON) that replays
//! exactly and fails the same way.
//!
//! May import: engine, model, world, workload, checker, scenario.

pub mod drawn;
pub mod groups;
pub mod lineage;
pub mod links;
pub mod lookups;
pub mod memory;
pub mod node_clocks;
pub mod operations;
pub mod parallel;
pub mod params;
pub mod shard;
mod shrink;
pub mod steer;

pub use shrink::{SHRINK_BUDGET, shrink};

use std::collections::BTreeSet;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::checker::{ProblemCount, ProblemKind, Scope, Verdict, linear::Reach};
use crate::engine::rng::SimRng;
use crate::explore::lineage::RunId;
use crate::explore::params::Drawn;
use crate::explore::shrink::SHRINK_BUDGET_EXPECTED;
use crate::model::coverage::Coverage;
use crate::scenario::run::{RunResult, RunSpec, run, run_covered};
use crate::scenario::{base, with_kind};
use crate::workload::Strategy;
use crate::world::faults::{APART, Fault, ProcSel, ScheduledFault};
use crate::world::{RunEnd, SimError};

/// The pseudo fault kind that turns on random message loss.
pub const LOSS: &str = "loss";

/// Most clients per run unless told otherwise: enough for long queues and hand-off chains
/// (seven waiters behind a holder) and several readers beside a writer to form, few
/// enough that a 30 s run stays cheap.
pub const DEFAULT_MAX_CLIENTS: usize = 8;

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
    /// Fencing failed (a token out of order, reused, or a re-entry's token not its epoch's).
    Violation,
    /// Mutual exclusion broke (conflicting beliefs, or a belief the servers no longer held)
    /// and no fault that touched the hold explains it.
    ExclusionBroken,
    /// A waiter starved while nothing hampered it.
    Starvation,
    /// Tasks spun without time passing.
    Livelock,
}

/// One failure of a run, classified on its own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// What failed.
    pub failure: Failure,
    /// The checker's kind of problem behind it (`None` for a livelock, which no checker
    /// reports): what the mutation gate matches a mutant's named verdicts against.
    pub problem: Option<ProblemKind>,
    /// The known limitation it is: the checker's rule that explains it by cause (a token
    /// out of order, see `checker::issuers`), or the catalogued scenario documenting it
    /// for the strategy whose signature faults all touched it; `None` means unexpected.
    /// Owned, so that a report read back (`merge`) keeps it.
    pub known_limitation: Option<String>,
    /// The evidence of the rule that made it expected, where the checker gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<String>,
    /// The checker's description.
    pub detail: String,
}

/// The failures of a finished run, each classified by the causal rule: a broken exclusion
/// counts only when no fault that touched the hold explains it (see
/// [`crate::checker::causes`]), and a fencing failure or a starvation is expected only
/// when a rule of the checker excused it by its cause, with its evidence (the fault, its
/// node, size and window); none is expected for the company it keeps.
pub fn failures_of(result: &RunResult) -> Vec<Finding> {
    let mut out = Vec::new();
    if result.end == RunEnd::Livelock {
        out.push(Finding {
            failure: Failure::Livelock,
            problem: None,
            known_limitation: None,
            evidence: None,
            detail: "livelock: tasks kept running without virtual time advancing".to_owned(),
        });
    }
    for problem in &result.findings.problems {
        let failure = match problem.kind.verdict() {
            Verdict::ExclusionBroken if problem.excused => continue,
            Verdict::ExclusionBroken => Failure::ExclusionBroken,
            Verdict::Violation => Failure::Violation,
            Verdict::Starvation => Failure::Starvation,
            Verdict::Safe | Verdict::SafeWithFencing => continue,
        };
        let known_limitation = match problem.kind {
            // A token out of order (or a re-entry's foreign token) is expected when its
            // issuing node explains it (the checker's rule, with its evidence), a waiter's
            // when its fault does; a token reused never is.
            kind if kind.expected_when_excused() && problem.excused => {
                problem.rule.map(str::to_owned)
            }
            // Every other failure is unexpected: a hand-off past its grantee's entry (no
            // fault moves a deadline the script reads off its own clock), a starvation no
            // rule sized to its fault.
            _ => None,
        };
        out.push(Finding {
            failure,
            problem: Some(problem.kind),
            evidence: known_limitation.as_ref().and(problem.excuse.clone()),
            known_limitation,
            detail: problem.detail.clone(),
        });
    }
    out
}

/// What a shrink keeps failing: a failure of this kind, expected by this scenario (or
/// unexpected).
pub type ShrinkTarget = (Failure, Option<String>);

/// The failure a failing run is reported and shrunk by: its first unexpected one, else its
/// first expected one.
pub fn target_of(findings: &[Finding]) -> Option<ShrinkTarget> {
    findings
        .iter()
        .find(|f| f.known_limitation.is_none())
        .or_else(|| findings.first())
        .map(|f| (f.failure, f.known_limitation.clone()))
}

fn enabled(options: &ExploreOptions, kind: &str) -> bool {
    options.faults.iter().any(|k| k == kind)
}

/// The run for `seed`: strategy, clients, fault kinds (a random subset of the allowed ones,
/// swarm-style) and the fault schedule all come from the seed.
pub fn swarm_spec(seed: u64, options: &ExploreOptions) -> RunSpec {
    draw_swarm(seed, &mut SimRng::new(seed ^ SWARM_SALT), options)
}

/// The run `id` names: plain seed `id.seed`'s spec, or for a steered run its spec drawn
/// from the words the chain of mutations left (the same as `swarm_spec` for a plain seed).
pub fn spec_for(id: &RunId, options: &ExploreOptions) -> RunSpec {
    lineage::derive(id, id.seed ^ SWARM_SALT, |seed, rng| {
        draw_swarm(seed, rng, options)
    })
}

/// Keeps a seed's swarm draws apart from its run's own stream (`SimRng::new(seed)`).
const SWARM_SALT: u64 = 0x5157_4152_4d00_0000;

/// A swarm run with seed `seed` whose every choice is drawn from `rng`.
fn draw_swarm(seed: u64, rng: &mut SimRng, options: &ExploreOptions) -> RunSpec {
    let strategy = options
        .strategies
        .get(rng.index(options.strategies.len().max(1)))
        .copied()
        .unwrap_or(Strategy::PubSub);
    let kind = params::draw_kind(rng, strategy);
    let mut spec = with_kind(base(strategy, seed), kind);
    let scale = params::draw(rng, &mut spec);
    spec.horizon = scale.of_duration(options.horizon);
    // Log-uniform: four runs in ten have two or three clients and about one in four has six
    // to eight, so the mean (4.3) and the control run's cost stay within about a quarter of
    // a uniform 2 to 5's (3.5): a run costs about as much as its clients.
    spec.clients = rng.log_between(2, options.max_clients.max(2) as u64) as usize;
    // Without the watchdog a lease ends by its own validity, which is where lease bugs
    // show: such runs mostly hold past the TTL.
    spec.workload.watchdog = rng.chance(0.5);
    spec.workload.extend = !spec.workload.watchdog && rng.chance(0.5);
    if rng.chance(if spec.workload.watchdog { 0.5 } else { 0.8 }) {
        spec.workload.hold = (
            scale.of_duration(Duration::from_millis(200)),
            scale.of_duration(Duration::from_millis(1_500)),
        );
    }
    spec.workload.locks = if rng.chance(0.8) { 1 } else { 2 };
    // Swarm testing: each run only draws from a random subset of the fault kinds, so some
    // runs concentrate on one kind and others mix several.
    let kinds: Vec<&str> = Fault::KINDS
        .iter()
        .copied()
        .filter(|k| !APART.contains(k) && enabled(options, k) && rng.chance(0.5))
        .collect();
    if enabled(options, LOSS) && rng.chance(0.3) {
        spec.net.loss = rng.between(1, 30) as f64 / 1_000.0;
    }
    if kinds.contains(&"failover") {
        groups::replicate(rng, &mut spec);
    }
    // Node faults hit one of the independent masters (always node 0 on one node).
    let masters = spec.deployment.targets.len();
    let horizon_ms = u64::try_from(spec.horizon.as_millis()).unwrap_or(u64::MAX);
    let ms = |base_ms: u64| scale.ms(base_ms);
    let count = if kinds.is_empty() {
        0
    } else {
        rng.between(1, options.max_faults.max(1) as u64)
    };
    for _ in 0..count {
        let kind = kinds[rng.index(kinds.len())];
        let at_ms = rng.between(ms(500), horizon_ms.saturating_sub(ms(3_000)).max(ms(500)));
        let who = match rng.below(3) {
            0 => ProcSel::Holder,
            1 => ProcSel::Waiter,
            _ => ProcSel::Id(rng.index(spec.clients)),
        };
        let proc = rng.index(spec.clients);
        let fault = match kind {
            "pause" => Fault::Pause {
                who,
                ms: ms(rng.between(50, 4_000)),
            },
            "crash" => Fault::Crash {
                who,
                restart_after_ms: rng.chance(0.7).then(|| ms(rng.between(10, 3_000))),
            },
            "partition" => Fault::Isolate {
                who,
                ms: ms(rng.between(50, 4_000)),
            },
            // Log-uniform: tens of ms (a lease shortened by a round trip) as often as
            // seconds (every request timing out).
            "delay" => Fault::Slow {
                who,
                extra_ms: rng.log_between(1, 2_000),
                ms: ms(rng.between(50, 8_000)),
            },
            "client-drift" => Fault::ClientClockDrift {
                proc,
                ppm: rng.between(0, 600_000) as i64 - 300_000,
            },
            "client-jump" => Fault::ClientClockJump {
                proc,
                by_ms: ms(rng.between(1, 3_000)) as i64,
            },
            // Either way: a step back stretches every lease the node holds (the liveness
            // bound grows by it, below) and is where a token without `last + 1` goes
            // backwards; a step forward ends leases early.
            "node-jump" => {
                let by_ms = ms(rng.between(1, 5_000)) as i64;
                Fault::NodeClockJump {
                    node: rng.index(masters),
                    by_ms: if rng.chance(BACKWARD_STEPS) {
                        -by_ms
                    } else {
                        by_ms
                    },
                }
            }
            // Any node, a replica too; a RedLock master or a replica may stay down for
            // good (a single node's clients would only wait out the run).
            "node-crash" => {
                let node = rng.index(spec.deployment.nodes.len());
                let for_good = (masters > 1 || node >= masters) && rng.chance(0.2);
                Fault::NodeCrash {
                    node,
                    restart_after_ms: (!for_good).then(|| ms(rng.between(10, 3_000))),
                }
            }
            "node-pause" => Fault::NodePause {
                node: rng.index(masters),
                ms: ms(rng.between(50, 4_000)),
            },
            "node-partition" => Fault::NodeIsolate {
                node: rng.index(masters),
                ms: ms(rng.between(50, 4_000)),
            },
            "failover" => groups::failover(rng, &spec, scale, who),
            _ => Fault::ScriptFlush {
                node: rng.index(masters),
            },
        };
        spec.faults.push(ScheduledFault { at_ms, fault });
    }
    // A client far from its server for the whole run (another zone): every lease it gets
    // was granted a one-way delay after it asked, which a lease counted from the reply
    // would miss. Its round trip stays below the response timeout: a client that never
    // hears back in time is misconfigured, and each of its unanswered grants holds the
    // line until its clean-up arrives, again and again. RedLock's per-master timeout is
    // far shorter (at most a tenth of the TTL): its far client stays within half of it, so
    // its quorum forms a round trip after its first request, where a validity counted from
    // the quorum's answer would show.
    if enabled(options, "delay") && rng.chance(0.5) {
        let far_ms = match strategy {
            Strategy::RedLock => {
                let timeout = leasehold::DEFAULT_NODE_TIMEOUT
                    .min(spec.workload.ttl / leasehold::NODE_TIMEOUT_TTL_DIVISOR);
                u64::try_from(timeout.as_millis() / 2).unwrap_or(1).max(2) - 1
            }
            Strategy::Spin | Strategy::PubSub | Strategy::FairQueue => FAR_CLIENT_MS,
        };
        spec.faults.push(ScheduledFault {
            at_ms: 0,
            fault: Fault::Slow {
                who: ProcSel::Id(rng.index(spec.clients)),
                extra_ms: rng.log_between(1, far_ms),
                ms: horizon_ms,
            },
        });
    }
    spec.faults.sort_by_key(|f| f.at_ms);
    // Each client fault can cost the line once: a crashed, cut off or frozen client holds
    // the lock until its lease ends, or its queue place until its entry times out, and
    // such faults may strike one after another during one wait. A node outage can cost
    // as much once it ends (queue entries lapsed meanwhile), on top of its own length.
    let client_faults = spec
        .faults
        .iter()
        .filter(|f| {
            matches!(
                f.fault,
                Fault::Crash { .. }
                    | Fault::Isolate { .. }
                    | Fault::Pause { .. }
                    | Fault::NodePause { .. }
                    | Fault::NodeIsolate { .. }
                    | Fault::Failover { split: Some(_), .. }
            )
        })
        .count();
    // A stalled or cut-off node holds every waiter up for as long as it lasts.
    let node_outages: u64 = spec
        .faults
        .iter()
        .map(|f| match f.fault {
            Fault::NodePause { ms, .. } | Fault::NodeIsolate { ms, .. } => ms,
            // A node clock stepped back keeps every lease it holds that much longer.
            Fault::NodeClockJump { by_ms, .. } if by_ms < 0 => by_ms.unsigned_abs(),
            Fault::Failover {
                split: Some(split), ..
            } => split.heal_after_ms,
            _ => 0,
        })
        .sum();
    let per_client_fault = spec.check.liveness_bound;
    spec.check.liveness_bound = per_client_fault
        .saturating_mul(u32::try_from(client_faults + 1).unwrap_or(u32::MAX))
        + lost_release_allowance(&spec) * u32::from(spec.net.loss > 0.0)
        + Duration::from_millis(node_outages);
    crate::explore::operations::draw(rng, &mut spec);
    node_clocks::draw(rng, &mut spec, |kind| enabled(options, kind));
    // Buggify: in some runs client processes hiccup between awaits, for at most a
    // millisecond (far below the drift margin, so a hiccup excuses nothing).
    if rng.chance(HICCUP_RUNS) {
        spec.net.hiccup_chance = rng.log_between(1, 50) as f64 / 1_000.0;
        spec.net.hiccup_max = Duration::from_micros(rng.log_between(10, 1_000));
    }
    // Buggify, replies: in some runs nodes refuse 0.1-3 % of script calls with a spurious
    // NOSCRIPT or READONLY. A refused release leaves its lock to expire, as a lost one does,
    // so the liveness bound allows what it allows for loss.
    if rng.chance(GLITCH_RUNS) {
        spec.net.glitch_chance = rng.log_between(1, 30) as f64 / 1_000.0;
        if spec.net.loss <= 0.0 {
            spec.check.liveness_bound += lost_release_allowance(&spec);
        }
    }
    memory::draw(rng, &mut spec, |kind| enabled(options, kind));
    links::draw(rng, &mut spec, |kind| enabled(options, kind));
    groups::late_promotions(rng, &mut spec);
    lookups::draw(rng, &mut spec, |kind| enabled(options, kind));
    node_clocks::draw_server(rng, &mut spec);
    crate::explore::operations::draw_last(rng, &mut spec);
    groups::min_replicas(rng, &mut spec);
    // A waiter outlasts the liveness bound (what the run's faults allow, sized above) by a
    // lease before it gives up, so a wait that starves can be seen to pass the bound.
    let outlast = spec.check.liveness_bound + spec.workload.ttl;
    spec.workload.acquire_timeout = spec.workload.acquire_timeout.map(|t| t.max(outlast));
    spec
}

/// Share of swarm runs whose client processes hiccup (see `NetConfig::hiccup_chance`).
const HICCUP_RUNS: f64 = 0.3;

/// Share of swarm runs whose nodes answer some script calls with spurious errors (see
/// `NetConfig::glitch_chance`).
const GLITCH_RUNS: f64 = 0.2;

/// What the liveness bound allows for releases that never ran (lost or refused): the lock
/// lingers until its lease ends, plus a second of retry slack.
fn lost_release_allowance(spec: &RunSpec) -> Duration {
    spec.workload.ttl + Duration::from_secs(1)
}

/// Longest one-way delay of a far client of a single node, ms: its round trip stays
/// below the response timeout.
const FAR_CLIENT_MS: u64 = 200;

/// Share of node clock steps that go backwards.
const BACKWARD_STEPS: f64 = 0.5;

/// A failing run, shrunk.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FailureReport {
    /// The plain seed, or the seed a steered run's chain starts from.
    pub seed: u64,
    /// A steered run's mutation numbers ([`RunId::steps`]); none for a plain seed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<u32>,
    /// The strategy it drew.
    pub strategy: Strategy,
    /// The failure it is reported (and shrunk) by: its first unexpected one, else its first.
    pub failure: Failure,
    /// The scenario documenting that failure as a known limitation; `None` when any
    /// failure of the run is unexpected.
    pub known_limitation: Option<String>,
    /// Every failure of the original run, classified on its own.
    pub findings: Vec<Finding>,
    /// What the checker said about the original run.
    pub details: Vec<String>,
    /// The minimal run found that still fails the same way.
    pub shrunk: RunSpec,
    /// Runs the shrinker spent.
    pub shrink_runs: u32,
}

impl FailureReport {
    /// Which run failed.
    pub fn run_id(&self) -> RunId {
        RunId {
            seed: self.seed,
            steps: self.steps.clone(),
        }
    }
}

/// Runs `spec` and classifies its failures.
pub fn run_and_classify(spec: &RunSpec) -> Result<(RunResult, Vec<Finding>), SimError> {
    let result = run(spec)?;
    let findings = failures_of(&result);
    Ok((result, findings))
}

/// What exploring one run came to.
#[derive(Debug)]
pub struct SeedOutcome {
    /// The run's verdict.
    pub verdict: Verdict,
    /// Its failure, classified and (when asked) shrunk.
    pub failure: Option<FailureReport>,
    /// The script call sites the run reached.
    pub coverage: Coverage,
    /// The client paths the run took ([`crate::workload::client_marks`]).
    pub client_marks: BTreeSet<String>,
    /// Every problem the checker found, counted by classification.
    pub problem_counts: Vec<ProblemCount>,
    /// Lock keys the linearizability check did not check exactly.
    pub linear_reach: Reach,
    /// How far each per-waiter and per-hold verdict reached ([`scopes`]).
    pub scopes: Vec<Scope>,
    /// What the run drew.
    pub drawn: Drawn,
}

/// Explores one run, a plain seed or a steered one: runs its swarm spec (recording the
/// script call sites it reaches), classifies each failure on its own and, when
/// `shrink_failures`, shrinks the run by its first unexpected failure (else its first
/// expected one, on a smaller budget: a known limitation needs a small replay too, but is
/// nothing new). Unshrunk, the report carries the original spec.
pub fn explore_run(
    id: &RunId,
    options: &ExploreOptions,
    shrink_failures: bool,
) -> Result<SeedOutcome, SimError> {
    let spec = spec_for(id, options);
    let result = run_covered(&spec)?;
    let findings = failures_of(&result);
    let Some(target) = target_of(&findings) else {
        return Ok(SeedOutcome {
            verdict: result.verdict(),
            failure: None,
            problem_counts: result.findings.problem_counts.clone(),
            linear_reach: result.findings.linear_reach,
            scopes: scopes(&spec, &result),
            coverage: result.coverage,
            client_marks: result.client_marks,
            drawn: Drawn::of(&spec),
        });
    };
    let budget = if target.1.is_none() {
        SHRINK_BUDGET
    } else {
        SHRINK_BUDGET_EXPECTED
    };
    let (shrunk, shrink_runs) = if shrink_failures {
        shrink(&spec, target.clone(), budget)?
    } else {
        (spec.clone(), 0)
    };
    Ok(SeedOutcome {
        verdict: result.verdict(),
        problem_counts: result.findings.problem_counts.clone(),
        linear_reach: result.findings.linear_reach,
        scopes: scopes(&spec, &result),
        drawn: Drawn::of(&spec),
        failure: Some(FailureReport {
            seed: id.seed,
            steps: id.steps.clone(),
            strategy: spec.workload.strategy,
            failure: target.0,
            known_limitation: target.1,
            details: details(&result),
            findings,
            shrunk,
            shrink_runs,
        }),
        coverage: result.coverage,
        client_marks: result.client_marks,
    })
}

/// How far `result`'s per-waiter and per-hold verdicts reached: the checker's count, with
/// the global liveness bound switched off in a run whose waits give up at or before it
/// (a wait can then never be seen to pass it).
pub fn scopes(spec: &RunSpec, result: &RunResult) -> Vec<Scope> {
    let gives_up_first = spec
        .workload
        .acquire_timeout
        .is_some_and(|timeout| timeout <= spec.check.liveness_bound);
    let mut scopes = result.findings.scopes.clone();
    for scope in &mut scopes {
        if scope.kind == ProblemKind::Starvation && gives_up_first {
            scope.off = Some("bound at or past the acquire timeout");
        }
    }
    scopes
}

/// Checker details worth showing for a failure: every problem, with the faults that
/// touched it and the rule (with its evidence) that excused it, if one did.
pub fn details(result: &RunResult) -> Vec<String> {
    let mut out: Vec<String> = result
        .findings
        .problems
        .iter()
        .map(|p| {
            let touched = if p.touched_by.is_empty() {
                "touched by no fault".to_owned()
            } else {
                format!("touched by {}", p.touched_by.join(", "))
            };
            let verdict = match (&p.rule, &p.excuse) {
                (Some(rule), Some(why)) => format!("excused by {rule}: {why}"),
                _ if p.excused => "excused".to_owned(),
                _ => "not excused".to_owned(),
            };
            format!("{:?}: {} [{touched}; {verdict}]", p.kind, p.detail)
        })
        .collect();
    if result.end == RunEnd::Livelock {
        out.push("livelock: tasks kept running without virtual time advancing".to_owned());
    }
    out
}
