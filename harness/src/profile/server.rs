//! The server side of a CPU profile: `INFO cpu` split into the main thread (command execution
//! and, without io-threads, the networking too) and the rest of the process, `INFO
//! commandstats` time per command, and each script's own time from a `SLOWLOG` that records
//! every call.
//!
//! Redis's `commandstats` counts every `EVALSHA` under one name whatever the script, so the
//! split by script comes from the slowlog (threshold 0 records every command with its
//! arguments, the SHA among them, and the commands scripts call too). That costs the server a
//! little per call, so it runs in a separate short pass and only its per-call times and call
//! counts are used, never its CPU.

use std::collections::BTreeMap;
use std::time::Duration;

use redis::Value;
use redis::aio::MultiplexedConnection;
use serde::{Deserialize, Serialize};

use crate::bench::commandstats::CommandStats;
use crate::bench::server_counters;
use crate::error::{Error, Result};

/// Slowlog entries kept during the script pass: more than a one-second pass of the fastest
/// contender issues (about 10,000 top-level commands per second here), so none is dropped.
pub const SLOWLOG_CAPACITY: u64 = 200_000;

/// Commands the harness itself sends around a cell (snapshots, the per-cell `FLUSHALL`, the
/// `COMMAND INFO` lookups of round-trip attribution, slowlog settings), left out of the rows.
const ADMIN_COMMANDS: [&str; 5] = ["info", "flushall", "command", "config", "slowlog"];

/// One server's CPU counters at one instant, seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CpuCounters {
    /// `used_cpu_sys + used_cpu_user`: the whole process.
    pub process: f64,
    /// `used_cpu_sys_main_thread + used_cpu_user_main_thread` (Redis ≥ 6.2), if reported.
    pub main_thread: Option<f64>,
}

/// Counters of one server before or after a profiled cell.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// `INFO cpu`.
    pub cpu: CpuCounters,
    /// `INFO commandstats`.
    pub commands: CommandStats,
}

/// What the server spent on one cell, in µs per acquisition.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerSide {
    /// The whole Redis process.
    pub process_us: f64,
    /// Its main thread (commands, and the socket reads and writes while io-threads is off).
    pub main_thread_us: Option<f64>,
    /// Every other thread (io-threads, background jobs): process minus main thread.
    pub other_threads_us: Option<f64>,
    /// Inside commands (commandstats `usec`), per command name; a script's time includes the
    /// commands it calls, which are listed again under their own names.
    pub command_us: BTreeMap<String, f64>,
    /// Calls per acquisition, per command name (script-internal calls included).
    pub calls: BTreeMap<String, f64>,
    /// Per script (by name where the SHA is known): calls per acquisition and µs per call, from
    /// the slowlog pass.
    pub scripts: Vec<ScriptCost>,
}

/// One script's (or one plain top-level command's) share of the server time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScriptCost {
    /// Script name (`acquire`, `release`, …), `sha 1234abcd` for an unknown script, or the
    /// command's name for a plain command.
    pub name: String,
    /// Calls per acquisition in the slowlog pass.
    pub calls_per_acq: f64,
    /// Mean execution time per call, µs.
    pub us_per_call: f64,
}

/// Reading a slowlog of [`SLOWLOG_CAPACITY`] entries takes longer than redis-rs's default
/// response timeout allows on a loaded machine.
const ADMIN_RESPONSE_TIMEOUT: Duration = Duration::from_secs(30);

/// The profile's own admin connection to `url`, patient enough for a full slowlog.
pub async fn admin(url: &str) -> Result<MultiplexedConnection> {
    let client = redis::Client::open(url).map_err(|err| Error::redis(url, err))?;
    let config =
        redis::AsyncConnectionConfig::new().set_response_timeout(Some(ADMIN_RESPONSE_TIMEOUT));
    client
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .map_err(|err| Error::redis(url, err))
}

