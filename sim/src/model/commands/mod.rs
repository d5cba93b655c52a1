//! The Redis command subset the lock scripts and clients use, with Redis's exact replies.
//!
//! Invariant: for every command here, arity errors, type errors (`WRONGTYPE`), integer
//! parsing, option validation and the special replies (`PTTL` -2/-1, nil vs empty array)
//! match Redis 7, so a script that works against the model works against Redis and
//! vice versa. Commands that need the node (scripts, `WAIT`, `INFO`) live in `node.rs`.
//!
//! This module is the command table (arity, writes, dispatch) and the argument syntax the
//! commands share; the commands themselves sit in one module per data type.

use std::collections::{BTreeMap, BTreeSet};

use keys::ExpireUnit;

use super::keyspace::Keyspace;
use crate::model::resp::Reply;

mod hashes;
mod keys;
mod lists;
mod pubsub;
mod server;
mod sorted_sets;
mod typed;

pub use sorted_sets::format_score;

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const NOT_INTEGER: &str = "ERR value is not an integer or out of range";
const SYNTAX: &str = "ERR syntax error";

/// Messages one command published, as (channel, message), in publishing order.
pub type Published = Vec<(Vec<u8>, Vec<u8>)>;

/// What a command did besides its reply: keys to replicate and messages to publish.
#[derive(Debug, Default, Clone)]
pub struct Effects {
    /// Keys written (their new state, or absence, is shipped to replicas).
    pub dirty: BTreeSet<Vec<u8>>,
    /// Messages published.
    pub published: Published,
}

/// Everything a data command may touch.
pub struct Ctx<'a> {
    /// The database.
    pub ks: &'a mut Keyspace,
    /// The node's wall clock in microseconds as key lookups judge expiry: frozen for the
    /// duration of a script.
    pub now_us: i64,
    /// The clock `TIME`, a remaining TTL and the base of a new expiry read: `now_us`,
    /// except in a script's later commands on a server whose clock moves on during a
    /// script (Redis before 7.2 reads `mstime()` there: [`crate::model::node::LateClock`]).
    pub live_us: i64,
    /// Writes and publishes performed so far.
    pub effects: &'a mut Effects,
    /// Channel -> subscriber connections, to answer `PUBLISH` with a receiver count.
    /// Commands only read it; it is `mut` so a script run can move it into the engine.
    pub subscribers: &'a mut BTreeMap<Vec<u8>, BTreeSet<u64>>,
    /// The error a write command gets, if writes are refused: `READONLY` on a replica,
    /// `NOREPLICAS` on a master short of good replicas (`min-replicas-to-write`).
    pub refuse_writes: Option<&'static str>,
}

