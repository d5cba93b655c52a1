//! One Redis server: its database, script cache, pub/sub registry, persistence and role.
//!
//! Invariant: what a restart keeps is exactly what the persistence mode would have on disk
//! (nothing; the last once-per-second fsync; every acknowledged write), a restart always
//! empties the script cache and subscriptions, and a replica refuses writes. Replication
//! transport and `WAIT` blocking are driven by the world (`world.rs`); the node only
//! produces and applies effect batches and reports offsets.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::commands::{self, Ctx, Effects};
use super::eviction::{self, EvictionPolicy};
use super::keyspace::{Entry, Keyspace};
use super::scripting::{LiveClock, ScriptEngine};
use super::state_watch::{self, Call, StateWatch};
use crate::engine::clock::ClockModel;
use crate::model::resp::Reply;

/// Index of a node in the world.
pub type NodeId = usize;

/// The node's Unix time at virtual zero (2023-11-14T22:13:20Z), in microseconds: scripts
/// that read `TIME` see a realistic epoch.
pub const EPOCH_US: i64 = 1_700_000_000_000_000;

/// Node clocks start this far after their epoch so that negative offsets stay positive.
pub const NODE_CLOCK_BASE: Duration = Duration::from_secs(3_600);

/// What a node whose clock is `clock` reads as Unix time in microseconds at virtual time
/// `t` (ns): what its scripts' `TIME`, and so its fencing tokens, see.
pub fn wall_us(clock: &ClockModel, t: u64) -> i64 {
    EPOCH_US + (clock.local_nanos(t) / 1_000) as i64
}

/// A server whose clock moves on while a script runs, and whose commands in a script read
/// it: Redis before 7.2 judges key expiry at the script's start but reads `mstime()` for
/// `TIME`, `PTTL` and the base of `PEXPIRE` or `SET PX`, so a script that straddles a
/// millisecond can see a key live with 0 ms left, and two relative expiries one script
/// sets can land a millisecond apart. From its `from_call`-th `redis.call` (counting from
/// 0) on, a script reads virtual time `t` there. Redis 7.2 and Valkey freeze that clock;
/// the differential test runs the model so to match a server of either kind, and
/// exploration draws a run's server ([`ServerClock`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LateClock {
    pub from_call: usize,
    pub t: u64,
}

/// How a run's servers read the clock inside a script.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum ServerClock {
    /// Redis 7.2 and later, Valkey: a script's calls all read its start.
    #[default]
    Frozen,
    /// Redis 7.0 and 7.1: expiry is judged at a script's start, and each `redis.call` reads
    /// the live clock, which moves on while the script runs, by up to `max_call_ns` per call
    /// (each script draws its pace from 0 to that).
    Moving { max_call_ns: u64 },
}

/// When a script runs: its virtual time, the node's µs then, and what its calls read.
struct ScriptClock {
    t: u64,
    now_us: i64,
    live: LiveClock,
}

/// How the caller of [`Node::execute_with`] has a script's calls read the clock.
#[derive(Debug, Clone, Copy)]
enum Clocked {
    Frozen,
    Late(LateClock),
    Paced(u64),
}

/// How a node's data survives a restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum Persistence {
    /// No AOF, no RDB: a restart comes back empty.
    #[default]
    None,
    /// `appendfsync everysec`: a restart loses the writes since the last fsync tick.
    AofEverySec,
    /// `appendfsync always`: every acknowledged write survives.
    AofAlways,
}

/// Master or replica (of the given master).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Accepts writes and streams effects to its replicas.
    Master,
    /// Applies the master's effect stream; refuses writes.
    Replica(NodeId),
}

/// What executing a command produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Executed {
    /// A reply to send now.
    Reply(Reply),
    /// `WAIT`: reply once `numreplicas` replicas acknowledged the offset of the
    /// connection's own last write (the world keeps it, as Redis keeps `client->woff`), or
    /// after `timeout_ms` (0 = never time out) with however many did.
    Wait {
        /// Replicas required.
        numreplicas: i64,
        /// Milliseconds to wait; 0 waits forever.
        timeout_ms: i64,
    },
}

