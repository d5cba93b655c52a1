//! The swarm's draw of memory pressure: a node under `maxmemory` with a `volatile-*`
//! policy evicting keys with a TTL, lock keys included.
//!
//! Why it exists: with any `maxmemory-policy` but `noeviction`, a full Redis deletes live
//! locks and grants them again, a hazard of the deployment that no client can prevent
//! (it can only warn, see `leasehold::Client::eviction_risk`). Exploration draws it so
//! that the checker's causal excuse (`checker::evictions`: only the lock whose key went)
//! is exercised, and so that everything else the lock does stays judged around it.
//!
//! Invariant: these draws come after every other draw of a swarm spec, so adding them
//! changed no earlier choice.

use crate::engine::rng::SimRng;
use crate::scenario::run::RunSpec;
use crate::world::faults::{EVICT, EvictionPolicy, Fault, ScheduledFault};

/// Share of runs with evictions.
const EVICT_RUNS: f64 = 0.06;

/// Most evictions in one run.
const MAX_EVICTIONS: u64 = 3;

/// Most keys one eviction takes: a lock has up to five keys with a TTL.
const MAX_KEYS: u64 = 4;

/// Draws `spec`'s evictions when `enabled(EVICT)`: in some runs, one to three moments at
/// which one master evicts one to four keys, nearest expiry first or at random.
pub fn draw(rng: &mut SimRng, spec: &mut RunSpec, enabled: impl Fn(&str) -> bool) {
    if !enabled(EVICT) || !rng.chance(EVICT_RUNS) {
        return;
    }
    let horizon_ms = u64::try_from(spec.horizon.as_millis()).unwrap_or(u64::MAX);
    // The independent masters (one node, or RedLock's) come first.
    let masters = spec.deployment.targets.len().max(1);
    for _ in 0..rng.between(1, MAX_EVICTIONS) {
        let at_ms = rng.between(horizon_ms / 20, horizon_ms * 9 / 10);
        let policy = if rng.chance(0.5) {
            EvictionPolicy::VolatileTtl
        } else {
            EvictionPolicy::VolatileRandom
        };
        let fault = Fault::Evict {
            node: rng.index(masters),
            policy,
            keys: rng.log_between(1, MAX_KEYS) as u32,
            evicted: Vec::new(),
        };
        spec.faults.push(ScheduledFault { at_ms, fault });
    }
    spec.faults.sort_by_key(|f| f.at_ms);
}
