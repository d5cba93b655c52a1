//! Commands on keys and strings: `GET`/`MGET`/`SET` and friends, counters, `DEL`/`EXISTS`/`TYPE`,
//! and expiry (`PEXPIRE` family, `PTTL`/`TTL`, `PEXPIRETIME`, `PERSIST`).
//!
//! Invariant: expiry is judged on the node's own wall clock in milliseconds, with Redis's
//! option rules and replies (`PTTL` -2 for a missing key, -1 for a persistent one), since
//! the lock's lease is nothing but a key's expiry.

use super::{Ctx, NOT_INTEGER, SYNTAX, WRONGTYPE, parse_int};
use crate::model::keyspace::{Data, Entry};
use crate::model::resp::Reply;

/// `GET key`: nil for a missing key.
pub(super) fn get(ctx: &mut Ctx<'_>, key: &[u8]) -> Reply {
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

/// `MGET key [key ...]`: each key's string, or nil for a missing key or one of another
/// type (`MGET` never answers `WRONGTYPE`).
pub(super) fn mget(ctx: &mut Ctx<'_>, keys: &[Vec<u8>]) -> Reply {
    let now = ctx.now_ms();
    Reply::Array(
        keys.iter()
            .map(|key| match ctx.ks.get(key, now) {
                Some(Entry {
                    data: Data::Str(value),
                    ..
                }) => Reply::Bulk(value.clone()),
                _ => Reply::Nil,
            })
            .collect(),
    )
}

/// `GETDEL key`: `GET`, then deletes the key if it held a string.
pub(super) fn getdel(ctx: &mut Ctx<'_>, key: &[u8]) -> Reply {
    let reply = get(ctx, key);
    if matches!(reply, Reply::Bulk(_)) {
        del_one(ctx, key);
    }
    reply
}

/// Deletes `key`; whether a live key was deleted.
fn del_one(ctx: &mut Ctx<'_>, key: &[u8]) -> bool {
    let now = ctx.now_ms();
    let removed = ctx.ks.remove(key, now);
    if removed {
        ctx.touch(key);
    }
    removed
}

/// `SET key value` with NX/XX, GET, KEEPTTL and the EX/PX/EXAT/PXAT expiry options.
pub(super) fn set(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Reply {
    let (key, value) = (&args[0], &args[1]);
    let now = ctx.now_ms();
    let (mut nx, mut xx, mut get_old, mut keepttl) = (false, false, false, false);
    let mut expires_at: Option<i64> = None;
    let mut i = 2;
    while i < args.len() {
        let opt = String::from_utf8_lossy(&args[i]).to_ascii_uppercase();
        match opt.as_str() {
            "NX" if !xx => nx = true,
            "XX" if !nx => xx = true,
            "GET" => get_old = true,
            "KEEPTTL" if expires_at.is_none() => keepttl = true,
            "EX" | "PX" | "EXAT" | "PXAT" if expires_at.is_none() && !keepttl => {
                let Some(raw) = args.get(i + 1) else {
                    return Reply::error(SYNTAX);
                };
                let Some(n) = parse_int(raw) else {
                    return Reply::error(NOT_INTEGER);
                };
                let base = ctx.live_ms();
                let at = match opt.as_str() {
                    "EX" => n.checked_mul(1000).and_then(|ms| ms.checked_add(base)),
                    "PX" => n.checked_add(base),
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

/// `INCR`/`DECR`/`INCRBY`/`DECRBY` by `delta`, keeping the key's expiry.
pub(super) fn incr_by(ctx: &mut Ctx<'_>, key: &[u8], delta: i64) -> Reply {
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

/// How an expiry command gives its time.
#[derive(Clone, Copy)]
pub(super) enum ExpireUnit {
    RelativeMs,
    RelativeSec,
    AbsoluteMs,
    AbsoluteSec,
}

/// The `PEXPIRE`/`EXPIRE`/`PEXPIREAT`/`EXPIREAT` family with NX/XX/GT/LT; a deadline
/// already past deletes the key.
pub(super) fn expire(ctx: &mut Ctx<'_>, args: &[Vec<u8>], name: &str, unit: ExpireUnit) -> Reply {
    let key = &args[0];
    let Some(n) = parse_int(&args[1]) else {
        return Reply::error(NOT_INTEGER);
    };
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for opt in &args[2..] {
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
    let (now, base) = (ctx.now_ms(), ctx.live_ms());
    let at = match unit {
        ExpireUnit::RelativeMs => n.checked_add(base),
        ExpireUnit::RelativeSec => n.checked_mul(1000).and_then(|ms| ms.checked_add(base)),
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
    if at <= base {
        ctx.ks.remove(key, now);
    } else {
        entry.expires_at = Some(at);
    }
    ctx.touch(key);
    Reply::Int(1)
}

/// A key's absolute expiry in Unix ms, or the code `PTTL` and `PEXPIRETIME` answer
/// instead: -2 for a missing key, -1 for a persistent one.
fn expiry(ctx: &mut Ctx<'_>, key: &[u8]) -> Result<i64, i64> {
    let now = ctx.now_ms();
    match ctx.ks.get(key, now) {
        None => Err(-2),
        Some(Entry {
            expires_at: None, ..
        }) => Err(-1),
        Some(Entry {
            expires_at: Some(at),
            ..
        }) => Ok(*at),
    }
}

/// `PTTL key`: remaining milliseconds, -2 for a missing key, -1 for a persistent one.
pub(super) fn pttl(ctx: &mut Ctx<'_>, key: &[u8]) -> i64 {
    let live = ctx.live_ms();
    expiry(ctx, key).map_or_else(|code| code, |at| (at - live).max(0))
}

/// `PEXPIRETIME key`: the absolute expiry in Unix ms, -2 for a missing key, -1 for a
/// persistent one. Unlike a `PTTL`, it reads no clock, so a script that carries one key's
/// expiry to another with it (`PEXPIREAT`) is exact even where a script's clock moves on
/// between the two calls (Redis before 7.2: [`crate::model::node::LateClock`]).
pub(super) fn pexpiretime(ctx: &mut Ctx<'_>, key: &[u8]) -> Reply {
    Reply::Int(expiry(ctx, key).unwrap_or_else(|code| code))
}

/// `PERSIST key`: 1 if an expiry was removed.
pub(super) fn persist(ctx: &mut Ctx<'_>, key: &[u8]) -> Reply {
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

/// `DEL key...`: how many of the keys existed.
pub(super) fn del(ctx: &mut Ctx<'_>, keys: &[Vec<u8>]) -> Reply {
    Reply::Int(keys.iter().filter(|k| del_one(ctx, k)).count() as i64)
}

/// `EXISTS key...`: how many of the keys are live (a key named twice counts twice).
pub(super) fn exists(ctx: &mut Ctx<'_>, keys: &[Vec<u8>]) -> Reply {
    let now = ctx.now_ms();
    Reply::Int(keys.iter().filter(|k| ctx.ks.get(k, now).is_some()).count() as i64)
}

/// `TYPE key`: the type name, `none` for a missing key.
pub(super) fn type_of(ctx: &mut Ctx<'_>, key: &[u8]) -> Reply {
    let now = ctx.now_ms();
    Reply::Status(
        ctx.ks
            .get(key, now)
            .map_or("none", |e| e.data.type_name())
            .to_owned(),
    )
}

/// `TTL key`: `PTTL` rounded to seconds, keeping its negative codes.
pub(super) fn ttl(ctx: &mut Ctx<'_>, key: &[u8]) -> Reply {
    Reply::Int(match pttl(ctx, key) {
        ms if ms < 0 => ms,
        ms => (ms + 500) / 1000,
    })
}
