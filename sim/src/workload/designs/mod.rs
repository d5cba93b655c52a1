//! Lock designs other than Leasehold's: the classic Redis locks, written here from their
//! published descriptions, run by the simulated clients through the same seams as the
//! production client (one [`leasehold::backend::Backend`] per deployment target, the
//! process's [`leasehold::runtime::Runtime`]), so the world's faults reach them alike and
//! the checker judges them by the same rules.
//!
//! A design is its server calls (commands or scripts in `sim/designs/`, their keys and
//! arguments) and its client rules: how long a client believes it holds (until it sends
//! its release, or until its own validity estimate ends), whether and how it renews, and
//! how it waits. [`Design::ALL`] lists them; a run picks one with
//! [`crate::workload::Workload::design`].
//!
//! Invariant: a design's client records what it believes — `Acquired` when its acquire
//! returns a grant, `Released` as it sends its release (or `Lost` when its own validity
//! estimate ends first) — and claims for the server-truth oracle exactly what its own
//! server calls wrote (its key and the value or field that marks its hold). None of these
//! designs issues a fencing token: a mutex design's holds are recorded as one permit of
//! one, a read-write design's as shared (read) or exclusive (write) access with token 0,
//! which the run tells the checker is no token ([`crate::checker::CheckConfig::unfenced`]),
//! so the checker judges overlaps and server truth, not tokens; and none writes to the
//! fenced resource.

mod custom;
pub mod file;
mod hash_watchdog;
mod read_write;
mod redlock;
mod single;
mod wake;
mod zset_queue;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use leasehold::backend::Backend;
use leasehold::runtime::Runtime;
use redis::Value;
use serde::{Deserialize, Serialize};

use self::read_write::ReadWrite;
use self::single::Kind;
use crate::workload::client::{next_round, uniform};
use crate::workload::{Strategy, Workload};
use crate::world::history::{Access, HistKind};
use crate::world::process::ProcessCtx;
use crate::world::truth::Claim;
use crate::world::{ProcessMain, SimError};

/// A lock design the simulated clients can run instead of Leasehold's.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum Design {
    /// `SETNX key 1`, then `PEXPIRE key ttl` as a second command; release `DEL`.
    SetnxThenExpire,
    /// `SETNX key <client's now + ttl>`; when busy, `GET` the stored expiry and, once it
    /// has passed on the client's own clock, `GETSET` a new one, winning only if the old
    /// value had passed too; release `DEL`. The key has no TTL.
    SetnxGetset,
    /// `SET key token NX PX ttl`; release `DEL` without checking the token.
    SetNxPxDel,
    /// The same acquire; release by a compare-and-delete script; no renewal.
    SetNxPxCad,
    /// A reentrant hash (owner -> count) with `PEXPIRE`, a watchdog renewing every TTL/3
    /// with no lost-lease signal, an unlock that publishes on a channel waiters subscribe
    /// to; no fencing.
    HashWatchdog,
    /// RedLock as commonly written: `SET NX PX` on every master, granted on a majority
    /// with validity `ttl - elapsed` and no drift term; the holder believes until its
    /// release or the validity's end on its own clock.
    RedlockNoDrift,
    /// A FIFO of waiters in a sorted set scored by each waiter's own clock at joining,
    /// entries older than a timeout on the acquiring caller's clock dropped; the head takes
    /// a `SET NX PX` lock key and leaves the queue; release compare-and-deletes and
    /// publishes; a waiter that gives up removes its entry.
    ZsetQueue,
    /// A read-write lock of two keys on one node: a write key (token, `PX ttl`) and a
    /// read key (reader -> count, its lease restarted by every reader), both checked by
    /// one script. No renewal.
    RwTwoKeys,
    /// A read-write lock in one hash (a `mode` field and per-owner counts, re-entrant)
    /// with `PEXPIRE` on the whole hash, as written for a cluster. No renewal.
    RwHash,
}

