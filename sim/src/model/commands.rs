//! The Redis command subset the lock scripts and clients use, with Redis's exact replies.
//!
//! Invariant: for every command here, arity errors, type errors (`WRONGTYPE`), integer
//! parsing, option validation and the special replies (`PTTL` -2/-1, nil vs empty array)
//! match Redis 7, so a script that works against the model works against Redis and
//! vice versa. Commands that need the node (scripts, `WAIT`, `INFO`) live in `node.rs`.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::keyspace::{Data, Entry, HashFields, Keyspace, ZMembers};
use crate::resp::Reply;

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const NOT_INTEGER: &str = "ERR value is not an integer or out of range";
const NOT_FLOAT: &str = "ERR value is not a valid float";
const SYNTAX: &str = "ERR syntax error";

/// What a command did besides its reply: keys to replicate and messages to publish.
#[derive(Debug, Default, Clone)]
pub struct Effects {
    /// Keys written (their new state, or absence, is shipped to replicas).
    pub dirty: BTreeSet<Vec<u8>>,
    /// `(channel, message)` pairs published, in order.
    pub published: Vec<(Vec<u8>, Vec<u8>)>,
}

/// Everything a data command may touch.
pub struct Ctx<'a> {
    /// The database.
    pub ks: &'a mut Keyspace,
    /// The node's wall clock in microseconds (frozen for the duration of a script).
    pub now_us: i64,
    /// Writes and publishes performed so far.
    pub effects: &'a mut Effects,
    /// Channel -> subscriber connections, to answer `PUBLISH` with a receiver count.
    pub subscribers: &'a BTreeMap<Vec<u8>, BTreeSet<u64>>,
    /// A replica refuses writes with `READONLY`.
    pub read_only: bool,
}

impl Ctx<'_> {
    fn now_ms(&self) -> i64 {
        self.now_us.div_euclid(1000)
    }

    fn touch(&mut self, key: &[u8]) {
        self.effects.dirty.insert(key.to_vec());
    }
}

/// Arity as Redis's command table states it: `n > 0` exactly `n` words (command included),
/// `n < 0` at least `-n`.
fn arity(name: &str) -> Option<i32> {
    Some(match name {
        "get" | "incr" | "decr" | "hlen" | "hgetall" | "hkeys" | "hvals" | "pttl" | "ttl"
        | "persist" | "llen" | "zcard" | "type" | "echo" | "getdel" => 2,
        "incrby" | "decrby" | "hget" | "hexists" | "lindex" | "zscore" | "zrank" | "publish" => 3,
        "hsetnx" | "hincrby" | "lrange" | "lrem" | "zremrangebyscore" => 4,
        "set" | "pexpire" | "expire" | "pexpireat" | "expireat" | "lpush" | "rpush" | "hdel"
        | "hmget" | "zrem" => -3,
        "hset" | "zadd" | "zrange" | "zrangebyscore" => -4,
        "del" | "exists" | "lpop" | "rpop" => -2,
        "time" | "dbsize" => 1,
        "ping" | "flushall" => -1,
        _ => return None,
    })
}

/// The reply Redis gives for a command with the wrong number of arguments.
pub fn wrong_arity(name: &str) -> Reply {
    Reply::error(format!(
        "ERR wrong number of arguments for '{name}' command"
    ))
}

/// The reply Redis gives for a command it does not know.
pub fn unknown_command(args: &[Vec<u8>]) -> Reply {
    let name = args
        .first()
        .map(|a| String::from_utf8_lossy(a))
        .unwrap_or_default();
    let rest: String = args
        .iter()
        .skip(1)
        .map(|a| format!("'{}' ", String::from_utf8_lossy(a)))
        .collect();
    Reply::error(format!(
        "ERR unknown command '{name}', with args beginning with: {rest}"
    ))
}

/// Whether `name` (lowercase) is a data command this module executes.
pub fn is_data_command(name: &str) -> bool {
    arity(name).is_some()
}

/// Whether `name` (lowercase) writes: such commands are refused on replicas.
pub fn is_write(name: &str) -> bool {
    matches!(
        name,
        "set"
            | "del"
            | "incr"
            | "incrby"
            | "decr"
            | "decrby"
            | "hset"
            | "hsetnx"
            | "hincrby"
            | "hdel"
            | "pexpire"
            | "expire"
            | "pexpireat"
            | "expireat"
            | "persist"
            | "lpush"
            | "rpush"
            | "lpop"
            | "rpop"
            | "lrem"
            | "zadd"
            | "zrem"
            | "zremrangebyscore"
            | "getdel"
            | "flushall"
    )
}