/// The result of one command: the reply and its side effects.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Reply or deferred `WAIT`.
    pub executed: Executed,
    /// Keys written and messages published.
    pub effects: Effects,
}

/// One replicated write: the new raw state of each key it touched.
pub type EffectBatch = Vec<(Vec<u8>, Option<Entry>)>;

/// A master's `min-replicas-to-write N` with `min-replicas-max-lag`: it refuses writes (a
/// script's at its first write call) with `NOREPLICAS` while fewer than `to_write` replicas
/// acknowledged within `max_lag`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MinReplicas {
    /// Good replicas a write needs.
    pub to_write: usize,
    /// How old a replica's last acknowledgement may be, in whole seconds as Redis counts.
    #[serde(with = "crate::engine::duration_text")]
    pub max_lag: Duration,
}

/// Per-node counters for reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct NodeStats {
    /// Commands received from clients.
    pub commands: u64,
    /// Script executions (EVAL/EVALSHA that ran).
    pub scripts: u64,
}

/// A simulated Redis server.
#[derive(Debug)]
pub struct Node {
    /// Index in the world.
    pub id: NodeId,
    /// Human-readable name for traces (`n0`, `n1`...).
    pub name: String,
    /// Whether the process is running.
    pub up: bool,
    /// Master or replica.
    pub role: Role,
    /// Persistence mode.
    pub persistence: Persistence,
    /// The node's wall clock (drives expiry and `TIME`).
    pub clock: ClockModel,
    data: Keyspace,
    durable: Keyspace,
    scripts: ScriptEngine,
    /// Channel -> subscription ids.
    subscribers: BTreeMap<Vec<u8>, BTreeSet<u64>>,
    /// Master: batches produced. Replica: batches applied.
    pub repl_offset: u64,
    /// Master: replica -> offset it acknowledged.
    pub replica_acks: BTreeMap<NodeId, u64>,
    /// Master: `min-replicas-to-write` and `min-replicas-max-lag`, if set.
    pub min_replicas: Option<MinReplicas>,
    /// Master: replicas whose lag is within `min-replicas-max-lag` (the world counts them
    /// before each command, as Redis's `repl_good_slaves_count`).
    pub good_replicas: usize,
    /// Counters.
    pub stats: NodeStats,
    /// While recording coverage: what the node knows for the verdict-relevant states.
    watch: Option<StateWatch>,
}

impl Node {
    /// A running, empty master.
    pub fn new(
        id: NodeId,
        persistence: Persistence,
        clock: ClockModel,
    ) -> Result<Self, mlua::Error> {
        Ok(Self {
            id,
            name: format!("n{id}"),
            up: true,
            role: Role::Master,
            persistence,
            clock,
            data: Keyspace::new(),
            durable: Keyspace::new(),
            scripts: ScriptEngine::new()?,
            subscribers: BTreeMap::new(),
            repl_offset: 0,
            replica_acks: BTreeMap::new(),
            min_replicas: None,
            good_replicas: 0,
            stats: NodeStats::default(),
            watch: None,
        })
    }

    /// The node's Unix time in microseconds at virtual time `t` (ns).
    pub fn wall_us(&self, t: u64) -> i64 {
        wall_us(&self.clock, t)
    }

    /// The live database (for checks and replication).
    pub fn data(&self) -> &Keyspace {
        &self.data
    }

    /// Runs one client command at virtual time `t`.
    pub fn execute(&mut self, args: &[Vec<u8>], t: u64) -> Outcome {
        self.execute_with(args, t, Clocked::Frozen)
    }

    /// Runs one client command at virtual time `t`, a script's later calls on a clock
    /// that moved on to `late` (see [`LateClock`]).
    pub fn execute_late(&mut self, args: &[Vec<u8>], t: u64, late: LateClock) -> Outcome {
        self.execute_with(args, t, Clocked::Late(late))
    }