/// Takes one server's snapshot over the admin connection `conn`.
pub async fn snapshot(conn: &mut MultiplexedConnection, url: &str) -> Result<Snapshot> {
    let (commands, cpu) = server_counters::counters(conn, url, cpu_counters).await?;
    Ok(Snapshot { cpu, commands })
}

/// The per-acquisition server cost between two snapshots (`scripts` is filled in later).
pub fn side(before: &Snapshot, after: &Snapshot, acquisitions: u64) -> ServerSide {
    let per_acq = 1.0 / acquisitions.max(1) as f64;
    let delta = after.commands.since(&before.commands);
    let process_us = (after.cpu.process - before.cpu.process).max(0.0) * 1e6 * per_acq;
    let main_thread_us = after
        .cpu
        .main_thread
        .zip(before.cpu.main_thread)
        .map(|(a, b)| (a - b).max(0.0) * 1e6 * per_acq);
    let per = |map: &BTreeMap<String, u64>| -> BTreeMap<String, f64> {
        map.iter()
            .filter(|(name, _)| !ADMIN_COMMANDS.iter().any(|a| name.starts_with(a)))
            .map(|(name, &n)| (name.clone(), n as f64 * per_acq))
            .collect()
    };
    ServerSide {
        process_us,
        main_thread_us,
        other_threads_us: main_thread_us.map(|m| (process_us - m).max(0.0)),
        command_us: per(delta.usec()),
        calls: per(delta.calls()),
        scripts: Vec::new(),
    }
}

/// Turns on a slowlog that records every command; returns the settings to restore.
pub async fn slowlog_on(conn: &mut MultiplexedConnection, url: &str) -> Result<[String; 2]> {
    let mut saved = [String::new(), String::new()];
    for (slot, key) in saved
        .iter_mut()
        .zip(["slowlog-log-slower-than", "slowlog-max-len"])
    {
        let pair: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg(key)
            .query_async(conn)
            .await
            .map_err(|err| Error::redis(url, err))?;
        *slot = pair.get(1).cloned().unwrap_or_default();
    }
    set_slowlog(conn, url, "0", &SLOWLOG_CAPACITY.to_string()).await?;
    let _: () = redis::cmd("SLOWLOG")
        .arg("RESET")
        .query_async(conn)
        .await
        .map_err(|err| Error::redis(url, err))?;
    Ok(saved)
}

/// Reads the slowlog into per-script costs over `acquisitions` and restores `saved`.
pub async fn slowlog_off(
    conn: &mut MultiplexedConnection,
    url: &str,
    saved: &[String; 2],
    acquisitions: u64,
) -> Result<Vec<ScriptCost>> {
    let entries: Value = redis::cmd("SLOWLOG")
        .arg("GET")
        .arg(-1)
        .query_async(conn)
        .await
        .map_err(|err| Error::redis(url, err))?;
    set_slowlog(conn, url, &saved[0], &saved[1]).await?;
    Ok(script_costs(&entries, acquisitions))
}

async fn set_slowlog(
    conn: &mut MultiplexedConnection,
    url: &str,
    slower_than: &str,
    max_len: &str,
) -> Result<()> {
    redis::cmd("CONFIG")
        .arg("SET")
        .arg("slowlog-log-slower-than")
        .arg(slower_than)
        .arg("slowlog-max-len")
        .arg(max_len)
        .query_async(conn)
        .await
        .map_err(|err| Error::redis(url, err))
}