impl Design {
    /// Every design, in table order.
    pub const ALL: [Design; 9] = [
        Self::SetnxThenExpire,
        Self::SetnxGetset,
        Self::SetNxPxDel,
        Self::SetNxPxCad,
        Self::HashWatchdog,
        Self::RedlockNoDrift,
        Self::ZsetQueue,
        Self::RwTwoKeys,
        Self::RwHash,
    ];

    /// The table and command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Self::SetnxThenExpire => "setnx-then-expire",
            Self::SetnxGetset => "setnx-getset",
            Self::SetNxPxDel => "set-nx-px-del",
            Self::SetNxPxCad => "set-nx-px-cad",
            Self::HashWatchdog => "hash-watchdog",
            Self::RedlockNoDrift => "redlock-no-drift",
            Self::ZsetQueue => "zset-queue",
            Self::RwTwoKeys => "rw-two-keys",
            Self::RwHash => "rw-hash",
        }
    }

    /// The Leasehold strategy whose deployment (and fault aim) the design runs on: one
    /// node, or RedLock's independent masters.
    pub fn strategy(self) -> Strategy {
        match self {
            Self::RedlockNoDrift => Strategy::RedLock,
            _ => Strategy::Spin,
        }
    }
}

/// Which design a run's clients use.
#[derive(Debug, Clone)]
pub enum Which {
    /// A built-in design.
    Builtin(Design),
    /// A design described by a file.
    File(Arc<file::DesignFile>),
}

impl Which {
    /// The design's name.
    pub fn name(&self) -> &str {
        match self {
            Self::Builtin(design) => design.name(),
            Self::File(file) => &file.name,
        }
    }
}

/// The process main that runs `work`'s lock loop with `design`'s client (again after
/// every restart).
pub fn process_main(design: Which, work: Workload) -> ProcessMain {
    Arc::new(move |ctx: ProcessCtx| Box::pin(run_client(design.clone(), work, ctx)))
}

/// The key a design keeps lock `name`'s holds under: the key Leasehold's mutex keeps its
/// holds under (a run has one design), so the checker's rules that read keys by name (key
/// hygiene, which keys an eviction took) judge a design's as they judge Leasehold's, and
/// the harness's monitor watches a design's key as it watches Leasehold's.
pub fn lock_key(name: &str) -> String {
    format!("{}:{{{name}}}", leasehold::KEY_PREFIX)
}

/// The lease settings a design's client takes from its workload.
#[derive(Debug, Clone, Copy)]
pub struct Lease {
    /// The lease every hold asks for.
    pub ttl: Duration,
    /// How old a queue entry may get before the line forgets it (`zset-queue`; Leasehold's
    /// fair line's default when `None`).
    pub entry_timeout: Option<Duration>,
}

impl Lease {
    /// `work`'s lease settings.
    pub fn of(work: &Workload) -> Self {
        Self {
            ttl: work.ttl,
            entry_timeout: work.entry_timeout,
        }
    }

    fn ttl_ms(self) -> u64 {
        millis(self.ttl)
    }
}

/// What one acquire attempt got.
enum Attempt {
    /// Granted: what the servers must show while it is believed, and, where the design
    /// keeps one, the end of its validity on the client's clock.
    Granted(Grant),
    /// Held by someone else; try again after about this long, if the server said.
    Busy(Option<Duration>),
}

/// A grant, as the design's client keeps it until its release.
#[derive(Debug)]
pub struct Grant {
    /// What the server-truth oracle checks while the grant is believed.
    claim: Claim,
    /// Where the design keeps a validity estimate: its end on the client's clock.
    valid_until: Option<Duration>,
    /// The value the design's release names (its token, its stored expiry, or its owner).
    value: Vec<u8>,
    /// Whom the hold excludes, as the history records it.
    access: Access,
}

impl Grant {
    /// What the servers must show while the grant is believed: the key and the value or
    /// field its grant wrote, on how many of the targets.
    pub fn claim(&self) -> &Claim {
        &self.claim
    }

