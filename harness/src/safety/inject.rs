//! Fault application: injects a scenario's [`RealFault`] into the tries of a running cell —
//! once on the shared node for node faults, once per try for faults aimed at a try's holder —
//! and reports, per try, when it started and ended and the evidence that it landed.
//!
//! Invariant: a try's fault counts as landed only on evidence read from the system, not on
//! the injection having been attempted: the target held when it hit, the process or node
//! was observed stopped or silent, a grant was missing where the fault should remove it.
//! Every client a fault hampers is marked `Impaired` for the outage (plus the TTLs it takes
//! the lock to come back), so the checker does not judge their waits then as starvation.

use std::time::{Duration, Instant};

use futures::future::{join_all, try_join_all};
use leasehold_sim::history::HistKind;

use crate::error::{Error, Result};
use crate::node::Node;
use crate::safety::infra::Infra;
use crate::safety::link::Link;
use crate::safety::report::FaultTiming;
use crate::safety::run_history::{RunHistory, ms_from_ns};
use crate::safety::scenario::{REDLOCK_RESTARTED, RealFault};
use crate::safety::worker::Board;
use crate::safety::worker_process;

/// How long to look for a holder to aim a mid-hold fault at before injecting anyway.
const HOLDER_WAIT: Duration = Duration::from_secs(2);

/// How long periodic faults (script flushes, client kills) keep coming: a few TTLs, so
/// they hit acquires, renewals and releases alike.
const PERIODIC_SPAN: Duration = Duration::from_millis(1_500);

/// Bound for Sentinel to promote the replica (down-after 1 s + election + reconfiguration).
const FAILOVER_LIMIT: Duration = Duration::from_secs(30);

/// How long a node may take to answer PING before the evidence calls it silent: a healthy
/// node on the local bridge answers in well under a millisecond.
const SILENT_AFTER: Duration = Duration::from_millis(300);

/// How long a line already in a frozen worker's pipe may take to reach the board.
const PIPE_DRAIN: Duration = Duration::from_millis(20);

/// What the fault can see of one try.
pub(super) struct TryView<'a> {
    /// Who holds now.
    pub board: &'a Board,
    /// The try's history, whose clock times the fault.
    pub history: &'a RunHistory,
    /// Per-client links (holder-partition only; empty otherwise).
    pub links: &'a [Link],
    /// The process id of worker c0 when it runs in its own process (holder-freeze).
    pub process: Option<u32>,
    /// Clients of the try.
    pub clients: usize,
}

/// What a fault is applied to in one cell.
pub(super) struct Injector<'a> {
    /// The cell's containers.
    pub infra: &'a Infra,
    /// The node holding the lock key when the cell started.
    pub master: &'a Node,
    /// The cell's lease TTL.
    pub ttl: Duration,
    /// When the fault is due (run time).
    pub fault_at: Duration,
    /// The tries, side by side.
    pub tries: Vec<TryView<'a>>,
}

/// One try's outcome of a fault: start stamp, what was done, whether it landed and why.
struct Hit {
    start: u64,
    note: String,
    landed: bool,
    evidence: String,
}

