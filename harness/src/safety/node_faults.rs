//! Faults on the cell's shared nodes: docker pause, a network cut, SIGKILL and restart, a
//! server crash with in-place recovery, periodic SCRIPT FLUSH and CLIENT KILL. One injection
//! hits every try at once; each try's hit says whether it had a holder then.
//!
//! Invariant: a node fault lands only when the node was observed gone (no PING answer
//! within [`SILENT_AFTER`]) or replaced (a crashed server back with a new run id) or, for
//! periodic faults, when a flush or kill took something.

use std::time::Duration;

use futures::future::{join_all, try_join_all};

use crate::error::Result;
use crate::safety::fault_target::{Hit, Injector, node_hits};
use crate::safety::scenario::REDLOCK_RESTARTED;
use crate::topology::node::{Node, info_field};

/// How long periodic faults (script flushes, client kills) keep coming: a few TTLs, so
/// they hit acquires, renewals and releases alike.
const PERIODIC_SPAN: Duration = Duration::from_millis(1_500);

/// How long a node may take to answer PING before the evidence calls it silent: a healthy
/// node on the local bridge answers in well under a millisecond.
const SILENT_AFTER: Duration = Duration::from_millis(300);

pub(super) async fn node_pause(inj: &Injector<'_>, length: Duration) -> Result<Vec<Hit>> {
    let (holders, start) = inj.begin_outage(length).await;
    let nodes = inj.infra.nodes();
    for node in &nodes {
        node.pause().await?;
    }
    let silent = is_silent(inj.master).await;
    tokio::time::sleep(length).await;
    for node in &nodes {
        node.unpause().await?;
    }
    let note = format!("docker pause for {} ms", length.as_millis());
    Ok(node_hits(
        &holders,
        start,
        &note,
        (silent, silence_label(silent)),
    ))
}

pub(super) async fn node_cut(inj: &Injector<'_>, length: Duration) -> Result<Vec<Hit>> {
    let (holders, start) = inj.begin_outage(length).await;
    inj.master.cut().await?;
    let silent = is_silent(inj.master).await;
    tokio::time::sleep(length).await;
    inj.master.restore().await?;
    let note = format!("node cut for {} ms", length.as_millis());
    Ok(node_hits(
        &holders,
        start,
        &note,
        (silent, silence_label(silent)),
    ))
}

/// SIGKILLs the node (RedLock: [`REDLOCK_RESTARTED`] masters) mid-hold and starts it
/// again after `down`.
pub(super) async fn restart(inj: &Injector<'_>, down: Duration) -> Result<Vec<Hit>> {
    let (holders, start) = inj.begin_outage(down).await;
    let victims = restart_victims(inj);
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
    Ok(node_hits(&holders, start, &note, (silent, observed)))
}

/// Crashes the server process of the node (RedLock: [`REDLOCK_RESTARTED`] masters) in
/// place right after a grant in the first try and has it start again after `down`; landed
/// when every victim came back as a new process (its run id changed).
///
/// Why at a grant: the crash closes every client's connection, and each client's
/// connection manager reconnects on its own backoff (redis-rs: 100-200 ms for the first
/// retry). A holder only notices the loss at its next renewal, so the lock can change
/// hands under it only when waiters reconnect and acquire before that renewal. Crashing
/// just after a grant leaves that holder a whole renewal interval (TTL/3) away from noticing.
pub(super) async fn crash_recover(inj: &Injector<'_>, down: Duration) -> Result<Vec<Hit>> {
    let (holders, start) = inj.begin_outage_at_grant(down).await;
    let victims = restart_victims(inj);
    let run_ids = try_join_all(victims.iter().map(|n| n.crash_and_recover(down))).await?;
    let replaced = run_ids.iter().all(|(before, after)| before != after);
    let note = format!(
        "server crash of {} node(s) (DEBUG CRASH-AND-RECOVER), back after {} ms",
        victims.len(),
        down.as_millis()
    );
    let observed = if replaced {
        "every crashed node came back as a new process (run id changed)"
    } else {
        "a crashed node kept its run id"
    };
    Ok(node_hits(&holders, start, &note, (replaced, observed)))
}

/// SCRIPT FLUSH on every data node every `every`; landed when a flush dropped cached
/// scripts (INFO `number_of_cached_scripts` > 0 before it).
pub(super) async fn script_flush(inj: &Injector<'_>, every: Duration) -> Result<Vec<Hit>> {
    let start = inj.tries.first().map_or(0, |t| t.history.now_ns());
    let (mut count, mut dropped) = (0u32, 0u32);
    while before_periodic_end(inj) {
        for node in inj.infra.nodes() {
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
    Ok(inj.shared_hits(start, &note, dropped > 0, &evidence))
}

/// CLIENT KILL TYPE normal on every data node every `every`; landed when the kills took
/// more connections than the PTTL monitors' own (one per try and kill).
pub(super) async fn client_kill(inj: &Injector<'_>, every: Duration) -> Result<Vec<Hit>> {
    let start = inj.tries.first().map_or(0, |t| t.history.now_ns());
    let (mut count, mut killed) = (0u32, 0i64);
    let cmd = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("normal")
        .clone();
    while before_periodic_end(inj) {
        for node in inj.infra.nodes() {
            killed += node.query::<i64>(&cmd).await?;
        }
        count += 1;
        tokio::time::sleep(every).await;
    }
    let monitors = i64::from(count) * inj.tries.len() as i64;
    let note = format!(
        "CLIENT KILL TYPE normal ×{count}, every {} ms",
        every.as_millis()
    );
    let evidence = format!("{killed} connections killed (at most {monitors} of them monitors')");
    Ok(inj.shared_hits(start, &note, killed > monitors, &evidence))
}

fn before_periodic_end(inj: &Injector<'_>) -> bool {
    let now = inj.now_ns();
    Duration::from_nanos(now) < inj.fault_at + PERIODIC_SPAN
}

/// `number_of_cached_scripts` from an INFO memory reply (0 when absent).
fn cached_scripts(info: &str) -> u64 {
    info_field(info, "number_of_cached_scripts")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Whether `node` fails to answer PING within [`SILENT_AFTER`]: the evidence that a pause,
/// cut or kill took it away.
/// The nodes a restart hits: the single node, or a quorum's worth of RedLock masters.
fn restart_victims<'a>(inj: &Injector<'a>) -> Vec<&'a Node> {
    let nodes = inj.infra.nodes();
    let n = if inj.infra.is_masters() {
        REDLOCK_RESTARTED.min(nodes.len())
    } else {
        nodes.len()
    };
    nodes.into_iter().take(n).collect()
}

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
