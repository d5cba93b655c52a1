//! The hash commands the lock scripts use (fair-queue and owner bookkeeping).
//!
//! Invariant: fields keep insertion order as a small Redis hash (listpack) does, so
//! `HGETALL`/`HKEYS` replies match a real server's order, and an emptied hash is deleted.

use super::typed::{lookup, lookup_or_create};
use super::{Ctx, NOT_INTEGER, parse_int, wrong_arity};
use crate::model::keyspace::HashFields;
use crate::model::resp::Reply;

/// The read-only hash commands (`HGET`, `HEXISTS`, `HLEN`, `HMGET`, `HKEYS`, `HVALS`,
/// `HGETALL`): a missing key reads as an empty hash.
pub(super) fn hash_read(ctx: &mut Ctx<'_>, name: &str, args: &[Vec<u8>]) -> Reply {
    if matches!(name, "hget" | "hexists") && args.len() != 2 {
        return wrong_arity(name);
    }
    let now = ctx.now_ms();
    let fields = match lookup::<HashFields>(ctx.ks, &args[0], now) {
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
        "hget" => Reply::bulk_or_nil(find(&args[1])),
        "hexists" => Reply::Int(i64::from(find(&args[1]).is_some())),
        "hlen" => Reply::Int(fields.len() as i64),
        "hmget" => Reply::Array(
            args[1..]
                .iter()
                .map(|f| Reply::bulk_or_nil(find(f)))
                .collect(),
        ),
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

/// The hash writes (`HSET`, `HSETNX`, `HINCRBY`, `HDEL`): a missing key is created (except
/// by `HDEL`), and a hash left empty is deleted.
pub(super) fn hash_write(ctx: &mut Ctx<'_>, name: &str, args: &[Vec<u8>]) -> Reply {
    let key = &args[0];
    if name == "hset" && args.len().is_multiple_of(2) {
        return wrong_arity(name);
    }
    let delta = if name == "hincrby" {
        match parse_int(&args[2]) {
            Some(d) => Some(d),
            None => return Reply::error(NOT_INTEGER),
        }
    } else {
        None
    };
    let now = ctx.now_ms();
    match lookup::<HashFields>(ctx.ks, key, now) {
        Err(reply) => return reply,
        Ok(None) if name == "hdel" => return Reply::Int(0),
        Ok(_) => {}
    }
    let fields = match lookup_or_create::<HashFields>(ctx.ks, key, now) {
        Ok(fields) => fields,
        Err(reply) => return reply,
    };
    let reply = match name {
        "hset" => {
            let mut added = 0;
            for pair in args[1..].chunks(2) {
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
            if fields.iter().any(|(f, _)| *f == args[1]) {
                Reply::Int(0)
            } else {
                fields.push((args[1].clone(), args[2].clone()));
                Reply::Int(1)
            }
        }
        "hincrby" => {
            let delta = delta.unwrap_or(0);
            let slot = fields.iter().position(|(f, _)| *f == args[1]);
            let current = match slot.map(|i| parse_int(&fields[i].1)) {
                None => 0,
                Some(Some(n)) => n,
                Some(None) => {
                    ctx.ks.drop_if_empty(key);
                    return Reply::error("ERR hash value is not an integer");
                }
            };
            let Some(next) = current.checked_add(delta) else {
                ctx.ks.drop_if_empty(key);
                return Reply::error("ERR increment or decrement would overflow");
            };
            let text = next.to_string().into_bytes();
            match slot {
                Some(i) => fields[i].1 = text,
                None => fields.push((args[1].clone(), text)),
            }
            Reply::Int(next)
        }
        _ => {
            let before = fields.len();
            fields.retain(|(f, _)| !args[1..].contains(f));
            Reply::Int((before - fields.len()) as i64)
        }
    };
    if !matches!(reply, Reply::Int(0)) || name == "hincrby" || name == "hset" {
        ctx.touch(key);
    }
    ctx.ks.drop_if_empty(key);
    reply
}
