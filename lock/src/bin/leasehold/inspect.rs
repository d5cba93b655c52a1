//! `leasehold inspect NAME [--output json]`: who holds a lock, until when, with which token, and who waits,
//! and whether the server's `maxmemory-policy` may evict it (issue 34, defect 2).
//!
//! The mutex is always shown (as "free" when it has no keys); the read-write lock and the
//! semaphore of the same name only when they have keys. Remaining times are computed from
//! the server's `TIME` read with the keys, so they are what the scripts will see.

use std::collections::HashMap;
use std::fmt::{self, Write as _};
use std::time::Duration;

use leasehold::{EVICTION_REMEDY, FencingToken, NO_EVICTION};
use serde::Serialize;

use crate::error::CliResult;
use crate::layout::Layout;
use crate::target::{Server, TargetArgs};
use leasehold::inspect::{Holding, LockState as Snapshot, MutexState, RwState, SemState, Waiter};

/// How `inspect` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// For people: remaining times, one line per hold and waiter.
    Text,
    /// One JSON object for scripts and health checks: the server, the name and the raw
    /// snapshot (deadlines in server ms, with the server's `now_ms` to subtract).
    Json,
}

/// What `inspect --output json` prints.
#[derive(Serialize)]
struct Report<'a> {
    server: &'a str,
    name: &'a str,
    #[serde(flatten)]
    snapshot: &'a Snapshot,
}

/// Runs `inspect`: prints the lock's state.
pub async fn run(target: &TargetArgs, name: &str, output: Output) -> CliResult<()> {
    let layout = Layout::new(name)?;
    let mut server = target.server_for(&layout.mutex.lock).await?;
    let snapshot = server.state(name).await?;
    match output {
        Output::Text => {
            print!("{}", render(&layout, &snapshot, &server.url));
            println!("{}", memory_policy(&mut server).await);
        }
        Output::Json => {
            let report = Report {
                server: &server.url,
                name,
                snapshot: &snapshot,
            };
            // Plain structs with string keys: serde_json fails only on a broken stdout.
            let json = serde_json::to_string_pretty(&report).map_err(std::io::Error::from)?;
            println!("{json}");
        }
    }
    Ok(())
}

/// One line on the server's eviction settings: lock keys carry TTLs, so any policy but
/// `noeviction` may evict a live lock once `maxmemory` is reached.
async fn memory_policy(server: &mut Server) -> String {
    let mut cmd = redis::cmd("CONFIG");
    cmd.arg("GET").arg("maxmemory").arg("maxmemory-policy");
    let settings: Result<HashMap<String, String>, _> = server.query(&cmd, "read CONFIG").await;
    let (maxmemory, policy) = match settings {
        Ok(mut settings) => (
            settings.remove("maxmemory").unwrap_or_default(),
            settings.remove("maxmemory-policy").unwrap_or_default(),
        ),
        Err(err) => return format!("maxmemory-policy: unknown ({err})"),
    };
    let limited = maxmemory.parse::<u64>().is_ok_and(|bytes| bytes > 0);
    if limited && policy != NO_EVICTION {
        format!(
            "maxmemory-policy: {policy} (maxmemory {maxmemory} bytes): may evict live locks; \
             run `{EVICTION_REMEDY}`"
        )
    } else {
        format!("maxmemory-policy: {policy} (maxmemory {maxmemory} bytes): locks are not evicted")
    }
}

/// The report for one snapshot.
pub fn render(layout: &Layout, snapshot: &Snapshot, server: &str) -> String {
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = write_report(&mut out, layout, snapshot, server);
    out
}

fn write_report(
    out: &mut String,
    layout: &Layout,
    snapshot: &Snapshot,
    server: &str,
) -> fmt::Result {
    writeln!(
        out,
        "lock {:?} on {server} (server time {} ms)",
        layout.name, snapshot.now_ms
    )?;
    mutex(out, layout, &snapshot.mutex, snapshot.now_ms)?;
    if snapshot.rw.is_present() {
        rwlock(out, layout, &snapshot.rw, snapshot.now_ms)?;
    }
    if snapshot.sem.is_present() {
        semaphore(out, layout, &snapshot.sem, snapshot.now_ms)?;
    }
    Ok(())
}

fn mutex(out: &mut String, layout: &Layout, state: &MutexState, now: i64) -> fmt::Result {
    writeln!(out, "mutex {}", layout.mutex.lock)?;
    holding(out, "holder", &state.holding, state.lease_left, now)?;
    token(out, "fencing token", state.fence)?;
    queue(out, "fair queue", &state.queue, now, "entry")
}

