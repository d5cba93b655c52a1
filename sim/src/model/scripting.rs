//! Server-side Lua: Redis's scripting environment over Lua 5.1, per node.
//!
//! Invariant: a script sees exactly what Redis gives it — `KEYS`/`ARGV`, `redis.call` /
//! `redis.pcall` / `redis.error_reply` / `redis.status_reply` / `redis.sha1hex`, Redis's
//! reply<->Lua conversion rules, read-only globals and a `math.random` reseeded per run —
//! and runs to completion without interleaving (it is a plain function call on the node's
//! event). Errors surface as Redis 7 formats them (`... script: <sha>, on @user_script:N.`).
//! While coverage is recorded, scripts run with branch marks ([`super::branch_marks`]),
//! which set one more global table and change nothing else a script sees or does.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use mlua::{Function, Lua, MultiValue, Table, Value};

use super::commands::{self, Ctx, Effects};
use super::keyspace::Keyspace;
use crate::model::branch_marks;
use crate::model::coverage::{Coverage, LineSet};
use crate::model::resp::Reply;
use crate::model::verdict_states::VerdictState;

/// The chunk name every script is compiled under, as in Redis (its errors say
/// `on @user_script:N`).
const USER_SCRIPT: &str = "@user_script";

/// Prelude installed once per Lua state: the `redis` table (except `call`/`pcall` and
/// `sha1hex`, which are Rust functions installed next to it), sandboxing and read-only
/// globals. It returns a function that runs a compiled script under `pcall`, so no Lua
/// error unwinds through Rust.
const PRELUDE: &str = r#"
local error, type = error, type
redis = {}
redis.error_reply = function(msg)
  if type(msg) ~= 'string' then error('wrong number or type of arguments', 2) end
  return { err = msg }
end
redis.status_reply = function(msg)
  if type(msg) ~= 'string' then error('wrong number or type of arguments', 2) end
  return { ok = msg }
end
redis.log = function() end
redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING = 0, 1, 2, 3
redis.replicate_commands = function() return true end
redis.setresp = function(v) if v ~= 2 then error('only RESP2 is simulated', 2) end end
os, io, package, require, loadfile, dofile, module = nil, nil, nil, nil, nil, nil, nil
local function run(f) return pcall(f) end
setmetatable(_G, {
  __newindex = function() error('Attempt to modify a readonly table', 2) end,
  __index = function(_, name)
    error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 2)
  end,
})
return run
"#;

/// The lrand48 constants Redis uses for its deterministic `math.random`.
const LRAND48_A: u64 = 0x5_DEEC_E66D;
const LRAND48_C: u64 = 0xB;
const LRAND48_MASK: u64 = (1 << 48) - 1;
/// Redis divides by `INT32_MAX` (its `REDIS_LRAND48_MAX`).
const LRAND48_MAX: u64 = i32::MAX as u64;
/// `srand48(0)`: Redis reseeds before every script so runs are replayable.
const LRAND48_SEED0: u64 = 0x330E;

/// The Lua state of one node with its script cache.
///
/// Everything a run needs is built once per state and reused: `redis.call`/`redis.pcall`
/// reach the node through [`Session`], and `KEYS`/`ARGV` are two tables cleared and
/// refilled per run, so a run allocates only what the script itself creates.
pub struct ScriptEngine {
    lua: Lua,
    run: Function,
    keys: Table,
    argv: Table,
    cache: BTreeMap<String, Function>,
    rand_state: Rc<Cell<u64>>,
    session: Rc<RefCell<Session>>,
    /// While recording coverage: the table the marked scripts set their branch marks in
    /// ([`branch_marks`]).
    marks: Option<Table>,
}

/// What a script's `redis.call`s read as the live clock (`TIME`, `PTTL`, the base of a
/// relative expiry); key expiry is judged at the script's start whatever this says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LiveClock {
    /// Every call reads the script's start (Redis 7.2 and later, Valkey).
    #[default]
    Frozen,
    /// From the `from_call`-th call (counting from 0) on, the clock reads `us`
    /// ([`crate::model::node::LateClock`]).
    Step { from_call: usize, us: i64 },
    /// The clock moves on `ns` per call made: the `k`-th call reads the start plus `k × ns`
    /// (Redis before 7.2 running a script that takes time).
    Paced { ns: u64 },
}

