//! Differential test: the simulator's Redis model (`leasehold_sim::model::Node`) against a
//! real Redis 7.0.15 container, on proptest-generated sequences of the lock scripts (with
//! plausible names, owners, hold ids, TTLs, permit counts) interleaved with plain commands
//! and time steps. Replies (values and error codes) and the whole keyspace (TYPE, PTTL,
//! contents) must agree after every step.
//!
//! Determinism, made explicit:
//! - The model's clock is the real one: at the start of a case the model's wall clock is
//!   set to the server's `TIME`, and every command runs on the model at the wall time
//!   elapsed since then (measured when the real command is sent).
//! - Everything else that depends on time is compared with a tolerance, never exactly:
//!   integers (or numeric strings, scores) of at least [`TIME_LIKE_MIN`] — PTTLs, deadlines
//!   in server ms, fencing tokens in server µs — agree when within [`MS_TOLERANCE`] ms
//!   (µs-scale values: the same in µs). Counts, flags and small values compare exactly.
//! - TTL arguments are minutes, far beyond a case's duration, so nothing expires by
//!   accident; expiry itself is exercised only by [`Step::ExpireSoon`], which sets a
//!   [`SHORT_TTL`] and then waits [`SHORT_TTL_WAIT`] — far from the deadline on both sides.
//! - One container serves every case; `FLUSHALL` and `SCRIPT FLUSH` reset it between cases
//!   and the model is built fresh.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use leasehold::script::scripts;
use leasehold_harness::SingleNode;
use leasehold_sim::clock::ClockModel;
use leasehold_sim::model::{Data, Executed, Node, Persistence};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use redis::Value;
use redis::aio::MultiplexedConnection;

/// Cases and steps per case (the "64 × 20").
const CASES: u32 = 64;
const MAX_STEPS: usize = 20;

/// Values at or above this are treated as time-derived (ms durations/deadlines, µs tokens).
/// Counts, flags and the small values the generator writes stay far below it.
const TIME_LIKE_MIN: i64 = 1_000;
/// Values at or above this are µs timestamps (fencing tokens); below, milliseconds.
const MICROS_MIN: i64 = 1_000_000_000_000_000;
/// Allowed disagreement of time-derived values: the model's clock follows the real one to
/// within a round trip; 250 ms absorbs scheduling hiccups on a loaded 2-core box.
const MS_TOLERANCE: i64 = 250;

/// Expiry exercised on purpose: the key expires after this ...
const SHORT_TTL: u64 = 50;
/// ... and the step then waits this long, so both sides are past the deadline.
const SHORT_TTL_WAIT: Duration = Duration::from_millis(150);

/// Fence margin the client passes (`DEFAULT_FENCE_MARGIN`, 60 s).
const FENCE_MARGIN_MS: &str = "60000";
const INBOX: &str = "leasehold:inbox:";
const CLIENTS: [&str; 2] = [
    "0123456789abcdef0123456789abcdef",
    "fedcba9876543210fedcba9876543210",
];
const NAMES: [&str; 2] = ["a", "b"];
const TTLS_MS: [&str; 3] = ["60000", "120000", "300000"];
const VALUES: [&str; 4] = ["1", "7", "x", "1700000000000"];

/// Keys of one lock name across the three families (see the scripts' headers).
fn keys_of(name: &str) -> Vec<String> {
    let m = format!("leasehold:{{{name}}}");
    let rw = format!("{m}:rw");
    let sem = format!("{m}:sem");
    vec![
        m.clone(),
        format!("{m}:fence"),
        format!("{m}:queue"),
        format!("{m}:waiters"),
        rw.clone(),
        format!("{rw}:fence"),
        format!("{rw}:readers"),
        format!("{rw}:owners"),
        format!("{rw}:intents"),
        sem.clone(),
        format!("{sem}:queue"),
        format!("{sem}:waiters"),
    ]
}