/// Executes one data command (`args[0]` is the command name, any case).
pub fn execute(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Reply {
    let Some(first) = args.first() else {
        return Reply::error("ERR empty command");
    };
    let name = String::from_utf8_lossy(first).to_ascii_lowercase();
    let Some(arity) = arity(&name) else {
        return unknown_command(args);
    };
    let n = args.len() as i32;
    if (arity > 0 && n != arity) || (arity < 0 && n < -arity) {
        return wrong_arity(&name);
    }
    if ctx.read_only && is_write(&name) {
        return Reply::error("READONLY You can't write against a read only replica.");
    }
    let a = &args[1..];
    match name.as_str() {
        "get" => get(ctx, &a[0]),
        "getdel" => getdel(ctx, &a[0]),
        "set" => set(ctx, a),
        "del" => Reply::Int(a.iter().filter(|k| del_one(ctx, k)).count() as i64),
        "exists" => {
            let now = ctx.now_ms();
            Reply::Int(a.iter().filter(|k| ctx.ks.get(k, now).is_some()).count() as i64)
        }
        "incr" => incr_by(ctx, &a[0], 1),
        "decr" => incr_by(ctx, &a[0], -1),
        "incrby" => match parse_int(&a[1]) {
            Some(delta) => incr_by(ctx, &a[0], delta),
            None => Reply::error(NOT_INTEGER),
        },
        "decrby" => match parse_int(&a[1]).and_then(i64::checked_neg) {
            Some(delta) => incr_by(ctx, &a[0], delta),
            None => Reply::error(NOT_INTEGER),
        },
        "type" => {
            let now = ctx.now_ms();
            Reply::Status(
                ctx.ks
                    .get(&a[0], now)
                    .map_or("none", |e| e.data.type_name())
                    .to_owned(),
            )
        }
        "pexpire" => expire(ctx, a, "pexpire", ExpireUnit::RelativeMs),
        "expire" => expire(ctx, a, "expire", ExpireUnit::RelativeSec),
        "pexpireat" => expire(ctx, a, "pexpireat", ExpireUnit::AbsoluteMs),
        "expireat" => expire(ctx, a, "expireat", ExpireUnit::AbsoluteSec),
        "pttl" => Reply::Int(pttl(ctx, &a[0])),
        "ttl" => Reply::Int(match pttl(ctx, &a[0]) {
            ms if ms < 0 => ms,
            ms => (ms + 500) / 1000,
        }),
        "persist" => persist(ctx, &a[0]),
        "hget" | "hexists" | "hlen" | "hgetall" | "hkeys" | "hvals" | "hmget" => {
            hash_read(ctx, &name, a)
        }
        "hset" | "hsetnx" | "hincrby" | "hdel" => hash_write(ctx, &name, a),
        "lpush" | "rpush" => push(ctx, &a[0], &a[1..], name == "lpush"),
        "lpop" | "rpop" => pop(ctx, a, name == "lpop", &name),
        "lrange" | "llen" | "lindex" => list_read(ctx, &name, a),
        "lrem" => lrem(ctx, a),
        "zadd" => zadd(ctx, a),
        "zrem" => zrem(ctx, a),
        "zscore" | "zcard" | "zrank" => zset_read(ctx, &name, a),
        "zrange" => zrange(ctx, a),
        "zrangebyscore" => zrangebyscore(ctx, a),
        "zremrangebyscore" => zremrangebyscore(ctx, a),
        "publish" => {
            let receivers = ctx.subscribers.get(&a[0]).map_or(0, BTreeSet::len);
            ctx.effects.published.push((a[0].clone(), a[1].clone()));
            Reply::Int(receivers as i64)
        }
        "time" => Reply::Array(vec![
            Reply::bulk(ctx.now_us.div_euclid(1_000_000).to_string()),
            Reply::bulk(ctx.now_us.rem_euclid(1_000_000).to_string()),
        ]),
        "ping" => match a {
            [] => Reply::Status("PONG".to_owned()),
            [msg] => Reply::Bulk(msg.clone()),
            _ => wrong_arity("ping"),
        },
        "echo" => Reply::Bulk(a[0].clone()),
        "dbsize" => Reply::Int(ctx.ks.live_len(ctx.now_ms()) as i64),
        "flushall" => {
            let keys: Vec<Vec<u8>> = ctx.ks.iter().map(|(k, _)| k.clone()).collect();
            for key in keys {
                ctx.touch(&key);
            }
            ctx.ks.clear();
            Reply::ok()
        }
        _ => unknown_command(args),
    }
}

/// Redis's strict integer syntax (`string2ll`): optional `-`, digits, no leading zeros,
/// no `+`, no spaces.
pub fn parse_int(bytes: &[u8]) -> Option<i64> {
    let text = std::str::from_utf8(bytes).ok()?;
    let digits = text.strip_prefix('-').unwrap_or(text);
    if digits.is_empty()
        || !digits.bytes().all(|b| b.is_ascii_digit())
        || (digits.len() > 1 && digits.starts_with('0'))
        || text == "-0"
    {
        return None;
    }
    text.parse().ok()
}

/// Redis's float syntax for scores: a finite or infinite number, never NaN.
fn parse_float(bytes: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(bytes).ok()?;
    let value = match text.to_ascii_lowercase().as_str() {
        "inf" | "+inf" => f64::INFINITY,
        "-inf" => f64::NEG_INFINITY,
        _ if text.trim() != text || text.is_empty() => return None,
        _ => text.parse::<f64>().ok()?,
    };
    (!value.is_nan()).then_some(value)
}

/// A score as Redis prints it (shortest round-trip form, as Redis 7.2+ does).
pub fn format_score(score: f64) -> String {
    if score == f64::INFINITY {
        "inf".to_owned()
    } else if score == f64::NEG_INFINITY {
        "-inf".to_owned()
    } else {
        format!("{score}")
    }
}

fn eq_ignore_case(arg: &[u8], word: &str) -> bool {
    arg.eq_ignore_ascii_case(word.as_bytes())
}

fn get(ctx: &mut Ctx<'_>, key: &[u8]) -> Reply {
    let now = ctx.now_ms();
    match ctx.ks.get(key, now) {
        None => Reply::Nil,
        Some(Entry {
            data: Data::Str(value),
            ..
        }) => Reply::Bulk(value.clone()),
        Some(_) => Reply::error(WRONGTYPE),
    }
}

fn getdel(ctx: &mut Ctx<'_>, key: &[u8]) -> Reply {
    let reply = get(ctx, key);
    if matches!(reply, Reply::Bulk(_)) {
        del_one(ctx, key);
    }
    reply
}

fn del_one(ctx: &mut Ctx<'_>, key: &[u8]) -> bool {
    let now = ctx.now_ms();
    let removed = ctx.ks.remove(key, now);
    if removed {
        ctx.touch(key);
    }
    removed
}

fn set(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let (key, value) = (&a[0], &a[1]);
    let now = ctx.now_ms();
    let (mut nx, mut xx, mut get_old, mut keepttl) = (false, false, false, false);
    let mut expires_at: Option<i64> = None;
    let mut i = 2;
    while i < a.len() {
        let opt = String::from_utf8_lossy(&a[i]).to_ascii_uppercase();
        match opt.as_str() {
            "NX" if !xx => nx = true,
            "XX" if !nx => xx = true,
            "GET" => get_old = true,
            "KEEPTTL" if expires_at.is_none() => keepttl = true,
            "EX" | "PX" | "EXAT" | "PXAT" if expires_at.is_none() && !keepttl => {
                let Some(raw) = a.get(i + 1) else {
                    return Reply::error(SYNTAX);
                };
                let Some(n) = parse_int(raw) else {
                    return Reply::error(NOT_INTEGER);
                };
                let at = match opt.as_str() {
                    "EX" => n.checked_mul(1000).and_then(|ms| ms.checked_add(now)),
                    "PX" => n.checked_add(now),
                    "EXAT" => n.checked_mul(1000),
                    _ => Some(n),
                };
                match at {
                    Some(at) if n > 0 => expires_at = Some(at),
                    _ => return Reply::error("ERR invalid expire time in 'set' command"),
                }
                i += 1;
            }
            _ => return Reply::error(SYNTAX),
        }
        i += 1;
    }
    let existing = ctx.ks.get(key, now).cloned();
    let old = match &existing {
        Some(Entry {
            data: Data::Str(v), ..
        }) => Some(v.clone()),
        Some(_) if get_old => return Reply::error(WRONGTYPE),
        _ => None,
    };
    if (nx && existing.is_some()) || (xx && existing.is_none()) {
        return if get_old {
            Reply::bulk_or_nil(old)
        } else {
            Reply::Nil
        };
    }
    let expires_at = if keepttl {
        existing.and_then(|e| e.expires_at)
    } else {
        expires_at
    };
    ctx.ks.insert(
        key.clone(),
        Entry {
            data: Data::Str(value.clone()),
            expires_at,
        },
    );
    ctx.touch(key);
    if get_old {
        Reply::bulk_or_nil(old)
    } else {
        Reply::ok()
    }
}

fn incr_by(ctx: &mut Ctx<'_>, key: &[u8], delta: i64) -> Reply {
    let now = ctx.now_ms();
    let (current, expires_at) = match ctx.ks.get(key, now) {
        None => (0, None),
        Some(Entry {
            data: Data::Str(v),
            expires_at,
        }) => match parse_int(v) {
            Some(n) => (n, *expires_at),
            None => return Reply::error(NOT_INTEGER),
        },
        Some(_) => return Reply::error(WRONGTYPE),
    };
    let Some(next) = current.checked_add(delta) else {
        return Reply::error("ERR increment or decrement would overflow");
    };
    ctx.ks.insert(
        key.to_vec(),
        Entry {
            data: Data::Str(next.to_string().into_bytes()),
            expires_at,
        },
    );
    ctx.touch(key);
    Reply::Int(next)
}

#[derive(Clone, Copy)]
enum ExpireUnit {
    RelativeMs,
    RelativeSec,
    AbsoluteMs,
    AbsoluteSec,
}

fn expire(ctx: &mut Ctx<'_>, a: &[Vec<u8>], name: &str, unit: ExpireUnit) -> Reply {
    let key = &a[0];
    let Some(n) = parse_int(&a[1]) else {
        return Reply::error(NOT_INTEGER);
    };
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for opt in &a[2..] {
        match String::from_utf8_lossy(opt).to_ascii_uppercase().as_str() {
            "NX" => nx = true,
            "XX" => xx = true,
            "GT" => gt = true,
            "LT" => lt = true,
            other => {
                return Reply::error(format!("ERR Unsupported option {other}"));
            }
        }
    }
    if nx && (xx || gt || lt) {
        return Reply::error("ERR NX and XX, GT or LT options at the same time are not compatible");
    }
    if gt && lt {
        return Reply::error("ERR GT and LT options at the same time are not compatible");
    }
    let now = ctx.now_ms();
    let at = match unit {
        ExpireUnit::RelativeMs => n.checked_add(now),
        ExpireUnit::RelativeSec => n.checked_mul(1000).and_then(|ms| ms.checked_add(now)),
        ExpireUnit::AbsoluteMs => Some(n),
        ExpireUnit::AbsoluteSec => n.checked_mul(1000),
    };
    let Some(at) = at else {
        return Reply::error(format!("ERR invalid expire time in '{name}' command"));
    };
    let Some(entry) = ctx.ks.get_mut(key, now) else {
        return Reply::Int(0);
    };
    // A persistent key counts as an infinite TTL for GT/LT, as in Redis 7.
    let current = entry.expires_at;
    let allowed = (!nx || current.is_none())
        && (!xx || current.is_some())
        && (!gt || current.is_some_and(|c| at > c))
        && (!lt || current.is_none_or(|c| at < c));
    if !allowed {
        return Reply::Int(0);
    }
    if at <= now {
        ctx.ks.remove(key, now);
    } else {
        entry.expires_at = Some(at);
    }
    ctx.touch(key);
    Reply::Int(1)
}

fn pttl(ctx: &mut Ctx<'_>, key: &[u8]) -> i64 {
    let now = ctx.now_ms();
    match ctx.ks.get(key, now) {
        None => -2,
        Some(Entry {
            expires_at: None, ..
        }) => -1,
        Some(Entry {
            expires_at: Some(at),
            ..
        }) => (at - now).max(0),
    }
}

fn persist(ctx: &mut Ctx<'_>, key: &[u8]) -> Reply {
    let now = ctx.now_ms();
    match ctx.ks.get_mut(key, now) {
        Some(entry) if entry.expires_at.is_some() => {
            entry.expires_at = None;
            ctx.touch(key);
            Reply::Int(1)
        }
        _ => Reply::Int(0),
    }
}

/// Looks up a hash: `Ok(None)` when absent, `Err` with WRONGTYPE for another type.
fn hash_of<'k>(
    ks: &'k mut Keyspace,
    key: &[u8],
    now: i64,
) -> Result<Option<&'k mut HashFields>, Reply> {
    match ks.get_mut(key, now) {
        None => Ok(None),
        Some(Entry {
            data: Data::Hash(fields),
            ..
        }) => Ok(Some(fields)),
        Some(_) => Err(Reply::error(WRONGTYPE)),
    }
}