    /// Runs one client command at virtual time `t`, a script's `k`-th call reading the
    /// clock `k × per_call_ns` after the script's start (Redis before 7.2, see
    /// [`ServerClock::Moving`]).
    pub fn execute_paced(&mut self, args: &[Vec<u8>], t: u64, per_call_ns: u64) -> Outcome {
        self.execute_with(args, t, Clocked::Paced(per_call_ns))
    }

    /// How many `redis.call`s the last script run made.
    pub fn script_calls(&self) -> usize {
        self.scripts.calls()
    }

    fn execute_with(&mut self, args: &[Vec<u8>], t: u64, clocked: Clocked) -> Outcome {
        self.stats.commands += 1;
        let now_us = self.wall_us(t);
        let mut effects = Effects::default();
        let name = args
            .first()
            .map(|a| String::from_utf8_lossy(a).to_ascii_lowercase())
            .unwrap_or_default();
        let refuse_writes = match self.role {
            Role::Replica(_) => Some(super::READONLY_ERROR),
            Role::Master
                if self
                    .min_replicas
                    .is_some_and(|min| self.good_replicas < min.to_write) =>
            {
                Some(super::NOREPLICAS_ERROR)
            }
            Role::Master => None,
        };
        let executed = match name.as_str() {
            "eval" | "evalsha" => {
                let live = match clocked {
                    Clocked::Frozen => LiveClock::Frozen,
                    Clocked::Late(late) => LiveClock::Step {
                        from_call: late.from_call,
                        us: self.wall_us(late.t),
                    },
                    Clocked::Paced(ns) => LiveClock::Paced { ns },
                };
                let clock = ScriptClock { t, now_us, live };
                Executed::Reply(self.eval(&name, args, clock, refuse_writes, &mut effects))
            }
            "script" => Executed::Reply(self.script(args)),
            "wait" => self.wait(args),
            "info" => Executed::Reply(Reply::bulk(self.info())),
            _ => match refuse_writes.filter(|_| commands::is_write(&name)) {
                Some(error) => Executed::Reply(Reply::error(error)),
                None => {
                    let mut ctx = Ctx {
                        ks: &mut self.data,
                        now_us,
                        live_us: now_us,
                        effects: &mut effects,
                        subscribers: &mut self.subscribers,
                        refuse_writes,
                    };
                    Executed::Reply(commands::execute(&mut ctx, args))
                }
            },
        };
        // A lookup that found a key expired deleted it; Redis propagates that deletion to
        // replicas and the AOF as a `DEL`, so it counts as a write of the key.
        effects.dirty.extend(self.data.take_expired());
        if self.persistence == Persistence::AofAlways && !effects.dirty.is_empty() {
            for key in &effects.dirty {
                self.durable.apply_raw(key, self.data.raw(key).cloned());
            }
        }
        Outcome { executed, effects }
    }

    fn eval(
        &mut self,
        name: &str,
        args: &[Vec<u8>],
        ScriptClock { t, now_us, live }: ScriptClock,
        refuse_writes: Option<&'static str>,
        effects: &mut Effects,
    ) -> Reply {
        if args.len() < 3 {
            return commands::wrong_arity(name);
        }
        let Some(numkeys) = commands::parse_int(&args[2]) else {
            return Reply::error("ERR value is not an integer or out of range");
        };
        let rest = &args[3..];
        if numkeys < 0 {
            return Reply::error("ERR Number of keys can't be negative");
        }
        let numkeys = numkeys as usize;
        if numkeys > rest.len() {
            return Reply::error("ERR Number of keys can't be greater than number of args");
        }
        let sha = if name == "eval" {
            match self.scripts.load(&args[1]) {
                Ok(sha) => sha,
                Err(reply) => return reply,
            }
        } else {
            String::from_utf8_lossy(&args[1]).into_owned()
        };
        let call = Call {
            keys: &rest[..numkeys],
            argv: &rest[numkeys..],
            now_ms: now_us.div_euclid(1_000),
        };
        let found = self.watch.as_mut().map(|watch| {
            let behind_peak = self.clock.peak_nanos(t) > self.clock.local_nanos(t);
            watch.before(&sha, &call, &self.data, behind_peak)
        });
        let mut ctx = Ctx {
            ks: &mut self.data,
            now_us,
            live_us: now_us,
            effects,
            subscribers: &mut self.subscribers,
            refuse_writes,
        };
        let reply = self.scripts.run(&sha, call.keys, call.argv, &mut ctx, live);
        if let Some(found) = found {
            let states = state_watch::settle(found, &reply);
            self.scripts.file_states(&sha.to_ascii_lowercase(), &states);
        }
        if !matches!(&reply, Reply::Error(e) if e.starts_with("NOSCRIPT")) {
            self.stats.scripts += 1;
        }
        reply
    }