fn all_keys() -> Vec<String> {
    let mut keys: Vec<String> = NAMES.iter().flat_map(|n| keys_of(n)).collect();
    keys.push("plain".to_owned());
    keys
}

fn owner(o: u8) -> String {
    format!("{}:{}", CLIENTS[usize::from(o % 2)], o / 2)
}

fn hold(o: u8, h: u8) -> String {
    format!("{:016x}:{}", u64::from(h) + 1, owner(o))
}

/// One generated script call: which script, on which name, as whom, with what numbers.
#[derive(Debug, Clone)]
struct ScriptCall {
    script: usize,
    name: usize,
    owner: u8,
    hold: u8,
    ttl: usize,
    queue: bool,
    permits: u8,
    by_sha: bool,
}

impl ScriptCall {
    /// The EVAL/EVALSHA command, built as the lock crate builds it.
    fn command(&self) -> redis::Cmd {
        let script = scripts().all()[self.script];
        let name = NAMES[self.name];
        let k = keys_of(name);
        let (hold, owner) = (hold(self.owner, self.hold), owner(self.owner));
        let ttl = TTLS_MS[self.ttl].to_owned();
        let entry = if self.queue { "60000" } else { "0" }.to_owned();
        let permits = self.permits.to_string();
        let released = format!("{}:released", k[0]);
        let rw_released = format!("{}:released", k[4]);
        let sem_released = format!("{}:released", k[9]);
        let (keys, args): (Vec<&String>, Vec<String>) = match script.name() {
            "acquire" => (
                vec![&k[0], &k[1], &k[2], &k[3]],
                vec![hold, owner, ttl, entry, FENCE_MARGIN_MS.into()],
            ),
            "release" => (
                vec![&k[0], &k[2], &k[3], &k[1]],
                vec![hold, owner, released, INBOX.into(), FENCE_MARGIN_MS.into()],
            ),
            "renew" => (vec![&k[0], &k[1]], vec![hold, ttl, FENCE_MARGIN_MS.into()]),
            "probe" => (vec![&k[0], &k[1]], vec![hold]),
            "rw_read_acquire" => (
                vec![&k[4], &k[6], &k[7], &k[8], &k[5]],
                vec![hold, owner, ttl],
            ),
            "rw_read_release" => (vec![&k[6], &k[7]], vec![hold, owner, rw_released]),
            "rw_read_renew" => (vec![&k[6], &k[7]], vec![hold, ttl]),
            "rw_read_probe" => (vec![&k[6], &k[5]], vec![hold]),
            "rw_write_acquire" => (
                vec![&k[4], &k[6], &k[7], &k[8], &k[5]],
                vec![
                    hold,
                    owner,
                    ttl,
                    entry,
                    FENCE_MARGIN_MS.into(),
                    "1000".into(),
                ],
            ),
            "rw_write_release" => (
                vec![&k[4], &k[8], &k[5]],
                vec![hold, owner, rw_released, FENCE_MARGIN_MS.into()],
            ),
            "semaphore_acquire" => (
                vec![&k[9], &k[10], &k[11]],
                vec![hold, permits, ttl, entry, INBOX.into()],
            ),
            "semaphore_release" => (
                vec![&k[9], &k[10], &k[11]],
                vec![hold, permits, sem_released, INBOX.into()],
            ),
            "semaphore_renew" => (vec![&k[9]], vec![hold, ttl]),
            _ => (vec![&k[9]], vec![hold]),
        };
        let mut cmd = if self.by_sha {
            let mut c = redis::cmd("EVALSHA");
            c.arg(script.sha());
            c
        } else {
            let mut c = redis::cmd("EVAL");
            c.arg(script.source());
            c
        };
        cmd.arg(keys.len()).arg(keys).arg(args);
        cmd
    }
}

