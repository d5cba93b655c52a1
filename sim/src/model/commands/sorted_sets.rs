//! The sorted-set commands (the lock family's deadlines and queues by score).
//!
//! Invariant: members stay ordered by (score, member) as Redis orders them, scores print
//! in Redis 7.2's shortest round-trip form, and an emptied set is deleted.

use super::typed::{lookup, lookup_or_create};
use super::{Ctx, NOT_INTEGER, SYNTAX, index_range, parse_int, wrong_arity};
use crate::model::keyspace::ZMembers;
use crate::model::resp::Reply;

const NOT_FLOAT: &str = "ERR value is not a valid float";

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

/// Inserts keeping (score, member) order; the member must not be present.
fn zinsert(members: &mut ZMembers, score: f64, member: Vec<u8>) {
    let at = members.partition_point(|(s, m)| (*s, m.as_slice()) < (score, member.as_slice()));
    members.insert(at, (score, member));
}

/// `ZADD` with its NX/XX/GT/LT/CH/INCR options: added (or changed) count, or the new score.
pub(super) fn zadd(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Reply {
    let key = &args[0];
    let (mut nx, mut xx, mut gt, mut lt, mut ch, mut incr) =
        (false, false, false, false, false, false);
    let mut i = 1;
    while i < args.len() {
        match String::from_utf8_lossy(&args[i])
            .to_ascii_uppercase()
            .as_str()
        {
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
    let pairs = &args[i..];
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
    match lookup::<ZMembers>(ctx.ks, key, now) {
        Err(reply) => return reply,
        Ok(None) if xx => return if incr { Reply::Nil } else { Reply::Int(0) },
        Ok(_) => {}
    }
    let members = match lookup_or_create::<ZMembers>(ctx.ks, key, now) {
        Ok(members) => members,
        Err(reply) => return reply,
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

/// `ZREM key member...`: how many were removed.
pub(super) fn zrem(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Reply {
    remove_where(ctx, &args[0], |(_, m)| args[1..].contains(m))
}

/// Removes the members of `key` that `doomed` picks: replies how many went.
fn remove_where(ctx: &mut Ctx<'_>, key: &[u8], doomed: impl Fn(&(f64, Vec<u8>)) -> bool) -> Reply {
    let now = ctx.now_ms();
    let members = match lookup::<ZMembers>(ctx.ks, key, now) {
        Err(reply) => return reply,
        Ok(None) => return Reply::Int(0),
        Ok(Some(members)) => members,
    };
    let before = members.len();
    members.retain(|member| !doomed(member));
    let removed = (before - members.len()) as i64;
    if removed > 0 {
        ctx.touch(key);
    }
    ctx.ks.drop_if_empty(key);
    Reply::Int(removed)
}

/// `ZCARD`, `ZSCORE` and `ZRANK`: a missing key reads as an empty set.
pub(super) fn zset_read(ctx: &mut Ctx<'_>, name: &str, args: &[Vec<u8>]) -> Reply {
    if name == "zrank" && args.len() != 2 {
        return wrong_arity(name);
    }
    let now = ctx.now_ms();
    let members = match lookup::<ZMembers>(ctx.ks, &args[0], now) {
        Err(reply) => return reply,
        Ok(members) => members.map(|m| &*m),
    };
    let empty = Vec::new();
    let members = members.unwrap_or(&empty);
    let pos = |member: &[u8]| members.iter().position(|(_, m)| m == member);
    match name {
        "zcard" => Reply::Int(members.len() as i64),
        "zscore" => {
            Reply::bulk_or_nil(pos(&args[1]).map(|i| format_score(members[i].0).into_bytes()))
        }
        _ => pos(&args[1]).map_or(Reply::Nil, |i| Reply::Int(i as i64)),
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

/// `ZRANGE` by index, or `BYSCORE` (with `REV` and `LIMIT`), optionally `WITHSCORES`.
pub(super) fn zrange(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Reply {
    let opts = match parse_range_opts(&args[3..], true) {
        Ok(opts) => opts,
        Err(reply) => return reply,
    };
    if opts.limit.is_some() && !opts.by_score {
        return Reply::error(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        );
    }
    let now = ctx.now_ms();
    let members = match lookup::<ZMembers>(ctx.ks, &args[0], now) {
        Err(reply) => return reply,
        Ok(members) => members.map(|m| m.clone()).unwrap_or_default(),
    };
    let items = if opts.by_score {
        // With REV the bounds are given max first.
        let (min, max) = if opts.rev {
            (&args[2], &args[1])
        } else {
            (&args[1], &args[2])
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
        let (Some(start), Some(stop)) = (parse_int(&args[1]), parse_int(&args[2])) else {
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

/// `ZRANGEBYSCORE key min max [WITHSCORES] [LIMIT offset count]`.
pub(super) fn zrangebyscore(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Reply {
    let opts = match parse_range_opts(&args[3..], false) {
        Ok(opts) => opts,
        Err(reply) => return reply,
    };
    let now = ctx.now_ms();
    let members = match lookup::<ZMembers>(ctx.ks, &args[0], now) {
        Err(reply) => return reply,
        Ok(members) => members.map(|m| m.clone()).unwrap_or_default(),
    };
    match score_range(&members, &args[1], &args[2]) {
        Ok(items) => range_reply(apply_limit(items, opts.limit), opts.with_scores),
        Err(reply) => reply,
    }
}

/// `ZREMRANGEBYSCORE key min max`: how many were removed.
pub(super) fn zremrangebyscore(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> Reply {
    let (Some(min), Some(max)) = (Bound::parse(&args[1]), Bound::parse(&args[2])) else {
        return Reply::error("ERR min or max is not a float");
    };
    remove_where(ctx, &args[0], |(s, _)| in_range(min, max, *s))
}