impl Injector<'_> {
    /// Injects `fault` and returns each try's timing and evidence once it is over.
    pub(super) async fn inject(&self, fault: RealFault) -> Result<Vec<FaultTiming>> {
        let hits = match fault {
            RealFault::HolderPause(pause) => {
                join_all(self.tries.iter().map(|t| self.holder_pause(t, pause))).await
            }
            RealFault::HolderFreeze(pause) => {
                try_join_all(self.tries.iter().map(|t| self.holder_freeze(t, pause))).await?
            }
            RealFault::HolderPartition(length) => {
                join_all(self.tries.iter().map(|t| self.holder_partition(t, length))).await
            }
            RealFault::NodePause(length) => self.node_pause(length).await?,
            RealFault::NodeCut(length) => self.node_cut(length).await?,
            RealFault::Restart(down) => self.restart(down).await?,
            RealFault::Failover => self.failover().await?,
            RealFault::ScriptFlush(every) => self.script_flush(every).await?,
            RealFault::ClientKill(every) => self.client_kill(every).await?,
        };
        Ok(self
            .tries
            .iter()
            .zip(hits)
            .map(|(t, hit)| FaultTiming {
                start_ms: ms_from_ns(hit.start),
                end_ms: ms_from_ns(t.history.now_ns()),
                note: hit.note,
                landed: hit.landed,
                evidence: hit.evidence,
            })
            .collect())
    }

    fn ttl_ns(&self) -> u64 {
        u64::try_from(self.ttl.as_nanos()).unwrap_or(u64::MAX)
    }

    /// The pausing worker stops on its own at its first hold after the fault point; this
    /// only waits (bounded) for that and for the pause to pass.
    async fn holder_pause(&self, t: &TryView<'_>, pause: Duration) -> Hit {
        let start = t.history.now_ns();
        let deadline = Instant::now() + HOLDER_WAIT + pause;
        while !t.board.paused() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let landed = t.board.paused();
        if landed {
            tokio::time::sleep(pause).await;
        }
        Hit {
            start,
            note: format!("c0 stopped in process for {} ms", pause.as_millis()),
            landed,
            evidence: if landed {
                "c0 stopped while holding".to_owned()
            } else {
                "c0 never held after the fault point".to_owned()
            },
        }
    }

    /// SIGSTOPs worker c0's process while it holds, checks the kernel reports it stopped,
    /// and continues it after `pause`.
    async fn holder_freeze(&self, t: &TryView<'_>, pause: Duration) -> Result<Hit> {
        let Some(pid) = t.process else {
            return Err(Error::Lock {
                name: "(safety)".to_owned(),
                reason: "holder-freeze needs c0 in its own process".to_owned(),
            });
        };
        let deadline = Instant::now() + HOLDER_WAIT;
        while t.board.holder() != Some(0) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let start = t.history.now_ns();
        worker_process::signal(pid, "STOP").await?;
        impair(
            t.history,
            [0],
            start + self.ttl_ns() + pause.as_nanos() as u64,
        );
        tokio::time::sleep(PIPE_DRAIN).await;
        let stopped = worker_process::is_stopped(pid).await;
        let held = t.board.holder() == Some(0);
        tokio::time::sleep(pause.saturating_sub(PIPE_DRAIN)).await;
        worker_process::signal(pid, "CONT").await?;
        Ok(Hit {
            start,
            note: format!("SIGSTOP of c0's process for {} ms", pause.as_millis()),
            landed: stopped && held,
            evidence: format!(
                "kernel state {}; c0 {} when stopped",
                if stopped {
                    "stopped (T)"
                } else {
                    "NOT stopped"
                },
                if held { "held" } else { "did NOT hold" }
            ),
        })
    }

    /// Cuts only the holder's link; only the holder is impaired.
    async fn holder_partition(&self, t: &TryView<'_>, length: Duration) -> Hit {
        let holder = wait_for_holder(t.board).await;
        let start = t.history.now_ns();
        let target = holder.unwrap_or(0);
        impair(
            t.history,
            [target],
            start + self.ttl_ns() + length.as_nanos() as u64,
        );
        let link = t.links.get(target);
        if let Some(link) = link {
            link.cut();
        }
        let held = t.board.holder() == Some(target) && holder.is_some();
        tokio::time::sleep(length).await;
        if let Some(link) = link {
            link.restore();
        }
        Hit {
            start,
            note: format!("c{target}'s links cut for {} ms", length.as_millis()),
            landed: held && link.is_some(),
            evidence: if held {
                format!("c{target} held when cut")
            } else {
                format!("c{target} did not hold when cut")
            },
        }
    }

    /// Waits (bounded) for a holder in every try, marks every client impaired until
    /// `impaired_for` after now, and returns each try's holder and the start stamp.
    async fn begin_outage(&self, impaired_for: Duration) -> (Vec<Option<usize>>, u64) {
        let deadline = Instant::now() + HOLDER_WAIT;
        while self.tries.iter().any(|t| t.board.holder().is_none()) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let holders = self.tries.iter().map(|t| t.board.holder()).collect();
        let start = self.tries.first().map_or(0, |t| t.history.now_ns());
        let until = start + self.ttl_ns() * 2 + impaired_for.as_nanos() as u64;
        for t in &self.tries {
            impair(t.history, 0..t.clients, until);
        }
        (holders, start)
    }

    /// One hit per try of a node fault: landed when the fault was observed (`observed`)
    /// and the try had a holder when it began.
    fn node_hits(
        holders: &[Option<usize>],
        start: u64,
        note: &str,
        observed: (bool, &str),
    ) -> Vec<Hit> {
        holders
            .iter()
            .map(|holder| Hit {
                start,
                note: format!("{note} while {} held", holder_label(*holder)),
                landed: observed.0 && holder.is_some(),
                evidence: format!(
                    "{}; {}",
                    observed.1,
                    holder.map_or("nobody held".to_owned(), |h| format!("c{h} held"))
                ),
            })
            .collect()
    }

    async fn node_pause(&self, length: Duration) -> Result<Vec<Hit>> {
        let (holders, start) = self.begin_outage(length).await;
        let nodes = self.infra.nodes();
        for node in &nodes {
            node.pause().await?;
        }
        let silent = is_silent(self.master).await;
        tokio::time::sleep(length).await;
        for node in &nodes {
            node.unpause().await?;
        }
        let note = format!("docker pause for {} ms", length.as_millis());
        Ok(Self::node_hits(
            &holders,
            start,
            &note,
            (silent, silence_label(silent)),
        ))
    }

    async fn node_cut(&self, length: Duration) -> Result<Vec<Hit>> {
        let (holders, start) = self.begin_outage(length).await;
        self.master.cut().await?;
        let silent = is_silent(self.master).await;
        tokio::time::sleep(length).await;
        self.master.restore().await?;
        let note = format!("node cut for {} ms", length.as_millis());
        Ok(Self::node_hits(
            &holders,
            start,
            &note,
            (silent, silence_label(silent)),
        ))
    }

    /// SIGKILLs the node (RedLock: [`REDLOCK_RESTARTED`] masters) mid-hold and starts it
    /// again after `down`.
    async fn restart(&self, down: Duration) -> Result<Vec<Hit>> {
        let (holders, start) = self.begin_outage(down).await;
        let nodes = self.infra.nodes();
        let victims = if self.infra.is_masters() {
            &nodes[..REDLOCK_RESTARTED.min(nodes.len())]
        } else {
            &nodes[..]
        };
        try_join_all(victims.iter().map(|n| n.kill())).await?;
        let silent = join_all(victims.iter().map(|n| is_silent(n)))
            .await
            .into_iter()
            .all(|s| s);
        tokio::time::sleep(down).await;
        try_join_all(victims.iter().map(|n| n.start())).await?;
        let note = format!(
            "SIGKILL of {} node(s), restarted after {} ms",
            victims.len(),
            down.as_millis()
        );
        let observed = if silent {
            "every killed node refused PING"
        } else {
            "a killed node still answered PING"
        };
        Ok(Self::node_hits(&holders, start, &note, (silent, observed)))
    }

    /// Right after a grant, kills the Sentinel master, reads at once whether the replica
    /// has each try's holder's grant (a grant it lacks is the one the failover loses), and
    /// waits for the replica's promotion.
    async fn failover(&self) -> Result<Vec<Hit>> {
        let Infra::Sentinel(sentinel) = self.infra else {
            return Err(Error::Lock {
                name: "(safety)".to_owned(),
                reason: "failover needs the Sentinel topology".to_owned(),
            });
        };
        // Right after a grant: wait for the lock to change hands, then kill at once.
        let boards: Vec<&Board> = self.tries.iter().map(|t| t.board).collect();
        let first: Vec<Option<usize>> = boards.iter().map(|b| b.holder()).collect();
        let deadline = Instant::now() + HOLDER_WAIT;
        while boards
            .iter()
            .zip(&first)
            .all(|(b, f)| b.holder().is_none_or(|h| Some(h) == *f))
            && Instant::now() < deadline
        {
            tokio::task::yield_now().await;
        }
        let holders: Vec<Option<usize>> = boards.iter().map(|b| b.holder()).collect();
        let grants: Vec<Option<(String, String)>> = boards.iter().map(|b| b.grant()).collect();
        let start = self.tries.first().map_or(0, |t| t.history.now_ns());
        let old = self.master.addr();
        self.master.kill().await?;
        let replica = self.infra.nodes().into_iter().find(|n| n.addr() != old);
        let mut kept = Vec::with_capacity(grants.len());
        for grant in &grants {
            kept.push(match (replica, grant) {
                (Some(node), Some((key, field))) => node
                    .query::<bool>(redis::cmd("HEXISTS").arg(key).arg(field))
                    .await
                    .ok(),
                _ => None,
            });
        }
        for t in &self.tries {
            impair(
                t.history,
                0..t.clients,
                start + FAILOVER_LIMIT.as_nanos() as u64,
            );
        }
        let new = sentinel.wait_for_new_master(old, FAILOVER_LIMIT).await?;
        for t in &self.tries {
            impair(
                t.history,
                0..t.clients,
                t.history.now_ns() + self.ttl_ns() * 2,
            );
        }
        Ok(holders
            .iter()
            .zip(kept)
            .map(|(holder, kept)| Hit {
                start,
                note: format!(
                    "master {old} killed right after {}'s grant; {new} promoted",
                    holder_label(*holder)
                ),
                landed: holder.is_some() && kept == Some(false),
                evidence: match kept {
                    Some(false) => "the replica lacked the holder's grant (lost)".to_owned(),
                    Some(true) => {
                        "the replica had the holder's grant: replication beat the kill".to_owned()
                    }
                    None => "the holder's grant could not be read on the replica".to_owned(),
                },
            })
            .collect())
    }

    /// SCRIPT FLUSH on every data node every `every`; landed when a flush dropped cached
    /// scripts (INFO `number_of_cached_scripts` > 0 before it).
    async fn script_flush(&self, every: Duration) -> Result<Vec<Hit>> {
        let start = self.tries.first().map_or(0, |t| t.history.now_ns());
        let (mut count, mut dropped) = (0u32, 0u32);
        while self.before_periodic_end() {
            for node in self.infra.nodes() {
                let info: String = node.query(redis::cmd("INFO").arg("memory")).await?;
                if cached_scripts(&info) > 0 {
                    dropped += 1;
                }
                node.query::<redis::Value>(redis::cmd("SCRIPT").arg("FLUSH"))
                    .await?;
            }
            count += 1;
            tokio::time::sleep(every).await;
        }
        let note = format!("SCRIPT FLUSH ×{count}, every {} ms", every.as_millis());
        let evidence = format!("{dropped} flush(es) dropped cached scripts");
        Ok(self.shared_hits(start, &note, dropped > 0, &evidence))
    }

    /// CLIENT KILL TYPE normal on every data node every `every`; landed when the kills took
    /// more connections than the PTTL monitors' own (one per try and kill).
    async fn client_kill(&self, every: Duration) -> Result<Vec<Hit>> {
        let start = self.tries.first().map_or(0, |t| t.history.now_ns());
        let (mut count, mut killed) = (0u32, 0i64);
        let cmd = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg("normal")
            .clone();
        while self.before_periodic_end() {
            for node in self.infra.nodes() {
                killed += node.query::<i64>(&cmd).await?;
            }
            count += 1;
            tokio::time::sleep(every).await;
        }
        let monitors = i64::from(count) * self.tries.len() as i64;
        let note = format!(
            "CLIENT KILL TYPE normal ×{count}, every {} ms",
            every.as_millis()
        );
        let evidence =
            format!("{killed} connections killed (at most {monitors} of them monitors')");
        Ok(self.shared_hits(start, &note, killed > monitors, &evidence))
    }

    fn before_periodic_end(&self) -> bool {
        let now = self.tries.first().map_or(0, |t| t.history.now_ns());
        Duration::from_nanos(now) < self.fault_at + PERIODIC_SPAN
    }

    /// The same hit for every try (a fault on the shared node with no holder to aim at).
    fn shared_hits(&self, start: u64, note: &str, landed: bool, evidence: &str) -> Vec<Hit> {
        self.tries
            .iter()
            .map(|_| Hit {
                start,
                note: note.to_owned(),
                landed,
                evidence: evidence.to_owned(),
            })
            .collect()
    }
}