fn hash_read(ctx: &mut Ctx<'_>, name: &str, a: &[Vec<u8>]) -> Reply {
    if matches!(name, "hget" | "hexists") && a.len() != 2 {
        return wrong_arity(name);
    }
    let now = ctx.now_ms();
    let fields = match hash_of(ctx.ks, &a[0], now) {
        Ok(fields) => fields.map(|f| &*f),
        Err(reply) => return reply,
    };
    let empty = Vec::new();
    let fields = fields.unwrap_or(&empty);
    let find = |field: &[u8]| {
        fields
            .iter()
            .find(|(f, _)| f == field)
            .map(|(_, v)| v.clone())
    };
    match name {
        "hget" => Reply::bulk_or_nil(find(&a[1])),
        "hexists" => Reply::Int(i64::from(find(&a[1]).is_some())),
        "hlen" => Reply::Int(fields.len() as i64),
        "hmget" => Reply::Array(a[1..].iter().map(|f| Reply::bulk_or_nil(find(f))).collect()),
        "hkeys" => Reply::Array(fields.iter().map(|(f, _)| Reply::Bulk(f.clone())).collect()),
        "hvals" => Reply::Array(fields.iter().map(|(_, v)| Reply::Bulk(v.clone())).collect()),
        _ => Reply::Array(
            fields
                .iter()
                .flat_map(|(f, v)| [Reply::Bulk(f.clone()), Reply::Bulk(v.clone())])
                .collect(),
        ),
    }
}

