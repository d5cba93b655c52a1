//! Clock faults on real nodes (docs/DESIGN.md §5 item 3, `node-clock-jump`): a node's wall
//! clock jumps forward mid-hold, so the lease key it holds expires early by server time
//! while the holder still trusts its own, monotonic, validity.
//!
//! RedLock mirrors the simulator's Kleppmann setting: masters 3 and 4 are unreachable for
//! [`BARE_QUORUM_WINDOW`], so whoever holds then holds on masters 0–2 only; right after its
//! next renewal master 0's clock jumps and masters 3 and 4 come back, so another client can
//! form the quorum {0, 3, 4} before the holder's next renewal. Master 0
//! then goes down for [`REDLOCK_DOWN`], so a quorum without it issues a lower maximum token.
//!
//! Invariant: the fault log carries the evidence that the jump bit: the lock key's PTTL on
//! the jumped node just before and just after the jump (-2: gone), and for RedLock which
//! masters held the holder's key.

use std::time::{Duration, Instant};

use futures::future::try_join_all;

use crate::error::{Error, Result};
use crate::node::Node;
use crate::safety::fault_aim::{holder_label, impair, wait_for_holder};
use crate::safety::infra::Infra;
use crate::safety::run_history::RunHistory;
use crate::safety::scenario::{CLIENTS, REDLOCK_MASTERS};
use crate::safety::worker::Board;

/// How long masters 3 and 4 are out before the jump: the simulator's bare-quorum window
/// (`BARE_QUORUM_WINDOW_MS` in sim/src/scenario.rs), longer than the longest hold, so the
/// holder at its end was granted without them and their older keys have expired. A network
/// cut stands in for the simulator's crash: a container restart takes ~1.5 s here, longer
/// than the 1 s lease that must survive it.
const BARE_QUORUM_WINDOW: Duration = Duration::from_millis(1_500);

/// When master 0 goes down after the jump, and for how long: the simulator's 4 s and 3 s
/// (its jump is at 2 s).
const REDLOCK_DOWN_AFTER: Duration = Duration::from_millis(2_000);
/// See [`REDLOCK_DOWN_AFTER`].
const REDLOCK_DOWN: Duration = Duration::from_millis(3_000);

/// How often the renewal watch polls the key's PTTL: small against the watchdog's TTL/3.
const RENEWAL_POLL: Duration = Duration::from_millis(2);

/// What a clock-jump injection needs of its cell.
pub(super) struct ClockJump<'a> {
    pub infra: &'a Infra,
    pub board: &'a Board,
    pub history: &'a RunHistory,
    /// The cell's lock key.
    pub lock_key: &'a str,
    /// The cell's lease TTL.
    pub ttl: Duration,
}

impl ClockJump<'_> {
    /// Jumps the clock of the lock's node (RedLock: master 0, after the bare-quorum window)
    /// forward by `by`; returns the fault's start and its log line.
    pub(super) async fn inject(&self, by: Duration) -> Result<(u64, String)> {
        let nodes = self.infra.nodes();
        let by_ms = i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
        if !self.infra.is_masters() {
            let holder = wait_for_holder(self.board).await;
            // Nobody is hampered: the node answers throughout, only its keys expire early.
            let start = self.history.now_ns();
            let Some(node) = nodes.first() else {
                return Ok((start, "no node to jump".to_owned()));
            };
            let (before, after) = self.jump(node, by_ms).await?;
            return Ok((
                start,
                format!(
                    "clock +{by_ms} ms while {} held: lock key PTTL {before} → {after} ms",
                    holder_label(holder)
                ),
            ));
        }

        let [n0, n1, _, n3, n4] = nodes.as_slice() else {
            return Err(Error::Lock {
                name: self.lock_key.to_owned(),
                reason: format!("node-clock-jump needs {REDLOCK_MASTERS} RedLock masters"),
            });
        };
        let start = self.history.now_ns();
        self.impair_all(start, BARE_QUORUM_WINDOW);
        try_join_all([n3, n4].map(|n| n.cut())).await?;
        tokio::time::sleep(BARE_QUORUM_WINDOW).await;
        let holder = wait_for_holder(self.board).await;
        // Right after the holder's watchdog renewed (n3 and n4 still cut, so the holder is
        // the bare quorum's), so the second quorum has most of a renewal period to form
        // before the holder's next renewal finds n0's key gone.
        let renewed = self.await_renewal(n1).await;
        let held_on = self.masters_holding(&nodes[..REDLOCK_MASTERS - 2]).await;
        self.impair_all(self.history.now_ns(), REDLOCK_DOWN_AFTER + REDLOCK_DOWN);
        let (before, after) = self.jump(n0, by_ms).await?;
        try_join_all([n3, n4].map(|n| n.restore())).await?;
        tokio::time::sleep(REDLOCK_DOWN_AFTER).await;
        n0.kill().await?;
        tokio::time::sleep(REDLOCK_DOWN).await;
        n0.start().await?;
        Ok((
            start,
            format!(
                "n3, n4 cut; after {} ms {} held on {held_on} of n0-n2; n0 clock +{by_ms} ms {}: \
                 lock key PTTL {before} → {after} ms; n3, n4 restored; n0 down {} ms from {} ms \
                 later",
                BARE_QUORUM_WINDOW.as_millis(),
                holder_label(holder),
                if renewed {
                    "right after a renewal"
                } else {
                    "(no renewal seen)"
                },
                REDLOCK_DOWN.as_millis(),
                REDLOCK_DOWN_AFTER.as_millis(),
            ),
        ))
    }

    /// Jumps `node`'s clock by `by_ms`; the lock key's PTTL there just before and after.
    async fn jump(&self, node: &Node, by_ms: i64) -> Result<(i64, i64)> {
        let pttl = redis::cmd("PTTL").arg(self.lock_key).clone();
        let before: i64 = node.query(&pttl).await?;
        node.jump_clock(by_ms)?;
        let after: i64 = node.query(&pttl).await?;
        Ok((before, after))
    }

    /// Waits (up to a TTL) until the lock key's PTTL on `node` goes up from a live value: a
    /// renewal landed (not a fresh grant).
    async fn await_renewal(&self, node: &Node) -> bool {
        let pttl = redis::cmd("PTTL").arg(self.lock_key).clone();
        let deadline = Instant::now() + self.ttl;
        let mut last = node.query::<i64>(&pttl).await.unwrap_or(-2);
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

    /// Which masters hold the lock key now, e.g. `{n0, n1, n2}`.
    async fn masters_holding(&self, nodes: &[&Node]) -> String {
        let mut holding = Vec::new();
        for (index, node) in nodes.iter().enumerate() {
            let exists = node
                .query::<i64>(redis::cmd("EXISTS").arg(self.lock_key))
                .await;
            if exists.is_ok_and(|n| n > 0) {
                holding.push(format!("n{index}"));
            }
        }
        format!("{{{}}}", holding.join(", "))
    }

    /// Every client is hampered from `start` for `length` and two TTLs after it.
    fn impair_all(&self, start: u64, length: Duration) {
        let ttl = u64::try_from(self.ttl.as_nanos()).unwrap_or(u64::MAX);
        let length = u64::try_from(length.as_nanos()).unwrap_or(u64::MAX);
        impair(self.history, 0..CLIENTS, start + ttl * 2 + length);
    }
}
