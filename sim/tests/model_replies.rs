//! The model answers like Redis 7: exact replies for the command subset and the Lua

#![allow(clippy::unwrap_used, clippy::expect_used)]
//! bridge, checked through the same RESP parsing a real connection uses.

use std::time::Duration;

use leasehold_sim::engine::clock::ClockModel;
use leasehold_sim::model::resp::Reply;
use leasehold_sim::model::scripting::sha1_hex;
use leasehold_sim::model::{Executed, Node, Persistence, Role};
use redis::{ErrorKind, ServerErrorKind, Value};

fn node() -> Node {
    Node::new(0, Persistence::None, ClockModel::new(Duration::ZERO, false)).unwrap()
}

/// Runs `args` at `t_ms` virtual milliseconds.
fn at(node: &mut Node, t_ms: u64, args: &[&str]) -> Reply {
    let words: Vec<Vec<u8>> = args.iter().map(|a| a.as_bytes().to_vec()).collect();
    match node.execute(&words, t_ms * 1_000_000).executed {
        Executed::Reply(reply) => reply,
        Executed::Wait { .. } => panic!("unexpected WAIT"),
    }
}

fn cmd(node: &mut Node, args: &[&str]) -> Reply {
    at(node, 0, args)
}

fn err(reply: Reply) -> String {
    match reply {
        Reply::Error(text) => text,
        other => panic!("expected an error, got {other:?}"),
    }
}

#[test]
fn pttl_and_ttl_special_replies() {
    let mut n = node();
    assert_eq!(cmd(&mut n, &["PTTL", "missing"]), Reply::Int(-2));
    assert_eq!(cmd(&mut n, &["TTL", "missing"]), Reply::Int(-2));
    cmd(&mut n, &["SET", "k", "v"]);
    assert_eq!(cmd(&mut n, &["PTTL", "k"]), Reply::Int(-1));
    assert_eq!(cmd(&mut n, &["TTL", "k"]), Reply::Int(-1));
    assert_eq!(cmd(&mut n, &["PEXPIRE", "k", "1500"]), Reply::Int(1));
    assert_eq!(at(&mut n, 100, &["PTTL", "k"]), Reply::Int(1400));
    assert_eq!(at(&mut n, 100, &["TTL", "k"]), Reply::Int(1));
    // At its deadline the key is still there (Redis expires when now > deadline).
    assert_eq!(at(&mut n, 1_500, &["PTTL", "k"]), Reply::Int(0));
    assert_eq!(at(&mut n, 1_500, &["EXISTS", "k"]), Reply::Int(1));
    assert_eq!(at(&mut n, 1_501, &["PTTL", "k"]), Reply::Int(-2));
    assert_eq!(at(&mut n, 1_501, &["EXISTS", "k"]), Reply::Int(0));
}

#[test]
fn set_options_follow_redis() {
    let mut n = node();
    assert_eq!(
        cmd(&mut n, &["SET", "k", "a", "NX", "PX", "100"]),
        Reply::ok()
    );
    assert_eq!(cmd(&mut n, &["SET", "k", "b", "NX"]), Reply::Nil);
    assert_eq!(
        cmd(&mut n, &["SET", "k", "c", "XX", "GET"]),
        Reply::bulk("a")
    );
    // SET without KEEPTTL clears the TTL.
    assert_eq!(cmd(&mut n, &["PTTL", "k"]), Reply::Int(-1));
    assert_eq!(
        err(cmd(&mut n, &["SET", "k", "v", "NX", "XX"])),
        "ERR syntax error"
    );
    assert_eq!(
        err(cmd(&mut n, &["SET", "k", "v", "PX", "0"])),
        "ERR invalid expire time in 'set' command"
    );
    assert_eq!(
        err(cmd(&mut n, &["SET", "k", "v", "PX", "x"])),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        err(cmd(&mut n, &["GET"])),
        "ERR wrong number of arguments for 'get' command"
    );
}

