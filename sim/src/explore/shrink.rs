//! The shrinker: reduces a failing run to a smaller one that fails the same way.
//!
//! Invariant: a candidate is kept only when it fails with the target's kind and the same
//! known limitation (or none), so a shrunk run replays the failure it was shrunk for.

use std::time::Duration;

use crate::scenario::run::RunSpec;
use crate::world::SimError;
use crate::world::faults::{Fault, ProcSel};
use crate::world::net::NetConfig;

use super::{ShrinkTarget, params, run_and_classify};

/// Most runs the shrinker may spend on an unexpected failure.
pub const SHRINK_BUDGET: u32 = 150;

/// Most runs the shrinker may spend on an expected one.
pub(super) const SHRINK_BUDGET_EXPECTED: u32 = 40;

/// Greedily removes faults, clients and run time while the run still fails the same way
/// (a failure of the target's kind, with the same known limitation or none), within
/// `budget` runs.
pub fn shrink(
    spec: &RunSpec,
    target: ShrinkTarget,
    budget: u32,
) -> Result<(RunSpec, u32), SimError> {
    let mut best = spec.clone();
    let mut runs = 0u32;
    let still_fails = |candidate: &RunSpec, runs: &mut u32| -> Result<bool, SimError> {
        *runs += 1;
        let (_, findings) = run_and_classify(candidate)?;
        Ok(findings
            .iter()
            .any(|f| f.failure == target.0 && f.known_limitation == target.1))
    };
    let mut progress = true;
    while progress && runs < budget {
        progress = false;
        let mut i = 0;
        while i < best.faults.len() && runs < budget {
            let mut candidate = best.clone();
            candidate.faults.remove(i);
            if still_fails(&candidate, &mut runs)? {
                best = candidate;
                progress = true;
            } else {
                i += 1;
            }
        }
        for quiet in [
            |net: &mut NetConfig| std::mem::take(&mut net.loss) > 0.0,
            |net: &mut NetConfig| std::mem::take(&mut net.glitch_chance) > 0.0,
            |net: &mut NetConfig| std::mem::take(&mut net.hiccup_chance) > 0.0,
        ] {
            let mut candidate = best.clone();
            if runs < budget && quiet(&mut candidate.net) && still_fails(&candidate, &mut runs)? {
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
        if best.clients > min_clients && runs < budget {
            let mut candidate = best.clone();
            candidate.clients -= 1;
            if still_fails(&candidate, &mut runs)? {
                best = candidate;
                progress = true;
            }
        }
        for candidate in params::simpler(&best) {
            if runs < budget && still_fails(&candidate, &mut runs)? {
                best = candidate;
                progress = true;
                break;
            }
        }
        let last_fault = best.faults.iter().map(|f| f.at_ms).max().unwrap_or(0);
        let floor = Duration::from_millis(last_fault) + Duration::from_secs(5);
        let shorter = best.horizon / 4 * 3;
        if shorter >= floor && runs < budget {
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
