//! Observes, when a lock script runs on a node, which verdict-relevant states
//! ([`VerdictState`]) it runs in: read from the keys the script is given, its arguments, its
//! reply and a few facts about the node (its clock behind its peak, a recent restart or
//! eviction).
//!
//! Invariant: observing only reads. Nothing here writes the keyspace (it reads entries
//! raw, without the lazy expiry a lookup performs), draws randomness or changes a reply, so
//! a run's trace and verdict are the same with the watch on or off.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use super::keyspace::{Data, Keyspace};
use crate::model::resp::Reply;
use crate::model::verdict_states::{Needs, VerdictState};

/// What the node knows about itself that the scripts' keys do not show.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeFacts {
    /// The node's clock reads behind the highest time it has shown (a backward step).
    pub behind_peak: bool,
    /// Node ms of the first script run after the node's last restart.
    pub restart_ms: Option<i64>,
    /// Node ms of the node's last eviction.
    pub eviction_ms: Option<i64>,
}

/// A node's record of the facts, kept only while coverage is recorded.
#[derive(Debug, Clone, Default)]
pub struct StateWatch {
    restarted: bool,
    facts: NodeFacts,
}

impl StateWatch {
    /// The node restarted: the next script run dates it.
    pub fn restarted(&mut self) {
        self.restarted = true;
    }

    /// The node evicted keys at node time `now_ms`.
    pub fn evicted(&mut self, now_ms: i64) {
        self.facts.eviction_ms = Some(now_ms);
    }

    /// The states script `sha` is about to run in at node time `now_ms` on `ks`; the
    /// reply later settles them ([`settle`]). Empty for a script that is not a lock
    /// script.
    pub fn before(
        &mut self,
        sha: &str,
        call: &Call<'_>,
        ks: &Keyspace,
        behind_peak: bool,
    ) -> Vec<VerdictState> {
        if std::mem::take(&mut self.restarted) {
            self.facts.restart_ms = Some(call.now_ms);
        }
        self.facts.behind_peak = behind_peak;
        let Some(script) = script_named(sha) else {
            return Vec::new();
        };
        found(script, call, ks, &self.facts)
    }
}

/// One script call: its keys, arguments and the node's time.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    /// `KEYS`.
    pub keys: &'a [Vec<u8>],
    /// `ARGV`.
    pub argv: &'a [Vec<u8>],
    /// The node's Unix time in ms, as the script's `TIME` reads it.
    pub now_ms: i64,
}

impl Call<'_> {
    fn key(&self, i: usize) -> &[u8] {
        self.keys.get(i).map_or(&[], Vec::as_slice)
    }

    fn arg(&self, i: usize) -> &[u8] {
        self.argv.get(i).map_or(&[], Vec::as_slice)
    }

    fn int_arg(&self, i: usize) -> i64 {
        int(self.arg(i)).unwrap_or(0)
    }
}

/// The lock script whose SHA is `sha` (its file stem), if any.
fn script_named(sha: &str) -> Option<&'static str> {
    static NAMES: OnceLock<BTreeMap<String, &'static str>> = OnceLock::new();
    NAMES
        .get_or_init(|| {
            leasehold::script::scripts()
                .all()
                .into_iter()
                .map(|s| (s.sha().to_owned(), s.name()))
                .collect()
        })
        .get(&sha.to_ascii_lowercase())
        .copied()
}

/// Keeps the states whose reply condition `reply` meets.
pub fn settle(found: Vec<VerdictState>, reply: &Reply) -> Vec<VerdictState> {
    let head = match reply {
        Reply::Array(items) => items.first().and_then(|first| match first {
            Reply::Int(n) => Some((*n, items.len())),
            _ => None,
        }),
        _ => None,
    };
    found
        .into_iter()
        .filter(|state| match state.needs() {
            Needs::Ran => true,
            Needs::Granted => matches!(head, Some((1, _))),
            Needs::QueueFlagged => matches!(head, Some((0, 3))),
            Needs::UpgradeRefused => matches!(head, Some((2, _))),
        })
        .collect()
}