/// `SETNX` and `GETSET`, the old forms some lock designs use: `SETNX` answers 1 or 0 and
/// sets no expiry; `GETSET` answers the old value (nil when there was none) and clears the
/// key's TTL, as `SET` does.
#[test]
fn setnx_and_getset_follow_redis() {
    let mut n = node();
    assert_eq!(cmd(&mut n, &["SETNX", "k", "a"]), Reply::Int(1));
    assert_eq!(cmd(&mut n, &["SETNX", "k", "b"]), Reply::Int(0));
    assert_eq!(cmd(&mut n, &["GET", "k"]), Reply::bulk("a"));
    assert_eq!(cmd(&mut n, &["PTTL", "k"]), Reply::Int(-1));
    assert_eq!(cmd(&mut n, &["PEXPIRE", "k", "500"]), Reply::Int(1));
    assert_eq!(cmd(&mut n, &["GETSET", "k", "c"]), Reply::bulk("a"));
    assert_eq!(cmd(&mut n, &["PTTL", "k"]), Reply::Int(-1));
    assert_eq!(cmd(&mut n, &["GETSET", "fresh", "x"]), Reply::Nil);
    assert_eq!(cmd(&mut n, &["GET", "fresh"]), Reply::bulk("x"));
    cmd(&mut n, &["HSET", "h", "f", "1"]);
    assert!(err(cmd(&mut n, &["GETSET", "h", "x"])).starts_with("WRONGTYPE"));
    assert_eq!(
        err(cmd(&mut n, &["SETNX", "k"])),
        "ERR wrong number of arguments for 'setnx' command"
    );
}

#[test]
fn wrongtype_is_reported_with_its_code() {
    let mut n = node();
    cmd(&mut n, &["HSET", "h", "f", "1"]);
    cmd(&mut n, &["SET", "s", "x"]);
    for reply in [
        cmd(&mut n, &["GET", "h"]),
        cmd(&mut n, &["HGET", "s", "f"]),
        cmd(&mut n, &["LPUSH", "s", "x"]),
        cmd(&mut n, &["ZADD", "h", "1", "m"]),
    ] {
        let e = reply.into_result().unwrap_err();
        assert_eq!(e.code(), Some("WRONGTYPE"));
    }
    assert_eq!(
        err(cmd(&mut n, &["INCR", "s"])),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        err(cmd(&mut n, &["HINCRBY", "h", "g", "x"])),
        "ERR value is not an integer or out of range"
    );
}

#[test]
fn counters_hashes_lists_and_zsets() {
    let mut n = node();
    assert_eq!(cmd(&mut n, &["INCR", "c"]), Reply::Int(1));
    assert_eq!(cmd(&mut n, &["INCRBY", "c", "41"]), Reply::Int(42));
    assert_eq!(
        cmd(&mut n, &["HSET", "h", "a", "1", "b", "2"]),
        Reply::Int(2)
    );
    assert_eq!(cmd(&mut n, &["HINCRBY", "h", "a", "-1"]), Reply::Int(0));
    assert_eq!(
        cmd(&mut n, &["HGETALL", "h"]),
        Reply::Array(vec![
            Reply::bulk("a"),
            Reply::bulk("0"),
            Reply::bulk("b"),
            Reply::bulk("2")
        ])
    );
    assert_eq!(cmd(&mut n, &["HDEL", "h", "a", "b"]), Reply::Int(2));
    assert_eq!(cmd(&mut n, &["EXISTS", "h"]), Reply::Int(0));
    assert_eq!(cmd(&mut n, &["RPUSH", "l", "x", "y", "x"]), Reply::Int(3));
    assert_eq!(cmd(&mut n, &["LINDEX", "l", "-1"]), Reply::bulk("x"));
    assert_eq!(cmd(&mut n, &["LPOS", "l", "x"]), Reply::Int(0));
    assert_eq!(cmd(&mut n, &["LPOS", "l", "y"]), Reply::Int(1));
    assert_eq!(cmd(&mut n, &["LPOS", "l", "z"]), Reply::Nil);
    assert_eq!(cmd(&mut n, &["LPOS", "missing", "x"]), Reply::Nil);
    assert!(matches!(
        cmd(&mut n, &["LPOS", "l", "x", "RANK", "2"]),
        Reply::Error(_)
    ));
    assert_eq!(cmd(&mut n, &["LREM", "l", "0", "x"]), Reply::Int(2));
    assert_eq!(
        cmd(&mut n, &["LRANGE", "l", "0", "-1"]),
        Reply::Array(vec![Reply::bulk("y")])
    );
    assert_eq!(cmd(&mut n, &["LPOP", "l"]), Reply::bulk("y"));
    assert_eq!(cmd(&mut n, &["LPOP", "l"]), Reply::Nil);
    assert_eq!(cmd(&mut n, &["LPOP", "l", "2"]), Reply::NilArray);
    assert_eq!(
        cmd(&mut n, &["ZADD", "z", "2", "b", "1", "a", "3", "c"]),
        Reply::Int(3)
    );
    assert_eq!(
        cmd(&mut n, &["ZRANGEBYSCORE", "z", "(1", "+inf", "WITHSCORES"]),
        Reply::Array(vec![
            Reply::bulk("b"),
            Reply::bulk("2"),
            Reply::bulk("c"),
            Reply::bulk("3")
        ])
    );
    assert_eq!(
        cmd(&mut n, &["ZREMRANGEBYSCORE", "z", "-inf", "2"]),
        Reply::Int(2)
    );
    assert_eq!(cmd(&mut n, &["ZSCORE", "z", "c"]), Reply::bulk("3"));
    assert_eq!(cmd(&mut n, &["ZCARD", "z"]), Reply::Int(1));
}

