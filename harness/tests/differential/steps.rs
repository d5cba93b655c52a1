//! The steps of a case (script calls, plain commands, expiries, pauses) and the proptest
//! strategy that generates them.

use std::time::Duration;

use leasehold::script::scripts;
use proptest::prelude::*;

use crate::calls::{
    Entry, NAMES, SHORT_HOLD, ScriptCall, TTLS_MS, all_keys, channels, hold, keys_of, owner,
};

/// Expiry exercised on purpose: the key expires after this, and the step then waits until
/// it has expired on both sides (see `main.rs`).
pub const SHORT_TTL: Duration = Duration::from_millis(20);

/// Chunks (a random step or a contended round) per case: about 20 steps on average.
const MAX_CHUNKS: usize = 12;

const VALUES: [&str; 4] = ["1", "7", "x", "1700000000000"];

/// One step of a case.
#[derive(Debug, Clone)]
pub enum Step {
    Script(ScriptCall),
    /// A plain command (arguments after the key are filled in from the pools).
    Plain(&'static str, usize, u8, u8),
    /// Sets a short expiry on a key (SET PX / PEXPIRE), then waits past it.
    ExpireSoon(usize, bool),
    /// Lets real time pass (the model follows).
    Sleep(u64),
    /// SCRIPT FLUSH.
    ScriptFlush,
    /// Waits until this many ms (−2 to +2) from the deadline the previous step set (a
    /// short hold or entry), instead of past it: the next step runs at the deadline, and
    /// the model is judged at every ms the server may have run it at (`near.rs`).
    Approach(i8),
}

pub const PLAIN: [&str; 26] = [
    "GET", "MGET", "SET", "SETPX", "DEL", "EXISTS", "TYPE", "PTTL", "TTL", "INCR", "HSET", "HGET",
    "HGETALL", "HDEL", "HINCRBY", "ZADD", "ZRANGE", "ZREM", "ZSCORE", "LPUSH", "RPUSH", "LRANGE",
    "LPOP", "PEXPIRE", "PERSIST", "PUBLISH",
];

/// The command of a plain step: `verb` on `key`, its other arguments drawn from the pools
/// by `a` and `b` (TTLs are minutes: nothing it sets expires within a case).
pub fn plain(verb: &'static str, key: &str, a: u8, b: u8) -> redis::Cmd {
    let value = VALUES[usize::from(a) % VALUES.len()];
    // Fields and members include the scripts' own (owners, '#'+hold ids).
    let field = match b % 3 {
        0 => owner(a % 4),
        1 => format!("#{}", hold(a % 4, b % 2)),
        _ => hold(a % 4, b % 2),
    };
    let mut c = redis::cmd(if verb == "SETPX" { "SET" } else { verb });
    match verb {
        "SETPX" => c
            .arg(key)
            .arg(value)
            .arg("PX")
            .arg(TTLS_MS[usize::from(b) % TTLS_MS.len()]),
        "SET" | "LPUSH" | "RPUSH" => c.arg(key).arg(value),
        "HSET" => c.arg(key).arg(field).arg(value),
        "HINCRBY" => c.arg(key).arg(field).arg("2"),
        "HGET" | "HDEL" | "ZREM" | "ZSCORE" => c.arg(key).arg(field),
        "ZADD" => c.arg(key).arg(value.parse::<i64>().unwrap_or(3)).arg(field),
        "ZRANGE" => c.arg(key).arg(0).arg(-1).arg("WITHSCORES"),
        "LRANGE" => c.arg(key).arg(0).arg(-1),
        "PEXPIRE" => c.arg(key).arg(TTLS_MS[usize::from(b) % TTLS_MS.len()]),
        // On a subscribed channel (the reply counts the test's subscriber) or on a key's
        // name, which nobody subscribes to.
        "PUBLISH" => {
            let channels = channels();
            let channel = match usize::from(b) % (channels.len() + 1) {
                i if i < channels.len() => channels[i].clone(),
                _ => key.to_owned(),
            };
            c.arg(channel).arg(value)
        }
        _ => c.arg(key),
    };
    c
}

impl Step {
    pub fn command(&self) -> Option<redis::Cmd> {
        let keys = all_keys();
        match self {
            Step::Script(call) => Some(call.command()),
            Step::Plain(verb, key, a, b) => Some(plain(verb, &keys[*key % keys.len()], *a, *b)),
            Step::ExpireSoon(key, with_set) => {
                let key = &keys[*key % keys.len()];
                let ms = SHORT_TTL.as_millis().to_string();
                let mut c;
                if *with_set {
                    c = redis::cmd("SET");
                    c.arg(key).arg("soon").arg("PX").arg(ms);
                } else {
                    c = redis::cmd("PEXPIRE");
                    c.arg(key).arg(ms);
                }
                Some(c)
            }
            Step::ScriptFlush => Some(redis::cmd("SCRIPT").arg("FLUSH").clone()),
            Step::Sleep(_) | Step::Approach(_) => None,
        }
    }