    /// Where the design keeps a validity estimate: its end on the client's clock.
    pub fn valid_until(&self) -> Option<Duration> {
        self.valid_until
    }

    /// Whom the hold excludes: one permit of one for a mutex design (it has no token),
    /// shared or exclusive for a read-write design's read or write.
    pub fn access(&self) -> Access {
        self.access
    }
}

/// A mutex design's hold: one permit of one, which the checker judges for overlaps and
/// server truth but not for a fencing token.
const ONE_PERMIT: Access = Access::Permit { permits: 1 };

/// A design's client for one process incarnation.
enum DesignClient {
    Single(single::SingleKey),
    Hash(hash_watchdog::HashWatchdog),
    RedLock(redlock::RedlockNoDrift),
    Custom(custom::Custom),
    Queue(zset_queue::ZsetQueue),
    ReadWrite(ReadWrite),
}

impl DesignClient {
    fn build(
        design: Which,
        lease: Lease,
        rt: &Runtime,
        backends: &[Arc<dyn Backend>],
    ) -> Option<Self> {
        let design = match design {
            Which::File(file) => {
                return custom::Custom::new(file, lease, rt, backends.first()?).map(Self::Custom);
            }
            Which::Builtin(design) => design,
        };
        let one = || backends.first().cloned();
        Some(match design {
            Design::HashWatchdog => Self::Hash(hash_watchdog::HashWatchdog::new(lease, rt, one()?)),
            Design::RedlockNoDrift => {
                Self::RedLock(redlock::RedlockNoDrift::new(lease, rt, backends.to_vec()))
            }
            Design::SetnxThenExpire => Self::single(Kind::ThenExpire, lease, rt, one()?),
            Design::SetnxGetset => Self::single(Kind::GetSet, lease, rt, one()?),
            Design::SetNxPxDel => Self::single(Kind::NxPx { compare: false }, lease, rt, one()?),
            Design::SetNxPxCad => Self::single(Kind::NxPx { compare: true }, lease, rt, one()?),
            Design::ZsetQueue => Self::Queue(zset_queue::ZsetQueue::new(lease, rt, one()?)),
            Design::RwTwoKeys => {
                Self::ReadWrite(ReadWrite::new(read_write::Kind::TwoKeys, lease, rt, one()?))
            }
            Design::RwHash => {
                Self::ReadWrite(ReadWrite::new(read_write::Kind::OneHash, lease, rt, one()?))
            }
        })
    }

    fn single(kind: Kind, lease: Lease, rt: &Runtime, backend: Arc<dyn Backend>) -> Self {
        Self::Single(single::SingleKey::new(kind, lease, rt, backend))
    }

    async fn attempt(&mut self, name: &str) -> Attempt {
        match self {
            Self::Single(c) => c.attempt(name).await,
            Self::Hash(c) => c.attempt(name).await,
            Self::RedLock(c) => c.attempt(name).await,
            Self::Queue(c) => c.attempt(name).await,
            Self::ReadWrite(c) => c.attempt(name).await,
            Self::Custom(c) => c.attempt(name).await,
        }
    }

    /// The process's seams.
    fn rt(&self) -> &Runtime {
        match self {
            Self::Single(c) => &c.rt,
            Self::Hash(c) => &c.rt,
            Self::RedLock(c) => &c.rt,
            Self::Queue(c) => &c.rt,
            Self::ReadWrite(c) => &c.rt,
            Self::Custom(c) => &c.rt,
        }
    }

    /// Holds for `hold` of the client's time; `false` when the design's own signal ended
    /// the belief first.
    async fn hold(&mut self, hold: Duration) -> bool {
        match self {
            Self::Custom(c) => c.hold(hold).await,
            _ => {
                self.rt().clock.sleep(hold).await;
                true
            }
        }
    }

