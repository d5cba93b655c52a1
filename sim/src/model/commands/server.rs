//! The server and connection commands a script or client may send as data commands:
//! `TIME`, `PING`, `DBSIZE`, `FLUSHALL` (and `ECHO`, in the table). `WAIT`, `INFO`, `EVAL`
//! and `SCRIPT` need the whole node and live in `node.rs`.
//!
//! Invariant: `TIME` reads the node's own (possibly skewed) clock, the one its expiry uses.

use super::{Ctx, wrong_arity};
use crate::model::resp::Reply;

/// `TIME`: the node's wall clock as seconds and microseconds.
pub(super) fn time(ctx: &Ctx<'_>) -> Reply {
    Reply::Array(vec![
        Reply::bulk(ctx.live_us.div_euclid(1_000_000).to_string()),
        Reply::bulk(ctx.live_us.rem_euclid(1_000_000).to_string()),
    ])
}

/// `PING [message]`.
pub(super) fn ping(args: &[Vec<u8>]) -> Reply {
    match args {
        [] => Reply::Status("PONG".to_owned()),
        [msg] => Reply::Bulk(msg.clone()),
        _ => wrong_arity("ping"),
    }
}

/// `DBSIZE`: the keys live now.
pub(super) fn dbsize(ctx: &Ctx<'_>) -> Reply {
    Reply::Int(ctx.ks.live_len(ctx.now_ms()) as i64)
}

/// `FLUSHALL`: deletes every key (each deletion replicates).
pub(super) fn flushall(ctx: &mut Ctx<'_>) -> Reply {
    let keys: Vec<Vec<u8>> = ctx.ks.iter().map(|(k, _)| k.clone()).collect();
    for key in keys {
        ctx.touch(&key);
    }
    ctx.ks.clear();
    Reply::ok()
}
