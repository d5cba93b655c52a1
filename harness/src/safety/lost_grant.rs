//! A failover that loses a grant (docs/DESIGN.md §5 item 6, issue 14 item 1): the replica is
//! kept from receiving the grant, the master dies right after granting, and the stale
//! replica is promoted, so the lock is free on the new master while its last holder still
//! believes in it.
//!
//! How the window is forced: on a local bridge replication beats any kill, so the master
//! refuses the replica's (re)synchronisation first (`ACL SETUSER default -psync -sync`, then
//! `CLIENT KILL TYPE replica`); lock clients never use those commands. The master is then
//! SIGKILLed right after the next grant and one Sentinel is told `SENTINEL FAILOVER`, which
//! promotes the replica without waiting for the down-after period (the replica's link has
//! been down for far less than Sentinel's 10 × down-after limit, so it is eligible). The
//! killed master comes back with its ACL reset (ACLs live in memory only).
//!
//! With a replica clock `behind`, the promoted master's wall clock is that far behind: its
//! tokens are the last replicated token + 1, below the lost grant's, and replicated absolute
//! expiries outlive their TTL by the skew (`failover-replica-clock-behind`). Replication is
//! then refused at a moment the lock is free, as a key the replica kept would linger until
//! its skewed clock had caught up with the lost token.
//!
//! Invariant: the fault log carries the evidence — whether the lost grant's key was on the
//! master and absent on the replica at the kill, the replicas that acknowledged it (with
//! `wait_replicas`), and the next grant on the promoted master.

use std::time::{Duration, Instant};

use leasehold::LockKeys;
use redis::aio::MultiplexedConnection;

use crate::error::{Error, Result};
use crate::node::Node;
use crate::safety::fault_aim::{holder_label, impair, wait_for_next_grant};
use crate::safety::run_history::RunHistory;
use crate::safety::scenario::CLIENTS;
use crate::safety::worker::Board;
use crate::sentinel::{MASTER_NAME, SentinelTopology};

/// Bound for the replica to be attached before replication is refused: after an earlier
/// cell's failover the old master rejoins as a replica only once Sentinel reconfigures it
/// (its INFO period is 10 s) and it has synchronised.
const REPLICA_ATTACH_LIMIT: Duration = Duration::from_secs(30);

/// Bound for the promotion (forced failover: a second or two here; if it is refused, the
/// automatic one: down-after 1 s + election + reconfiguration).
const PROMOTION_LIMIT: Duration = Duration::from_secs(30);

/// How long to wait for the first grant on the promoted master, so the run covers it even
/// when a lingering (clock-stretched) key delays it: the replica's skew plus a few TTLs.
const NEXT_GRANT_SLACK_TTLS: u32 = 3;

/// Grants to wait for, after the refusal, for one that the replica lacks: the first may
/// have been replicated before the refusal took effect; more than a few means the refusal
/// did not work (the fault log then shows equal tokens).
const GRANTS_TO_LOSE: u32 = 3;

/// How long to look for a moment the lock is free before refusing replication anyway: a
/// few of the longest holds.
const FREE_WAIT: Duration = Duration::from_secs(10);

/// How often the bounded waits here poll.
const POLL: Duration = Duration::from_millis(5);

/// What a lost-grant failover needs of its cell.
pub(super) struct LostGrant<'a> {
    pub sentinel: &'a SentinelTopology,
    /// The master at the cell's start.
    pub master: &'a Node,
    pub board: &'a Board,
    pub history: &'a RunHistory,
    /// The cell's lock keys.
    pub keys: &'a LockKeys,
    /// The cell's lease TTL.
    pub ttl: Duration,
}

