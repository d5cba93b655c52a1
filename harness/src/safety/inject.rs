//! Fault application: injects a scenario's [`RealFault`] into a running cell — aimed at the
//! holder where the fault is about a hold — and reports when it started and ended.
//!
//! Invariant: every client a fault hampers is marked `Impaired` in the history for the
//! outage (plus the TTLs it takes the lock to come back), so the checker does not judge
//! their waits during an outage as starvation, as the simulator does for its faults.

use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::node::Node;
use crate::safety::clock_faults::ClockJump;
use crate::safety::fault_aim::{
    HOLDER_WAIT, holder_label, impair, wait_for_holder, wait_for_next_grant,
};
use crate::safety::infra::Infra;
use crate::safety::link::Link;
use crate::safety::lost_grant::LostGrant;
use crate::safety::report::FaultTiming;
use crate::safety::run_history::{RunHistory, ms_from_ns};
use crate::safety::scenario::{CLIENTS, FAULT_AT, REDLOCK_RESTARTED, RealFault};
use crate::safety::worker::Board;
use futures::future::try_join_all;
use leasehold::LockKeys;

/// How long periodic faults (script flushes, client kills) keep coming: a few TTLs, so
/// they hit acquires, renewals and releases alike.
const PERIODIC_SPAN: Duration = Duration::from_secs(2);

/// Bound for Sentinel to promote the replica (down-after 1 s + election + reconfiguration).
const FAILOVER_LIMIT: Duration = Duration::from_secs(30);

/// What a fault is applied to in one cell.
pub(super) struct Injector<'a> {
    /// The cell's containers.
    pub infra: &'a Infra,
    /// The node holding the lock key when the cell started.
    pub master: &'a Node,
    /// The cell's lock keys.
    pub keys: &'a LockKeys,
    /// The cell's lease TTL.
    pub ttl: Duration,
    /// Per-client links (holder-partition only; empty otherwise).
    pub links: &'a [Link],
    /// Who holds now.
    pub board: &'a Board,
    /// The cell's history, whose clock times the fault.
    pub history: &'a RunHistory,
}