impl LiveClock {
    /// What the call made after `calls` earlier ones reads, the script having started at
    /// `start_us`.
    fn at(self, start_us: i64, calls: usize) -> i64 {
        match self {
            Self::Frozen => start_us,
            Self::Step { from_call, us } if calls >= from_call => us,
            Self::Step { .. } => start_us,
            Self::Paced { ns } => {
                let moved = (calls as u64).saturating_mul(ns) / 1_000;
                start_us.saturating_add(i64::try_from(moved).unwrap_or(i64::MAX))
            }
        }
    }
}

/// The node state a running script reaches through `redis.call`.
///
/// The call functions live in the Lua state for good, so they cannot borrow the node; for
/// the duration of one run the node's keyspace, effects and subscriptions are moved in
/// here and moved back afterwards (a move of a `BTreeMap` copies no entries).
#[derive(Default)]
struct Session {
    ks: Keyspace,
    effects: Effects,
    subscribers: BTreeMap<Vec<u8>, BTreeSet<u64>>,
    now_us: i64,
    /// How the run's `redis.call`s read the clock ([`LiveClock`]).
    live: LiveClock,
    /// `redis.call`s the current (or last) run made.
    calls: usize,
    refuse_writes: Option<&'static str>,
    /// `redis.call` argument buffers, reused from call to call.
    words: Vec<Vec<u8>>,
    /// While recording coverage: the lines of the running script that called Redis.
    lines: Option<BTreeSet<u32>>,
    /// While recording coverage: the lines the last script run called, to pair with the
    /// states it ran in ([`ScriptEngine::file_states`]).
    last_lines: BTreeSet<u32>,
    /// While recording coverage: every script's branches taken and call sites reached so far.
    covered: Coverage,
}

impl std::fmt::Debug for ScriptEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptEngine")
            .field("cached", &self.cache.len())
            .finish_non_exhaustive()
    }
}

/// Lowercase hex SHA1, as `SCRIPT LOAD` reports it.
pub fn sha1_hex(source: &[u8]) -> String {
    sha1_smol::Sha1::from(source).digest().to_string()
}

impl ScriptEngine {
    /// A fresh Lua state with Redis's environment.
    pub fn new() -> mlua::Result<Self> {
        let lua = Lua::new();
        let rand_state = Rc::new(Cell::new(LRAND48_SEED0));
        let math: Table = lua.globals().get("math")?;
        let state = Rc::clone(&rand_state);
        math.set(
            "random",
            lua.create_function(move |_, args: MultiValue| redis_random(&state, &args))?,
        )?;
        math.set(
            "randomseed",
            lua.create_function(|_, _: MultiValue| Ok(()))?,
        )?;
        let sha1hex = lua.create_function(|_, s: mlua::LuaString| Ok(sha1_hex(&s.as_bytes())))?;
        let run: Function = lua.load(PRELUDE).set_name("=prelude").call(())?;
        let redis: Table = lua.globals().raw_get("redis")?;
        redis.raw_set("sha1hex", sha1hex)?;
        let session = Rc::new(RefCell::new(Session::default()));
        redis.raw_set(
            "call",
            lua.create_function(redis_call(Rc::clone(&session), true))?,
        )?;
        redis.raw_set(
            "pcall",
            lua.create_function(redis_call(Rc::clone(&session), false))?,
        )?;
        let keys = lua.create_table()?;
        let argv = lua.create_table()?;
        Ok(Self {
            lua,
            run,
            keys,
            argv,
            cache: BTreeMap::new(),
            rand_state,
            session,
            marks: None,
        })
    }

    /// Compiles and caches `source`; returns its SHA or the compile error reply.
    pub fn load(&mut self, source: &[u8]) -> Result<String, Reply> {
        let sha = sha1_hex(source);
        if !self.cache.contains_key(&sha) {
            let function = self
                .lua
                .load(source)
                .set_name(USER_SCRIPT)
                .into_function()
                .map_err(|err| {
                    Reply::error(format!(
                        "ERR Error compiling script (new function): {}",
                        lua_error_text(&err)
                    ))
                })?;
            let function = match self.marks {
                Some(_) => self.marked(source).unwrap_or(function),
                None => function,
            };
            self.cache.insert(sha.clone(), function);
        }
        Ok(sha)
    }