    fn script(&mut self, args: &[Vec<u8>]) -> Reply {
        let Some(sub) = args.get(1) else {
            return commands::wrong_arity("script");
        };
        match String::from_utf8_lossy(sub).to_ascii_lowercase().as_str() {
            "load" if args.len() == 3 => match self.scripts.load(&args[2]) {
                Ok(sha) => Reply::bulk(sha),
                Err(reply) => reply,
            },
            "exists" if args.len() >= 3 => Reply::Array(
                args[2..]
                    .iter()
                    .map(|sha| {
                        Reply::Int(i64::from(
                            self.scripts.exists(&String::from_utf8_lossy(sha)),
                        ))
                    })
                    .collect(),
            ),
            "flush" if args.len() <= 3 => {
                self.scripts.flush();
                Reply::ok()
            }
            "load" | "exists" | "flush" => commands::wrong_arity(&format!(
                "script|{}",
                String::from_utf8_lossy(sub).to_ascii_lowercase()
            )),
            other => Reply::error(format!(
                "ERR unknown subcommand '{other}'. Try SCRIPT HELP."
            )),
        }
    }

    fn wait(&self, args: &[Vec<u8>]) -> Executed {
        if args.len() != 3 {
            return Executed::Reply(commands::wrong_arity("wait"));
        }
        if matches!(self.role, Role::Replica(_)) {
            return Executed::Reply(Reply::error(
                "ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated.",
            ));
        }
        let (Some(numreplicas), Some(timeout_ms)) =
            (commands::parse_int(&args[1]), commands::parse_int(&args[2]))
        else {
            return Executed::Reply(Reply::error("ERR value is not an integer or out of range"));
        };
        if timeout_ms < 0 {
            return Executed::Reply(Reply::error("ERR timeout is negative"));
        }
        Executed::Wait {
            numreplicas,
            timeout_ms,
        }
    }

    /// Replicas that have acknowledged at least `offset`.
    pub fn acked_replicas(&self, offset: u64) -> i64 {
        self.replica_acks.values().filter(|&&o| o >= offset).count() as i64
    }

    fn info(&self) -> String {
        let role = match self.role {
            Role::Master => format!(
                "role:master\r\nconnected_slaves:{}\r\nmaster_repl_offset:{}\r\n",
                self.replica_acks.len(),
                self.repl_offset
            ),
            Role::Replica(master) => format!(
                "role:slave\r\nmaster_host:n{master}\r\nslave_repl_offset:{}\r\n",
                self.repl_offset
            ),
        };
        format!(
            "# Server\r\nredis_version:7.0.15-leasehold-sim\r\n\r\n# Replication\r\n{role}\r\n# Stats\r\ntotal_commands_processed:{}\r\n",
            self.stats.commands
        )
    }

    /// The effect batch for `dirty` keys as they are now (what a master ships).
    pub fn effect_batch(&self, dirty: &BTreeSet<Vec<u8>>) -> EffectBatch {
        dirty
            .iter()
            .map(|key| (key.clone(), self.data.raw(key).cloned()))
            .collect()
    }

    /// Applies a master's batch (replica side) and records the new offset.
    pub fn apply_batch(&mut self, batch: &EffectBatch, offset: u64) {
        for (key, entry) in batch {
            self.data.apply_raw(key, entry.clone());
            if self.persistence == Persistence::AofAlways {
                self.durable.apply_raw(key, entry.clone());
            }
        }
        self.repl_offset = offset;
    }

