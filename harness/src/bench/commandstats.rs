//! Round trips per acquisition from `INFO commandstats` deltas (DESIGN section 3).
//!
//! Redis counts a command called from inside a Lua script in `commandstats` (and in
//! `total_commands_processed`) exactly like one a client sent, so "client-issued" needs an
//! attribution rule. Ours: a command is client-issued when Redis flags it `noscript` (scripts
//! cannot call it: EVALSHA, EVAL, SCRIPT LOAD, SUBSCRIBE, BLPOP, CLIENT …) or when the contender
//! declares it sends that plain command itself (rslock sends `SET NX PX`); every other call in
//! the delta ran inside a script. A contender whose scripts call a command its client also
//! sends (python-redis-lock: a GET before each acquire, another inside its release script)
//! declares that each script call runs it once, and those calls are taken back out of the
//! client's share. The harness's own `INFO` snapshots are excluded.

use std::collections::{BTreeMap, BTreeSet};

use redis::aio::MultiplexedConnection;

use crate::error::{Error, Result};

/// The harness's own command (the snapshot itself); never issued by a benchmarked client.
const HARNESS_COMMAND: &str = "info";
/// The flag Redis puts on commands a Lua script may not call.
const NOSCRIPT_FLAG: &str = "noscript";
/// The commands that run a script: each call of one runs the script's commands once.
const SCRIPT_CALLS: [&str; 2] = ["evalsha", "eval"];

/// Calls per command name (lower case, subcommands as `container|sub`), counting both executed
/// and rejected calls: a rejected command still cost its sender a round trip. Beside them the
/// server time spent executing each command (`usec`), for the server-cost rows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandStats {
    calls: BTreeMap<String, u64>,
    usec: BTreeMap<String, u64>,
}

impl CommandStats {
    /// Parses the text of `INFO commandstats`; lines that are not `cmdstat_*` entries are
    /// ignored, a malformed entry is an error (it would silently skew every ratio).
    pub fn parse(info: &str) -> std::result::Result<Self, String> {
        let mut calls = BTreeMap::new();
        let mut usec = BTreeMap::new();
        for line in info.lines().map(str::trim) {
            let Some(entry) = line.strip_prefix("cmdstat_") else {
                continue;
            };
            let (name, fields) = entry
                .split_once(':')
                .ok_or_else(|| format!("commandstats line without ':': {line}"))?;
            let mut total = 0u64;
            let mut saw_calls = false;
            let mut spent = 0u64;
            for field in fields.split(',') {
                let Some((key, value)) = field.split_once('=') else {
                    continue;
                };
                let number = || {
                    value
                        .parse::<u64>()
                        .map_err(|err| format!("bad {key} in `{line}`: {err}"))
                };
                match key {
                    "calls" | "rejected_calls" => {
                        saw_calls |= key == "calls";
                        total += number()?;
                    }
                    "usec" => spent = number()?,
                    _ => {}
                }
            }
            if !saw_calls {
                return Err(format!("commandstats line without calls=: {line}"));
            }
            calls.insert(name.to_ascii_lowercase(), total);
            usec.insert(name.to_ascii_lowercase(), spent);
        }
        Ok(Self { calls, usec })
    }

    /// Calls made between `earlier` and `self` (commands absent earlier count from zero;
    /// a counter that went backwards — a `CONFIG RESETSTAT` mid-run — counts as zero).
    pub fn since(&self, earlier: &CommandStats) -> CommandStats {
        let delta = |now: &BTreeMap<String, u64>, before: &BTreeMap<String, u64>| {
            now.iter()
                .map(|(name, &now)| {
                    let before = before.get(name).copied().unwrap_or(0);
                    (name.clone(), now.saturating_sub(before))
                })
                .filter(|(_, delta)| *delta > 0)
                .collect()
        };
        CommandStats {
            calls: delta(&self.calls, &earlier.calls),
            usec: delta(&self.usec, &earlier.usec),
        }
    }

    /// Calls per command name.
    pub fn calls(&self) -> &BTreeMap<String, u64> {
        &self.calls
    }

    /// Server time executing each command, µs (a script's includes the commands it calls).
    pub fn usec(&self) -> &BTreeMap<String, u64> {
        &self.usec
    }

    /// Sum over several servers (RedLock's masters), so one attribution covers a whole topology.
    pub fn merged<'a>(all: impl IntoIterator<Item = &'a CommandStats>) -> CommandStats {
        let mut merged = CommandStats::default();
        for stats in all {
            for (name, n) in &stats.calls {
                *merged.calls.entry(name.clone()).or_insert(0) += n;
            }
            for (name, n) in &stats.usec {
                *merged.usec.entry(name.clone()).or_insert(0) += n;
            }
        }
        merged
    }
}

