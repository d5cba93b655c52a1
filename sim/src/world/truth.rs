//! The server-truth oracle's vocabulary: what a believed hold claims is on the servers, and
//! whether a node's data still says so.
//!
//! Why it exists: overlapping beliefs only show a lease bug when a second client happens to
//! be granted in the gap. The `lost()` promise is stronger — while a client believes it
//! holds a lock, the nodes that granted it still hold its hold id — and the model can check
//! that directly at every instant, with or without contention.
//!
//! Invariant: the check only reads the model (no lazy expiry, no command counted), and
//! treats a key as live until its deadline has passed on the node's own clock
//! (`now > deadline`, as Redis does), so it never disturbs the run it judges. A node that
//! is down contradicts no belief until it is back.

use crate::model::{Data, Node};

/// Where a hold lives in a node's keyspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Member {
    /// A field of a hash (a mutex or write hold: `#<hold id>`) valued with the hold's lease
    /// deadline in server milliseconds: held while the deadline has not passed (the scripts
    /// drop a hold whose deadline passed even while a sibling keeps the hash alive). A
    /// mutex's lone hold may instead be the key's whole string value, the hold id (the
    /// lone hold form of `acquire.lua`), held while the key lives.
    HashField(Vec<u8>),
    /// A member of a sorted set scored by its lease deadline in server milliseconds (a
    /// read hold or a semaphore permit): held while the deadline has not passed.
    Deadline(Vec<u8>),
    /// The key's whole string value (a lock design that stores its holder's token, or its
    /// expiry, as the key's value): held while the key lives with that value.
    Value(Vec<u8>),
    /// A field of a hash, whatever its value (a lock design's reentrant owner count):
    /// held while the key lives with that field.
    Field(Vec<u8>),
}

/// What a believed hold claims: its key and member on each of the deployment targets it
/// was granted through, and how many of them must still hold it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// The key.
    pub key: Vec<u8>,
    /// The member, per target (RedLock's per-master holds have their own ids), as
    /// `(target index, member)`.
    pub members: Vec<(usize, Member)>,
    /// How many targets must hold it (1, or a majority of RedLock's masters).
    pub quorum: u32,
}

impl Member {
    /// Whether `node` holds this member under `key` at virtual time `t`. A node that is
    /// down counts as holding it: it grants nothing to anyone meanwhile, and if it comes
    /// back without the hold the check catches that at its restart.
    pub fn held_on(&self, node: &Node, key: &[u8], t: u64) -> bool {
        if !node.up {
            return true;
        }
        let now_ms = node.wall_us(t).div_euclid(1_000);
        let Some(entry) = node.data().raw(key) else {
            return false;
        };
        if entry.expires_at.is_some_and(|at| now_ms > at) {
            return false;
        }
        match (self, &entry.data) {
            (Self::HashField(field), Data::Hash(fields)) => fields.iter().any(|(f, value)| {
                f == field
                    && std::str::from_utf8(value)
                        .ok()
                        .and_then(|v| v.parse::<i64>().ok())
                        .is_some_and(|deadline| deadline > now_ms)
            }),
            (Self::HashField(field), Data::Str(value)) => {
                field.strip_prefix(b"#") == Some(value.as_slice())
            }
            (Self::Deadline(member), Data::ZSet(members)) => members
                .iter()
                .any(|(score, m)| m == member && *score >= now_ms as f64),
            (Self::Value(wanted), Data::Str(value)) => wanted == value,
            (Self::Field(field), Data::Hash(fields)) => fields.iter().any(|(f, _)| f == field),
            _ => false,
        }
    }
}

/// A hold a client believes it has, as the world tracks it between the client's
/// `Acquired` and its `Released`/`Lost`/crash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Belief {
    /// What the servers must show.
    pub claim: Claim,
    /// Whether its loss was already recorded (once per hold).
    pub reported: bool,
}