    /// Whether a script with this SHA is cached (`SCRIPT EXISTS`).
    pub fn exists(&self, sha: &str) -> bool {
        self.cache.contains_key(&sha.to_ascii_lowercase())
    }

    /// Records, from now on, which branches the scripts take and which call sites they
    /// reach ([`Self::coverage`]). Scripts already cached stay unmarked, so it is called
    /// before any script is loaded.
    pub fn record_coverage(&mut self) -> mlua::Result<()> {
        self.session.borrow_mut().lines = Some(BTreeSet::new());
        let marks = self.lua.create_table()?;
        self.lua.globals().raw_set(branch_marks::MARKS, &marks)?;
        self.marks = Some(marks);
        Ok(())
    }

    /// `source` compiled with its branch marks, if it can be read as Lua blocks and so
    /// compiles (the unmarked compile, done first, decides whether a script loads at all).
    fn marked(&self, source: &[u8]) -> Option<Function> {
        let marked = branch_marks::marked(source)?;
        self.lua
            .load(marked)
            .set_name(USER_SCRIPT)
            .into_function()
            .ok()
    }

    /// The branches taken and call sites reached while recording.
    pub fn coverage(&self) -> Coverage {
        self.session.borrow().covered.clone()
    }

    /// Records that the last run, of script `sha`, ran in `states`: each is paired with
    /// every call site that run reached. Called after every [`Self::run`] while recording
    /// (a run refused with `NOSCRIPT` reached none), so no run's lines outlive it.
    pub fn file_states(&mut self, sha: &str, states: &[VerdictState]) {
        let mut session = self.session.borrow_mut();
        let session = &mut *session;
        session.covered.add_states(sha, &session.last_lines, states);
        session.last_lines.clear();
    }

    /// How many `redis.call`s (and `pcall`s) the last run made.
    pub fn calls(&self) -> usize {
        self.session.borrow().calls
    }

    /// Forgets every cached script (`SCRIPT FLUSH`, restart).
    pub fn flush(&mut self) {
        self.cache.clear();
    }

    /// Runs the cached script `sha` atomically against `ctx`, its `redis.call`s reading
    /// the clock as `live` says (`Ctx::live_us`).
    pub fn run(
        &mut self,
        sha: &str,
        keys: &[Vec<u8>],
        argv: &[Vec<u8>],
        ctx: &mut Ctx<'_>,
        live: LiveClock,
    ) -> Reply {
        let sha = sha.to_ascii_lowercase();
        let Some(function) = self.cache.get(&sha).cloned() else {
            return Reply::error(super::NOSCRIPT_ERROR);
        };
        self.rand_state.set(LRAND48_SEED0);
        self.enter(ctx, live);
        let result = self.call(&function, keys, argv);
        self.leave(ctx, &sha);
        match result {
            Ok(Ok(value)) => lua_to_reply(&value),
            Ok(Err(error)) => script_error(&sha, &error),
            Err(err) => Reply::error(format!(
                "ERR internal simulator Lua failure: {} script: {sha}",
                lua_error_text(&err)
            )),
        }
    }

    /// Moves the node state `ctx` points at into the session for a run.
    fn enter(&self, ctx: &mut Ctx<'_>, live: LiveClock) {
        // Not borrowed: the call functions borrow the session only while a script runs.
        let mut session = self.session.borrow_mut();
        session.ks = std::mem::take(ctx.ks);
        session.effects = std::mem::take(ctx.effects);
        session.subscribers = std::mem::take(ctx.subscribers);
        session.now_us = ctx.now_us;
        session.live = live;
        session.calls = 0;
        session.refuse_writes = ctx.refuse_writes;
    }

    /// Moves the node state back after a run of script `sha` (also after a failed one),
    /// and files the branches it took and the call sites it reached.
    fn leave(&self, ctx: &mut Ctx<'_>, sha: &str) {
        let mut session = self.session.borrow_mut();
        let session = &mut *session;
        if let Some(lines) = &mut session.lines {
            let mut taken = LineSet::default();
            if let Some(marks) = &self.marks {
                // Reading a plain table of integers to booleans cannot fail; a failure
                // would only lose this run's marks.
                let _ = branch_marks::take(marks, &mut taken);
            }
            session.covered.add_branches(sha, &taken);
            session.covered.add(sha, lines);
            std::mem::swap(lines, &mut session.last_lines);
            lines.clear();
        }
        *ctx.ks = std::mem::take(&mut session.ks);
        *ctx.effects = std::mem::take(&mut session.effects);
        *ctx.subscribers = std::mem::take(&mut session.subscribers);
    }