    /// Waits before the next attempt after a busy answer (`hint`: when to try again, as
    /// the server or the design's own rule says).
    async fn wait(&mut self, name: &str, hint: Option<Duration>, retry: u32) {
        match self {
            Self::Hash(c) => c.wait(name, hint).await,
            Self::Custom(c) => c.wait(name, hint, retry).await,
            Self::Queue(c) => c.wait(name, hint).await,
            Self::RedLock(c) => c.rt.clock.sleep(hint.unwrap_or_default()).await,
            Self::Single(c) => spin(&c.rt, retry).await,
            Self::ReadWrite(c) => spin(&c.rt, retry).await,
        }
    }

    /// Undoes what a waiting acquisition left behind when it gives up (the queue's entry,
    /// the mode drawn for it).
    async fn give_up(&mut self, name: &str) {
        match self {
            Self::Queue(c) => c.give_up(name).await,
            Self::ReadWrite(c) => c.give_up(),
            Self::Single(_) | Self::Hash(_) | Self::RedLock(_) | Self::Custom(_) => {}
        }
    }

    async fn release(&mut self, name: &str, grant: Grant) {
        match self {
            Self::Single(c) => c.release(name, grant).await,
            Self::Hash(c) => c.release(name).await,
            Self::RedLock(c) => c.release(name, grant).await,
            Self::Custom(c) => c.release(name, grant).await,
            Self::Queue(c) => c.release(name, grant).await,
            Self::ReadWrite(c) => c.release(name, grant).await,
        }
    }
}

/// A jittered exponential backoff, with Leasehold's spin ceilings.
async fn spin(rt: &Runtime, retry: u32) {
    let nap = rt.jitter(leasehold::Backoff::SPIN.ceiling(retry));
    rt.clock.sleep(nap).await;
}

/// Renews a hold every `every` on `rt`'s clock, by `renew`, until the flag it returns is
/// set (the release) or `renew` answers `false`: the server said the hold is gone, and
/// `gone` runs (a design's lost signal, if it has one). The renewal loop of every design
/// that renews (`hash-watchdog`, a file design's `renew`).
fn spawn_renewals<F, Fut>(
    rt: &Runtime,
    every: Duration,
    mut renew: F,
    gone: impl FnOnce() + Send + 'static,
) -> Arc<AtomicBool>
where
    F: FnMut() -> Fut + Send + 'static,
    Fut: Future<Output = bool> + Send + 'static,
{
    let stop = Arc::new(AtomicBool::new(false));
    let (stopped, clock) = (Arc::clone(&stop), Arc::clone(&rt.clock));
    rt.spawner.spawn(Box::pin(async move {
        loop {
            clock.sleep(every).await;
            if stopped.load(Ordering::SeqCst) {
                return;
            }
            if !renew().await {
                gone();
                return;
            }
        }
    }));
    stop
}

/// A design's lock, for one client: the design's server calls and client rules over the
/// production client's seams. The simulator's clients run it against the model; the
/// harness runs the same code against real Redis (one [`Backend`] per target, a tokio
/// [`Runtime`]).
pub struct DesignLock {
    client: DesignClient,
}

impl DesignLock {
    /// `design`'s client on `backends` (one node, or each RedLock master) with `rt`'s clock,
    /// spawner and randomness.
    ///
    /// # Errors
    /// [`SimError::Config`] when `backends` is empty.
    pub fn new(
        design: Which,
        lease: Lease,
        rt: &Runtime,
        backends: &[Arc<dyn Backend>],
    ) -> Result<Self, SimError> {
        let name = design.name().to_owned();
        DesignClient::build(design, lease, rt, backends)
            .map(|client| Self { client })
            .ok_or_else(|| SimError::Config(format!("design {name} has no backend to run on")))
    }