#[test]
fn unknown_sha_is_noscript_and_eval_caches() {
    let mut n = node();
    let source = "return 1";
    let sha = sha1_hex(source.as_bytes());
    let e = cmd(&mut n, &["EVALSHA", &sha, "0"])
        .into_result()
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Server(ServerErrorKind::NoScript));
    assert_eq!(cmd(&mut n, &["EVAL", source, "0"]), Reply::Int(1));
    assert_eq!(cmd(&mut n, &["EVALSHA", &sha, "0"]), Reply::Int(1));
    assert_eq!(
        cmd(&mut n, &["SCRIPT", "EXISTS", &sha, "ffff"]),
        Reply::Array(vec![Reply::Int(1), Reply::Int(0)])
    );
    assert_eq!(cmd(&mut n, &["SCRIPT", "FLUSH"]), Reply::ok());
    assert!(err(cmd(&mut n, &["EVALSHA", &sha, "0"])).starts_with("NOSCRIPT"));
    assert_eq!(cmd(&mut n, &["SCRIPT", "LOAD", source]), Reply::bulk(sha));
    assert_eq!(
        err(cmd(&mut n, &["EVAL", source, "2", "k"])),
        "ERR Number of keys can't be greater than number of args"
    );
    assert_eq!(
        err(cmd(&mut n, &["EVAL", source, "-1"])),
        "ERR Number of keys can't be negative"
    );
}

#[test]
fn lua_to_redis_conversion_rules() {
    let mut n = node();
    let eval = |n: &mut Node, src: &str| cmd(n, &["EVAL", src, "0"]);
    assert_eq!(eval(&mut n, "return 3.99"), Reply::Int(3));
    assert_eq!(eval(&mut n, "return -3.99"), Reply::Int(-3));
    assert_eq!(eval(&mut n, "return true"), Reply::Int(1));
    assert_eq!(eval(&mut n, "return false"), Reply::Nil);
    assert_eq!(eval(&mut n, "return nil"), Reply::Nil);
    assert_eq!(eval(&mut n, "return 'x'"), Reply::bulk("x"));
    assert_eq!(
        eval(&mut n, "return {1, 'two', nil, 4}"),
        Reply::Array(vec![Reply::Int(1), Reply::bulk("two")])
    );
    assert_eq!(
        eval(&mut n, "return {ok='FINE'}"),
        Reply::Status("FINE".into())
    );
    assert_eq!(
        eval(&mut n, "return redis.status_reply('OK')").into_result(),
        Ok(Value::Okay)
    );
    assert_eq!(
        eval(&mut n, "return redis.error_reply('MY failure')"),
        Reply::Error("MY failure".into())
    );
    assert_eq!(
        eval(&mut n, "return {err='-BAD thing'}"),
        Reply::Error("BAD thing".into())
    );
}