fn hash_write(ctx: &mut Ctx<'_>, name: &str, a: &[Vec<u8>]) -> Reply {
    let key = &a[0];
    if name == "hset" && a.len().is_multiple_of(2) {
        return wrong_arity(name);
    }
    let delta = if name == "hincrby" {
        match parse_int(&a[2]) {
            Some(d) => Some(d),
            None => return Reply::error(NOT_INTEGER),
        }
    } else {
        None
    };
    let now = ctx.now_ms();
    let exists = match hash_of(ctx.ks, key, now) {
        Ok(fields) => fields.is_some(),
        Err(reply) => return reply,
    };
    if !exists {
        if name == "hdel" {
            return Reply::Int(0);
        }
        ctx.ks.insert(
            key.clone(),
            Entry {
                data: Data::Hash(Vec::new()),
                expires_at: None,
            },
        );
    }
    let Ok(Some(fields)) = hash_of(ctx.ks, key, now) else {
        // Unreachable: the key was just checked or created as a hash.
        return Reply::error("ERR internal: hash vanished");
    };
    let reply = match name {
        "hset" => {
            let mut added = 0;
            for pair in a[1..].chunks(2) {
                match fields.iter_mut().find(|(f, _)| *f == pair[0]) {
                    Some((_, v)) => *v = pair[1].clone(),
                    None => {
                        fields.push((pair[0].clone(), pair[1].clone()));
                        added += 1;
                    }
                }
            }
            Reply::Int(added)
        }
        "hsetnx" => {
            if fields.iter().any(|(f, _)| *f == a[1]) {
                Reply::Int(0)
            } else {
                fields.push((a[1].clone(), a[2].clone()));
                Reply::Int(1)
            }
        }
        "hincrby" => {
            let delta = delta.unwrap_or(0);
            let slot = fields.iter().position(|(f, _)| *f == a[1]);
            let current = match slot.map(|i| parse_int(&fields[i].1)) {
                None => 0,
                Some(Some(n)) => n,
                Some(None) => {
                    drop_empty_after(ctx, key);
                    return Reply::error("ERR hash value is not an integer");
                }
            };
            let Some(next) = current.checked_add(delta) else {
                drop_empty_after(ctx, key);
                return Reply::error("ERR increment or decrement would overflow");
            };
            let text = next.to_string().into_bytes();
            match slot {
                Some(i) => fields[i].1 = text,
                None => fields.push((a[1].clone(), text)),
            }
            Reply::Int(next)
        }
        _ => {
            let before = fields.len();
            fields.retain(|(f, _)| !a[1..].contains(f));
            Reply::Int((before - fields.len()) as i64)
        }
    };
    if !matches!(reply, Reply::Int(0)) || name == "hincrby" || name == "hset" {
        ctx.touch(key);
    }
    ctx.ks.drop_if_empty(key);
    reply
}