    /// Makes the global `name` the array `table` of `items` as (binary-safe) Lua strings.
    /// The table is emptied first, and metatable and binding reset, so nothing a previous
    /// run did to it shows, as with a fresh table.
    fn set_strings(&self, name: &str, table: &Table, items: &[Vec<u8>]) -> mlua::Result<()> {
        table.clear()?;
        table.set_metatable(None)?;
        for (i, item) in items.iter().enumerate() {
            // Text goes straight onto the Lua stack; only other bytes need a string handle.
            match std::str::from_utf8(item) {
                Ok(text) => table.raw_set(i + 1, text)?,
                Err(_) => table.raw_set(i + 1, self.lua.create_string(item)?)?,
            }
        }
        self.lua.globals().raw_set(name, table)
    }

    /// Calls `function` with KEYS/ARGV set; `Ok(Err(obj))` is a Lua error object.
    fn call(
        &self,
        function: &Function,
        keys: &[Vec<u8>],
        argv: &[Vec<u8>],
    ) -> mlua::Result<Result<Value, Value>> {
        self.set_strings("KEYS", &self.keys, keys)?;
        self.set_strings("ARGV", &self.argv, argv)?;
        let (ok, value): (bool, Value) = self.run.call(function)?;
        Ok(if ok { Ok(value) } else { Err(value) })
    }
}

/// `redis.call` (`raise`) or `redis.pcall` over the session's node state.
///
/// They are Rust (C) functions, as in Redis: a `return redis.call(...)` is then no Lua
/// tail call and the script's frame, with its current line, is still on the stack when an
/// error is raised.
fn redis_call(
    session: Rc<RefCell<Session>>,
    raise: bool,
) -> impl Fn(&Lua, MultiValue) -> mlua::Result<Value> + 'static {
    move |lua: &Lua, args: MultiValue| {
        let reply = {
            let mut session = session
                .try_borrow_mut()
                .map_err(|_| mlua::Error::RecursiveMutCallback)?;
            let session = &mut *session;
            let live_us = session.live.at(session.now_us, session.calls);
            session.calls += 1;
            let mut ctx = Ctx {
                ks: &mut session.ks,
                now_us: session.now_us,
                live_us,
                effects: &mut session.effects,
                subscribers: &mut session.subscribers,
                refuse_writes: session.refuse_writes,
            };
            if let Some(lines) = &mut session.lines {
                lines.extend(calling_line(lua).and_then(|line| u32::try_from(line).ok()));
            }
            dispatch_from_script(&args, &mut session.words, &mut ctx)
        };
        match reply {
            Reply::Error(message) if raise => {
                let line = calling_line(lua);
                Err(mlua::Error::external(CallError { message, line }))
            }
            reply => reply_to_lua(lua, &reply),
        }
    }
}

/// The script line making the running `redis.call`: level 0 of the stack is the call
/// function itself, level 1 the script calling it.
fn calling_line(lua: &Lua) -> Option<usize> {
    lua.inspect_stack(1, |d| d.current_line()).flatten()
}