/// One step of a case.
#[derive(Debug, Clone)]
enum Step {
    Script(ScriptCall),
    /// A plain command (arguments after the key are filled in from the pools).
    Plain(&'static str, usize, u8, u8),
    /// Sets a short expiry on a key (SET PX / PEXPIRE), then waits past it.
    ExpireSoon(usize, bool),
    /// Lets real time pass (the model follows).
    Sleep(u64),
    /// SCRIPT FLUSH.
    ScriptFlush,
}

const PLAIN: [&str; 24] = [
    "GET", "SET", "SETPX", "DEL", "EXISTS", "TYPE", "PTTL", "TTL", "INCR", "HSET", "HGET",
    "HGETALL", "HDEL", "HINCRBY", "ZADD", "ZRANGE", "ZREM", "ZSCORE", "LPUSH", "RPUSH", "LRANGE",
    "LPOP", "PEXPIRE", "PERSIST",
];

impl Step {
    fn command(&self) -> Option<redis::Cmd> {
        let keys = all_keys();
        match self {
            Step::Script(call) => Some(call.command()),
            Step::Plain(verb, key, a, b) => {
                let key = &keys[*key % keys.len()];
                let value = VALUES[usize::from(*a) % VALUES.len()];
                // Fields and members include the scripts' own (owners, '#'+hold ids).
                let field = match b % 3 {
                    0 => owner(*a % 4),
                    1 => format!("#{}", hold(*a % 4, *b % 2)),
                    _ => hold(*a % 4, *b % 2),
                };
                let mut c;
                match *verb {
                    "SETPX" => {
                        c = redis::cmd("SET");
                        c.arg(key)
                            .arg(value)
                            .arg("PX")
                            .arg(TTLS_MS[usize::from(*b) % 3]);
                    }
                    "SET" | "LPUSH" | "RPUSH" => {
                        c = redis::cmd(verb);
                        c.arg(key).arg(value);
                    }
                    "HSET" | "HINCRBY" => {
                        c = redis::cmd(verb);
                        c.arg(key)
                            .arg(field)
                            .arg(if *verb == "HSET" { value } else { "2" });
                    }
                    "HGET" | "HDEL" | "ZREM" | "ZSCORE" => {
                        c = redis::cmd(verb);
                        c.arg(key).arg(field);
                    }
                    "ZADD" => {
                        c = redis::cmd(verb);
                        c.arg(key).arg(value.parse::<i64>().unwrap_or(3)).arg(field);
                    }
                    "ZRANGE" => {
                        c = redis::cmd(verb);
                        c.arg(key).arg(0).arg(-1).arg("WITHSCORES");
                    }
                    "LRANGE" => {
                        c = redis::cmd(verb);
                        c.arg(key).arg(0).arg(-1);
                    }
                    "PEXPIRE" => {
                        c = redis::cmd(verb);
                        c.arg(key).arg(TTLS_MS[usize::from(*b) % 3]);
                    }
                    _ => {
                        c = redis::cmd(verb);
                        c.arg(key);
                    }
                }
                Some(c)
            }
            Step::ExpireSoon(key, with_set) => {
                let key = &keys[*key % keys.len()];
                let mut c;
                if *with_set {
                    c = redis::cmd("SET");
                    c.arg(key).arg("soon").arg("PX").arg(SHORT_TTL);
                } else {
                    c = redis::cmd("PEXPIRE");
                    c.arg(key).arg(SHORT_TTL);
                }
                Some(c)
            }
            Step::ScriptFlush => Some(redis::cmd("SCRIPT").arg("FLUSH").clone()),
            Step::Sleep(_) => None,
        }
    }
}

fn step_strategy() -> impl Strategy<Value = Step> {
    let script = (
        0..scripts().all().len(),
        0..NAMES.len(),
        0u8..4,
        0u8..2,
        0..TTLS_MS.len(),
        any::<bool>(),
        1u8..3,
        prop::bool::weighted(0.2),
    )
        .prop_map(|(script, name, owner, hold, ttl, queue, permits, by_sha)| {
            Step::Script(ScriptCall {
                script,
                name,
                owner,
                hold,
                ttl,
                queue,
                permits,
                by_sha,
            })
        });
    let keys = all_keys().len();
    prop_oneof![
        6 => script,
        4 => (prop::sample::select(PLAIN.to_vec()), 0..keys, any::<u8>(), any::<u8>())
            .prop_map(|(v, k, a, b)| Step::Plain(v, k, a, b)),
        1 => (0..keys, any::<bool>()).prop_map(|(k, s)| Step::ExpireSoon(k, s)),
        1 => (0u64..30).prop_map(Step::Sleep),
        1 => Just(Step::ScriptFlush),
    ]
}

/// A reply or stored value in comparable form.
#[derive(Debug, Clone)]
enum Canon {
    Nil,
    Int(i64),
    Bytes(Vec<u8>),
    Status(String),
    Array(Vec<Canon>),
    /// Error code only (`ERR`, `WRONGTYPE`, `NOSCRIPT`, ...): messages carry script SHAs
    /// and line numbers that are formatting, not semantics.
    Error(String),
    Other(String),
}

fn numeric(bytes: &[u8]) -> Option<i64> {
    let text = std::str::from_utf8(bytes).ok()?;
    text.parse::<i64>().ok().or_else(|| {
        text.parse::<f64>()
            .ok()
            .filter(|f| f.fract() == 0.0)
            .map(|f| f as i64)
    })
}

fn close(a: i64, b: i64) -> bool {
    if a == b {
        return true;
    }
    if a.min(b) < TIME_LIKE_MIN {
        return false;
    }
    let tolerance = if a.min(b) >= MICROS_MIN {
        MS_TOLERANCE * 1_000
    } else {
        MS_TOLERANCE
    };
    (a - b).abs() <= tolerance
}

impl PartialEq for Canon {
    fn eq(&self, other: &Self) -> bool {
        use Canon::*;
        match (self, other) {
            (Nil, Nil) => true,
            (Int(a), Int(b)) => close(*a, *b),
            (Bytes(a), Bytes(b)) => match (numeric(a), numeric(b)) {
                (Some(x), Some(y)) => close(x, y),
                _ => a == b,
            },
            (Status(a), Status(b)) | (Error(a), Error(b)) | (Other(a), Other(b)) => a == b,
            (Array(a), Array(b)) => a == b,
            _ => false,
        }
    }
}

fn canon_value(value: Value) -> Canon {
    match value {
        Value::Nil => Canon::Nil,
        Value::Int(n) => Canon::Int(n),
        Value::BulkString(b) => Canon::Bytes(b),
        Value::SimpleString(s) => Canon::Status(s),
        Value::Okay => Canon::Status("OK".into()),
        Value::Array(items) => Canon::Array(items.into_iter().map(canon_value).collect()),
        Value::ServerError(e) => Canon::Error(e.code().to_owned()),
        other => Canon::Other(format!("{other:?}")),
    }
}

fn canon_result(result: redis::RedisResult<Value>) -> Canon {
    match result {
        Ok(v) => canon_value(v),
        Err(e) => Canon::Error(e.code().unwrap_or("?").to_owned()),
    }
}

/// One key's observable state: TYPE, PTTL and contents (hash fields sorted: HGETALL order
/// is unspecified by Redis).
#[derive(Debug, Clone, PartialEq)]
struct KeyState {
    kind: String,
    pttl: Canon,
    contents: Vec<Canon>,
}

async fn real_state(conn: &mut MultiplexedConnection) -> BTreeMap<String, KeyState> {
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query_async(conn).await.unwrap();
    let mut state = BTreeMap::new();
    for key in keys {
        let kind: String = redis::cmd("TYPE")
            .arg(&key)
            .query_async(conn)
            .await
            .unwrap();
        let pttl: i64 = redis::cmd("PTTL")
            .arg(&key)
            .query_async(conn)
            .await
            .unwrap();
        let contents: Vec<Canon> = match kind.as_str() {
            "string" => {
                let v: Vec<u8> = redis::cmd("GET").arg(&key).query_async(conn).await.unwrap();
                vec![Canon::Bytes(v)]
            }
            "hash" => {
                let mut pairs: Vec<(Vec<u8>, Vec<u8>)> = redis::cmd("HGETALL")
                    .arg(&key)
                    .query_async(conn)
                    .await
                    .unwrap();
                pairs.sort();
                pairs
                    .into_iter()
                    .flat_map(|(f, v)| [Canon::Bytes(f), Canon::Bytes(v)])
                    .collect()
            }
            "list" => {
                let items: Vec<Vec<u8>> = redis::cmd("LRANGE")
                    .arg(&key)
                    .arg(0)
                    .arg(-1)
                    .query_async(conn)
                    .await
                    .unwrap();
                items.into_iter().map(Canon::Bytes).collect()
            }
            "zset" => {
                let items: Vec<(Vec<u8>, Vec<u8>)> = redis::cmd("ZRANGE")
                    .arg(&key)
                    .arg(0)
                    .arg(-1)
                    .arg("WITHSCORES")
                    .query_async(conn)
                    .await
                    .unwrap();
                items
                    .into_iter()
                    .flat_map(|(m, s)| [Canon::Bytes(m), Canon::Bytes(s)])
                    .collect()
            }
            other => vec![Canon::Other(other.to_owned())],
        };
        state.insert(
            key,
            KeyState {
                kind,
                pttl: Canon::Int(pttl),
                contents,
            },
        );
    }
    state
}

fn model_state(node: &Node, t: u64) -> BTreeMap<String, KeyState> {
    let now_ms = node.wall_us(t) / 1_000;
    let mut state = BTreeMap::new();
    for (key, entry) in node.data().iter() {
        if entry.expires_at.is_some_and(|at| at <= now_ms) {
            continue;
        }
        let contents = match &entry.data {
            Data::Str(v) => vec![Canon::Bytes(v.clone())],
            Data::Hash(fields) => {
                let mut pairs = fields.clone();
                pairs.sort();
                pairs
                    .into_iter()
                    .flat_map(|(f, v)| [Canon::Bytes(f), Canon::Bytes(v)])
                    .collect()
            }
            Data::List(items) => items.iter().cloned().map(Canon::Bytes).collect(),
            Data::ZSet(members) => members
                .iter()
                .flat_map(|(s, m)| {
                    [
                        Canon::Bytes(m.clone()),
                        Canon::Bytes(format_score(*s).into_bytes()),
                    ]
                })
                .collect(),
        };
        state.insert(
            String::from_utf8_lossy(key).into_owned(),
            KeyState {
                kind: entry.data.type_name().to_owned(),
                pttl: Canon::Int(entry.expires_at.map_or(-1, |at| at - now_ms)),
                contents,
            },
        );
    }
    state
}

fn format_score(score: f64) -> String {
    if score.fract() == 0.0 && score.abs() < 1e17 {
        format!("{}", score as i64)
    } else {
        format!("{score}")
    }
}

fn args_of(cmd: &redis::Cmd) -> Vec<Vec<u8>> {
    cmd.args_iter()
        .map(|a| match a {
            redis::Arg::Simple(b) => b.to_vec(),
            _ => b"0".to_vec(),
        })
        .collect()
}

fn describe(cmd: &redis::Cmd) -> String {
    args_of(cmd)
        .iter()
        .map(|a| {
            let s = String::from_utf8_lossy(a);
            if s.len() > 40 {
                format!("<{} bytes>", s.len())
            } else {
                s.into_owned()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs one case against both sides; the first disagreement fails it.
async fn run_case(conn: &mut MultiplexedConnection, steps: &[Step]) -> Result<(), TestCaseError> {
    let _: () = redis::cmd("FLUSHALL").query_async(conn).await.unwrap();
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(conn)
        .await
        .unwrap();
    let (secs, micros): (i64, i64) = redis::cmd("TIME").query_async(conn).await.unwrap();
    let server_us = secs * 1_000_000 + micros;
    let start = Instant::now();
    let epoch_us = Node::new(0, Persistence::None, ClockModel::new(Duration::ZERO, false))
        .unwrap()
        .wall_us(0);
    let offset = Duration::from_micros(u64::try_from(server_us - epoch_us).unwrap());
    let mut model = Node::new(0, Persistence::None, ClockModel::new(offset, false)).unwrap();
    let now = |start: Instant| u64::try_from(start.elapsed().as_nanos()).unwrap();
    for (i, step) in steps.iter().enumerate() {
        if let Step::Sleep(ms) = step {
            tokio::time::sleep(Duration::from_millis(*ms)).await;
            continue;
        }
        let Some(cmd) = step.command() else { continue };
        let t = now(start);
        let real = canon_result(cmd.query_async::<Value>(conn).await);
        let modelled = match model.execute(&args_of(&cmd), t).executed {
            Executed::Reply(reply) => canon_result(reply.into_result()),
            Executed::Wait { .. } => Canon::Other("WAIT".into()),
        };
        prop_assert_eq!(
            &real,
            &modelled,
            "step {} reply differs (left real, right model): {}",
            i,
            describe(&cmd)
        );
        if let Step::ExpireSoon(..) = step {
            tokio::time::sleep(SHORT_TTL_WAIT).await;
        }
        let real_keys = real_state(conn).await;
        let model_keys = model_state(&model, now(start));
        prop_assert_eq!(
            &real_keys,
            &model_keys,
            "step {} keyspace differs (left real, right model) after: {}",
            i,
            describe(&cmd)
        );
    }
    Ok(())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Runs `steps` as one case on a fresh container (for the named regressions).
fn check_steps(steps: Vec<Step>) {
    let rt = runtime();
    rt.block_on(async {
        let node = SingleNode::start().await.unwrap();
        let mut conn = node.node().connection().await.unwrap();
        run_case(&mut conn, &steps).await.unwrap();
    });
}

#[test]
fn model_matches_real_redis() {
    let rt = runtime();
    let node = rt.block_on(SingleNode::start()).unwrap();
    let conn = rt.block_on(node.node().connection()).unwrap();
    // PROPTEST_CASES overrides the default for a longer hunt.
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(CASES);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(
        &prop::collection::vec(step_strategy(), 1..=MAX_STEPS),
        |steps| {
            // A multiplexed connection is a cheap handle on one shared connection.
            let mut conn = conn.clone();
            rt.block_on(run_case(&mut conn, &steps))
        },
    );
    // The container must be removed inside the runtime (testcontainers drops asynchronously).
    rt.block_on(async move { drop(node) });
    if let Err(err) = result {
        panic!("model and real Redis disagree: {err}");
    }
}

fn call(script: &str, owner: u8, hold: u8, queue: bool) -> Step {
    let index = scripts()
        .all()
        .iter()
        .position(|s| s.name() == script)
        .unwrap();
    Step::Script(ScriptCall {
        script: index,
        name: 0,
        owner,
        hold,
        ttl: 0,
        queue,
        permits: 1,
        by_sha: false,
    })
}

/// Smoke regression: a contended mutex round (acquire, busy, queue, release with hand-off,
/// claim) agrees step by step.
#[test]
fn regression_mutex_handoff_round() {
    check_steps(vec![
        call("acquire", 0, 0, false),
        call("acquire", 1, 0, true),
        call("release", 0, 0, false),
        call("acquire", 1, 0, true),
        call("probe", 1, 0, false),
        call("renew", 1, 0, false),
        call("release", 1, 0, false),
    ]);
}