#[test]
fn redis_to_lua_conversion_rules() {
    let mut n = node();
    // In order: each script sees the key as the ones before it left it.
    let cases = [
        ("return redis.call('GET', KEYS[1]) == false", Reply::Int(1)),
        ("return redis.call('SET', KEYS[1], 5)", Reply::ok()),
        ("return redis.call('SET', KEYS[1], 5).ok", Reply::bulk("OK")),
        (
            "return type(redis.call('INCR', KEYS[1]))",
            Reply::bulk("number"),
        ),
        ("return redis.call('GET', KEYS[1])", Reply::bulk("6")),
        (
            "return redis.pcall('HGET', KEYS[1], 'f').err",
            Reply::bulk("WRONGTYPE Operation against a key holding the wrong kind of value"),
        ),
        ("return #redis.call('TIME')", Reply::Int(2)),
    ];
    for (script, want) in cases {
        assert_eq!(cmd(&mut n, &["EVAL", script, "1", "k"]), want, "{script}");
    }
}

#[test]
fn script_errors_abort_like_redis() {
    let mut n = node();
    cmd(&mut n, &["SET", "s", "x"]);
    let src = "redis.call('SET', 'before', 1)\nreturn redis.call('HGET', KEYS[1], 'f')";
    let sha = sha1_hex(src.as_bytes());
    assert_eq!(
        err(cmd(&mut n, &["EVAL", src, "1", "s"])),
        format!(
            "WRONGTYPE Operation against a key holding the wrong kind of value script: {sha}, on @user_script:2."
        )
    );
    let src = "local x = nil\nreturn x.y";
    let e = err(cmd(&mut n, &["EVAL", src, "0"]));
    assert!(e.starts_with("ERR user_script:2: attempt to index"), "{e}");
    assert!(
        e.ends_with(&format!(
            "script: {}, on @user_script:2.",
            sha1_hex(src.as_bytes())
        )),
        "{e}"
    );
    let e = err(cmd(&mut n, &["EVAL", "return undefined_global", "0"]));
    assert!(
        e.contains("Script attempted to access nonexistent global variable 'undefined_global'"),
        "{e}"
    );
    let e = err(cmd(&mut n, &["EVAL", "leak = 1", "0"]));
    assert!(e.contains("Attempt to modify a readonly table"), "{e}");
    let e = err(cmd(&mut n, &["EVAL", "return (", "0"]));
    assert!(e.starts_with("ERR Error compiling script"), "{e}");
    let e = err(cmd(
        &mut n,
        &["EVAL", "return redis.call('EVAL', 'return 1', 0)", "0"],
    ));
    assert!(
        e.starts_with("ERR This Redis command is not allowed from script"),
        "{e}"
    );
}

#[test]
fn script_math_random_is_reseeded_per_run() {
    let mut n = node();
    let a = cmd(&mut n, &["EVAL", "return math.random(1000000)", "0"]);
    let b = cmd(&mut n, &["EVAL", "return math.random(1000000)", "0"]);
    assert_eq!(a, b);
}

#[test]
fn each_run_sees_only_its_own_keys_and_argv() {
    // The engine reuses its KEYS/ARGV tables: what one run did to them must not show.
    let mut n = node();
    let scribble = "KEYS[3] = 'extra'; KEYS.name = 'x'; \
                    setmetatable(ARGV, {__index = function() return 'meta' end}); return 1";
    assert_eq!(
        cmd(&mut n, &["EVAL", scribble, "2", "a", "b", "c"]),
        Reply::Int(1)
    );
    let look = "return {#KEYS, #ARGV, tostring(KEYS[1]), tostring(KEYS.name), tostring(ARGV[2])}";
    assert_eq!(
        cmd(&mut n, &["EVAL", look, "1", "k", "v"]),
        Reply::Array(vec![
            Reply::Int(1),
            Reply::Int(1),
            Reply::bulk("k"),
            Reply::bulk("nil"),
            Reply::bulk("nil"),
        ])
    );
}