    /// Waits for a grant of lock `name` until `timeout` on the client's clock (`None`:
    /// forever); `None` when it ran out, after undoing what the wait left behind (a queue
    /// entry). A grant whose validity ended before its answer came back is no grant: the
    /// client gives it back and asks again, as RedLock's clients do.
    pub async fn acquire(&mut self, name: &str, timeout: Option<Duration>) -> Option<Grant> {
        let clock = Arc::clone(&self.client.rt().clock);
        let start = clock.now();
        let mut retry = 0u32;
        loop {
            let hint = match self.client.attempt(name).await {
                Attempt::Granted(grant) if grant.valid_until.is_some_and(|u| u <= clock.now()) => {
                    self.client.release(name, grant).await;
                    None
                }
                Attempt::Granted(grant) => return Some(grant),
                Attempt::Busy(hint) => hint,
            };
            if timeout.is_some_and(|limit| clock.now().saturating_sub(start) >= limit) {
                self.client.give_up(name).await;
                return None;
            }
            self.client.wait(name, hint, retry).await;
            retry = retry.saturating_add(1);
        }
    }

    /// Works under `grant` for `hold` of the client's time, or until the design's own
    /// signal (its validity estimate's end, a refused renewal it watches) ends the belief;
    /// `false` when that signal came first.
    pub async fn hold(&mut self, grant: &Grant, hold: Duration) -> bool {
        let rt = self.client.rt().clone();
        let left = grant
            .valid_until
            .map(|until| until.saturating_sub(rt.clock.now()));
        match left {
            Some(left) if left < hold => {
                rt.clock.sleep(left).await;
                false
            }
            _ => self.client.hold(hold).await,
        }
    }

    /// Sends the design's release of `grant` (its reply is not looked at, as the designs'
    /// clients do not).
    pub async fn release(&mut self, name: &str, grant: Grant) {
        self.client.release(name, grant).await;
    }
}

async fn run_client(design: Which, work: Workload, ctx: ProcessCtx) {
    let name_of_design = design.name().to_owned();
    let mut lock = match DesignLock::new(design, Lease::of(&work), &ctx.runtime, &ctx.backends) {
        Ok(lock) => lock,
        Err(err) => {
            tracing::warn!(proc = ctx.id, %err, "design client build failed");
            return;
        }
    };
    let mut done = 0u64;
    while work.ops.is_none_or(|n| done < n) {
        done += 1;
        let name = next_round(&work, &ctx).await;
        let Some(grant) = lock.acquire(&name, work.acquire_timeout).await else {
            let error = format!("{name_of_design} acquire timed out");
            ctx.recorder
                .record(&name, HistKind::AcquireFailed { error });
            continue;
        };
        ctx.recorder
            .acquired(&name, 0, grant.access, grant.claim.clone());
        // Work for the hold time, or until the design's own validity estimate ends.
        let kind = if lock.hold(&grant, uniform(&ctx, work.hold)).await {
            HistKind::Released
        } else {
            HistKind::Lost
        };
        ctx.recorder.record(&name, kind);
        lock.release(&name, grant).await;
    }
}

/// Whether a reply is `OK` (a `SET` that wrote).
fn is_ok(reply: &redis::RedisResult<Value>) -> bool {
    matches!(reply, Ok(Value::Okay)) || matches!(reply, Ok(Value::SimpleString(s)) if s == "OK")
}

/// A reply's integer, if it is one.
fn int(reply: &redis::RedisResult<Value>) -> Option<i64> {
    match reply {
        Ok(Value::Int(n)) => Some(*n),
        _ => None,
    }
}

/// A reply's bytes, if it is a bulk string.
fn bytes(reply: &redis::RedisResult<Value>) -> Option<&[u8]> {
    match reply {
        Ok(Value::BulkString(b)) => Some(b),
        _ => None,
    }
}

/// `d` in whole milliseconds (saturating), as the scripts take leases and clocks.
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A fresh random token for one hold.
fn token(rt: &Runtime) -> Vec<u8> {
    format!(
        "{:016x}{:016x}",
        rt.entropy.next_u64(),
        rt.entropy.next_u64()
    )
    .into_bytes()
}

/// A fresh owner id for one client.
fn owner(rt: &Runtime) -> String {
    format!("{:016x}", rt.entropy.next_u64())
}