/// The states `script` (a file stem) finds before it runs.
pub fn found(script: &str, call: &Call<'_>, ks: &Keyspace, facts: &NodeFacts) -> Vec<VerdictState> {
    use VerdictState as S;
    let now = call.now_ms;
    let mut states = Vec::new();
    let mut when = |cond: bool, state: VerdictState| {
        if cond {
            states.push(state);
        }
    };
    if matches!(
        script,
        "acquire" | "rw_read_acquire" | "rw_write_acquire" | "semaphore_acquire"
    ) {
        let ttl = call.int_arg(2);
        let within = |at: Option<i64>| at.is_some_and(|at| (0..=ttl).contains(&(now - at)));
        when(facts.behind_peak, S::GrantBehindClockPeak);
        when(within(facts.restart_ms), S::GrantAfterRestart);
        when(within(facts.eviction_ms), S::GrantAfterEviction);
    }
    match script {
        "acquire" => {
            let lock = Holds::of(ks, call.key(0), now);
            let (hold, owner) = (call.arg(0), call.arg(1));
            let own = lock.deadline(hold);
            when(
                lock.lapsed_sibling(hold, owner, now),
                S::GrantOverLapsedSibling,
            );
            let live = lock.live_siblings(hold, owner, now);
            when(own.is_none() && live >= 1, S::Reentry);
            when(own.is_none() && live >= 2, S::DeepReentry);
            when(own.is_some_and(|d| d > now), S::ClaimOfGrantedHold);
            when(
                lock.present && live_entry(ks, call.key(1), now).is_none(),
                S::FenceLostUnderHold,
            );
            let head = queue_head(ks, call.key(2), call.key(3), now);
            when(
                !lock.present && head.is_some_and(|(deadline, _)| deadline <= now),
                S::FreeLockPastExpiredHead,
            );
            let queued = match live_entry(ks, call.key(2), now) {
                Some(Data::List(items)) => items.iter().any(|h| h == hold),
                _ => false,
            };
            let entry = hash_field(ks, call.key(3), hold, now).is_some();
            when(
                call.int_arg(3) > 0 && queued != entry,
                S::WaiterEntryHalfGone,
            );
            when(call.int_arg(3) == 0, S::PlainAttemptMeetsQueue);
        }
        "release" => {
            let lock = Holds::of(ks, call.key(0), now);
            let (hold, owner) = (call.arg(0), call.arg(1));
            let own = lock.deadline(hold);
            when(own.is_some_and(|d| d <= now), S::ReleaseOfLapsedHold);
            when(
                own.is_some() && lock.lapsed_sibling(hold, owner, now),
                S::ReleaseWithDeadSibling,
            );
            let frees = own.is_some() && lock.queued && lock.live_siblings(hold, owner, now) == 0;
            let head = queue_head(ks, call.key(1), call.key(2), now).filter(|_| frees);
            when(
                head.is_some_and(|(deadline, _)| deadline <= now),
                S::HandOffPastExpiredHead,
            );
            when(
                head.is_some_and(|(deadline, ttl)| deadline > now && deadline - now < ttl),
                S::HandOffLeaseCut,
            );
        }
        "rw_write_release" => {
            let write = Holds::of(ks, call.key(0), now);
            let (hold, owner) = (call.arg(0), call.arg(1));
            when(
                write.deadline(hold).is_some() && write.lapsed_sibling(hold, owner, now),
                S::ReleaseWithDeadSibling,
            );
        }
        "renew" => {
            let lock = Holds::of(ks, call.key(0), now);
            when(
                lock.deadline(call.arg(0)).is_some_and(|d| d <= now),
                S::RenewOfLapsedHold,
            );
        }
        "rw_read_acquire" => {
            let intents = scores(ks, call.key(3), now);
            when(
                intents.iter().any(|(s, _)| *s > now),
                S::ReaderPastWriterIntent,
            );
        }
        "rw_write_acquire" => {
            let write = Holds::of(ks, call.key(0), now);
            when(
                write.lapsed_sibling(call.arg(0), call.arg(1), now),
                S::GrantOverLapsedSibling,
            );
            let readers = scores(ks, call.key(1), now);
            when(
                readers.iter().any(|(s, _)| *s <= now),
                S::WriterOverLapsedReaders,
            );
            when(true, S::UpgradeRefused);
        }
        "semaphore_acquire" => {
            let permits = scores(ks, call.key(0), now);
            let live = permits.iter().filter(|(s, _)| *s > now).count() as i64;
            let size = match live_entry(ks, call.key(3), now) {
                Some(Data::Str(text)) => int(text).unwrap_or(0),
                _ => call.int_arg(1),
            };
            let waiting =
                matches!(live_entry(ks, call.key(1), now), Some(Data::List(q)) if !q.is_empty());
            when(waiting && live < size, S::PermitFreeWithQueue);
            when(permits.iter().any(|(s, _)| *s <= now), S::PermitOverLapsed);
        }
        "semaphore_release" => {
            let permits = scores(ks, call.key(0), now);
            let own = permits.iter().find(|(_, m)| *m == call.arg(0));
            when(
                own.is_some_and(|(s, _)| *s <= now),
                S::ReleaseOfLapsedPermit,
            );
        }
        _ => {}
    }
    states
}