#[test]
fn lazy_expiry_is_replicated_as_a_delete() {
    // Redis propagates a key a read finds expired as a DEL, so a replica whose own clock
    // has not reached the deadline yet stops serving it too.
    let ms = 1_000_000;
    for read in [
        vec!["GET", "k"],
        vec!["EVAL", "return redis.call('EXISTS', KEYS[1])", "1", "k"],
    ] {
        let mut master = node();
        cmd(&mut master, &["SET", "k", "v", "PX", "100"]);
        let mut replica =
            Node::new(1, Persistence::None, ClockModel::new(Duration::ZERO, false)).unwrap();
        replica.role = Role::Replica(0);
        replica.full_sync(master.data().clone(), 0);

        let words: Vec<Vec<u8>> = read.iter().map(|a| a.as_bytes().to_vec()).collect();
        let at_deadline = master.execute(&words, 100 * ms);
        assert!(at_deadline.effects.dirty.is_empty(), "{read:?}");
        let after = master.execute(&words, 101 * ms);
        assert!(after.effects.dirty.contains(b"k".as_slice()), "{read:?}");
        let batch = master.effect_batch(&after.effects.dirty);
        assert_eq!(batch, vec![(b"k".to_vec(), None)]);
        replica.apply_batch(&batch, 1);
        assert_eq!(
            at(&mut replica, 50, &["EXISTS", "k"]),
            Reply::Int(0),
            "{read:?}"
        );
    }
}

#[test]
fn replicas_refuse_writes() {
    let mut n = node();
    n.role = Role::Replica(1);
    assert_eq!(
        err(cmd(&mut n, &["SET", "k", "v"])),
        "READONLY You can't write against a read only replica."
    );
    assert_eq!(cmd(&mut n, &["GET", "k"]), Reply::Nil);
}

#[test]
fn restart_keeps_what_persistence_keeps() {
    for (mode, survives_fsynced, survives_latest) in [
        (Persistence::None, false, false),
        (Persistence::AofEverySec, true, false),
        (Persistence::AofAlways, true, true),
    ] {
        let mut n = Node::new(0, mode, ClockModel::new(Duration::ZERO, false)).unwrap();
        cmd(&mut n, &["SET", "old", "1"]);
        n.fsync_tick();
        cmd(&mut n, &["SET", "new", "1"]);
        n.crash();
        n.restart();
        assert_eq!(
            cmd(&mut n, &["EXISTS", "old"]),
            Reply::Int(i64::from(survives_fsynced)),
            "{mode:?}"
        );
        assert_eq!(
            cmd(&mut n, &["EXISTS", "new"]),
            Reply::Int(i64::from(survives_latest)),
            "{mode:?}"
        );
    }
}

#[test]
fn lock_scripts_compile_in_the_model() {
    let mut n = node();
    for script in leasehold::script::scripts().all() {
        assert_eq!(
            cmd(&mut n, &["SCRIPT", "LOAD", script.source()]),
            Reply::bulk(script.sha()),
            "{}",
            script.name()
        );
    }
}

#[test]
fn a_lua_number_passed_to_redis_call_is_sent_as_c_s_percent_17g() {
    // Each pair as Redis 7.0.15 stores it (`EVAL "redis.call('SET','k',<n>)
    // return redis.call('GET','k')" 0` on a real server).
    let cases = [
        ("0.1", "0.10000000000000001"),
        ("1/3", "0.33333333333333331"),
        ("1700003604643629", "1700003604643629"),
        ("1e15", "1000000000000000"),
        ("1e17", "1e+17"),
        ("2^53+1", "9007199254740992"),
        ("123456789012345678", "1.2345678901234568e+17"),
        ("1e-5", "1.0000000000000001e-05"),
        ("-0.5", "-0.5"),
        ("1e300", "1.0000000000000001e+300"),
    ];
    let mut n = node();
    for (lua, stored) in cases {
        let script = format!("redis.call('SET', 'k', {lua}) return redis.call('GET', 'k')");
        assert_eq!(
            cmd(&mut n, &["EVAL", &script, "0"]),
            Reply::Bulk(stored.as_bytes().to_vec()),
            "{lua}"
        );
    }
}