    /// Replaces the whole dataset with the master's (a full resynchronisation).
    pub fn full_sync(&mut self, data: Keyspace, offset: u64) {
        if self.persistence != Persistence::None {
            self.durable = data.clone();
        }
        self.data = data;
        self.repl_offset = offset;
    }

    /// The once-per-second AOF fsync of `appendfsync everysec`.
    pub fn fsync_tick(&mut self) {
        if self.persistence == Persistence::AofEverySec {
            self.durable = self.data.clone();
        }
    }

    /// Records which script lines and call sites run on this node from now on.
    pub fn record_coverage(&mut self) -> Result<(), mlua::Error> {
        self.watch = Some(StateWatch::default());
        self.scripts.record_coverage()
    }

    /// The script lines and call sites run here while recording.
    pub fn coverage(&self) -> crate::model::coverage::Coverage {
        self.scripts.coverage()
    }

    /// Crashes the process: it stops answering until [`Node::restart`].
    pub fn crash(&mut self) {
        self.up = false;
    }

    /// Starts the process again with what its persistence kept; scripts and
    /// subscriptions are gone.
    pub fn restart(&mut self) {
        self.data = match self.persistence {
            Persistence::None => Keyspace::new(),
            Persistence::AofEverySec | Persistence::AofAlways => self.durable.clone(),
        };
        self.scripts.flush();
        self.subscribers.clear();
        if let Some(watch) = &mut self.watch {
            watch.restarted();
        }
        self.replica_acks.clear();
        self.repl_offset = 0;
        self.up = true;
    }

    /// Memory runs out under `maxmemory` with `policy` at virtual time `t`: evicts up to
    /// `count` live keys with a TTL (`pick(n)` chooses among `n` for a random policy) and
    /// returns them, to replicate as deletions. A replica evicts nothing (Redis's default
    /// `replica-ignore-maxmemory`: it deletes what its master's `DEL`s say), nor does a
    /// node that is down.
    pub fn evict(
        &mut self,
        policy: EvictionPolicy,
        count: u32,
        t: u64,
        pick: impl FnMut(usize) -> usize,
    ) -> BTreeSet<Vec<u8>> {
        if !self.up || self.role != Role::Master {
            return BTreeSet::new();
        }
        let now_ms = self.wall_us(t).div_euclid(1_000);
        let evicted = eviction::victims(&self.data, policy, count, now_ms, pick);
        for key in &evicted {
            self.data.apply_raw(key, None);
            if self.persistence == Persistence::AofAlways {
                self.durable.apply_raw(key, None);
            }
        }
        if let Some(watch) = self.watch.as_mut().filter(|_| !evicted.is_empty()) {
            watch.evicted(now_ms);
        }
        evicted.into_iter().collect()
    }

    /// `SCRIPT FLUSH` issued by an operator (a fault).
    pub fn flush_scripts(&mut self) {
        self.scripts.flush();
    }

    /// Registers subscription `sub` on `channel`.
    pub fn subscribe(&mut self, channel: &[u8], sub: u64) {
        self.subscribers
            .entry(channel.to_vec())
            .or_default()
            .insert(sub);
    }

    /// Removes subscription `sub` from `channel` (or from every channel when `None`).
    pub fn unsubscribe(&mut self, channel: Option<&[u8]>, sub: u64) {
        match channel {
            Some(channel) => {
                if let Some(set) = self.subscribers.get_mut(channel) {
                    set.remove(&sub);
                    if set.is_empty() {
                        self.subscribers.remove(channel);
                    }
                }
            }
            None => {
                for set in self.subscribers.values_mut() {
                    set.remove(&sub);
                }
                self.subscribers.retain(|_, set| !set.is_empty());
            }
        }
    }

    /// Subscriptions that receive a message published on `channel`.
    pub fn subscribers_of(&self, channel: &[u8]) -> Vec<u64> {
        self.subscribers
            .get(channel)
            .map(|set| set.iter().copied().collect())
            .unwrap_or_default()
    }
}
