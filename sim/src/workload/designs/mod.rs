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

use std::sync::Arc;
use std::time::Duration;

use redis::Value;
use serde::{Deserialize, Serialize};

use self::read_write::ReadWrite;
use self::single::Kind;
use crate::workload::client::{next_round, uniform};
use crate::workload::{Strategy, Workload};
use crate::world::ProcessMain;
use crate::world::history::{Access, HistKind};
use crate::world::process::ProcessCtx;
use crate::world::truth::Claim;

/// A lock design the simulated clients can run instead of Leasehold's.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, clap::ValueEnum,
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
    fn name(&self) -> &str {
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
/// hygiene, which keys an eviction took) judge a design's as they judge Leasehold's.
fn lock_key(name: &str) -> String {
    format!("{}:{{{name}}}", leasehold::KEY_PREFIX)
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
struct Grant {
    /// What the server-truth oracle checks while the grant is believed.
    claim: Claim,
    /// Where the design keeps a validity estimate: its end on the client's clock.
    valid_until: Option<Duration>,
    /// The value the design's release names (its token, its stored expiry, or its owner).
    value: Vec<u8>,
    /// Whom the hold excludes, as the history records it.
    access: Access,
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
    fn build(design: Which, work: &Workload, ctx: &ProcessCtx) -> Option<Self> {
        let design = match design {
            Which::File(file) => return custom::Custom::new(file, work, ctx).map(Self::Custom),
            Which::Builtin(design) => design,
        };
        Some(match design {
            Design::HashWatchdog => Self::Hash(hash_watchdog::HashWatchdog::new(work, ctx)?),
            Design::RedlockNoDrift => Self::RedLock(redlock::RedlockNoDrift::new(work, ctx)),
            Design::SetnxThenExpire => Self::single(Kind::ThenExpire, work, ctx)?,
            Design::SetnxGetset => Self::single(Kind::GetSet, work, ctx)?,
            Design::SetNxPxDel => Self::single(Kind::NxPx { compare: false }, work, ctx)?,
            Design::SetNxPxCad => Self::single(Kind::NxPx { compare: true }, work, ctx)?,
            Design::ZsetQueue => Self::Queue(zset_queue::ZsetQueue::new(work, ctx)?),
            Design::RwTwoKeys => Self::read_write(read_write::Kind::TwoKeys, work, ctx)?,
            Design::RwHash => Self::read_write(read_write::Kind::OneHash, work, ctx)?,
        })
    }

    fn single(kind: Kind, work: &Workload, ctx: &ProcessCtx) -> Option<Self> {
        single::SingleKey::new(kind, work, ctx).map(Self::Single)
    }

    fn read_write(kind: read_write::Kind, work: &Workload, ctx: &ProcessCtx) -> Option<Self> {
        ReadWrite::new(kind, work, ctx).map(Self::ReadWrite)
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

    /// Holds for `hold` of the client's time; `false` when the design's own signal ended
    /// the belief first.
    async fn hold(&mut self, hold: Duration) -> bool {
        match self {
            Self::Custom(c) => c.hold(hold).await,
            Self::Single(single::SingleKey { ctx, .. })
            | Self::Hash(hash_watchdog::HashWatchdog { ctx, .. })
            | Self::RedLock(redlock::RedlockNoDrift { ctx, .. })
            | Self::Queue(zset_queue::ZsetQueue { ctx, .. })
            | Self::ReadWrite(ReadWrite { ctx, .. }) => {
                ctx.runtime.clock.sleep(hold).await;
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
            Self::RedLock(c) => c.ctx.runtime.clock.sleep(hint.unwrap_or_default()).await,
            Self::Single(c) => spin(&c.ctx, retry).await,
            Self::ReadWrite(c) => spin(&c.ctx, retry).await,
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
async fn spin(ctx: &ProcessCtx, retry: u32) {
    let nap = ctx.runtime.jitter(leasehold::Backoff::SPIN.ceiling(retry));
    ctx.runtime.clock.sleep(nap).await;
}

/// Waits for a grant until `work`'s acquire timeout on the client's clock; `None` when it
/// ran out.
async fn acquire(
    client: &mut DesignClient,
    name: &str,
    work: &Workload,
    ctx: &ProcessCtx,
) -> Option<Grant> {
    let clock = Arc::clone(&ctx.runtime.clock);
    let start = clock.now();
    let mut retry = 0u32;
    loop {
        let hint = match client.attempt(name).await {
            // A grant whose validity ended before its answer came back is no grant: the
            // client gives it back and asks again, as RedLock's clients do.
            Attempt::Granted(grant) if grant.valid_until.is_some_and(|u| u <= clock.now()) => {
                client.release(name, grant).await;
                None
            }
            Attempt::Granted(grant) => return Some(grant),
            Attempt::Busy(hint) => hint,
        };
        if work
            .acquire_timeout
            .is_some_and(|limit| clock.now().saturating_sub(start) >= limit)
        {
            client.give_up(name).await;
            return None;
        }
        client.wait(name, hint, retry).await;
        retry = retry.saturating_add(1);
    }
}

async fn run_client(design: Which, work: Workload, ctx: ProcessCtx) {
    let name_of_design = design.name().to_owned();
    let Some(mut client) = DesignClient::build(design, &work, &ctx) else {
        tracing::warn!(proc = ctx.id, "design client build failed: no backend");
        return;
    };
    let clock = Arc::clone(&ctx.runtime.clock);
    let mut done = 0u64;
    while work.ops.is_none_or(|n| done < n) {
        done += 1;
        let name = next_round(&work, &ctx).await;
        let Some(grant) = acquire(&mut client, &name, &work, &ctx).await else {
            let error = format!("{name_of_design} acquire timed out");
            ctx.recorder
                .record(&name, HistKind::AcquireFailed { error });
            continue;
        };
        ctx.recorder
            .acquired(&name, 0, grant.access, grant.claim.clone());
        // Work for the hold time, or until the design's own validity estimate ends.
        let hold = uniform(&ctx, work.hold);
        let left = grant
            .valid_until
            .map(|until| until.saturating_sub(clock.now()));
        match left {
            Some(left) if left < hold => {
                clock.sleep(left).await;
                ctx.recorder.record(&name, HistKind::Lost);
            }
            _ => {
                let kind = if client.hold(hold).await {
                    HistKind::Released
                } else {
                    HistKind::Lost
                };
                ctx.recorder.record(&name, kind);
            }
        }
        client.release(&name, grant).await;
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
fn token(ctx: &ProcessCtx) -> Vec<u8> {
    format!(
        "{:016x}{:016x}",
        ctx.runtime.entropy.next_u64(),
        ctx.runtime.entropy.next_u64()
    )
    .into_bytes()
}