    /// Whether the step leaves something due to expire shortly: the test then waits until
    /// it has expired on both sides before the next step.
    pub fn expires_soon(&self) -> bool {
        match self {
            Step::Script(call) => call.expires_briefly(),
            Step::ExpireSoon(..) => true,
            _ => false,
        }
    }
}

fn entry_strategy() -> impl Strategy<Value = Entry> {
    prop_oneof![
        2 => Just(Entry::Never),
        2 => Just(Entry::Long),
        1 => Just(Entry::Short),
    ]
}

/// Script indices, each repeated by its weight: the scripts that queue, hand off and drop
/// expired entries come up more often, so cases build lines of waiters.
pub fn weighted_scripts() -> Vec<usize> {
    let weight = |name: &str| match name {
        "acquire" | "semaphore_acquire" => 4,
        "release" | "semaphore_release" => 3,
        "rw_read_acquire" | "rw_write_acquire" | "rw_read_release" | "rw_write_release" => 2,
        _ => 1,
    };
    scripts()
        .all()
        .iter()
        .enumerate()
        .flat_map(|(i, script)| std::iter::repeat_n(i, weight(script.name())))
        .collect()
}

fn step_strategy() -> impl Strategy<Value = Step> {
    let script = (
        prop::sample::select(weighted_scripts()),
        0..NAMES.len(),
        0u8..4,
        0u8..2,
        0..TTLS_MS.len(),
        entry_strategy(),
        1u8..3,
        prop::bool::weighted(0.2),
    )
        .prop_map(|(script, name, owner, hold, ttl, entry, permits, by_sha)| {
            Step::Script(ScriptCall {
                script,
                name,
                owner,
                hold,
                ttl,
                entry,
                permits,
                by_sha,
            })
        });
    let keys = all_keys().len();
    prop_oneof![
        6 => script,
        4 => (prop::sample::select(PLAIN.to_vec()), 0..keys, any::<u8>(), any::<u8>())
            .prop_map(|(v, k, a, b)| Step::Plain(v, k, a, b)),
        1 => (0..keys, any::<bool>()).prop_map(|(k, s)| Step::ExpireSoon(k, s)),
        1 => (0u64..30).prop_map(Step::Sleep),
        1 => Just(Step::ScriptFlush),
    ]
}

/// A contended round on one lock (mutex or semaphore): a holder, a line of waiters with
/// long or short entries (a long entry may be shortened by its retry, so it expires while
/// its queue lives on), then the holder releases, or its lease ends and a newcomer
/// acquires, and the waiters retry. Rounds build the lines whose expired entries the
/// scripts must drop; random steps alone rarely do.
fn round_strategy() -> impl Strategy<Value = Vec<Step>> {
    let waiter = (
        0u8..4,
        prop_oneof![2 => Just(Entry::Long), 1 => Just(Entry::Short)],
    );
    (
        any::<bool>(),
        0..NAMES.len(),
        0u8..4,
        prop::collection::vec(waiter, 1..=3),
        prop::option::of(0usize..3),
        any::<bool>(),
    )
        .prop_map(|(semaphore, name, holder, waiters, shorten, lapse)| {
            let (acquire, release, lock_key) = if semaphore {
                ("semaphore_acquire", "semaphore_release", 9)
            } else {
                ("acquire", "release", 0)
            };
            let call =
                |script, owner, entry| Step::Script(ScriptCall::new(script, name, owner, entry));
            let mut steps = vec![call(acquire, holder, Entry::Never)];
            steps.extend(
                waiters
                    .iter()
                    .map(|&(owner, entry)| call(acquire, owner, entry)),
            );
            if let Some(i) = shorten {
                steps.push(call(acquire, waiters[i % waiters.len()].0, Entry::Short));
            }
            if lapse {
                steps.push(Step::ExpireSoon(
                    name * keys_of(NAMES[name]).len() + lock_key,
                    false,
                ));
                steps.push(call(acquire, holder.wrapping_add(1) % 4, Entry::Never));
            } else {
                steps.push(call(release, holder, Entry::Never));
            }
            steps.extend(
                waiters
                    .iter()
                    .map(|&(owner, _)| call(acquire, owner, Entry::Long)),
            );
            steps
        })
}

/// The scripts of one family: acquire, renew, probe, release, and the rival's acquire (a
/// writer's, against the read-write lock's readers).
fn family_scripts(family: usize) -> [&'static str; 5] {
    match family {
        0 => ["acquire", "renew", "probe", "release", "acquire"],
        1 => [
            "rw_read_acquire",
            "rw_read_renew",
            "rw_read_probe",
            "rw_read_release",
            "rw_write_acquire",
        ],
        _ => [
            "semaphore_acquire",
            "semaphore_renew",
            "semaphore_probe",
            "semaphore_release",
            "semaphore_acquire",
        ],
    }
}

/// A deadline-adjacent chunk on one lock of a family (mutex, read-write lock, semaphore):
/// something set to lapse in 20 ms, then [`Step::Approach`] and one step aimed at that
/// deadline. What lapses is either the owner's hold (a short TTL, beside a long hold of
/// the same owner when `re_entry`, so only the per-hold deadline passes while the key
/// lives on), or a rival's queue entry or writer intent (a short entry timeout behind the
/// owner's long hold). The aimed step is the rival's acquire or retry, the owner's renew,
/// probe or release, or a `PTTL` of the lock's key.
fn deadline_strategy() -> impl Strategy<Value = Vec<Step>> {
    (
        0usize..3,
        0..NAMES.len(),
        (0u8..4, 1u8..4),
        (any::<bool>(), any::<bool>()),
        -2i8..=2,
        0usize..6,
    )
        .prop_map(
            |(family, name, (owner, rival), (entry_lapses, re_entry), offset, aimed)| {
                let rival = (owner + rival) % 4;
                let [acquire, renew, probe, release, rival_acquire] = family_scripts(family);
                let call = |script, owner, hold, ttl, entry| {
                    let mut call = ScriptCall::new(script, name, owner, entry);
                    call.hold = hold;
                    call.ttl = ttl;
                    Step::Script(call)
                };
                let mut steps = Vec::new();
                if entry_lapses {
                    steps.push(call(acquire, owner, 0, 0, Entry::Never));
                    steps.push(call(rival_acquire, rival, 0, 0, Entry::Short));
                } else {
                    if re_entry {
                        steps.push(call(acquire, owner, 1, 0, Entry::Never));
                    }
                    steps.push(call(acquire, owner, 0, SHORT_HOLD, Entry::Never));
                }
                steps.push(Step::Approach(offset));
                let lock_key = name * keys_of(NAMES[name]).len() + [0, 4, 9][family];
                steps.push(match aimed {
                    0 => call(rival_acquire, rival, 0, 0, Entry::Never),
                    1 => call(renew, owner, 0, 0, Entry::Never),
                    2 => call(probe, owner, 0, 0, Entry::Never),
                    3 => call(release, owner, 0, 0, Entry::Never),
                    4 => Step::Plain("PTTL", lock_key, 0, 0),
                    _ => call(rival_acquire, rival, 0, 0, Entry::Long),
                });
                steps
            },
        )
}

/// A case: random steps, contended rounds and deadline-adjacent chunks.
pub fn case_strategy() -> impl Strategy<Value = Vec<Step>> {
    let chunk = prop_oneof![
        4 => step_strategy().prop_map(|step| vec![step]),
        1 => round_strategy(),
        1 => deadline_strategy(),
    ];
    prop::collection::vec(chunk, 1..=MAX_CHUNKS).prop_map(|chunks| chunks.concat())
}