fn rwlock(out: &mut String, layout: &Layout, state: &RwState, now: i64) -> fmt::Result {
    writeln!(out, "rwlock {}", layout.rw.write)?;
    holding(out, "writer", &state.writer, state.lease_left, now)?;
    token(out, "write fencing token", state.fence)?;
    queue(out, "readers", &state.readers, now, "lease")?;
    if !state.owners.is_empty() {
        writeln!(out, "  read owners:")?;
        for (owner, count) in &state.owners {
            writeln!(out, "    {owner}: {count} read hold(s)")?;
        }
    }
    queue(out, "waiting writers", &state.intents, now, "intent")?;
    queue(out, "fair line", &state.queue, now, "entry")
}

fn semaphore(out: &mut String, layout: &Layout, state: &SemState, now: i64) -> fmt::Result {
    writeln!(out, "semaphore {}", layout.sem.permits)?;
    // The permit limit is each client's argument, not stored on the server.
    queue(out, "permits in use", &state.permits, now, "lease")?;
    queue(out, "fair queue", &state.queue, now, "entry")
}

fn holding(
    out: &mut String,
    role: &str,
    holding: &Holding,
    left: Option<Duration>,
    now: i64,
) -> fmt::Result {
    match holding {
        Holding::Free => {
            writeln!(out, "  {role}: none (free)")?;
        }
        Holding::Held(holders) => {
            for holder in holders {
                writeln!(
                    out,
                    "  {role}: {}{} ({} hold(s), {})",
                    holder.owner,
                    client(holder.client_name.as_deref()),
                    holder.count,
                    lease(left)
                )?;
                for hold in &holder.holds {
                    writeln!(out, "    hold {}  {}", hold.hold, until(hold, now, "lease"))?;
                }
            }
        }
        Holding::Unknown(fields) => {
            writeln!(out, "  {role}: unrecognised lock hash ({}):", lease(left))?;
            for (field, value) in fields {
                writeln!(out, "    {field} = {value}")?;
            }
        }
    }
    Ok(())
}

/// ` [client NAME]` for an owner of a named client, nothing otherwise.
fn client(name: Option<&str>) -> String {
    name.map(|name| format!(" [client {name}]"))
        .unwrap_or_default()
}

/// A held key's remaining time; read in the same `MULTI` as the holders, a held key
/// without one has no expiry, which Leasehold's scripts never leave.
fn lease(left: Option<Duration>) -> String {
    match left {
        None => "no expiry set: not written by Leasehold's scripts".to_owned(),
        Some(left) => format!("lease {} ms left", left.as_millis()),
    }
}

fn token(out: &mut String, label: &str, token: Option<FencingToken>) -> fmt::Result {
    match token {
        Some(token) => {
            writeln!(out, "  {label}: {token} (last issued)")?;
        }
        None => {
            // The margin is each handle's setting; the CLI can only name the default.
            let margin = leasehold::DEFAULT_FENCE_MARGIN.as_secs();
            writeln!(
                out,
                "  {label}: none (no fence key: never locked, or idle longer than its fence \
                 margin, {margin} s by default)"
            )?;
        }
    }
    Ok(())
}

fn queue(
    out: &mut String,
    label: &str,
    entries: &[Waiter],
    now: i64,
    deadline: &str,
) -> fmt::Result {
    if entries.is_empty() {
        return writeln!(out, "  {label}: none");
    }
    writeln!(out, "  {label}: {}", entries.len())?;
    for (position, entry) in entries.iter().enumerate() {
        let when = until(entry, now, deadline);
        let name = client(entry.client_name.as_deref());
        let writes = if entry.wants_write { " (to write)" } else { "" };
        writeln!(
            out,
            "    {}. {}{name}{writes}  {when}",
            position + 1,
            entry.hold
        )?;
    }
    Ok(())
}

/// How long `entry`'s `deadline` (a lease, an entry or an intent) has left at `now`.
fn until(entry: &Waiter, now: i64, deadline: &str) -> String {
    match entry.deadline_ms {
        Some(at) if at > now => format!("{deadline} ends in {} ms", at - now),
        Some(at) => format!(
            "{deadline} ended {} ms ago (dropped by the next script call)",
            now - at
        ),
        None => format!("no {deadline} deadline recorded"),
    }
}