impl LostGrant<'_> {
    /// Forces the lost grant with the replica's clock `behind`; returns the fault's start
    /// and its log line.
    pub(super) async fn inject(&self, behind: Duration) -> Result<(u64, String)> {
        let replica = self.replica()?;
        wait_attached(self.master, REPLICA_ATTACH_LIMIT).await?;
        let behind_ms = i64::try_from(behind.as_millis()).unwrap_or(i64::MAX);
        if behind_ms > 0 {
            replica.set_clock_offset(-behind_ms)?;
        }
        let start = self.history.now_ns();
        // With a skewed replica, a key it still holds outlives its TTL by the skew and
        // delays the next grant until the skewed clock has caught up with the lost token;
        // refusing while the lock is free leaves the promoted replica free at once.
        let free = if behind_ms > 0 {
            Some(self.refuse_when_free().await?)
        } else {
            self.refuse_replication(&mut self.master.connection().await?)
                .await?;
            None
        };

        // A grant whose script ran before the refusal was replicated (its reply may reach
        // the board only after the refusal): wait for one the replica lacks, by the last
        // token each node holds.
        let fence = redis::cmd("GET").arg(&self.keys.fence).clone();
        let mut holder;
        let mut tokens;
        let mut grants = 0;
        loop {
            holder = wait_for_next_grant(self.board).await;
            grants += 1;
            tokens = (
                self.master.query::<Option<u64>>(&fence).await?,
                replica.query::<Option<u64>>(&fence).await?,
            );
            if tokens.0 != tokens.1 || grants >= GRANTS_TO_LOSE {
                break;
            }
        }
        let acked = self.board.replicas_acked();
        self.master.kill().await?;
        let killed_ns = self.history.now_ns();
        impair(
            self.history,
            0..CLIENTS,
            killed_ns + u64::try_from(PROMOTION_LIMIT.as_nanos()).unwrap_or(u64::MAX),
        );

        let how = self.force_failover().await;
        let old = self.master.addr();
        let new = self
            .sentinel
            .wait_for_new_master(old, PROMOTION_LIMIT)
            .await?;
        let promoted_ns = self.history.now_ns();
        let ttl_ns = u64::try_from(self.ttl.as_nanos()).unwrap_or(u64::MAX);
        impair(self.history, 0..CLIENTS, promoted_ns + ttl_ns * 2);

        let next = self
            .wait_for_grant_after(holder, behind + self.ttl * NEXT_GRANT_SLACK_TTLS)
            .await;
        let acked = acked.map_or(String::new(), |n| {
            format!(", acknowledged by {n} replica(s)")
        });
        let next = next.map_or_else(
            || "no grant on it within the wait".to_owned(),
            |(c, ns)| {
                format!(
                    "c{c} granted {:.0} ms after the kill",
                    (ns - killed_ns) as f64 / 1e6
                )
            },
        );
        Ok((
            start,
            format!(
                "replication refused{}; {}'s grant (grant {grants} after the refusal): last token \
                 on master {}, on replica {}{acked}; \
                 master {old} killed, {new} promoted ({how}) {:.0} ms later{}; {next}",
                match free {
                    Some(true) => " while the lock was free",
                    Some(false) => " (no free moment seen)",
                    None => "",
                },
                holder_label(holder),
                token_label(tokens.0),
                token_label(tokens.1),
                (promoted_ns - killed_ns) as f64 / 1e6,
                if behind_ms > 0 {
                    format!(", its clock {behind_ms} ms behind")
                } else {
                    String::new()
                },
            ),
        ))
    }

    /// The data node that is not the cell's master.
    fn replica(&self) -> Result<&Node> {
        self.sentinel
            .data_nodes()
            .find(|n| n.addr() != self.master.addr())
            .ok_or_else(|| Error::UnexpectedReply {
                addr: self.master.url(),
                reply: "no replica in the Sentinel topology".to_owned(),
            })
    }

    /// Makes the master refuse the replica's synchronisation and drops its link.
    async fn refuse_replication(&self, connection: &mut MultiplexedConnection) -> Result<()> {
        let url = self.master.url();
        let mut refuse = redis::pipe();
        refuse
            .cmd("ACL")
            .arg("SETUSER")
            .arg("default")
            .arg("-psync")
            .arg("-sync")
            .ignore()
            .cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg("replica")
            .ignore();
        refuse
            .query_async::<()>(connection)
            .await
            .map_err(|err| Error::redis(url, err))
    }

    /// Refuses replication at the first moment (bounded) the master has no lock key;
    /// whether such a moment was found (if not, it refuses anyway).
    async fn refuse_when_free(&self) -> Result<bool> {
        let url = self.master.url();
        let mut connection = self.master.connection().await?;
        let exists = redis::cmd("EXISTS").arg(&self.keys.lock).clone();
        let deadline = Instant::now() + FREE_WAIT;
        let mut free = false;
        while !free && Instant::now() < deadline {
            let held: i64 = exists
                .query_async(&mut connection)
                .await
                .map_err(|err| Error::redis(url.clone(), err))?;
            free = held == 0;
        }
        self.refuse_replication(&mut connection).await?;
        Ok(free)
    }

    /// Asks each Sentinel in turn for a forced failover; names the one that accepted, or
    /// says that the automatic failover is left to happen.
    async fn force_failover(&self) -> String {
        let mut refusals = Vec::new();
        for sentinel in self.sentinel.sentinels() {
            let reply = sentinel
                .query::<()>(redis::cmd("SENTINEL").arg("FAILOVER").arg(MASTER_NAME))
                .await;
            match reply {
                Ok(()) => return format!("SENTINEL FAILOVER via {}", sentinel.name()),
                Err(err) => refusals.push(err.to_string()),
            }
        }
        format!(
            "automatic; SENTINEL FAILOVER refused: {}",
            refusals.join("; ")
        )
    }

    /// Waits (up to `limit`) for a grant to someone other than `holder`; who and when.
    async fn wait_for_grant_after(
        &self,
        holder: Option<usize>,
        limit: Duration,
    ) -> Option<(usize, u64)> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Some(now) = self.board.holder().filter(|h| Some(*h) != holder) {
                return Some((now, self.history.now_ns()));
            }
            tokio::time::sleep(POLL).await;
        }
        None
    }
}

/// A fence value for the fault log (`none`: no token issued yet).
fn token_label(token: Option<u64>) -> String {
    token.map_or_else(|| "none".to_owned(), |t| t.to_string())
}

/// Waits until `master` has a replica online (synchronised and streaming).
async fn wait_attached(master: &Node, limit: Duration) -> Result<()> {
    crate::wait::until("a replica to be attached", limit, || async {
        let info: String = master.query(redis::cmd("INFO").arg("replication")).await?;
        Ok(info
            .lines()
            .any(|l| l.starts_with("slave") && l.contains("state=online"))
            .then_some(()))
    })
    .await
}