/// `number_of_cached_scripts` from an INFO memory reply (0 when absent).
fn cached_scripts(info: &str) -> u64 {
    info.lines()
        .find_map(|l| l.strip_prefix("number_of_cached_scripts:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// Whether `node` fails to answer PING within [`SILENT_AFTER`]: the evidence that a pause,
/// cut or kill took it away.
async fn is_silent(node: &Node) -> bool {
    !matches!(
        tokio::time::timeout(SILENT_AFTER, node.query::<String>(&redis::cmd("PING"))).await,
        Ok(Ok(_))
    )
}

fn silence_label(silent: bool) -> &'static str {
    if silent {
        "the node did not answer PING"
    } else {
        "the node still answered PING"
    }
}

/// Waits (bounded) until somebody holds the lock, so a mid-hold fault hits a holder.
async fn wait_for_holder(board: &Board) -> Option<usize> {
    let deadline = Instant::now() + HOLDER_WAIT;
    while Instant::now() < deadline {
        if let Some(holder) = board.holder() {
            return Some(holder);
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    None
}

/// Marks `procs` as hampered from now until `until_ns`, so the checker does not judge
/// their waits during an outage as starvation (as the simulator does for its faults).
fn impair(history: &RunHistory, procs: impl IntoIterator<Item = usize>, until_ns: u64) {
    for proc in procs {
        history.record(proc, "", HistKind::Impaired { until: until_ns });
    }
}

/// Who held the lock when a fault was injected, for the fault log ("c2", or nobody yet).
fn holder_label(holder: Option<usize>) -> String {
    holder.map_or_else(|| "no client".to_owned(), |c| format!("c{c}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cached_scripts_reads_the_info_field() {
        let info = "# Memory\r\nused_memory:1\r\nnumber_of_cached_scripts:3\r\n";
        assert_eq!(cached_scripts(info), 3);
        assert_eq!(cached_scripts("# Memory\r\n"), 0);
    }
}