fn drop_empty_after(ctx: &mut Ctx<'_>, key: &[u8]) {
    ctx.ks.drop_if_empty(key);
}

fn list_of<'k>(
    ks: &'k mut Keyspace,
    key: &[u8],
    now: i64,
) -> Result<Option<&'k mut VecDeque<Vec<u8>>>, Reply> {
    match ks.get_mut(key, now) {
        None => Ok(None),
        Some(Entry {
            data: Data::List(items),
            ..
        }) => Ok(Some(items)),
        Some(_) => Err(Reply::error(WRONGTYPE)),
    }
}

fn push(ctx: &mut Ctx<'_>, key: &[u8], values: &[Vec<u8>], front: bool) -> Reply {
    let now = ctx.now_ms();
    match list_of(ctx.ks, key, now) {
        Err(reply) => return reply,
        Ok(None) => ctx.ks.insert(
            key.to_vec(),
            Entry {
                data: Data::List(VecDeque::new()),
                expires_at: None,
            },
        ),
        Ok(Some(_)) => {}
    }
    let Ok(Some(items)) = list_of(ctx.ks, key, now) else {
        return Reply::error("ERR internal: list vanished");
    };
    for value in values {
        if front {
            items.push_front(value.clone());
        } else {
            items.push_back(value.clone());
        }
    }
    let len = items.len() as i64;
    ctx.touch(key);
    Reply::Int(len)
}

