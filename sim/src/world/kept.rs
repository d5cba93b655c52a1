//! What a node keeps of a lock's holds right after it ran one of the lock scripts: the
//! server-side witness the stranded-state rule judges against what the clients asked for
//! (see [`crate::checker::stranded`]).
//!
//! Why it exists: a script that writes a longer deadline than its request asked, or that
//! answers "released" and leaves the hold in place, tells nobody; its reply and its
//! hand-off message may say the right thing. Only the keyspace shows it, so the keyspace is
//! read where the script ran, not the script's word.
//!
//! Invariant: only reads the model (no lazy expiry, nothing counted), right after the
//! script ran on a master, so a recorded run is the same run as an unrecorded one. The keys read are
//! the ones each script's header documents as holding holds, by their `KEYS` position: the
//! mutex's lock key (a hash of `#<hold id>` fields valued with their deadlines, or a lone
//! hold's string), the read-write lock's write hash and readers zset, the semaphore's
//! permits zset. Queue lists, waiters hashes and intents carry no hold and are not read
//! here (key hygiene bounds their lifetimes at the run's end). The mutex's fence key is
//! read once, right *before* a grant or release ran ([`fence`]): the token the node had,
//! which the token rule weighs against an earlier grant's (`checker::issuers`).

use serde::Serialize;

use crate::model::{Data, Entry, Node, Role};

use super::calls::{self, Family, LockOp, OpKind};

/// One key that holds holds, as the node kept it after a script ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeptKey {
    /// The key.
    pub key: String,
    /// When it expires, in the node's wall-clock ms; `None` if it has no expiry.
    pub expires_ms: Option<i64>,
    /// Its holds, as `(hold id hashed by [`calls::id_of`], deadline in the node's wall-clock
    /// ms)`: a hash's `#` fields, a zset's members, or a lone hold's string (whose deadline
    /// is the key's own expiry, `i64::MAX` if it has none).
    pub holds: Vec<(u64, i64)>,
}

/// The `KEYS` positions (from 1) of a script's keys that hold holds, by its header.
fn hold_keys(family: Family, kind: OpKind) -> &'static [usize] {
    match (family, kind) {
        (Family::Mutex | Family::Permit, _) => &[1],
        (Family::Read, OpKind::Acquire) | (Family::Write, OpKind::Acquire) => &[1, 2],
        (Family::Read, OpKind::Release) => &[1, 3],
        (Family::Read, _) => &[1],
        (Family::Write, _) => &[1, 4],
    }
}

/// The holds of `entry`, read as a hold-carrying key (see [`KeptKey::holds`]); a lone
/// string is a hold only under the mutex's lock key.
fn holds_of(entry: &Entry, lone: bool) -> Vec<(u64, i64)> {
    match &entry.data {
        Data::Hash(fields) => fields
            .iter()
            .filter_map(|(field, value)| {
                let id = field.strip_prefix(b"#")?;
                let deadline = std::str::from_utf8(value).ok()?.parse::<i64>().ok()?;
                Some((calls::id_of(id), deadline))
            })
            .collect(),
        Data::ZSet(members) => members
            .iter()
            .map(|(score, member)| (calls::id_of(member), *score as i64))
            .collect(),
        Data::Str(value) if lone => {
            vec![(calls::id_of(value), entry.expires_at.unwrap_or(i64::MAX))]
        }
        Data::Str(_) | Data::List(_) => Vec::new(),
    }
}

/// The hold-carrying keys of the lock-script call `op` (the command `args`) as `node`
/// keeps them at `t` (a key already past its expiry on the node's clock counts as gone),
/// and the node's wall-clock ms then; `None` on a replica, whose keys follow its master's
/// requests, not the ones it ran (it refuses their writes).
pub fn read(node: &Node, (op, args): (&LockOp, &[Vec<u8>]), t: u64) -> Option<(i64, Vec<KeptKey>)> {
    if node.role != Role::Master {
        return None;
    }
    let keys = calls::keys(args)?;
    let now_ms = node.wall_us(t).div_euclid(1_000);
    let kept = hold_keys(op.family, op.kind)
        .iter()
        .filter_map(|&at| {
            let key = keys.get(at - 1)?;
            let entry = node.data().raw(key)?;
            if entry.expires_at.is_some_and(|at| now_ms > at) {
                return None;
            }
            Some(KeptKey {
                key: String::from_utf8_lossy(key).into_owned(),
                expires_ms: entry.expires_at,
                holds: holds_of(entry, op.family == Family::Mutex && at == 1),
            })
        })
        .collect();
    Some((now_ms, kept))
}

/// The fencing token `node`'s fence key held at `t`, right before the mutex call `op` (the
/// command `args`) ran: `KEYS[2]` of `acquire.lua`, `KEYS[4]` of `release.lua` (whose
/// hand-off issues the grantee's token), 0 where the key is absent or already past its
/// expiry on the node's clock; `None` for other calls and on a replica (which issues no
/// token).
pub fn fence(node: &Node, (op, args): (&LockOp, &[Vec<u8>]), t: u64) -> Option<u64> {
    let at = match (op.family, op.kind) {
        (Family::Mutex, OpKind::Acquire) => 2,
        (Family::Mutex, OpKind::Release) => 4,
        _ => return None,
    };
    if node.role != Role::Master {
        return None;
    }
    let key = calls::keys(args)?.get(at - 1)?;
    let now_ms = node.wall_us(t).div_euclid(1_000);
    let live = node
        .data()
        .raw(key)
        .filter(|e| e.expires_at.is_none_or(|at| now_ms <= at));
    Some(match live.map(|e| &e.data) {
        Some(Data::Str(value)) => std::str::from_utf8(value).ok()?.parse().ok()?,
        _ => 0,
    })
}
