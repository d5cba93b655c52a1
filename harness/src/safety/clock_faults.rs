//! Clock faults on real nodes (docs/DESIGN.md §5 item 3, `node-clock-jump`): a node's wall
//! clock jumps forward mid-hold, so the lease key it holds expires early by server time
//! while the holder still trusts its own, monotonic, validity. One jump hits every try of
//! the cell (each has its own key on the node).
//!
//! RedLock mirrors the simulator's Kleppmann setting: masters 3 and 4 are unreachable for
//! [`BARE_QUORUM_WINDOW`], so whoever holds then holds on masters 0–2 only; right after the
//! first try's holder's next renewal master 0's clock jumps and masters 3 and 4 come back,
//! so another client can form the quorum {0, 3, 4} before the holder's next renewal.
//! Master 0 then goes down for [`REDLOCK_DOWN`], so a quorum without it issues a lower
//! maximum token. The steps of that setting ([`bare_quorum`], [`restore_quorum`],
//! [`master_down`]) are shared with the drifting master of `clock_drift`.
//!
//! Invariant: a try's jump lands only when its holder held and its lock key's PTTL on the
//! jumped node went from live to -2 (gone) across the jump; for RedLock also only when the
//! key was on exactly the bare quorum {n0, n1, n2}. The evidence carries those readings.

use std::time::{Duration, Instant};

use futures::future::try_join_all;

use crate::error::{Error, Result};
use crate::safety::fault_aim::holder_label;
use crate::safety::fault_target::{Hit, Injector};
use crate::safety::scenario::REDLOCK_MASTERS;
use crate::topology::node::Node;

/// How long masters 3 and 4 are out before the jump: the simulator's bare-quorum window
/// (`BARE_QUORUM_WINDOW_MS` in sim/src/scenario/shape.rs), longer than the longest hold, so the
/// holder at its end was granted without them and their older keys have expired. A network
/// cut stands in for the simulator's crash: a container restart takes ~1.5 s here, longer
/// than the 1 s lease that must survive it.
pub(super) const BARE_QUORUM_WINDOW: Duration = Duration::from_millis(1_500);

/// When master 0 goes down after the jump, and for how long: the simulator's 4 s and 3 s
/// (its jump is at 2 s).
const REDLOCK_DOWN_AFTER: Duration = Duration::from_millis(2_000);
/// See [`REDLOCK_DOWN_AFTER`].
pub(super) const REDLOCK_DOWN: Duration = Duration::from_millis(3_000);

/// How often the renewal watch polls the key's PTTL: small against the watchdog's TTL/3.
const RENEWAL_POLL: Duration = Duration::from_millis(2);

/// The masters the RedLock holder must hold on for the jump to land: the bare quorum.
const BARE_QUORUM: &str = "{n0, n1, n2}";

/// PTTL of a key that does not exist.
const GONE: i64 = -2;

/// Jumps the clock of the lock's node (RedLock: master 0, after the bare-quorum window)
/// forward by `by`; one hit per try.
pub(super) async fn jump(inj: &Injector<'_>, by: Duration) -> Result<Vec<Hit>> {
    let nodes = inj.infra.nodes();
    let by_ms = i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
    if !inj.infra.is_masters() {
        let holders = inj.wait_for_holders().await;
        // Nobody is hampered: the node answers throughout, only its keys expire early.
        let start = inj.now_ns();
        let Some(node) = nodes.first() else {
            return Err(no_nodes("node-clock-jump"));
        };
        let pttls = jump_node(inj, node, by_ms).await?;
        return Ok(holders
            .iter()
            .zip(pttls)
            .map(|(holder, (before, after))| Hit {
                start,
                note: format!("clock +{by_ms} ms while {} held", holder_label(*holder)),
                landed: holder.is_some() && before > 0 && after == GONE,
                evidence: format!("lock key PTTL {before} → {after} ms"),
            })
            .collect());
    }

    let [n0, n1, n2, n3, n4] = nodes.as_slice() else {
        return Err(no_nodes("node-clock-jump"));
    };
    let start = inj.now_ns();
    let holders = bare_quorum(inj, [n3, n4]).await?;
    // Right after the first try's holder's watchdog renewed (n3 and n4 still cut, so the
    // holder is the bare quorum's), so the second quorum has most of a renewal period to
    // form before the holder's next renewal finds n0's key gone. The other tries' holders
    // are caught wherever they are in their renewal period.
    let renewed = match inj.tries.first() {
        Some(t) => await_renewal(n1, t.key, inj.ttl).await,
        None => false,
    };
    let held_on = held_on_bare_quorum(inj, [n0, n1, n2]).await;
    impair_for(inj, REDLOCK_DOWN_AFTER + REDLOCK_DOWN);
    let pttls = jump_node(inj, n0, by_ms).await?;
    restore_quorum([n3, n4]).await?;
    tokio::time::sleep(REDLOCK_DOWN_AFTER).await;
    master_down(n0).await?;
    let note = format!(
        "n3, n4 cut for {} ms; n0 clock +{by_ms} ms {}; n3, n4 restored; n0 down {} ms from \
         {} ms later",
        BARE_QUORUM_WINDOW.as_millis(),
        if renewed {
            "right after try 1's holder renewed"
        } else {
            "(no renewal seen)"
        },
        REDLOCK_DOWN.as_millis(),
        REDLOCK_DOWN_AFTER.as_millis(),
    );
    Ok(holders
        .iter()
        .zip(held_on)
        .zip(pttls)
        .map(|((holder, held_on), (before, after))| Hit {
            start,
            note: note.clone(),
            landed: holder.is_some() && held_on == BARE_QUORUM && before > 0 && after == GONE,
            evidence: format!(
                "{} held on {held_on} of n0-n2; lock key PTTL on n0 {before} → {after} ms",
                holder_label(*holder)
            ),
        })
        .collect())
}