/// A commandstats delta split into who issued the calls.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Attribution {
    /// Commands the benchmarked clients sent (each one a round trip, pipelining aside).
    pub client_issued: u64,
    /// Commands that ran inside Lua scripts.
    pub script_internal: u64,
    /// Calls per command name, for the raw report.
    pub by_command: BTreeMap<String, u64>,
    /// Server time executing these commands (commandstats `usec`, scripts include the commands
    /// they call), µs; absent in reports written before it was recorded.
    #[serde(default)]
    pub usec: u64,
}

impl Attribution {
    /// Every command Redis executed for the clients: client-issued plus script-internal.
    pub fn all_commands(&self) -> u64 {
        self.client_issued + self.script_internal
    }
}

/// Splits `delta` by the rule in the module doc. `noscript` holds the names Redis flags
/// `noscript`; `declared_direct` the plain commands the contender says it sends itself;
/// `inside_each_script_call` those of them its scripts also call, once per script call.
pub fn attribute(
    delta: &CommandStats,
    noscript: &BTreeSet<String>,
    declared_direct: &[&str],
    inside_each_script_call: &[&str],
) -> Attribution {
    let declared = |list: &[&str], name: &str| list.iter().any(|d| d.eq_ignore_ascii_case(name));
    let script_calls: u64 = SCRIPT_CALLS
        .iter()
        .filter_map(|name| delta.calls.get(*name))
        .sum();
    let mut attribution = Attribution::default();
    for (name, &calls) in &delta.calls {
        if name == HARNESS_COMMAND {
            continue;
        }
        let client = if noscript.contains(name) {
            calls
        } else if declared(declared_direct, name) {
            let inside = if declared(inside_each_script_call, name) {
                script_calls.min(calls)
            } else {
                0
            };
            calls - inside
        } else {
            0
        };
        attribution.client_issued += client;
        attribution.script_internal += calls - client;
        // A script's usec already includes the commands it called; counting only the
        // client-issued ones (pro rata where a command is both) avoids charging those twice.
        if client > 0 {
            let usec = delta.usec.get(name).copied().unwrap_or(0);
            attribution.usec += usec * client / calls;
        }
        attribution.by_command.insert(name.clone(), calls);
    }
    attribution
}

/// Reads `INFO commandstats` from one server.
pub async fn snapshot(conn: &mut MultiplexedConnection, addr: &str) -> Result<CommandStats> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .map_err(|err| Error::redis(addr, err))?;
    CommandStats::parse(&info).map_err(|reason| Error::Report {
        what: format!("INFO commandstats from {addr}"),
        reason,
    })
}

/// Asks the server which of `names` carry the `noscript` flag (`COMMAND INFO`), so the
/// attribution follows the running server's own command table rather than a list of ours.
pub async fn noscript_commands(
    conn: &mut MultiplexedConnection,
    addr: &str,
    names: impl IntoIterator<Item = &String>,
) -> Result<BTreeSet<String>> {
    let names: Vec<&String> = names.into_iter().collect();
    if names.is_empty() {
        return Ok(BTreeSet::new());
    }
    let reply: Vec<redis::Value> = redis::cmd("COMMAND")
        .arg("INFO")
        .arg(&names)
        .query_async(conn)
        .await
        .map_err(|err| Error::redis(addr, err))?;
    Ok(noscript_from_command_info(&reply))
}

/// Pure part of [`noscript_commands`]: each entry is `[name, arity, [flags…], …]` or nil for
/// an unknown name.
fn noscript_from_command_info(reply: &[redis::Value]) -> BTreeSet<String> {
    reply
        .iter()
        .filter_map(|entry| match entry {
            redis::Value::Array(fields) => {
                let name = text(fields.first()?)?;
                let flags = match fields.get(2)? {
                    redis::Value::Array(flags) | redis::Value::Set(flags) => flags,
                    _ => return None,
                };
                flags
                    .iter()
                    .any(|flag| text(flag).as_deref() == Some(NOSCRIPT_FLAG))
                    .then(|| name.to_ascii_lowercase())
            }
            _ => None,
        })
        .collect()
}

