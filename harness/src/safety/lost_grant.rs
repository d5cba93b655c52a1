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
//! expiries outlive their TTL by the skew (`failover-replica-clock-behind`). The lost grant
//! is then one issued more than a TTL after the replica's last token: a key the replica
//! kept expires (by the master's clock) a TTL after that token at the latest, so the
//! promoted master's skewed clock frees it while still behind the lost grant's token, and
//! its next grant's token is lower (tokens are server microseconds).
//!
//! One failover hits every try of the cell (each has its own key on the shared master).
//!
//! Invariant: a try's failover lands only when its holder held and the dying master's last
//! fencing token for the try's lock was above the replica's (the grant was not replicated);
//! the evidence carries both tokens, the replicas that acknowledged the grant (with
//! `wait_replicas`) and the next grant on the promoted master.

use std::time::{Duration, Instant};

use leasehold::LockKeys;
use redis::aio::MultiplexedConnection;

use futures::future::join_all;

use crate::error::{Error, Result};
use crate::safety::fault_aim::{holder_label, wait_for_next_grant};
use crate::safety::fault_target::{Hit, Injector, TryView};
use crate::safety::infra::Infra;
use crate::safety::worker::Board;
use crate::topology::node::Node;
use crate::topology::sentinel::{MASTER_NAME, SentinelTopology};

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

/// How long to wait, after the refusal, for a grant the replica lacks: the first grant seen
/// may have been replicated before the refusal took effect, a hold lasts up to 1.5 TTLs
/// (7.5 s at [`FAILOVER_TTL`](crate::safety::scenario::FAILOVER_TTL)), and with a skewed
/// replica the lost grant must come more than [`SKEW_GAP_SLACK`] + a TTL after the
/// replica's last token: two of the longest holds and a TTL. If the refusal did not work,
/// the tokens stay equal and the try's fault does not land.
const LOSS_WAIT: Duration = Duration::from_secs(20);

/// Beyond the TTL, how much later than the replica's last token a skewed run's lost grant
/// must be: covers a waiter's poll interval and the promoted master's grant latency.
const SKEW_GAP_SLACK: Duration = Duration::from_millis(500);

/// How often the bounded waits here poll.
const POLL: Duration = Duration::from_millis(5);