/// Kleppmann's setting, first half: every client is marked impaired and masters 3 and 4
/// (`cut`) are unreachable for [`BARE_QUORUM_WINDOW`], so whoever holds at its end was
/// granted on masters 0–2 only; each try's holder then.
pub(super) async fn bare_quorum(inj: &Injector<'_>, cut: [&Node; 2]) -> Result<Vec<Option<usize>>> {
    impair_for(inj, BARE_QUORUM_WINDOW);
    try_join_all(cut.map(Node::cut)).await?;
    tokio::time::sleep(BARE_QUORUM_WINDOW).await;
    Ok(inj.wait_for_holders().await)
}

/// Which of masters 0–2 (`quorum`) hold each try's key now, e.g. `{n0, n1, n2}`.
pub(super) async fn held_on_bare_quorum(inj: &Injector<'_>, quorum: [&Node; 3]) -> Vec<String> {
    let mut held_on = Vec::with_capacity(inj.tries.len());
    for t in &inj.tries {
        held_on.push(masters_holding(&quorum, t.key).await);
    }
    held_on
}

/// Kleppmann's setting, second half: masters 3 and 4 (`cut`) come back, so a second
/// quorum {n0, n3, n4} can form (the caller has marked every client impaired until master
/// 0's outage is over: [`impair_for`]).
pub(super) async fn restore_quorum(cut: [&Node; 2]) -> Result<()> {
    try_join_all(cut.map(Node::restore)).await?;
    Ok(())
}

/// Master 0 goes down for [`REDLOCK_DOWN`] (SIGKILL, then started again empty), so a
/// quorum formed meanwhile lacks it.
pub(super) async fn master_down(n0: &Node) -> Result<()> {
    n0.kill().await?;
    tokio::time::sleep(REDLOCK_DOWN).await;
    n0.start().await
}

/// Marks every client of every try impaired for `length` from now, plus the two TTLs the
/// lock may take to come back.
pub(super) fn impair_for(inj: &Injector<'_>, length: Duration) {
    let length = u64::try_from(length.as_nanos()).unwrap_or(u64::MAX);
    inj.impair_all(inj.now_ns() + inj.ttl_ns() * 2 + length);
}

/// Jumps `node`'s clock by `by_ms`; each try's lock key PTTL there just before and after
/// (each side read in one round trip, so no grant slips in between the tries' readings).
async fn jump_node(inj: &Injector<'_>, node: &Node, by_ms: i64) -> Result<Vec<(i64, i64)>> {
    let mut pttls = redis::pipe();
    for t in &inj.tries {
        pttls.cmd("PTTL").arg(t.key);
    }
    let mut connection = node.connection().await?;
    let failed = |err| Error::redis(node.url(), err);
    let before: Vec<i64> = pttls.query_async(&mut connection).await.map_err(failed)?;
    node.jump_clock(by_ms)?;
    let after: Vec<i64> = pttls.query_async(&mut connection).await.map_err(failed)?;
    Ok(before.into_iter().zip(after).collect())
}

/// Waits (up to `ttl`) until `key`'s PTTL on `node` goes up from a live value: a renewal
/// landed (not a fresh grant).
async fn await_renewal(node: &Node, key: &str, ttl: Duration) -> bool {
    let pttl = redis::cmd("PTTL").arg(key).clone();
    let deadline = Instant::now() + ttl;
    let mut last = node.query::<i64>(&pttl).await.unwrap_or(GONE);
    while Instant::now() < deadline {
        tokio::time::sleep(RENEWAL_POLL).await;
        let Ok(now) = node.query::<i64>(&pttl).await else {
            return false;
        };
        if now > last && last > 0 {
            return true;
        }
        last = now;
    }
    false
}

/// Which of `nodes` (n0, n1, …) hold `key` now, e.g. `{n0, n1, n2}`.
async fn masters_holding(nodes: &[&Node], key: &str) -> String {
    let mut holding = Vec::new();
    for (index, node) in nodes.iter().enumerate() {
        let exists = node.query::<i64>(redis::cmd("EXISTS").arg(key)).await;
        if exists.is_ok_and(|n| n > 0) {
            holding.push(format!("n{index}"));
        }
    }
    format!("{{{}}}", holding.join(", "))
}

/// A clock fault (`scenario`) found neither one node nor the RedLock masters.
pub(super) fn no_nodes(scenario: &str) -> Error {
    Error::Lock {
        name: "(safety)".to_owned(),
        reason: format!("{scenario} needs one node or {REDLOCK_MASTERS} RedLock masters"),
    }
}