/// The source of lock script `name` (`lock/scripts/<name>.lua`).
fn script_source(name: &str) -> &'static str {
    leasehold::script::scripts()
        .all()
        .iter()
        .find(|s| s.name() == name)
        .unwrap()
        .source()
}

/// `EVAL source numkeys keys... argv...` as a node's command words.
fn eval_words(source: &str, keys: &[&str], argv: &[&str]) -> Vec<Vec<u8>> {
    let mut words: Vec<Vec<u8>> = vec![b"EVAL".to_vec(), source.as_bytes().to_vec()];
    words.push(keys.len().to_string().into_bytes());
    words.extend(keys.iter().chain(argv).map(|w| w.as_bytes().to_vec()));
    words
}

/// Runs script `source` with `keys` at `t_ms`, its calls from `from_call` on reading the
/// clock at `late_ms` (a server whose clock moves on during a script, Redis before 7.2).
fn eval_late(node: &mut Node, t_ms: u64, late: (usize, u64), source: &str, keys: &[&str]) -> Reply {
    let words = eval_words(source, keys, &[]);
    let (from_call, late_ms) = late;
    let late = leasehold_sim::model::LateClock {
        from_call,
        t: late_ms * 1_000_000,
    };
    match node.execute_late(&words, t_ms * 1_000_000, late).executed {
        Executed::Reply(reply) => reply,
        Executed::Wait { .. } => panic!("unexpected WAIT"),
    }
}

/// On a clock that moves on during a script, lookups keep the script's start time while
/// `TIME`, `PTTL` and `PEXPIRE` read the later one: a key at its last millisecond is still
/// there with 0 ms left, and a `PEXPIRE` counts from the later time. Read by one clock, the
/// same script sees 1 ms left and sets the expiry a millisecond earlier.
#[test]
fn a_script_on_a_moving_clock_reads_time_late_and_judges_expiry_at_its_start() {
    let script = "local a = redis.call('PTTL', KEYS[1]) \
                  redis.call('PEXPIRE', KEYS[2], 10) \
                  local b = redis.call('PTTL', KEYS[1]) \
                  local t = redis.call('TIME') \
                  return {a, b, redis.call('EXISTS', KEYS[1]), redis.call('PTTL', KEYS[2]), \
                  tonumber(t[2]) % 1000000}";
    let reads = |late: (usize, u64)| {
        let mut n = node();
        cmd(&mut n, &["SET", "k", "v", "PX", "100"]);
        cmd(&mut n, &["SET", "other", "v"]);
        let reply = eval_late(&mut n, 99, late, script, &["k", "other"]);
        let expiry = at(&mut n, 105, &["PTTL", "other"]);
        (reply, expiry)
    };
    let ints = |v: &[i64]| Reply::Array(v.iter().map(|&i| Reply::Int(i)).collect());
    let base_us = {
        let n = node();
        n.wall_us(0).rem_euclid(1_000_000)
    };
    let time_at = |ms: i64| (base_us + ms * 1_000).rem_euclid(1_000_000);
    // One clock: 1 ms left all along, the expiry 10 ms from 99.
    assert_eq!(
        reads((usize::MAX, 100)),
        (ints(&[1, 1, 1, 10, time_at(99)]), Reply::Int(4))
    );
    // From the second call on, the clock reads 100: the key is still kept, 0 ms left, and
    // the expiry counts from 100.
    assert_eq!(
        reads((1, 100)),
        (ints(&[1, 0, 1, 10, time_at(100)]), Reply::Int(5))
    );
}

