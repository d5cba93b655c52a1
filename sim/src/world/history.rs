//! What the clients, the servers and the protected resource observed, in true (virtual)
//! time, and which faults actually landed on whom.
//!
//! Invariant: events are appended in the order they happen in virtual time, stamped by the
//! simulator (never by a client's skewed clock), so the checker judges the real timeline;
//! a fault appears in the [`FaultMark`] log only if it hit something (a fault aimed at "the
//! holder" when nobody holds is not there), so a verdict excused by a fault is excused by
//! one that happened.

use serde::Serialize;

use crate::model::NodeId;
use crate::world::calls::{LockOp, LockReply};
use crate::world::faults::Fault;
use crate::world::kept::KeptKey;
use crate::world::net::{ProcId, Target};

/// One observation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HistEvent {
    /// Virtual time in nanoseconds.
    pub at: u64,
    /// The process.
    pub proc: ProcId,
    /// Its incarnation (a restarted process is a new holder).
    pub incarnation: u32,
    /// Lock name.
    pub lock: String,
    /// What happened.
    pub kind: HistKind,
}

/// Kinds of observation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum HistKind {
    /// The client started waiting for the lock.
    WaitStart,
    /// `lock()` returned a guard with this fencing token.
    Acquired {
        /// The guard's fencing token.
        token: u64,
        /// Whom the hold excludes.
        access: Access,
    },
    /// A second hold of the owner the client holds the lock as was granted (re-entry):
    /// it must join the held epoch, with that epoch's token.
    Reentered {
        /// The second hold's fencing token.
        token: u64,
        /// The second hold's id, as its calls name it ([`crate::world::calls::id_of`]).
        hold: u64,
    },
    /// `lock()` failed (timeout or error) and the client gave up this attempt.
    AcquireFailed {
        /// The error's display text.
        error: String,
    },
    /// The client stopped believing it holds the lock (called `unlock()`).
    Released,
    /// While the client believed it held the lock, the servers no longer held its hold:
    /// fewer than `quorum` of the nodes that can grant it still had the hold id under a live
    /// key (the server-truth oracle; recorded once per hold, when first seen).
    LeaseGone {
        /// Nodes still holding it.
        holding: u32,
        /// Nodes that must hold it (1; a majority of masters for RedLock).
        quorum: u32,
    },
    /// The guard's lost-lease signal fired and the client stopped working.
    Lost,
    /// The process crashed: whatever it held is orphaned, whatever it waited for abandoned.
    Crashed,
    /// A fault hampers this process (pause, partition, slow link, Redis outage) until
    /// `until` (virtual ns): its waits are not judged for liveness.
    Impaired {
        /// End of the impairment.
        until: u64,
    },
    /// The resource received a write.
    Write {
        /// Token presented.
        token: u64,
        /// Highest token the resource had seen before this write.
        highest: u64,
        /// Whether the fenced resource accepted it (`token >= highest`).
        accepted: bool,
    },
    /// A lock-script call left the process (`lock` is its lock key): the invocation of an
    /// operation the linearizability check orders. One with no [`HistKind::Return`] is
    /// ambiguous: its reply never arrived, so it may or may not have taken effect.
    Call {
        /// The call's id (its index in the history).
        id: u64,
        /// The deployment target it went to (a node, or a replicated service).
        target: Target,
        /// What it asked.
        op: LockOp,
    },
    /// The reply of call `id` arrived and read as its script documents.
    Return {
        /// The call's id.
        id: u64,
        /// What the server answered.
        reply: LockReply,
    },
    /// The node ran lock-script call `id` (the simulator's server-side witness, stamped
    /// when the node executed it): a call with no [`HistKind::Return`] took effect, if at
    /// all, then, with the reply the node produced, and one the node never ran took no
    /// effect. Histories from real servers have none, and their unanswered calls stay
    /// open-ended.
    Ran {
        /// The call's id.
        id: u64,
        /// The reply the node produced, read as the client would have read it, whether or
        /// not it reached the client; `None` if it does not read as the script documents.
        reply: Option<LockReply>,
        /// The node that ran it.
        node: NodeId,
        /// What the node's clock read then, ms: the time its script saw.
        clock_ms: u64,
        /// The token the node's fence key held right before a mutex grant or release ran
        /// (0: none), the last the node had issued or received (see
        /// [`crate::world::kept::fence`]); `None` for other calls.
        fence: Option<u64>,
    },
    /// What the node that ran the call `id` kept of the lock's holds right after it ran
    /// (the keyspace, not the script's word: see [`crate::world::kept`]).
    Kept {
        /// The call's id.
        id: u64,
        /// The node that ran it.
        node: NodeId,
        /// The node's wall-clock ms then (the scripts' `TIME`).
        now_ms: i64,
        /// Its hold-carrying keys that were live.
        keys: Vec<KeptKey>,
    },
    /// A release this process sent handed the lock (`lock` is its lock key) to the head of
    /// its fair line, inside the script, as the hand-off message the node published says:
    /// the server's effect, seen where it happened, not a client's belief.
    HandedOff {
        /// The grantee's hold id ([`crate::world::calls::id_of`]).
        hold: u64,
        /// The lease granted, in ms of the node's clock.
        lease_ms: u64,
        /// The node that ran the release.
        node: NodeId,
        /// The fencing token the message names (the new epoch's).
        token: u64,
        /// The node's clock when it ran the release, ms (the time its script saw).
        clock_ms: u64,
    },
    /// A `semaphore_resize.lua` call left the process (`lock` is the semaphore's permits
    /// key), asking the server to store `permits` as its size. One with no
    /// [`HistKind::Resized`] is ambiguous: it may have landed at any point after.
    Resize {
        /// The call's id (its index in the history).
        id: u64,
        /// The size asked for.
        permits: u32,
    },
    /// The reply of resize `id` arrived: whether the semaphore was live, and so now stores
    /// the size (an idle one stores nothing).
    Resized {
        /// The call's id.
        id: u64,
        /// Whether the size was stored.
        live: bool,
    },
    /// The semaphore `lock` has `free` permits free on `node`, the node serving it (the
    /// server-truth census, recorded when the count changes; `proc` is 0 and means
    /// nothing): no lease, live or handed to a waiter, holds them.
    PermitsFree {
        /// Permits free.
        free: u32,
        /// The node counted.
        node: NodeId,
    },
}

/// Whom a hold excludes: the counting rule the checker applies to one lock's holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Access {
    /// A mutex or write hold: no other hold of the lock at the same time.
    Exclusive,
    /// A read hold: any number of readers, but no exclusive hold beside them.
    Shared,
    /// A semaphore permit: at most `permits` holds at once.
    Permit {
        /// The semaphore's size.
        permits: u32,
    },
}

/// A key a node held when the run ended, for the key-hygiene rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeyAtEnd {
    /// The node.
    pub node: NodeId,
    /// The key.
    pub key: String,
    /// Its time to live on the node's own clock, ms; `None` if it has no expiry.
    pub ttl_ms: Option<i64>,
}

/// A fault that landed: what, on whom, and the stretch of virtual time it acted over.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FaultMark {
    /// The scheduled fault.
    pub fault: Fault,
    /// The process incarnation it hit (process faults), resolved when it fired.
    pub proc: Option<(ProcId, u32)>,
    /// When it began, virtual ns.
    pub from: u64,
    /// When its effect ended (a pause's end, a node's restart), virtual ns; `u64::MAX` for
    /// lasting changes (a clock's new rate) and faults with no end.
    pub until: u64,
}