fn pop(ctx: &mut Ctx<'_>, a: &[Vec<u8>], front: bool, name: &str) -> Reply {
    let count = match a {
        [_] => None,
        [_, raw] => match parse_int(raw) {
            Some(n) if n >= 0 => Some(n as usize),
            _ => return Reply::error("ERR value is out of range, must be positive"),
        },
        _ => return wrong_arity(name),
    };
    let key = &a[0];
    let now = ctx.now_ms();
    let items = match list_of(ctx.ks, key, now) {
        Err(reply) => return reply,
        Ok(None) => {
            return if count.is_some() {
                Reply::NilArray
            } else {
                Reply::Nil
            };
        }
        Ok(Some(items)) => items,
    };
    let take = count.unwrap_or(1).min(items.len());
    let popped: Vec<Vec<u8>> = (0..take)
        .filter_map(|_| {
            if front {
                items.pop_front()
            } else {
                items.pop_back()
            }
        })
        .collect();
    if take > 0 {
        ctx.touch(key);
    }
    ctx.ks.drop_if_empty(key);
    match count {
        None => Reply::bulk_or_nil(popped.into_iter().next()),
        Some(_) => Reply::Array(popped.into_iter().map(Reply::Bulk).collect()),
    }
}

/// Resolves Redis's inclusive, possibly negative `[start, stop]` against `len`.
fn index_range(start: i64, stop: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    let start = if start < 0 {
        (len + start).max(0)
    } else {
        start
    };
    let stop = if stop < 0 {
        len + stop
    } else {
        stop.min(len - 1)
    };
    (start <= stop && start < len).then_some((start as usize, stop as usize))
}

fn list_read(ctx: &mut Ctx<'_>, name: &str, a: &[Vec<u8>]) -> Reply {
    let now = ctx.now_ms();
    let ints: Option<Vec<i64>> = a[1..].iter().map(|x| parse_int(x)).collect();
    let Some(ints) = ints else {
        return Reply::error(NOT_INTEGER);
    };
    let items = match list_of(ctx.ks, &a[0], now) {
        Err(reply) => return reply,
        Ok(items) => items.map(|i| &*i),
    };
    let empty = VecDeque::new();
    let items = items.unwrap_or(&empty);
    match name {
        "llen" => Reply::Int(items.len() as i64),
        "lindex" => {
            let i = ints[0];
            let i = if i < 0 { items.len() as i64 + i } else { i };
            Reply::bulk_or_nil(usize::try_from(i).ok().and_then(|i| items.get(i)).cloned())
        }
        _ => match index_range(ints[0], ints[1], items.len()) {
            None => Reply::Array(Vec::new()),
            Some((s, e)) => Reply::Array(items.range(s..=e).cloned().map(Reply::Bulk).collect()),
        },
    }
}

fn lrem(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let Some(count) = parse_int(&a[1]) else {
        return Reply::error(NOT_INTEGER);
    };
    let key = &a[0];
    let now = ctx.now_ms();
    let items = match list_of(ctx.ks, key, now) {
        Err(reply) => return reply,
        Ok(None) => return Reply::Int(0),
        Ok(Some(items)) => items,
    };
    let limit = if count == 0 {
        usize::MAX
    } else {
        count.unsigned_abs() as usize
    };
    let mut removed = 0;
    if count >= 0 {
        let mut i = 0;
        while i < items.len() && removed < limit {
            if items[i] == a[2] {
                items.remove(i);
                removed += 1;
            } else {
                i += 1;
            }
        }
    } else {
        let mut i = items.len();
        while i > 0 && removed < limit {
            i -= 1;
            if items[i] == a[2] {
                items.remove(i);
                removed += 1;
            }
        }
    }
    if removed > 0 {
        ctx.touch(key);
    }
    ctx.ks.drop_if_empty(key);
    Reply::Int(removed as i64)
}

fn zset_of<'k>(
    ks: &'k mut Keyspace,
    key: &[u8],
    now: i64,
) -> Result<Option<&'k mut ZMembers>, Reply> {
    match ks.get_mut(key, now) {
        None => Ok(None),
        Some(Entry {
            data: Data::ZSet(members),
            ..
        }) => Ok(Some(members)),
        Some(_) => Err(Reply::error(WRONGTYPE)),
    }
}

/// Inserts keeping (score, member) order; the member must not be present.
fn zinsert(members: &mut Vec<(f64, Vec<u8>)>, score: f64, member: Vec<u8>) {
    let at = members.partition_point(|(s, m)| (*s, m.as_slice()) < (score, member.as_slice()));
    members.insert(at, (score, member));
}