/// Groups slowlog entries (`[id, time, µs, [args…], …]`) by script SHA (named from the lock's
/// catalogue) or by command name; the harness's own commands are left out.
fn script_costs(entries: &Value, acquisitions: u64) -> Vec<ScriptCost> {
    let names: BTreeMap<&str, &str> = leasehold::script::scripts()
        .all()
        .iter()
        .map(|s| (s.sha(), s.name()))
        .collect();
    let mut totals: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let Value::Array(entries) = entries else {
        return Vec::new();
    };
    for entry in entries {
        let Value::Array(fields) = entry else {
            continue;
        };
        let (Some(Value::Int(us)), Some(Value::Array(args))) = (fields.get(2), fields.get(3))
        else {
            continue;
        };
        let text = |v: Option<&Value>| match v {
            Some(Value::BulkString(b)) => String::from_utf8_lossy(b).into_owned(),
            Some(Value::SimpleString(s)) => s.clone(),
            _ => String::new(),
        };
        let verb = text(args.first()).to_ascii_lowercase();
        if ADMIN_COMMANDS.iter().any(|a| verb.starts_with(a)) {
            continue;
        }
        let name = if verb == "evalsha" {
            let sha = text(args.get(1)).to_ascii_lowercase();
            names.get(sha.as_str()).map_or_else(
                || format!("sha {}", &sha[..sha.len().min(8)]),
                |n| (*n).to_owned(),
            )
        } else {
            verb
        };
        let slot = totals.entry(name).or_default();
        slot.0 += 1;
        slot.1 += u64::try_from(*us).unwrap_or(0);
    }
    let per_acq = 1.0 / acquisitions.max(1) as f64;
    totals
        .into_iter()
        .map(|(name, (calls, us))| ScriptCost {
            name,
            calls_per_acq: calls as f64 * per_acq,
            us_per_call: us as f64 / calls.max(1) as f64,
        })
        .collect()
}

/// `INFO cpu`'s process and main-thread totals, seconds.
fn cpu_counters(info: &str) -> std::result::Result<CpuCounters, String> {
    let field = |name: &str| -> Option<f64> {
        info.lines()
            .find_map(|l| l.trim().strip_prefix(name)?.strip_prefix(':'))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|v| v.is_finite() && *v >= 0.0)
    };
    let process = field("used_cpu_sys")
        .zip(field("used_cpu_user"))
        .map(|(s, u)| s + u)
        .ok_or_else(|| "no used_cpu_sys/used_cpu_user".to_owned())?;
    let main_thread = field("used_cpu_sys_main_thread")
        .zip(field("used_cpu_user_main_thread"))
        .map(|(s, u)| s + u);
    Ok(CpuCounters {
        process,
        main_thread,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn splits_the_main_thread_from_the_process() {
        let info = "used_cpu_sys:2.0\r\nused_cpu_user:1.0\r\n\
            used_cpu_sys_main_thread:1.5\r\nused_cpu_user_main_thread:0.5\r\n";
        let cpu = cpu_counters(info).unwrap();
        assert_eq!(cpu.process, 3.0);
        assert_eq!(cpu.main_thread, Some(2.0));
        assert!(cpu_counters("used_cpu_sys:1.0\r\n").is_err());
    }

    #[test]
    fn names_known_scripts_and_leaves_the_harness_out() {
        let acquire = leasehold::script::scripts().acquire.sha().to_owned();
        let entry = |us: i64, args: &[&str]| {
            Value::Array(vec![
                Value::Int(1),
                Value::Int(0),
                Value::Int(us),
                Value::Array(
                    args.iter()
                        .map(|a| Value::BulkString(a.as_bytes().to_vec()))
                        .collect(),
                ),
            ])
        };
        let log = Value::Array(vec![
            entry(10, &["EVALSHA", &acquire, "1", "k"]),
            entry(20, &["EVALSHA", &acquire, "1", "k"]),
            entry(4, &["EVALSHA", "0123456789abcdef", "0"]),
            entry(99, &["INFO", "cpu"]),
        ]);
        let costs = script_costs(&log, 2);
        assert_eq!(costs.len(), 2);
        assert_eq!(costs[0].name, "acquire");
        assert_eq!(costs[0].calls_per_acq, 1.0);
        assert_eq!(costs[0].us_per_call, 15.0);
        assert_eq!(costs[1].name, "sha 01234567");
    }
}