fn text(value: &redis::Value) -> Option<String> {
    match value {
        redis::Value::BulkString(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
        redis::Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    const BEFORE: &str = "# Commandstats\r\n\
        cmdstat_set:calls=10,usec=20,usec_per_call=2.00,rejected_calls=0,failed_calls=0\r\n\
        cmdstat_info:calls=1,usec=41,usec_per_call=41.00,rejected_calls=0,failed_calls=0\r\n";
    const AFTER: &str = "# Commandstats\r\n\
        cmdstat_set:calls=110,usec=220,usec_per_call=2.00,rejected_calls=0,failed_calls=0\r\n\
        cmdstat_get:calls=60,usec=90,usec_per_call=1.50,rejected_calls=0,failed_calls=0\r\n\
        cmdstat_del:calls=50,usec=60,usec_per_call=1.20,rejected_calls=0,failed_calls=0\r\n\
        cmdstat_evalsha:calls=58,usec=900,usec_per_call=15.5,rejected_calls=2,failed_calls=0\r\n\
        cmdstat_script|load:calls=1,usec=30,usec_per_call=30.0,rejected_calls=0,failed_calls=0\r\n\
        cmdstat_info:calls=2,usec=80,usec_per_call=40.00,rejected_calls=0,failed_calls=0\r\n";

    fn delta() -> CommandStats {
        let before = CommandStats::parse(BEFORE).unwrap();
        CommandStats::parse(AFTER).unwrap().since(&before)
    }

    #[test]
    fn parses_calls_and_rejected_calls_per_command() {
        let stats = CommandStats::parse(AFTER).unwrap();
        assert_eq!(stats.calls().get("evalsha"), Some(&60));
        assert_eq!(stats.calls().get("script|load"), Some(&1));
        assert_eq!(stats.calls().len(), 6);
    }

    #[test]
    fn rejects_malformed_counters() {
        assert!(CommandStats::parse("cmdstat_get:calls=x,usec=1").is_err());
        assert!(CommandStats::parse("cmdstat_get:usec=1").is_err());
    }

    #[test]
    fn delta_subtracts_and_drops_unchanged_commands() {
        let d = delta();
        assert_eq!(d.calls().get("set"), Some(&100));
        assert_eq!(d.calls().get("get"), Some(&60));
        assert_eq!(d.calls().get("info"), Some(&1));
        let same = CommandStats::parse(BEFORE).unwrap();
        assert!(same.since(&same).calls().is_empty());
    }

    #[test]
    fn attribution_separates_script_calls_from_client_calls() {
        // rslock's shape: SET NX from the client, GET/DEL inside its unlock script.
        let noscript: BTreeSet<String> = ["evalsha", "script|load"]
            .into_iter()
            .map(String::from)
            .collect();
        let a = attribute(&delta(), &noscript, &["SET"], &[]);
        assert_eq!(a.client_issued, 100 + 60 + 1);
        assert_eq!(a.script_internal, 60 + 50);
        assert_eq!(a.all_commands(), 271);
        // SET 200 + EVALSHA 900 + SCRIPT LOAD 30; GET/DEL ran inside the scripts' 900.
        assert_eq!(a.usec, 200 + 900 + 30);
        assert!(!a.by_command.contains_key("info"), "harness INFO excluded");
    }

    #[test]
    fn undeclared_plain_commands_count_as_script_internal() {
        let a = attribute(&delta(), &BTreeSet::new(), &[], &[]);
        assert_eq!(a.client_issued, 0);
        assert_eq!(a.script_internal, 100 + 60 + 50 + 60 + 1);
    }

    #[test]
    fn a_command_both_sent_and_scripted_counts_once_per_script_call_as_script_internal() {
        // python-redis-lock's shape: GET and SET NX from the client, a GET inside each
        // release script (58 script calls here, 2 of them rejected).
        let noscript: BTreeSet<String> = ["evalsha", "script|load"]
            .into_iter()
            .map(String::from)
            .collect();
        let a = attribute(&delta(), &noscript, &["set", "get"], &["get"]);
        // SET 100, EVALSHA 60, SCRIPT LOAD 1; GET's 60 calls are the 60 scripts' own.
        assert_eq!(a.client_issued, 100 + 60 + 1);
        assert_eq!(a.script_internal, 60 + 50);
        // The same delta without the declaration charges every GET to the client.
        let b = attribute(&delta(), &noscript, &["set", "get"], &[]);
        assert_eq!(b.client_issued, a.client_issued + 60);
        // More script calls than GETs cannot make the client's share negative.
        let only_gets = CommandStats::parse(
            "cmdstat_get:calls=5,usec=5\r\ncmdstat_evalsha:calls=9,usec=90\r\n",
        )
        .unwrap();
        let c = attribute(&only_gets, &noscript, &["get"], &["get"]);
        assert_eq!((c.client_issued, c.script_internal), (9, 5));
    }

    #[test]
    fn merges_servers() {
        let d = delta();
        let merged = CommandStats::merged([&d, &d]);
        assert_eq!(merged.calls().get("del"), Some(&100));
    }

    #[test]
    fn reads_noscript_flags_from_command_info() {
        use redis::Value::{Array, BulkString, Int, Nil, SimpleString};
        let reply = vec![
            Array(vec![
                BulkString(b"evalsha".to_vec()),
                Int(-3),
                Array(vec![
                    SimpleString("noscript".into()),
                    SimpleString("stale".into()),
                ]),
            ]),
            Array(vec![
                BulkString(b"set".to_vec()),
                Int(-3),
                Array(vec![SimpleString("write".into())]),
            ]),
            Nil,
        ];
        let names = noscript_from_command_info(&reply);
        assert_eq!(names.into_iter().collect::<Vec<_>>(), vec!["evalsha"]);
    }
}