fn zadd(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let key = &a[0];
    let (mut nx, mut xx, mut gt, mut lt, mut ch, mut incr) =
        (false, false, false, false, false, false);
    let mut i = 1;
    while i < a.len() {
        match String::from_utf8_lossy(&a[i]).to_ascii_uppercase().as_str() {
            "NX" => nx = true,
            "XX" => xx = true,
            "GT" => gt = true,
            "LT" => lt = true,
            "CH" => ch = true,
            "INCR" => incr = true,
            _ => break,
        }
        i += 1;
    }
    let pairs = &a[i..];
    if pairs.is_empty() || !pairs.len().is_multiple_of(2) {
        return Reply::error(SYNTAX);
    }
    if nx && xx {
        return Reply::error("ERR XX and NX options at the same time are not compatible");
    }
    if (gt && lt) || (nx && (gt || lt)) {
        return Reply::error("ERR GT, LT, and/or NX options at the same time are not compatible");
    }
    if incr && pairs.len() > 2 {
        return Reply::error("ERR INCR option supports a single increment-element pair");
    }
    let mut parsed = Vec::with_capacity(pairs.len() / 2);
    for pair in pairs.chunks(2) {
        let Some(score) = parse_float(&pair[0]) else {
            return Reply::error(NOT_FLOAT);
        };
        parsed.push((score, pair[1].clone()));
    }
    let now = ctx.now_ms();
    match zset_of(ctx.ks, key, now) {
        Err(reply) => return reply,
        Ok(Some(_)) => {}
        Ok(None) => {
            if xx {
                return if incr { Reply::Nil } else { Reply::Int(0) };
            }
            ctx.ks.insert(
                key.clone(),
                Entry {
                    data: Data::ZSet(Vec::new()),
                    expires_at: None,
                },
            );
        }
    }
    let Ok(Some(members)) = zset_of(ctx.ks, key, now) else {
        return Reply::error("ERR internal: zset vanished");
    };
    let (mut added, mut changed) = (0i64, 0i64);
    let mut incr_result = None;
    for (score, member) in parsed {
        let existing = members.iter().position(|(_, m)| *m == member);
        match existing {
            Some(pos) => {
                if nx {
                    continue;
                }
                let old = members[pos].0;
                let new = if incr { old + score } else { score };
                if new.is_nan() {
                    return Reply::error("ERR resulting score is not a number (NaN)");
                }
                if (gt && new <= old) || (lt && new >= old) {
                    continue;
                }
                incr_result = Some(new);
                if new != old {
                    members.remove(pos);
                    zinsert(members, new, member);
                    changed += 1;
                }
            }
            None => {
                if xx {
                    continue;
                }
                zinsert(members, score, member);
                incr_result = Some(score);
                added += 1;
            }
        }
    }
    if added + changed > 0 {
        ctx.touch(key);
    }
    ctx.ks.drop_if_empty(key);
    if incr {
        incr_result.map_or(Reply::Nil, |s| Reply::bulk(format_score(s)))
    } else if ch {
        Reply::Int(added + changed)
    } else {
        Reply::Int(added)
    }
}

fn zrem(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let key = &a[0];
    let now = ctx.now_ms();
    let members = match zset_of(ctx.ks, key, now) {
        Err(reply) => return reply,
        Ok(None) => return Reply::Int(0),
        Ok(Some(members)) => members,
    };
    let before = members.len();
    members.retain(|(_, m)| !a[1..].contains(m));
    let removed = (before - members.len()) as i64;
    if removed > 0 {
        ctx.touch(key);
    }
    ctx.ks.drop_if_empty(key);
    Reply::Int(removed)
}

fn zset_read(ctx: &mut Ctx<'_>, name: &str, a: &[Vec<u8>]) -> Reply {
    if name == "zrank" && a.len() != 2 {
        return wrong_arity(name);
    }
    let now = ctx.now_ms();
    let members = match zset_of(ctx.ks, &a[0], now) {
        Err(reply) => return reply,
        Ok(members) => members.map(|m| &*m),
    };
    let empty = Vec::new();
    let members = members.unwrap_or(&empty);
    let pos = |member: &[u8]| members.iter().position(|(_, m)| m == member);
    match name {
        "zcard" => Reply::Int(members.len() as i64),
        "zscore" => Reply::bulk_or_nil(pos(&a[1]).map(|i| format_score(members[i].0).into_bytes())),
        _ => pos(&a[1]).map_or(Reply::Nil, |i| Reply::Int(i as i64)),
    }
}

/// A score bound: value and whether it is exclusive (`(x`).
#[derive(Clone, Copy)]
struct Bound {
    value: f64,
    exclusive: bool,
}

impl Bound {
    fn parse(bytes: &[u8]) -> Option<Self> {
        match bytes.strip_prefix(b"(") {
            Some(rest) => Some(Self {
                value: parse_float(rest)?,
                exclusive: true,
            }),
            None => Some(Self {
                value: parse_float(bytes)?,
                exclusive: false,
            }),
        }
    }

    fn below(self, score: f64) -> bool {
        if self.exclusive {
            self.value < score
        } else {
            self.value <= score
        }
    }

    fn above(self, score: f64) -> bool {
        if self.exclusive {
            score < self.value
        } else {
            score <= self.value
        }
    }
}

fn in_range(min: Bound, max: Bound, score: f64) -> bool {
    min.below(score) && max.above(score)
}

/// Trailing `WITHSCORES` / `LIMIT offset count` options of the range commands.
struct RangeOpts {
    with_scores: bool,
    limit: Option<(i64, i64)>,
    by_score: bool,
    rev: bool,
}