impl Injector<'_> {
    /// Injects `fault` and returns its timing once it is over (for periodic faults: after
    /// the last injection).
    pub(super) async fn inject(&self, fault: RealFault) -> Result<FaultTiming> {
        let (start, note) = match fault {
            RealFault::HolderPause(pause) => self.holder_pause(pause).await,
            RealFault::NodePause(length) => self.node_pause(length).await?,
            RealFault::NodeCut(length) => self.node_cut(length).await?,
            RealFault::HolderPartition(length) => self.holder_partition(length).await,
            RealFault::Restart(down) => self.restart(down).await?,
            RealFault::Failover => self.failover().await?,
            RealFault::ScriptFlush(every) => {
                let cmd = redis::cmd("SCRIPT").arg("FLUSH").clone();
                self.periodic(every, &cmd, "SCRIPT FLUSH").await?
            }
            RealFault::ClientKill(every) => {
                let cmd = redis::cmd("CLIENT")
                    .arg("KILL")
                    .arg("TYPE")
                    .arg("normal")
                    .clone();
                self.periodic(every, &cmd, "CLIENT KILL TYPE normal")
                    .await?
            }
            RealFault::NodeClockJump(by) => {
                let jump = ClockJump {
                    infra: self.infra,
                    board: self.board,
                    history: self.history,
                    lock_key: &self.keys.lock,
                    ttl: self.ttl,
                };
                jump.inject(by).await?
            }
            RealFault::FailoverLostGrant { replica_behind, .. } => {
                let Infra::Sentinel(sentinel) = self.infra else {
                    return Err(needs_sentinel());
                };
                let lost = LostGrant {
                    sentinel,
                    master: self.master,
                    board: self.board,
                    history: self.history,
                    keys: self.keys,
                    ttl: self.ttl,
                };
                lost.inject(replica_behind).await?
            }
        };
        Ok(FaultTiming {
            start_ms: ms_from_ns(start),
            end_ms: ms_from_ns(self.history.now_ns()),
            note,
        })
    }

    fn ttl_ns(&self) -> u64 {
        u64::try_from(self.ttl.as_nanos()).unwrap_or(u64::MAX)
    }

    /// The pausing worker freezes on its own at its first hold after [`FAULT_AT`]; this only
    /// waits (bounded) for that and for the pause to pass.
    async fn holder_pause(&self, pause: Duration) -> (u64, String) {
        let start = self.history.now_ns();
        let deadline = Instant::now() + HOLDER_WAIT + pause;
        while !self.board.paused() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        tokio::time::sleep(pause).await;
        (
            start,
            format!("c0 froze for {} ms on its next hold", pause.as_millis()),
        )
    }

    /// The start of an outage of every client for `length`, aimed (bounded) at a hold:
    /// who held, and the start stamp; every client is impaired for the outage plus two TTLs.
    async fn begin_outage(&self, length: Duration) -> (Option<usize>, u64) {
        let holder = wait_for_holder(self.board).await;
        let start = self.history.now_ns();
        impair(
            self.history,
            0..CLIENTS,
            start + self.ttl_ns() * 2 + length.as_nanos() as u64,
        );
        (holder, start)
    }

    async fn node_pause(&self, length: Duration) -> Result<(u64, String)> {
        let (holder, start) = self.begin_outage(length).await;
        for node in self.infra.nodes() {
            node.pause().await?;
        }
        tokio::time::sleep(length).await;
        for node in self.infra.nodes() {
            node.unpause().await?;
        }
        Ok((
            start,
            format!(
                "docker pause for {} ms while {} held",
                length.as_millis(),
                holder_label(holder)
            ),
        ))
    }

    async fn node_cut(&self, length: Duration) -> Result<(u64, String)> {
        let (holder, start) = self.begin_outage(length).await;
        self.master.cut().await?;
        tokio::time::sleep(length).await;
        self.master.restore().await?;
        Ok((
            start,
            format!(
                "node cut for {} ms while {} held",
                length.as_millis(),
                holder_label(holder)
            ),
        ))
    }

    /// Cuts only the holder's link; only the holder is impaired.
    async fn holder_partition(&self, length: Duration) -> (u64, String) {
        let holder = wait_for_holder(self.board).await.unwrap_or(0);
        let start = self.history.now_ns();
        impair(
            self.history,
            [holder],
            start + self.ttl_ns() + length.as_nanos() as u64,
        );
        if let Some(link) = self.links.get(holder) {
            link.cut();
            tokio::time::sleep(length).await;
            link.restore();
        }
        (
            start,
            format!("c{holder}'s links cut for {} ms", length.as_millis()),
        )
    }

    /// SIGKILLs the node (RedLock: [`REDLOCK_RESTARTED`] masters) mid-hold and starts it
    /// again after `down`.
    async fn restart(&self, down: Duration) -> Result<(u64, String)> {
        let (holder, start) = self.begin_outage(down).await;
        let nodes = self.infra.nodes();
        let victims = if self.infra.is_masters() {
            &nodes[..REDLOCK_RESTARTED.min(nodes.len())]
        } else {
            &nodes[..]
        };
        try_join_all(victims.iter().map(|n| n.kill())).await?;
        tokio::time::sleep(down).await;
        try_join_all(victims.iter().map(|n| n.start())).await?;
        Ok((
            start,
            format!(
                "SIGKILL of {} node(s) while {} held, restarted after {} ms",
                victims.len(),
                holder_label(holder),
                down.as_millis()
            ),
        ))
    }

    /// Right after a grant, kills the Sentinel master and waits for the replica's promotion.
    async fn failover(&self) -> Result<(u64, String)> {
        let Infra::Sentinel(sentinel) = self.infra else {
            return Err(needs_sentinel());
        };
        // Right after a grant: wait for the lock to change hands, then kill at once.
        let holder = wait_for_next_grant(self.board).await;
        let start = self.history.now_ns();
        let old = self.master.addr();
        self.master.kill().await?;
        impair(
            self.history,
            0..CLIENTS,
            start + FAILOVER_LIMIT.as_nanos() as u64,
        );
        let new = sentinel.wait_for_new_master(old, FAILOVER_LIMIT).await?;
        impair(
            self.history,
            0..CLIENTS,
            self.history.now_ns() + self.ttl_ns() * 2,
        );
        Ok((
            start,
            format!("master {old} killed right after c{holder:?}'s grant; {new} promoted"),
        ))
    }

    /// Runs `cmd` on every data node every `every` until [`PERIODIC_SPAN`] after
    /// [`FAULT_AT`].
    async fn periodic(
        &self,
        every: Duration,
        cmd: &redis::Cmd,
        label: &str,
    ) -> Result<(u64, String)> {
        let start = self.history.now_ns();
        let until = FAULT_AT + PERIODIC_SPAN;
        let mut count = 0u32;
        while Duration::from_nanos(self.history.now_ns()) < until {
            for node in self.infra.nodes() {
                // The reply (OK, or how many clients were killed) is not interesting.
                node.query::<redis::Value>(cmd).await?;
            }
            count += 1;
            tokio::time::sleep(every).await;
        }
        Ok((
            start,
            format!("{label} ×{count}, every {} ms", every.as_millis()),
        ))
    }
}

/// A failover fault was given a topology without Sentinel.
fn needs_sentinel() -> Error {
    Error::Lock {
        name: "(safety)".to_owned(),
        reason: "failover needs the Sentinel topology".to_owned(),
    }
}
