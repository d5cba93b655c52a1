//! The swarm's draw of Sentinel faults: a client cut from the Sentinels, and a Sentinel
//! whose view of a group lags behind its failovers.
//!
//! Why it exists: the simulated Sentinels would otherwise be omniscient and always
//! reachable, and a Sentinel deployment loses its way in lookups too: a client whose
//! lookups time out cannot follow a failover it has noticed, and a Sentinel that has not
//! yet heard of a promotion (or rejoined after being cut off during one) sends clients to
//! the old master, dead, a replica again, or a zombie still granting. The production
//! backend's policy (drop the master on a failure, ask again) must survive both. Neither
//! excuses a lock's anomaly (`checker::causes`): they only decide which node a client asks,
//! and what a node grants is judged as ever, the failover that made an answer stale
//! explaining what it lost.
//!
//! Invariant: these draws come after every other draw of a swarm spec, so adding them
//! changed no earlier choice; only runs whose deployment follows a group through the
//! Sentinels draw them; each adds one plain liveness bound, as the client faults drawn with
//! the others do (a client that could not find its master meanwhile holds the line until
//! its lease or entry ends; the waits it spends misrouted are its impairment).

use crate::engine::rng::SimRng;
use crate::explore::params;
use crate::scenario::run::RunSpec;
use crate::world::faults::{Fault, ProcSel, SENTINEL_CUT, SENTINEL_STALE, ScheduledFault};

/// Share of runs with Sentinels that cut a client from them (about half the runs have
/// Sentinels: about 5 % of all runs).
const CUT_RUNS: f64 = 0.1;

/// Share of runs with a failover that have a Sentinel lag behind it (about one run in six
/// has a failover: about 6 % of all runs). A lag with no promotion to miss names what the
/// Sentinels name anyway, so it is drawn only where there is one.
const STALE_RUNS: f64 = 0.4;

/// Longest cut drawn, ms at a 1 s lease (as for the other partitions).
const MAX_CUT_MS: u64 = 4_000;

/// Shortest and longest lag of a Sentinel's view, ms at a 1 s lease: from one hello period
/// (2 s in Redis, scaled to the short leases) to a Sentinel cut off through a failover.
const LAG_RANGE_MS: (u64, u64) = (300, 5_000);

/// Draws `spec`'s Sentinel faults among the `enabled` fault kinds, if it has Sentinels: in
/// some runs a client cut from them (across a failover when there is one, so that it asks
/// during the cut), and in some runs with a failover a lagging view of that group from it.
pub fn draw(rng: &mut SimRng, spec: &mut RunSpec, enabled: impl Fn(&str) -> bool) {
    if spec.deployment.groups.is_empty() {
        return;
    }
    let horizon_ms = u64::try_from(spec.horizon.as_millis()).unwrap_or(u64::MAX);
    let scale = params::Scale::of(spec.workload.ttl);
    let at = |rng: &mut SimRng| rng.between(horizon_ms / 20, horizon_ms * 8 / 10);
    let failovers: Vec<(u64, usize)> = spec
        .faults
        .iter()
        .filter_map(|f| match f.fault {
            Fault::Failover { group, .. } => Some((f.at_ms, group)),
            _ => None,
        })
        .collect();
    let mut faults = Vec::new();
    if enabled(SENTINEL_CUT) && rng.chance(CUT_RUNS) {
        let ms = scale.ms(rng.between(50, MAX_CUT_MS));
        let at_ms = match failovers.as_slice() {
            [] => at(rng),
            some => some[rng.index(some.len())]
                .0
                .saturating_sub(rng.between(0, ms / 2)),
        };
        let who = ProcSel::Id(rng.index(spec.clients));
        faults.push(ScheduledFault {
            at_ms,
            fault: Fault::SentinelCut { who, ms },
        });
    }
    if !failovers.is_empty() && enabled(SENTINEL_STALE) && rng.chance(STALE_RUNS) {
        let (at_ms, group) = failovers[rng.index(failovers.len())];
        let lag_ms = scale.ms(rng.log_between(LAG_RANGE_MS.0, LAG_RANGE_MS.1));
        // From the failover (a split's or late promotion's comes later, inside the lag),
        // for at least the lag: the window in which the lagging view names the old master.
        let ms = lag_ms + scale.ms(rng.between(0, MAX_CUT_MS));
        faults.push(ScheduledFault {
            at_ms,
            fault: Fault::SentinelStale { group, lag_ms, ms },
        });
    }
    let per_client_fault = params::bound(spec);
    spec.check.liveness_bound += per_client_fault * u32::try_from(faults.len()).unwrap_or(0);
    spec.faults.extend(faults);
    spec.faults.sort_by_key(|f| f.at_ms);
}