impl Ctx<'_> {
    fn now_ms(&self) -> i64 {
        self.now_us.div_euclid(1000)
    }

    fn live_ms(&self) -> i64 {
        self.live_us.div_euclid(1000)
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
        | "pexpiretime" | "persist" | "llen" | "zcard" | "type" | "echo" | "getdel" => 2,
        "incrby" | "decrby" | "hget" | "hexists" | "lindex" | "zscore" | "zrank" | "publish" => 3,
        "hsetnx" | "hincrby" | "lrange" | "lrem" | "zremrangebyscore" => 4,
        "setnx" | "getset" => 3,
        "set" | "pexpire" | "expire" | "pexpireat" | "expireat" | "lpush" | "rpush" | "hdel"
        | "hmget" | "zrem" | "lpos" => -3,
        "hset" | "zadd" | "zrange" | "zrangebyscore" => -4,
        "del" | "exists" | "lpop" | "rpop" | "mget" => -2,
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
pub fn unknown_command(words: &[Vec<u8>]) -> Reply {
    let name = words
        .first()
        .map(|w| String::from_utf8_lossy(w))
        .unwrap_or_default();
    let rest: String = words
        .iter()
        .skip(1)
        .map(|w| format!("'{}' ", String::from_utf8_lossy(w)))
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
            | "setnx"
            | "getset"
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

/// Executes one data command (`words[0]` is the command name, any case).
pub fn execute(ctx: &mut Ctx<'_>, words: &[Vec<u8>]) -> Reply {
    let Some(first) = words.first() else {
        return Reply::error("ERR empty command");
    };
    let name = String::from_utf8_lossy(first).to_ascii_lowercase();
    let Some(arity) = arity(&name) else {
        return unknown_command(words);
    };
    let n = words.len() as i32;
    if (arity > 0 && n != arity) || (arity < 0 && n < -arity) {
        return wrong_arity(&name);
    }
    if let Some(error) = ctx.refuse_writes
        && is_write(&name)
    {
        return Reply::error(error);
    }
    // The arity check above guarantees the arguments each arm indexes.
    let args = &words[1..];
    match name.as_str() {
        "get" => keys::get(ctx, &args[0]),
        "getdel" => keys::getdel(ctx, &args[0]),
        "mget" => keys::mget(ctx, args),
        "set" => keys::set(ctx, args),
        // The old forms of `SET .. NX` and `SET .. GET`, which older lock designs use.
        "setnx" => match keys::set(ctx, &[args[0].clone(), args[1].clone(), b"NX".to_vec()]) {
            Reply::Nil => Reply::Int(0),
            _ => Reply::Int(1),
        },
        "getset" => keys::set(ctx, &[args[0].clone(), args[1].clone(), b"GET".to_vec()]),
        "del" => keys::del(ctx, args),
        "exists" => keys::exists(ctx, args),
        "incr" => keys::incr_by(ctx, &args[0], 1),
        "decr" => keys::incr_by(ctx, &args[0], -1),
        "incrby" => match parse_int(&args[1]) {
            Some(delta) => keys::incr_by(ctx, &args[0], delta),
            None => Reply::error(NOT_INTEGER),
        },
        "decrby" => match parse_int(&args[1]).and_then(i64::checked_neg) {
            Some(delta) => keys::incr_by(ctx, &args[0], delta),
            None => Reply::error(NOT_INTEGER),
        },
        "type" => keys::type_of(ctx, &args[0]),
        "pexpire" => keys::expire(ctx, args, "pexpire", ExpireUnit::RelativeMs),
        "expire" => keys::expire(ctx, args, "expire", ExpireUnit::RelativeSec),
        "pexpireat" => keys::expire(ctx, args, "pexpireat", ExpireUnit::AbsoluteMs),
        "expireat" => keys::expire(ctx, args, "expireat", ExpireUnit::AbsoluteSec),
        "pttl" => Reply::Int(keys::pttl(ctx, &args[0])),
        "pexpiretime" => keys::pexpiretime(ctx, &args[0]),
        "ttl" => keys::ttl(ctx, &args[0]),
        "persist" => keys::persist(ctx, &args[0]),
        "hget" | "hexists" | "hlen" | "hgetall" | "hkeys" | "hvals" | "hmget" => {
            hashes::hash_read(ctx, &name, args)
        }
        "hset" | "hsetnx" | "hincrby" | "hdel" => hashes::hash_write(ctx, &name, args),
        "lpush" | "rpush" => lists::push(ctx, &args[0], &args[1..], name == "lpush"),
        "lpop" | "rpop" => lists::pop(ctx, args, name == "lpop", &name),
        "lrange" | "llen" | "lindex" => lists::list_read(ctx, &name, args),
        "lrem" => lists::lrem(ctx, args),
        "lpos" => lists::lpos(ctx, args),
        "zadd" => sorted_sets::zadd(ctx, args),
        "zrem" => sorted_sets::zrem(ctx, args),
        "zscore" | "zcard" | "zrank" => sorted_sets::zset_read(ctx, &name, args),
        "zrange" => sorted_sets::zrange(ctx, args),
        "zrangebyscore" => sorted_sets::zrangebyscore(ctx, args),
        "zremrangebyscore" => sorted_sets::zremrangebyscore(ctx, args),
        "publish" => pubsub::publish(ctx, &args[0], &args[1]),
        "time" => server::time(ctx),
        "ping" => server::ping(args),
        "echo" => Reply::Bulk(args[0].clone()),
        "dbsize" => server::dbsize(ctx),
        "flushall" => server::flushall(ctx),
        _ => unknown_command(words),
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
