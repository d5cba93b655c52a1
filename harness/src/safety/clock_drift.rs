//! Clock drift on real nodes (docs/DESIGN.md §5 item 4, `node-clock-drift`,
//! `node-clock-drift-within-margin`): a node's wall clock runs fast, so every lease key on it
//! expires early in real time while its holder counts its validity on a correct clock. The
//! workers run without the watchdog and hold past the TTL, as the simulator's do, so each
//! lease ends by its holder's validity deadline against a key expiring by the fast clock:
//! beyond the 1 % drift margin holds overlap; within it the lost signal must come first.
//!
//! RedLock at 30 % mirrors the simulator's `redlock_clock_ahead`: only master 0 drifts, in
//! `node-clock-jump`'s Kleppmann setting (`clock_faults`: masters 3 and 4 cut so the holder
//! has {n0, n1, n2}, then restored), and n0 goes down for 3 s once it has drifted as long
//! as the simulator's n0 before its outage, so it is as far ahead then: a quorum without it
//! issues a lower maximum token than the grants it took part in.
//!
//! Invariant: a try's drift lands only when its lock key's PTTL on a drifting node was seen
//! running down at the drifted rate (within half the drift either way) over at least one
//! grant, timed against real time (`pttl_rate`); a try whose keys were never timed, or ran
//! down at real speed, does not count. The evidence carries the measured rate.

use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::safety::clock_faults::{
    BARE_QUORUM_WINDOW, REDLOCK_DOWN, bare_quorum, held_on_bare_quorum, impair_for, master_down,
    no_nodes, restore_quorum,
};
use crate::safety::fault_aim::holder_label;
use crate::safety::fault_target::{Hit, Injector};
use crate::safety::pttl_rate::{self, KeyRate};
use crate::safety::scenario::DriftedMasters;

/// How long the nodes drift when nothing else happens: a few TTLs, so each try sees several
/// grants whose keys all run down at the drifted rate.
const DRIFT_SPAN: Duration = Duration::from_millis(4_000);

/// How long master 0 drifts before it goes down (RedLock at 30 %): the simulator's n0
/// drifts from 0 s and goes down at 4 s, so it is then 1.2 s ahead.
const DRIFT_BEFORE_DOWN: Duration = Duration::from_millis(4_000);

/// Parts per million in one.
const PPM: f64 = 1e6;

/// Makes the nodes' clocks run `ppm` fast (RedLock: as `masters` says); one hit per try.
pub(super) async fn drift(
    inj: &Injector<'_>,
    ppm: i64,
    masters: DriftedMasters,
) -> Result<Vec<Hit>> {
    if inj.infra.is_masters() && masters == DriftedMasters::MasterZero {
        return master_zero(inj, ppm).await;
    }
    let nodes = inj.infra.nodes();
    let Some(&measured) = nodes.first() else {
        return Err(no_nodes("a node clock drift"));
    };
    // Nobody is hampered: the nodes answer throughout, only their keys expire early.
    let holders = inj.wait_for_holders().await;
    let start = inj.now_ns();
    for node in &nodes {
        node.set_clock_drift(ppm)?;
    }
    let ((), rates) = pttl_rate::during(measured, &keys(inj), tokio::time::sleep(DRIFT_SPAN)).await;
    // The drift stops where it got to: the clocks keep their lead, they do not jump back.
    for node in &nodes {
        node.set_clock_drift(0)?;
    }
    let which = if nodes.len() > 1 {
        "every master's"
    } else {
        "the node's"
    };
    let note = format!(
        "{which} clock {} for {} ms",
        rate_label(ppm),
        DRIFT_SPAN.as_millis()
    );
    Ok(holders
        .iter()
        .zip(rates?)
        .map(|(holder, rate)| Hit {
            start,
            note: format!("{note} from when {} held", holder_label(*holder)),
            landed: drift_shows(&rate, ppm),
            evidence: rate.describe("n0", inj.ttl),
        })
        .collect())
}