/// The semaphore's size key lives no longer than its other keys even when the script's
/// clock moves on between reading their expiry and setting the size's (a moving clock,
/// Redis before 7.2): relative TTLs carried across a millisecond would outlive by one.
#[test]
fn the_semaphore_size_never_outlives_its_permits_on_a_moving_clock() {
    let script = script_source("semaphore_acquire");
    let keys = ["s", "s:queue", "s:waiters", "s:size"];
    let argv = [
        "0000000000000001:owner",
        "3",
        "1000",
        "0",
        "leasehold:inbox:",
    ];
    let expiry = |n: &mut Node, key: &str| at(n, 0, &["PEXPIRETIME", key]);
    let mut moves = 0;
    for from_call in 0.. {
        let mut n = node();
        let words = eval_words(script, &keys, &argv);
        let late = leasehold_sim::model::LateClock {
            from_call,
            t: 1_000_000,
        };
        let reply = n.execute_late(&words, 0, late).executed;
        assert!(
            matches!(&reply, Executed::Reply(Reply::Array(a)) if a.first() == Some(&Reply::Int(1))),
            "{reply:?}"
        );
        if from_call >= n.script_calls() {
            break;
        }
        moves += 1;
        let (size, permits) = (expiry(&mut n, "s:size"), expiry(&mut n, "s"));
        assert!(
            matches!((&size, &permits), (Reply::Int(s), Reply::Int(p)) if s <= p),
            "clock moved on from call {from_call}: size expires at {size:?}, permits at {permits:?}"
        );
    }
    assert!(moves > 3, "the script made {moves} calls");
}

/// A paced clock (Redis before 7.2 running a script that takes time): the k-th call reads
/// the start plus k × the pace, lookups still judge expiry at the start.
#[test]
fn a_paced_script_reads_a_clock_that_moves_on_call_by_call() {
    let script = "local a = redis.call('TIME') \
                  local b = redis.call('TIME') \
                  redis.call('PEXPIRE', KEYS[1], 10) \
                  return {tonumber(a[2]), tonumber(b[2]), redis.call('EXISTS', KEYS[2]), \
                  redis.call('PEXPIRETIME', KEYS[1])}";
    let mut n = node();
    cmd(&mut n, &["SET", "k", "v"]);
    cmd(&mut n, &["SET", "gone", "v", "PX", "1"]);
    let start_us = n.wall_us(0);
    let words = eval_words(script, &["k", "gone"], &[]);
    // 0.7 ms per call: the second TIME 0.7 ms on, the PEXPIRE (third call) 1.4 ms on.
    let Executed::Reply(Reply::Array(got)) = n.execute_paced(&words, 0, 700_000).executed else {
        panic!("not an array");
    };
    let us = |d: i64| Reply::Int((start_us + d).rem_euclid(1_000_000));
    assert_eq!(got[0], us(0));
    assert_eq!(got[1], us(700));
    assert_eq!(got[2], Reply::Int(1), "expiry is judged at the start");
    assert_eq!(
        got[3],
        Reply::Int((start_us + 1_400).div_euclid(1_000) + 10)
    );
}

/// A read grant on a server whose clock moves on while the script runs gives the readers
/// zset and the owners hash one expiry, the reader's own deadline: relative TTLs set one
/// after the other would land apart, and past it (mutant 49 keeps that form).
#[test]
fn the_reader_keys_expire_together_at_the_latest_read_deadline_on_a_moving_clock() {
    let script = script_source("rw_read_acquire");
    let keys = [
        "w",
        "w:readers",
        "w:owners",
        "w:intents",
        "w:fence",
        "w:line",
        "w:waiters",
    ];
    let argv = ["0000000000000001:owner", "owner", "1000", "100", "0", "1"];
    for pace_ns in [0, 50_000, 333_333, 900_000] {
        let mut n = node();
        let words = eval_words(script, &keys, &argv);
        let reply = n.execute_paced(&words, 0, pace_ns).executed;
        assert!(
            matches!(&reply, Executed::Reply(Reply::Array(a)) if a.first() == Some(&Reply::Int(1))),
            "{reply:?}"
        );
        let deadline = at(&mut n, 0, &["ZSCORE", "w:readers", argv[0]]);
        let Reply::Bulk(deadline) = deadline else {
            panic!("no reader: {deadline:?}");
        };
        let deadline: i64 = String::from_utf8_lossy(&deadline).parse().unwrap();
        for key in ["w:readers", "w:owners"] {
            assert_eq!(
                at(&mut n, 0, &["PEXPIRETIME", key]),
                Reply::Int(deadline),
                "{key} at a pace of {pace_ns} ns per call"
            );
        }
    }
}