/// An error reply raised by `redis.call`, with the script line that made the call.
#[derive(Debug)]
struct CallError {
    message: String,
    line: Option<usize>,
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CallError {}

/// Finds a [`CallError`] inside an mlua error chain.
fn call_error(err: &mlua::Error) -> Option<&CallError> {
    match err {
        mlua::Error::CallbackError { cause, .. } => call_error(cause),
        mlua::Error::ExternalError(inner) => inner.downcast_ref::<CallError>(),
        mlua::Error::WithContext { cause, .. } => call_error(cause),
        _ => None,
    }
}

/// Converts `redis.call` arguments and runs the command, refusing those Redis refuses
/// inside scripts.
/// `buffers` holds the argument bytes; its vectors are overwritten, not reallocated.
fn dispatch_from_script(args: &MultiValue, buffers: &mut Vec<Vec<u8>>, ctx: &mut Ctx<'_>) -> Reply {
    if args.is_empty() {
        return Reply::error("ERR Please specify at least one argument for this redis lib call");
    }
    if buffers.len() < args.len() {
        buffers.resize_with(args.len(), Vec::new);
    }
    for (arg, word) in args.iter().zip(buffers.iter_mut()) {
        word.clear();
        match arg {
            Value::String(s) => word.extend_from_slice(&s.as_bytes()),
            // Lua 5.1 has only doubles: an integral one arrives as an integer here.
            Value::Integer(i) => word.extend_from_slice(lua_number_text(*i as f64).as_bytes()),
            Value::Number(n) => word.extend_from_slice(lua_number_text(*n).as_bytes()),
            _ => {
                return Reply::error(
                    "ERR Lua redis lib command arguments must be strings or integers",
                );
            }
        }
    }
    let words = &buffers[..args.len()];
    let name = String::from_utf8_lossy(&words[0]).to_ascii_lowercase();
    if commands::is_data_command(&name) {
        commands::execute(ctx, words)
    } else if matches!(
        name.as_str(),
        "eval" | "evalsha" | "script" | "wait" | "subscribe" | "unsubscribe" | "multi" | "exec"
    ) {
        Reply::error("ERR This Redis command is not allowed from script")
    } else {
        commands::unknown_command(words)
    }
}

/// The text Redis 7 sends for a Lua number passed to `redis.call`: C's `%.17g` (not Lua's
/// own `tostring`, whose `%.14g` loses precision), so `0.1` goes out as
/// `0.10000000000000001` and `1e17` as `1e+17`.
fn lua_number_text(n: f64) -> String {
    if n.is_nan() {
        return "nan".to_owned();
    }
    if n.is_infinite() {
        return if n > 0.0 { "inf" } else { "-inf" }.to_owned();
    }
    // %g: the exponent of the %e form with 17 significant digits picks the style.
    let scientific = format!("{n:.16e}");
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let trimmed = |text: &str| {
        if text.contains('.') {
            text.trim_end_matches('0').trim_end_matches('.').to_owned()
        } else {
            text.to_owned()
        }
    };
    if (-4..17).contains(&exponent) {
        let decimals = usize::try_from(16 - exponent).unwrap_or(0);
        trimmed(&format!("{n:.decimals$}"))
    } else {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trimmed(mantissa), exponent.unsigned_abs())
    }
}

/// Redis reply -> Lua value (the rules `redis.call` applies).
fn reply_to_lua(lua: &Lua, reply: &Reply) -> mlua::Result<Value> {
    Ok(match reply {
        Reply::Int(n) => Value::Integer(*n),
        Reply::Bulk(bytes) => Value::String(lua.create_string(bytes)?),
        Reply::Nil | Reply::NilArray => Value::Boolean(false),
        Reply::Status(text) => {
            let table = lua.create_table()?;
            table.raw_set("ok", text.as_str())?;
            Value::Table(table)
        }
        Reply::Error(text) => {
            let table = lua.create_table()?;
            table.raw_set("err", text.as_str())?;
            Value::Table(table)
        }
        Reply::Array(items) => {
            let table = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, item) in items.iter().enumerate() {
                table.raw_set(i + 1, reply_to_lua(lua, item)?)?;
            }
            Value::Table(table)
        }
    })
}

/// Lua value -> Redis reply (the rules applied to a script's return value).
pub fn lua_to_reply(value: &Value) -> Reply {
    match value {
        Value::Nil => Reply::Nil,
        Value::Boolean(true) => Reply::Int(1),
        Value::Boolean(false) => Reply::Nil,
        Value::Integer(n) => Reply::Int(*n),
        // Redis casts the double to long long: truncation toward zero.
        Value::Number(n) => Reply::Int(*n as i64),
        Value::String(s) => Reply::Bulk(s.as_bytes().to_vec()),
        Value::Table(table) => {
            if let Ok(Value::String(err)) = table.raw_get::<Value>("err") {
                return Reply::Error(error_text(&err.to_string_lossy()));
            }
            if let Ok(Value::String(ok)) = table.raw_get::<Value>("ok") {
                return Reply::Status(ok.to_string_lossy());
            }
            let mut items = Vec::new();
            for i in 1.. {
                match table.raw_get::<Value>(i) {
                    Ok(Value::Nil) | Err(_) => break,
                    Ok(item) => items.push(lua_to_reply(&item)),
                }
            }
            Reply::Array(items)
        }
        Value::Error(err) => Reply::Error(format!("ERR {}", lua_error_text(err))),
        _ => Reply::Nil,
    }
}