/// A lock key's holds, read from either form (acquire.lua's header): the lone hold's
/// string stands for one hold whose deadline is the key's expiry.
#[derive(Debug, Default)]
struct Holds<'k> {
    present: bool,
    /// Hold id and lease deadline (node ms).
    holds: Vec<(&'k [u8], i64)>,
    /// The `~q` flag: fair waiters may be queued.
    queued: bool,
}

impl<'k> Holds<'k> {
    fn of(ks: &'k Keyspace, key: &[u8], now: i64) -> Self {
        let Some(entry) = ks
            .raw(key)
            .filter(|e| e.expires_at.is_none_or(|at| now <= at))
        else {
            return Self::default();
        };
        let mut holds = Vec::new();
        let mut queued = false;
        match &entry.data {
            Data::Str(hold) => holds.push((hold.as_slice(), entry.expires_at.unwrap_or(i64::MAX))),
            Data::Hash(fields) => {
                for (name, value) in fields {
                    if let Some(hold) = name.strip_prefix(b"#") {
                        holds.push((hold, int(value).unwrap_or(0)));
                    }
                    queued |= name == b"~q";
                }
            }
            Data::List(_) | Data::ZSet(_) => {}
        }
        Self {
            present: true,
            holds,
            queued,
        }
    }

    fn deadline(&self, hold: &[u8]) -> Option<i64> {
        self.holds.iter().find(|(h, _)| *h == hold).map(|(_, d)| *d)
    }

    /// The deadlines of the other holds of `owner`.
    fn siblings<'a>(&'a self, hold: &'a [u8], owner: &'a [u8]) -> impl Iterator<Item = i64> + 'a {
        self.holds
            .iter()
            .filter(move |(h, _)| *h != hold && owner_of(h) == owner)
            .map(|(_, d)| *d)
    }

    fn lapsed_sibling(&self, hold: &[u8], owner: &[u8], now: i64) -> bool {
        self.siblings(hold, owner).any(|d| d <= now)
    }

    fn live_siblings(&self, hold: &[u8], owner: &[u8], now: i64) -> usize {
        self.siblings(hold, owner).filter(|d| *d > now).count()
    }
}

/// The owner a hold id names: what follows its 16 hex digits and colon.
fn owner_of(hold: &[u8]) -> &[u8] {
    hold.get(17..).unwrap_or_default()
}

fn int(bytes: &[u8]) -> Option<i64> {
    std::str::from_utf8(bytes).ok()?.trim().parse().ok()
}

/// The live value under `key`, read without the lazy expiry a lookup performs.
fn live_entry<'k>(ks: &'k Keyspace, key: &[u8], now: i64) -> Option<&'k Data> {
    ks.raw(key)
        .filter(|e| e.expires_at.is_none_or(|at| now <= at))
        .map(|e| &e.data)
}

fn hash_field<'k>(ks: &'k Keyspace, key: &[u8], field: &[u8], now: i64) -> Option<&'k [u8]> {
    match live_entry(ks, key, now)? {
        Data::Hash(fields) => fields
            .iter()
            .find(|(name, _)| name == field)
            .map(|(_, v)| v.as_slice()),
        _ => None,
    }
}

/// The queue head's entry: its deadline and lease TTL (`'<deadline> <ttl> <seq>'`).
fn queue_head(ks: &Keyspace, queue: &[u8], waiters: &[u8], now: i64) -> Option<(i64, i64)> {
    let Data::List(items) = live_entry(ks, queue, now)? else {
        return None;
    };
    let entry = hash_field(ks, waiters, items.front()?, now).unwrap_or_default();
    let mut words = entry.split(|b| *b == b' ').map(int);
    Some((
        words.next().flatten().unwrap_or(0),
        words.next().flatten().unwrap_or(0),
    ))
}

/// A sorted set's members with their scores truncated to ms.
fn scores<'k>(ks: &'k Keyspace, key: &[u8], now: i64) -> Vec<(i64, &'k [u8])> {
    match live_entry(ks, key, now) {
        Some(Data::ZSet(members)) => members
            .iter()
            .map(|(score, member)| (*score as i64, member.as_slice()))
            .collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
#[path = "state_watch_tests.rs"]
mod tests;
