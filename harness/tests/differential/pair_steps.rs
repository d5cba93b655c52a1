//! The steps of a master-and-replica case (`pair.rs`): the lock scripts and plain commands
//! on either of two connections to the master, `WAIT` on either, replica freezes, pauses,
//! and the proptest strategy that generates them.
//!
//! Invariant: nothing a step leaves expires within a case (hold TTLs, entry timeouts and key
//! TTLs are all a minute or more), so every reply and every replica's keyspace is decided by
//! the steps alone; and no `WAIT` can block for ever: while the replica is frozen, every
//! `WAIT` carries a timeout.

use proptest::prelude::*;

use crate::calls::{Entry, NAMES, ScriptCall, TTLS_MS, all_keys};
use crate::steps::{PLAIN, plain, weighted_scripts};

/// Chunks (a step, or a freeze of the replica with steps inside) per case.
const MAX_CHUNKS: usize = 10;
/// Steps inside one freeze of the replica.
const MAX_FROZEN_STEPS: usize = 4;
/// `WAIT` timeouts, ms, besides 0 (for ever): short, so a `WAIT` on a frozen replica
/// costs the case little.
const WAIT_TIMEOUTS_MS: [u64; 2] = [10, 30];

/// The two client connections to the master.
pub const CONNS: usize = 2;

/// One step of a master-and-replica case; `usize` fields name the connection.
#[derive(Debug, Clone)]
pub enum PairStep {
    Script(usize, ScriptCall),
    /// A plain command (see [`plain`]): verb, key index, argument draws.
    Plain(usize, &'static str, usize, u8, u8),
    /// `WAIT numreplicas timeout_ms`.
    Wait(usize, u8, u64),
    /// Freezes the replica (`docker pause`; the model's node holds what reaches it).
    Freeze,
    /// Thaws the frozen replica.
    Thaw,
    /// Lets real time pass (the model follows).
    Sleep(u64),
}

impl PairStep {
    /// The connection the step runs on and its command, if it sends one.
    pub fn command(&self) -> Option<(usize, redis::Cmd)> {
        match self {
            PairStep::Script(conn, call) => Some((*conn, call.command())),
            PairStep::Plain(conn, verb, key, a, b) => {
                let keys = all_keys();
                Some((*conn, plain(verb, &keys[key % keys.len()], *a, *b)))
            }
            PairStep::Wait(conn, numreplicas, timeout_ms) => Some((
                *conn,
                redis::cmd("WAIT").arg(numreplicas).arg(timeout_ms).clone(),
            )),
            PairStep::Freeze | PairStep::Thaw | PairStep::Sleep(_) => None,
        }
    }
}

/// A script call that leaves nothing due to expire within a case.
fn call_strategy() -> impl Strategy<Value = ScriptCall> {
    (
        prop::sample::select(weighted_scripts()),
        0..NAMES.len(),
        (0u8..4, 0u8..2),
        0..TTLS_MS.len(),
        prop_oneof![Just(Entry::Never), Just(Entry::Long)],
        1u8..3,
        prop::bool::weighted(0.2),
    )
        .prop_map(
            |(script, name, (owner, hold), ttl, entry, permits, by_sha)| ScriptCall {
                script,
                name,
                owner,
                hold,
                ttl,
                entry,
                permits,
                by_sha,
            },
        )
}

fn script_strategy() -> impl Strategy<Value = PairStep> {
    (0..CONNS, call_strategy()).prop_map(|(conn, call)| PairStep::Script(conn, call))
}

fn plain_strategy() -> impl Strategy<Value = PairStep> {
    (
        0..CONNS,
        prop::sample::select(PLAIN.to_vec()),
        0..all_keys().len(),
        any::<u8>(),
        any::<u8>(),
    )
        .prop_map(|(conn, verb, key, a, b)| PairStep::Plain(conn, verb, key, a, b))
}

/// `WAIT 1 t` with a timeout, or `WAIT 0 0`: both answer while the replica is frozen.
fn bounded_wait_strategy() -> impl Strategy<Value = PairStep> {
    prop_oneof![
        3 => (0..CONNS, prop::sample::select(WAIT_TIMEOUTS_MS.to_vec()))
            .prop_map(|(conn, t)| PairStep::Wait(conn, 1, t)),
        1 => (0..CONNS).prop_map(|conn| PairStep::Wait(conn, 0, 0)),
    ]
}

/// One step with the replica running: `WAIT 1 0` (no timeout) answers as soon as the
/// replica acknowledged.
fn step_strategy() -> impl Strategy<Value = PairStep> {
    prop_oneof![
        6 => script_strategy(),
        3 => plain_strategy(),
        2 => bounded_wait_strategy(),
        1 => (0..CONNS).prop_map(|conn| PairStep::Wait(conn, 1, 0)),
        1 => (0u64..10).prop_map(PairStep::Sleep),
    ]
}

/// The replica frozen around a script call on one connection, then a bounded `WAIT 1` on
/// each connection (in either order) among a few more steps: the writer's `WAIT` times out
/// (when the call wrote), the other connection's answers at once.
fn frozen_strategy() -> impl Strategy<Value = Vec<PairStep>> {
    let inside = prop_oneof![
        3 => script_strategy(),
        1 => plain_strategy(),
        3 => bounded_wait_strategy(),
    ];
    (
        0..CONNS,
        call_strategy(),
        prop::sample::select(WAIT_TIMEOUTS_MS.to_vec()),
        any::<bool>(),
        prop::collection::vec(inside, 0..MAX_FROZEN_STEPS),
    )
        .prop_map(|(writer, call, timeout, writer_first, more)| {
            let mut waits = [
                PairStep::Wait(writer, 1, timeout),
                PairStep::Wait(1 - writer, 1, timeout),
            ];
            if !writer_first {
                waits.reverse();
            }
            let mut chunk = vec![PairStep::Freeze, PairStep::Script(writer, call)];
            chunk.extend(waits);
            chunk.extend(more);
            chunk.push(PairStep::Thaw);
            chunk
        })
}

/// A case: steps with the replica running and freezes of it.
pub fn pair_case_strategy() -> impl Strategy<Value = Vec<PairStep>> {
    let chunk = prop_oneof![
        6 => step_strategy().prop_map(|step| vec![step]),
        1 => frozen_strategy(),
    ];
    prop::collection::vec(chunk, 1..=MAX_CHUNKS).prop_map(|chunks| chunks.concat())
}
