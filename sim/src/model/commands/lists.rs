//! The list commands (the queue of waiters some lock variants keep).
//!
//! Invariant: indexes follow Redis's inclusive, possibly negative ranges, and an emptied
//! list is deleted.

use super::typed::{lookup, lookup_or_create};
use super::{Ctx, NOT_INTEGER, index_range, parse_int, wrong_arity};
use crate::model::keyspace::ListItems;
use crate::model::resp::Reply;

/// `LPUSH`/`RPUSH` (`front` for `LPUSH`): the list's new length.
pub(super) fn push(ctx: &mut Ctx<'_>, key: &[u8], values: &[Vec<u8>], front: bool) -> Reply {
    let now = ctx.now_ms();
    let items = match lookup_or_create::<ListItems>(ctx.ks, key, now) {
        Ok(items) => items,
        Err(reply) => return reply,
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

/// `LPOP`/`RPOP` with an optional count: nil (or a nil array) for a missing key.
pub(super) fn pop(ctx: &mut Ctx<'_>, args: &[Vec<u8>], front: bool, name: &str) -> Reply {
    let count = match args {
        [_] => None,
        [_, raw] => match parse_int(raw) {
            Some(n) if n >= 0 => Some(n as usize),
            _ => return Reply::error("ERR value is out of range, must be positive"),
        },
        _ => return wrong_arity(name),
    };
    let key = &args[0];
    let now = ctx.now_ms();
    let items = match lookup::<ListItems>(ctx.ks, key, now) {
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

/// `LLEN`, `LINDEX` and `LRANGE`: a missing key reads as an empty list.
pub(super) fn list_read(ctx: &mut Ctx<'_>, name: &str, args: &[Vec<u8>]) -> Reply {
    let now = ctx.now_ms();
    let ints: Option<Vec<i64>> = args[1..].iter().map(|x| parse_int(x)).collect();
    let Some(ints) = ints else {
        return Reply::error(NOT_INTEGER);
    };
    let items = match lookup::<ListItems>(ctx.ks, &args[0], now) {
        Err(reply) => return reply,
        Ok(items) => items.map(|i| &*i),
    };
    let empty = ListItems::new();
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

/// `LPOS key element`: the index of the first occurrence from the head, nil when the
/// element (or the key) is missing. Its options (`RANK`, `COUNT`, `MAXLEN`) are not modelled
/// and get an error saying so, rather than an answer Redis would not give.
pub(super) fn lpos(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Reply {
    if args.len() != 2 {
        return Reply::error("ERR the model runs LPOS key element only (no RANK, COUNT or MAXLEN)");
    }
    let now = ctx.now_ms();
    match lookup::<ListItems>(ctx.ks, &args[0], now) {
        Err(reply) => reply,
        Ok(None) => Reply::Nil,
        Ok(Some(items)) => match items.iter().position(|item| *item == args[1]) {
            Some(index) => Reply::Int(index as i64),
            None => Reply::Nil,
        },
    }
}

/// `LREM key count element`: removes from the head (`count > 0`), the tail (`< 0`) or all.
pub(super) fn lrem(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Reply {
    let Some(count) = parse_int(&args[1]) else {
        return Reply::error(NOT_INTEGER);
    };
    let key = &args[0];
    let now = ctx.now_ms();
    let items = match lookup::<ListItems>(ctx.ks, key, now) {
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
            if items[i] == args[2] {
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
            if items[i] == args[2] {
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