fn parse_range_opts(opts: &[Vec<u8>], allow_by: bool) -> Result<RangeOpts, Reply> {
    let mut out = RangeOpts {
        with_scores: false,
        limit: None,
        by_score: false,
        rev: false,
    };
    let mut i = 0;
    while i < opts.len() {
        let arg = &opts[i];
        if eq_ignore_case(arg, "WITHSCORES") {
            out.with_scores = true;
        } else if eq_ignore_case(arg, "LIMIT") && i + 2 < opts.len() {
            let (Some(o), Some(c)) = (parse_int(&opts[i + 1]), parse_int(&opts[i + 2])) else {
                return Err(Reply::error(NOT_INTEGER));
            };
            out.limit = Some((o, c));
            i += 2;
        } else if allow_by && eq_ignore_case(arg, "BYSCORE") {
            out.by_score = true;
        } else if allow_by && eq_ignore_case(arg, "REV") {
            out.rev = true;
        } else {
            return Err(Reply::error(SYNTAX));
        }
        i += 1;
    }
    Ok(out)
}

fn range_reply(items: Vec<(f64, Vec<u8>)>, with_scores: bool) -> Reply {
    Reply::Array(
        items
            .into_iter()
            .flat_map(|(s, m)| {
                let mut out = vec![Reply::Bulk(m)];
                if with_scores {
                    out.push(Reply::bulk(format_score(s)));
                }
                out
            })
            .collect(),
    )
}

fn apply_limit(items: Vec<(f64, Vec<u8>)>, limit: Option<(i64, i64)>) -> Vec<(f64, Vec<u8>)> {
    match limit {
        None => items,
        Some((offset, _)) if offset < 0 => Vec::new(),
        Some((offset, count)) => {
            let take = if count < 0 {
                usize::MAX
            } else {
                count as usize
            };
            items.into_iter().skip(offset as usize).take(take).collect()
        }
    }
}

fn score_range(
    members: &[(f64, Vec<u8>)],
    min: &[u8],
    max: &[u8],
) -> Result<Vec<(f64, Vec<u8>)>, Reply> {
    let (Some(min), Some(max)) = (Bound::parse(min), Bound::parse(max)) else {
        return Err(Reply::error("ERR min or max is not a float"));
    };
    Ok(members
        .iter()
        .filter(|(s, _)| in_range(min, max, *s))
        .cloned()
        .collect())
}

fn zrange(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let opts = match parse_range_opts(&a[3..], true) {
        Ok(opts) => opts,
        Err(reply) => return reply,
    };
    if opts.limit.is_some() && !opts.by_score {
        return Reply::error(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        );
    }
    let now = ctx.now_ms();
    let members = match zset_of(ctx.ks, &a[0], now) {
        Err(reply) => return reply,
        Ok(members) => members.map(|m| m.clone()).unwrap_or_default(),
    };
    let items = if opts.by_score {
        // With REV the bounds are given max first.
        let (min, max) = if opts.rev {
            (&a[2], &a[1])
        } else {
            (&a[1], &a[2])
        };
        let mut items = match score_range(&members, min, max) {
            Ok(items) => items,
            Err(reply) => return reply,
        };
        if opts.rev {
            items.reverse();
        }
        apply_limit(items, opts.limit)
    } else {
        let (Some(start), Some(stop)) = (parse_int(&a[1]), parse_int(&a[2])) else {
            return Reply::error(NOT_INTEGER);
        };
        let mut ordered = members;
        if opts.rev {
            ordered.reverse();
        }
        match index_range(start, stop, ordered.len()) {
            None => Vec::new(),
            Some((s, e)) => ordered[s..=e].to_vec(),
        }
    };
    range_reply(items, opts.with_scores)
}

fn zrangebyscore(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let opts = match parse_range_opts(&a[3..], false) {
        Ok(opts) => opts,
        Err(reply) => return reply,
    };
    let now = ctx.now_ms();
    let members = match zset_of(ctx.ks, &a[0], now) {
        Err(reply) => return reply,
        Ok(members) => members.map(|m| m.clone()).unwrap_or_default(),
    };
    match score_range(&members, &a[1], &a[2]) {
        Ok(items) => range_reply(apply_limit(items, opts.limit), opts.with_scores),
        Err(reply) => reply,
    }
}

fn zremrangebyscore(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> Reply {
    let key = &a[0];
    let (Some(min), Some(max)) = (Bound::parse(&a[1]), Bound::parse(&a[2])) else {
        return Reply::error("ERR min or max is not a float");
    };
    let now = ctx.now_ms();
    let members = match zset_of(ctx.ks, key, now) {
        Err(reply) => return reply,
        Ok(None) => return Reply::Int(0),
        Ok(Some(members)) => members,
    };
    let before = members.len();
    members.retain(|(s, _)| !in_range(min, max, *s));
    let removed = (before - members.len()) as i64;
    if removed > 0 {
        ctx.touch(key);
    }
    ctx.ks.drop_if_empty(key);
    Reply::Int(removed)
}