/// Forces the lost grant in every try with the replica's clock `behind`; one hit per try.
pub(super) async fn inject(inj: &Injector<'_>, behind: Duration) -> Result<Vec<Hit>> {
    let Infra::Sentinel(sentinel) = inj.infra else {
        return Err(Error::Lock {
            name: "(safety)".to_owned(),
            reason: "a lost-grant failover needs the Sentinel topology".to_owned(),
        });
    };
    let master = inj.master;
    let replica = replica(sentinel, master)?;
    let keys = inj
        .tries
        .iter()
        .map(|t| {
            LockKeys::new(t.name).map_err(|err| Error::Lock {
                name: t.name.to_owned(),
                reason: err.to_string(),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    wait_attached(master, REPLICA_ATTACH_LIMIT).await?;
    let behind_ms = i64::try_from(behind.as_millis()).unwrap_or(i64::MAX);
    if behind_ms > 0 {
        replica.set_clock_offset(-behind_ms)?;
    }
    let start = inj.now_ns();
    refuse_replication(master, &mut master.connection().await?).await?;
    // With a skewed replica, a key it still holds outlives its TTL by the skew: the lost
    // grant must come more than a TTL after the replica's last token (see the module doc).
    let gap_us = if behind_ms > 0 {
        u64::try_from((inj.ttl + SKEW_GAP_SLACK).as_micros()).unwrap_or(u64::MAX)
    } else {
        0
    };

    // A grant whose script ran before the refusal was replicated (its reply may reach the
    // board only after the refusal): wait, per try, for a grant the replica lacks, by the
    // last token each node holds.
    let lost = join_all(
        inj.tries
            .iter()
            .zip(&keys)
            .map(|(t, k)| lose_a_grant(t.board, (master, replica), &k.fence, gap_us)),
    )
    .await;
    let acked: Vec<Option<u32>> = inj.tries.iter().map(|t| t.board.replicas_acked()).collect();
    let holders: Vec<Option<usize>> = inj.tries.iter().map(|t| t.board.holder()).collect();
    master.kill().await?;
    let killed_ns = inj.now_ns();
    inj.impair_all(killed_ns + u64::try_from(PROMOTION_LIMIT.as_nanos()).unwrap_or(u64::MAX));

    let how = force_failover(sentinel).await;
    let old = master.addr();
    let new = sentinel.wait_for_new_master(old, PROMOTION_LIMIT).await?;
    let promoted_ns = inj.now_ns();
    inj.impair_all(promoted_ns + inj.ttl_ns() * 2);

    let limit = behind + inj.ttl * NEXT_GRANT_SLACK_TTLS;
    let next = join_all(
        inj.tries
            .iter()
            .zip(&holders)
            .map(|(t, holder)| wait_for_grant_after(t, *holder, limit)),
    )
    .await;
    let note = format!(
        "replication refused; master {old} killed, {new} promoted ({how}) {:.0} ms later{}",
        (promoted_ns - killed_ns) as f64 / 1e6,
        if behind_ms > 0 {
            format!(", its clock {behind_ms} ms behind")
        } else {
            String::new()
        },
    );
    Ok(lost
        .into_iter()
        .zip(acked)
        .zip(holders)
        .zip(next)
        .map(|(((lost, acked), holder), next)| {
            let acked = acked.map_or(String::new(), |n| {
                format!(", acknowledged by {n} replica(s)")
            });
            let next = next.map_or_else(
                || "no grant on the promoted master within the wait".to_owned(),
                |(c, ns)| {
                    format!(
                        "c{c} granted {:.0} ms after the kill",
                        ns.saturating_sub(killed_ns) as f64 / 1e6
                    )
                },
            );
            match lost {
                Ok(l) => Hit {
                    start,
                    note: note.clone(),
                    // Lost: somebody held when the master died, and the master had a later
                    // token than the replica (every grant after the refusal is unreplicated),
                    // with a skewed replica more than a TTL later.
                    landed: holder.is_some() && l.lost,
                    evidence: format!(
                        "{} granted {} time(s) after the refusal, {} held at the kill: last \
                         token on master {}, on replica {}{acked}; {next}",
                        holder_label(l.holder),
                        l.grants,
                        holder_label(holder),
                        token_label(l.master),
                        token_label(l.replica),
                    ),
                },
                Err(err) => Hit {
                    start,
                    note: note.clone(),
                    landed: false,
                    evidence: format!("the tokens could not be read: {err}"),
                },
            }
        })
        .collect())
}

/// One try's grant after the refusal, and the last token on each node at that moment.
struct Lost {
    holder: Option<usize>,
    grants: u32,
    /// Whether the master's last token was above the replica's by the required gap.
    lost: bool,
    master: Option<u64>,
    replica: Option<u64>,
}

/// Waits for grants (up to [`LOSS_WAIT`]) until the master's last token is one the replica
/// lacks, more than `gap_us` above the replica's.
async fn lose_a_grant(
    board: &Board,
    (master, replica): (&Node, &Node),
    fence: &str,
    gap_us: u64,
) -> Result<Lost> {
    let fence = redis::cmd("GET").arg(fence).clone();
    let deadline = Instant::now() + LOSS_WAIT;
    let mut grants = 0;
    loop {
        let before = board.holder();
        let holder = wait_for_next_grant(board).await;
        if holder.is_some() && holder != before {
            grants += 1;
        }
        let on_master = master.query::<Option<u64>>(&fence).await?;
        let on_replica = replica.query::<Option<u64>>(&fence).await?;
        let lost = on_master.unwrap_or(0) > on_replica.unwrap_or(0).saturating_add(gap_us);
        if lost || Instant::now() >= deadline {
            return Ok(Lost {
                holder,
                grants,
                lost,
                master: on_master,
                replica: on_replica,
            });
        }
    }
}

/// The data node that is not the cell's master.
fn replica<'a>(sentinel: &'a SentinelTopology, master: &Node) -> Result<&'a Node> {
    sentinel
        .data_nodes()
        .find(|n| n.addr() != master.addr())
        .ok_or_else(|| Error::UnexpectedReply {
            addr: master.url(),
            reply: "no replica in the Sentinel topology".to_owned(),
        })
}

/// Makes the master refuse the replica's synchronisation and drops its link.
async fn refuse_replication(master: &Node, connection: &mut MultiplexedConnection) -> Result<()> {
    let url = master.url();
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

/// Asks each Sentinel in turn for a forced failover; names the one that accepted, or says
/// that the automatic failover is left to happen.
async fn force_failover(sentinel: &SentinelTopology) -> String {
    let mut refusals = Vec::new();
    for node in sentinel.sentinels() {
        let reply = node
            .query::<()>(redis::cmd("SENTINEL").arg("FAILOVER").arg(MASTER_NAME))
            .await;
        match reply {
            Ok(()) => return format!("SENTINEL FAILOVER via {}", node.name()),
            Err(err) => refusals.push(err.to_string()),
        }
    }
    format!(
        "automatic; SENTINEL FAILOVER refused: {}",
        refusals.join("; ")
    )
}

/// Waits (up to `limit`) for a grant in try `t` to someone other than `holder`; who and
/// when.
async fn wait_for_grant_after(
    t: &TryView<'_>,
    holder: Option<usize>,
    limit: Duration,
) -> Option<(usize, u64)> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Some(now) = t.board.holder().filter(|h| Some(*h) != holder) {
            return Some((now, t.history.now_ns()));
        }
        tokio::time::sleep(POLL).await;
    }
    None
}

/// A fence value for the fault log (`none`: no token issued yet).
fn token_label(token: Option<u64>) -> String {
    token.map_or_else(|| "none".to_owned(), |t| t.to_string())
}

/// Waits until `master` has a replica online (synchronised and streaming).
async fn wait_attached(master: &Node, limit: Duration) -> Result<()> {
    crate::topology::wait::until("a replica to be attached", limit, || async {
        let info: String = master.query(redis::cmd("INFO").arg("replication")).await?;
        Ok(info
            .lines()
            .any(|l| l.starts_with("slave") && l.contains("state=online"))
            .then_some(()))
    })
    .await
}