/// Redis strips a leading `-` from `{err=...}` strings and gives code-less messages none
/// of their own (the client then sees the first word as the code).
fn error_text(raw: &str) -> String {
    raw.strip_prefix('-').unwrap_or(raw).to_owned()
}

/// The reply for a script that raised an error, in Redis 7's format.
fn script_error(sha: &str, error: &Value) -> Reply {
    match error {
        Value::Table(table) => {
            let message = table
                .raw_get::<Value>("err")
                .ok()
                .and_then(|v| match v {
                    Value::String(s) => Some(error_text(&s.to_string_lossy())),
                    _ => None,
                })
                .unwrap_or_else(|| "ERR unknown error".to_owned());
            let line = table.raw_get::<i64>("line").unwrap_or(-1);
            if line > 0 {
                Reply::Error(format!("{message} script: {sha}, on @user_script:{line}."))
            } else {
                Reply::Error(format!("{message} script: {sha}"))
            }
        }
        Value::Error(err) if call_error(err).is_some() => match call_error(err) {
            Some(CallError {
                message,
                line: Some(line),
            }) => Reply::Error(format!(
                "{} script: {sha}, on @user_script:{line}.",
                error_text(message)
            )),
            Some(CallError { message, .. }) => {
                Reply::Error(format!("{} script: {sha}", error_text(message)))
            }
            None => Reply::error("ERR unknown error"),
        },
        other => {
            let text = match other {
                Value::String(s) => s.to_string_lossy(),
                Value::Error(err) => lua_error_text(err),
                _ => "unknown error".to_owned(),
            };
            let line = runtime_error_line(&text);
            match line {
                Some(line) => {
                    Reply::Error(format!("ERR {text} script: {sha}, on @user_script:{line}."))
                }
                None => Reply::Error(format!("ERR {text} script: {sha}")),
            }
        }
    }
}

/// `user_script:7: boom` -> `7`.
fn runtime_error_line(text: &str) -> Option<u32> {
    text.strip_prefix("user_script:")?
        .split(':')
        .next()?
        .parse()
        .ok()
}

/// The first line of a Lua error (mlua appends a traceback).
fn lua_error_text(err: &mlua::Error) -> String {
    let text = match err {
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        mlua::Error::RuntimeError(message) => message.clone(),
        mlua::Error::CallbackError { cause, .. } => return lua_error_text(cause),
        other => other.to_string(),
    };
    text.lines().next().unwrap_or_default().to_owned()
}

/// Redis's `math.random`: lrand48 reseeded to 0 per script, with Lua's argument rules.
fn redis_random(state: &Cell<u64>, args: &MultiValue) -> mlua::Result<f64> {
    let next = (LRAND48_A.wrapping_mul(state.get()).wrapping_add(LRAND48_C)) & LRAND48_MASK;
    state.set(next);
    let r = ((next >> 17) % LRAND48_MAX) as f64 / LRAND48_MAX as f64;
    let num = |v: &Value| match v {
        Value::Integer(i) => Ok(*i as f64),
        Value::Number(n) => Ok(*n),
        _ => Err(mlua::Error::RuntimeError(
            "bad argument to 'random' (number expected)".into(),
        )),
    };
    let values: Vec<&Value> = args.iter().collect();
    match values.as_slice() {
        [] => Ok(r),
        [m] => {
            let m = num(m)?;
            if m < 1.0 {
                return Err(mlua::Error::RuntimeError(
                    "bad argument #1 to 'random' (interval is empty)".into(),
                ));
            }
            Ok((r * m).floor() + 1.0)
        }
        [l, u] => {
            let (l, u) = (num(l)?, num(u)?);
            if l > u {
                return Err(mlua::Error::RuntimeError(
                    "bad argument #2 to 'random' (interval is empty)".into(),
                ));
            }
            Ok((r * (u - l + 1.0)).floor() + l)
        }
        _ => Err(mlua::Error::RuntimeError(
            "wrong number of arguments".into(),
        )),
    }
}
