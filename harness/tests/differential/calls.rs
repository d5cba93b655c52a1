//! The lock scripts' calls as the lock crate makes them: keys, hold ids, owners, and one
//! argument builder per script.
//!
//! The argument lists live in one function per script (`acquire_args`, `release_args`,
//! ...), so a change of a script's ARGV is a change of one small function here.

use std::time::Duration;

use leasehold::script::scripts;

/// Fence margin the client passes (`DEFAULT_FENCE_MARGIN`, 60 s).
const FENCE_MARGIN_MS: &str = "60000";
/// Longest poll interval a waiting writer is told (the rwlock's default, 1 s).
const WRITER_POLL_MS: &str = "1000";
/// The client's inbox channel prefix (`notify.rs`): hand-offs go to `prefix..client id`.
pub const INBOX: &str = "leasehold:inbox:";
pub const CLIENTS: [&str; 2] = [
    "0123456789abcdef0123456789abcdef",
    "fedcba9876543210fedcba9876543210",
];
pub const NAMES: [&str; 2] = ["a", "b"];
/// Hold TTLs that outlive any case.
pub const TTLS_MS: [&str; 3] = ["60000", "120000", "300000"];
/// The TTL index of a hold meant to lapse, [`SHORT_ENTRY`] long: only a deadline-adjacent
/// chunk (`steps::deadline_strategy`) passes it.
pub const SHORT_HOLD: usize = TTLS_MS.len();
/// A queue entry (or writer intent) that outlives any case.
const LONG_ENTRY_MS: &str = "60000";
/// A queue entry (or writer intent) meant to expire: the step that makes one waits until
/// it has expired on both sides (see `main.rs`), so no later step runs near its deadline.
pub const SHORT_ENTRY: Duration = Duration::from_millis(20);

/// Keys of one lock name across the three families (see the scripts' headers).
pub fn keys_of(name: &str) -> Vec<String> {
    let m = format!("leasehold:{{{name}}}");
    let rw = format!("{m}:rw");
    let sem = format!("{m}:sem");
    vec![
        m.clone(),
        format!("{m}:fence"),
        format!("{m}:queue"),
        format!("{m}:waiters"),
        rw.clone(),
        format!("{rw}:fence"),
        format!("{rw}:readers"),
        format!("{rw}:owners"),
        format!("{rw}:intents"),
        sem.clone(),
        format!("{sem}:queue"),
        format!("{sem}:waiters"),
        format!("{sem}:size"),
        format!("{rw}:queue"),
        format!("{rw}:waiters"),
    ]
}

/// Every key a step may touch.
pub fn all_keys() -> Vec<String> {
    let mut keys: Vec<String> = NAMES.iter().flat_map(|n| keys_of(n)).collect();
    keys.push("plain".to_owned());
    keys
}

/// The channels the scripts publish on: each family's `released` channel per name, and
/// each client's inbox.
pub fn channels() -> Vec<String> {
    let mut channels: Vec<String> = NAMES
        .iter()
        .flat_map(|name| {
            let k = keys_of(name);
            [&k[0], &k[4], &k[9]].map(|key| format!("{key}:released"))
        })
        .collect();
    channels.extend(CLIENTS.iter().map(|client| format!("{INBOX}{client}")));
    channels
}

pub fn owner(o: u8) -> String {
    format!("{}:{}", CLIENTS[usize::from(o % 2)], o / 2)
}

pub fn hold(o: u8, h: u8) -> String {
    format!("{:016x}:{}", u64::from(h) + 1, owner(o))
}

/// How a queueing call waits: never, for longer than any case, or briefly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    Never,
    Long,
    Short,
}

impl Entry {
    fn arg(self) -> String {
        match self {
            Entry::Never => "0".to_owned(),
            Entry::Long => LONG_ENTRY_MS.to_owned(),
            Entry::Short => SHORT_ENTRY.as_millis().to_string(),
        }
    }
}

