//! The swarm's draw of node clocks: a drift on one node, and replicas whose clocks are set
//! off from their master's.
//!
//! Why it exists: Redis expiries and fencing tokens come from node clocks, which in a real
//! deployment neither agree nor keep exact time. A node clock running fast ends every
//! lease it grants early in true time: within the library's drift margin no holder may
//! notice, beyond it a holder may trust a lease its node has ended (excused only by the
//! drift, see `checker::causes`). A replica's clock off from its master's displaces the
//! tokens and expiries of the master it may become.
//!
//! Invariant: these draws come after every other draw of a swarm spec (the operations'
//! included), so adding them changed no earlier choice; a replica's offset counts as a
//! node clock jump at the start (as the world records it), so it is drawn only when
//! `node-jump` faults are.

use crate::engine::rng::SimRng;
use crate::scenario::run::RunSpec;
use crate::world::faults::{Fault, ScheduledFault};

/// The fault kind of a node clock's drift (drawn here, not among the scheduled faults).
pub const DRIFT: &str = "node-drift";

/// The fault kind a replica's clock offset counts as.
const JUMP: &str = "node-jump";

/// Share of runs with one drifting node clock.
const DRIFT_CHANCE: f64 = 0.3;

/// Largest drift drawn, ppm (10 %: ten times the drift margin), log-uniform from 1 ppm
/// so drifts well inside the margin are drawn as often as ones beyond it.
const MAX_DRIFT_PPM: u64 = 100_000;

/// Share of replicas, in runs with replicas, whose clock is set off from true time.
const OFFSET_CHANCE: f64 = 0.3;

/// Largest replica clock offset drawn, either way, ms: past a few leases.
const MAX_OFFSET_MS: u64 = 3_000;

/// Draws `spec`'s node clocks among the `enabled` fault kinds: sometimes a drift on one
/// node from some time on, and offsets for some replicas. A slow node clock stretches
/// every lease it grants, and the liveness bound with it.
pub fn draw(rng: &mut SimRng, spec: &mut RunSpec, enabled: impl Fn(&str) -> bool) {
    if enabled(DRIFT) && rng.chance(DRIFT_CHANCE) {
        let horizon_ms = u64::try_from(spec.horizon.as_millis()).unwrap_or(u64::MAX);
        let node = rng.index(spec.deployment.nodes.len().max(1));
        let magnitude = rng.log_between(1, MAX_DRIFT_PPM) as i64;
        let ppm = if rng.chance(0.5) {
            magnitude
        } else {
            -magnitude
        };
        let at_ms = rng.between(0, horizon_ms.saturating_sub(3_000));
        spec.faults.push(ScheduledFault {
            at_ms,
            fault: Fault::NodeClockDrift { node, ppm },
        });
        spec.faults.sort_by_key(|f| f.at_ms);
        if ppm < 0 {
            let stretch = 1.0 + magnitude as f64 / 1_000_000.0;
            spec.check.liveness_bound = spec.check.liveness_bound.mul_f64(stretch);
        }
    }
    if enabled(JUMP) {
        for node in spec
            .deployment
            .nodes
            .iter_mut()
            .filter(|n| n.replica_of.is_some())
        {
            if rng.chance(OFFSET_CHANCE) {
                let ms = rng.between(1, MAX_OFFSET_MS) as i64;
                node.clock_offset_ms = if rng.chance(0.5) { ms } else { -ms };
            }
        }
    }
}
