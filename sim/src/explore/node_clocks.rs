//! The swarm's draw of node clocks: a drift on one node, replicas whose clocks are set off
//! from their master's, and whether the clock a script reads stands still while it runs
//! (the server's version).
//!
//! Why it exists: Redis expiries and fencing tokens come from node clocks, which in a real
//! deployment neither agree nor keep exact time. A node clock running fast ends every
//! lease it grants early in true time: within the library's drift margin no holder may
//! notice, beyond it a holder may trust a lease its node has ended (excused only by the
//! drift, see `checker::causes`). A replica's clock off from its master's displaces the
//! tokens and expiries of the master it may become.
//!
//! Redis before 7.2 judges expiry at a script's start but reads a live clock in each of its
//! calls, and that clock moves on while the script runs: a script's relative expiries then
//! land its run time late, and two of them land apart. Redis 7.2, Valkey and the named
//! scenarios freeze it, so a run draws which server it has.
//!
//! Invariant: these draws come after every other draw of a swarm spec (the operations'
//! included), so adding them changed no earlier choice; a replica's offset counts as a
//! node clock jump at the start (as the world records it), so it is drawn only when
//! `node-jump` faults are.

use crate::engine::rng::SimRng;
use crate::model::node::ServerClock;
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

/// Share of runs whose servers are Redis 7.0 or 7.1, reading a moving clock in scripts.
const MOVING_CLOCK_CHANCE: f64 = 0.5;

/// Fewest and most ns a script's call may take on such a server, log-uniform per run
/// (each script then draws its own pace up to it): from a fast call on an idle server to a
/// slow one on a loaded server, where a script of twenty calls spans a few milliseconds.
const CALL_NS_RANGE: (u64, u64) = (1_000, 200_000);

/// Draws the run's server: in half the runs Redis 7.0 or 7.1, whose scripts read a clock
/// that moves on while they run (so a script's relative expiries can land a millisecond
/// apart, and a `PTTL` read after `TIME` sees less left), the others Redis 7.2 or later.
/// Drawn after every other draw of a swarm spec, so adding it changed no earlier choice.
pub fn draw_server(rng: &mut SimRng, spec: &mut RunSpec) {
    if rng.chance(MOVING_CLOCK_CHANCE) {
        spec.deployment.server_clock = ServerClock::Moving {
            max_call_ns: rng.log_between(CALL_NS_RANGE.0, CALL_NS_RANGE.1),
        };
    }
}

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