/// One generated script call: which script, on which name, as whom, with what numbers.
#[derive(Debug, Clone)]
pub struct ScriptCall {
    pub script: usize,
    pub name: usize,
    pub owner: u8,
    pub hold: u8,
    pub ttl: usize,
    pub entry: Entry,
    pub permits: u8,
    pub by_sha: bool,
}

/// What one call passes: its keys and its arguments.
type Args = (Vec<String>, Vec<String>);

/// The values a call's arguments are drawn from.
struct Parts {
    k: Vec<String>,
    hold: String,
    owner: String,
    ttl: String,
    entry: String,
    permits: String,
    /// A read-write call waits in the fair line (its entry `entry`), not by a writer's
    /// intent: the client passes one or the other.
    fair: bool,
}

fn keys(parts: &Parts, indices: &[usize]) -> Vec<String> {
    indices.iter().map(|&i| parts.k[i].clone()).collect()
}

fn released(parts: &Parts, family: usize) -> String {
    format!("{}:released", parts.k[family])
}

fn owned(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

fn acquire_args(p: &Parts) -> Args {
    // ARGV[6]: the attempt number a hand-off names; ARGV[7]: '1', so a busy lock is
    // flagged for the released message and its release publishes it.
    let argv: &[&str] = &[
        &p.hold,
        &p.owner,
        &p.ttl,
        &p.entry,
        FENCE_MARGIN_MS,
        "7",
        "1",
    ];
    (keys(p, &[0, 1, 2, 3]), owned(argv))
}

fn release_args(p: &Parts) -> Args {
    let argv: &[&str] = &[&p.hold, &p.owner, &released(p, 0), INBOX, FENCE_MARGIN_MS];
    (keys(p, &[0, 2, 3, 1]), owned(argv))
}

fn renew_args(p: &Parts) -> Args {
    (keys(p, &[0, 1]), owned(&[&p.hold, &p.ttl, FENCE_MARGIN_MS]))
}

fn probe_args(p: &Parts) -> Args {
    (keys(p, &[0, 1]), owned(&[&p.hold]))
}

/// The fair line's entry (`0`: not in the line) and a writer's intent, by `p.fair`.
fn line_and_intent(p: &Parts) -> (&str, &str) {
    if p.fair {
        (&p.entry, "0")
    } else {
        ("0", &p.entry)
    }
}

fn rw_read_acquire_args(p: &Parts) -> Args {
    let (line, _) = line_and_intent(p);
    (
        keys(p, &[4, 6, 7, 8, 5, 13, 14]),
        owned(&[&p.hold, &p.owner, &p.ttl, FENCE_MARGIN_MS, line, "7"]),
    )
}

fn rw_read_release_args(p: &Parts) -> Args {
    let argv: &[&str] = &[&p.hold, &p.owner, &released(p, 4), FENCE_MARGIN_MS, INBOX];
    (keys(p, &[6, 7, 4, 5, 13, 14]), owned(argv))
}

fn rw_read_renew_args(p: &Parts) -> Args {
    (
        keys(p, &[6, 7, 5]),
        owned(&[&p.hold, &p.ttl, FENCE_MARGIN_MS]),
    )
}

fn rw_read_probe_args(p: &Parts) -> Args {
    (keys(p, &[6, 5]), owned(&[&p.hold]))
}

fn rw_write_acquire_args(p: &Parts) -> Args {
    let (line, intent) = line_and_intent(p);
    let argv: &[&str] = &[
        &p.hold,
        &p.owner,
        &p.ttl,
        intent,
        FENCE_MARGIN_MS,
        WRITER_POLL_MS,
        line,
        "7",
    ];
    (keys(p, &[4, 6, 7, 8, 5, 13, 14]), owned(argv))
}

fn rw_write_release_args(p: &Parts) -> Args {
    let argv: &[&str] = &[&p.hold, &p.owner, &released(p, 4), FENCE_MARGIN_MS, INBOX];
    (keys(p, &[4, 8, 5, 6, 7, 13, 14]), owned(argv))
}

fn semaphore_acquire_args(p: &Parts) -> Args {
    let argv: &[&str] = &[&p.hold, &p.permits, &p.ttl, &p.entry, INBOX];
    (keys(p, &[9, 10, 11, 12]), owned(argv))
}

fn semaphore_release_args(p: &Parts) -> Args {
    let argv: &[&str] = &[&p.hold, &p.permits, &released(p, 9), INBOX];
    (keys(p, &[9, 10, 11, 12]), owned(argv))
}

fn semaphore_renew_args(p: &Parts) -> Args {
    (keys(p, &[9, 12]), owned(&[&p.hold, &p.ttl]))
}

fn semaphore_probe_args(p: &Parts) -> Args {
    (keys(p, &[9]), owned(&[&p.hold]))
}

impl ScriptCall {
    /// A call of `script` on name `name` by `owner` (hold 0, the shortest TTL, one permit,
    /// by EVAL).
    pub fn new(script: &str, name: usize, owner: u8, entry: Entry) -> Self {
        let index = scripts()
            .all()
            .iter()
            .position(|s| s.name() == script)
            .unwrap();
        Self {
            script: index,
            name,
            owner,
            hold: 0,
            ttl: 0,
            entry,
            permits: 1,
            by_sha: false,
        }
    }

    /// The script's name (its file name in `lock/scripts/`).
    pub fn script_name(&self) -> &'static str {
        scripts().all()[self.script].name()
    }

    /// Whether the call may leave a queue entry (or writer intent) or a hold due to
    /// expire shortly.
    pub fn expires_briefly(&self) -> bool {
        let queues = self.entry == Entry::Short
            && matches!(
                self.script_name(),
                "acquire" | "rw_read_acquire" | "rw_write_acquire" | "semaphore_acquire"
            );
        queues || self.ttl == SHORT_HOLD
    }

    /// The hold id this call passes.
    pub fn hold_id(&self) -> String {
        hold(self.owner, self.hold)
    }

    /// The EVAL/EVALSHA command, built as the lock crate builds it.
    pub fn command(&self) -> redis::Cmd {
        let script = scripts().all()[self.script];
        let parts = Parts {
            k: keys_of(NAMES[self.name]),
            hold: self.hold_id(),
            owner: owner(self.owner),
            ttl: TTLS_MS.get(self.ttl).map_or_else(
                || SHORT_ENTRY.as_millis().to_string(),
                |ttl| (*ttl).to_owned(),
            ),
            entry: self.entry.arg(),
            permits: self.permits.to_string(),
            fair: self.hold.is_multiple_of(2),
        };
        let (keys, args) = match script.name() {
            "acquire" => acquire_args(&parts),
            "release" => release_args(&parts),
            "renew" => renew_args(&parts),
            "probe" => probe_args(&parts),
            "rw_read_acquire" => rw_read_acquire_args(&parts),
            "rw_read_release" => rw_read_release_args(&parts),
            "rw_read_renew" => rw_read_renew_args(&parts),
            "rw_read_probe" => rw_read_probe_args(&parts),
            "rw_write_acquire" => rw_write_acquire_args(&parts),
            "rw_write_release" => rw_write_release_args(&parts),
            "semaphore_acquire" => semaphore_acquire_args(&parts),
            "semaphore_release" => semaphore_release_args(&parts),
            "semaphore_renew" => semaphore_renew_args(&parts),
            "semaphore_probe" => semaphore_probe_args(&parts),
            other => panic!("no argument builder for script {other}"),
        };
        let mut cmd = if self.by_sha {
            let mut c = redis::cmd("EVALSHA");
            c.arg(script.sha());
            c
        } else {
            let mut c = redis::cmd("EVAL");
            c.arg(script.source());
            c
        };
        cmd.arg(keys.len()).arg(keys).arg(args);
        cmd
    }
}