/// RedLock in the Kleppmann setting: master 0 drifts, masters 3 and 4 are cut for the
/// bare-quorum window and restored, and n0 goes down after [`DRIFT_BEFORE_DOWN`] of drift.
async fn master_zero(inj: &Injector<'_>, ppm: i64) -> Result<Vec<Hit>> {
    let nodes = inj.infra.nodes();
    let [n0, n1, n2, n3, n4] = nodes.as_slice() else {
        return Err(no_nodes("a node clock drift"));
    };
    let start = inj.now_ns();
    let drifting_since = Instant::now();
    n0.set_clock_drift(ppm)?;
    let setting = async {
        let holders = bare_quorum(inj, [n3, n4]).await?;
        let held_on = held_on_bare_quorum(inj, [n0, n1, n2]).await;
        let down_at = drifting_since + DRIFT_BEFORE_DOWN;
        impair_for(
            inj,
            down_at.saturating_duration_since(Instant::now()) + REDLOCK_DOWN,
        );
        restore_quorum([n3, n4]).await?;
        tokio::time::sleep_until(down_at.into()).await;
        Ok::<_, Error>((holders, held_on))
    };
    // n0's keys are timed until it goes down (a killed node answers nothing).
    let (setting, rates) = pttl_rate::during(n0, &keys(inj), setting).await;
    let (holders, held_on) = setting?;
    let lead_ms = n0.clock_offset();
    master_down(n0).await?;
    n0.set_clock_drift(0)?;
    let note = format!(
        "n0 clock {}; n3, n4 cut for {} ms and restored; n0 down {} ms once {} ms into the \
         drift",
        rate_label(ppm),
        BARE_QUORUM_WINDOW.as_millis(),
        REDLOCK_DOWN.as_millis(),
        DRIFT_BEFORE_DOWN.as_millis(),
    );
    Ok(holders
        .iter()
        .zip(held_on)
        .zip(rates?)
        .map(|((holder, held_on), rate)| Hit {
            start,
            note: note.clone(),
            landed: drift_shows(&rate, ppm),
            evidence: format!(
                "{}; after the cut {} held on {held_on} of n0-n2; n0 was {lead_ms} ms ahead \
                 when it went down",
                rate.describe("n0", inj.ttl),
                holder_label(*holder)
            ),
        })
        .collect())
}

/// The tries' lock keys, in the tries' order.
fn keys<'a>(inj: &Injector<'a>) -> Vec<&'a str> {
    inj.tries.iter().map(|t| t.key).collect()
}

/// Whether `rate` shows a clock `ppm` fast: within half the drift of 1 + ppm/10⁶.
fn drift_shows(rate: &KeyRate, ppm: i64) -> bool {
    let drift = ppm as f64 / PPM;
    rate.rate
        .is_some_and(|r| (r - 1.0 - drift).abs() <= drift.abs() / 2.0)
}

/// Parts per million in one per cent.
const PPM_PER_PERCENT: f64 = 10_000.0;

/// "30% fast", "0.9% fast".
fn rate_label(ppm: i64) -> String {
    let percent = ppm as f64 / PPM_PER_PERCENT;
    let pace = if ppm >= 0 { "fast" } else { "slow" };
    format!("{}% {pace}", percent.abs())
}

#[cfg(test)]
mod tests {
    use super::{KeyRate, drift_shows, rate_label};

    fn measured(rate: f64) -> KeyRate {
        KeyRate {
            rate: Some(rate),
            ..KeyRate::default()
        }
    }

    #[test]
    fn a_drift_lands_only_when_the_key_ran_down_near_the_drifted_rate() {
        assert!(drift_shows(&measured(1.29), 300_000));
        assert!(!drift_shows(&measured(1.0), 300_000));
        assert!(drift_shows(&measured(1.0088), 9_000));
        assert!(!drift_shows(&measured(1.0004), 9_000));
        assert!(!drift_shows(&KeyRate::default(), 9_000));
    }

    #[test]
    fn rates_read_as_percentages() {
        assert_eq!(rate_label(300_000), "30% fast");
        assert_eq!(rate_label(9_000), "0.9% fast");
    }
}
