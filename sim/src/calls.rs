//! The lock-script calls a client sends, read off the wire for the linearizability
//! history: which script, on which lock key, for which hold, and what its reply said.
//!
//! Why it exists: the checker judges the servers' answers to the calls the production
//! client really made (see [`crate::checker::linear`]), so the calls are recognised where
//! they leave the process, at the backend seam, not re-derived from the client's beliefs.
//!
//! Invariant: only the mutex scripts (acquire, renew, release, probe; RedLock sends them
//! to each master) are recognised, by the SHA or source the library sends, and their
//! arguments are read at the positions each script's header documents; nothing here
//! decides anything, and a reply it cannot read is left unrecorded (ambiguous).

use serde::Serialize;

use redis::Value;

/// Which script.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum OpKind {
    /// `acquire.lua`.
    Acquire,
    /// `renew.lua`.
    Renew,
    /// `release.lua`.
    Release,
    /// `probe.lua`.
    Probe,
}

/// One lock-script call: hold and owner ids are hashed (see [`id_of`]) to keep the
/// history small.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LockOp {
    /// The script.
    pub kind: OpKind,
    /// The hold id (`ARGV[1]` of every mutex script).
    pub hold: u64,
    /// The owner (acquire and release; 0 where the script takes none).
    pub owner: u64,
    /// The lease asked for in ms (acquire and renew; 0 otherwise).
    pub ttl_ms: u64,
    /// An acquire that queues (a fair waiter's attempt, `ARGV[4]` > 0): a release may
    /// grant its hold outright, with no call of its own the history sees.
    pub queued: bool,
}

/// What the server answered, read by the script's documented replies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum LockReply {
    /// `{1, token}`: the hold owns the lock with this epoch's token.
    Granted {
        /// The token.
        token: u64,
    },
    /// `{0, pttl}`: not granted (held, reserved or queued).
    Denied,
    /// renew: whether the lease was extended.
    Renewed(bool),
    /// release: the owner's holds left (>= 0) or -1 when the hold was not held.
    Released(i64),
    /// probe: whether the hold is live, and the token the fence key shows (if any).
    Probed {
        /// Whether the hold is live.
        held: bool,
        /// The fence key's token, when it shows one.
        token: Option<u64>,
    },
    /// The server refused to run it (`NOSCRIPT`): it had no effect.
    NotRun,
}

/// A stable 64-bit id of a hold or owner string (FNV-1a: deterministic across runs and
/// platforms, unlike the std hasher).
pub fn id_of(bytes: &[u8]) -> u64 {
    /// FNV-1a 64-bit offset basis and prime (the published constants).
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    bytes
        .iter()
        .fold(OFFSET, |h, b| (h ^ u64::from(*b)).wrapping_mul(PRIME))
}

fn number(word: Option<&Vec<u8>>) -> Option<u64> {
    std::str::from_utf8(word?).ok()?.parse().ok()
}

/// The lock key and call of a command, if it runs one of the mutex scripts.
pub fn recognise(words: &[Vec<u8>]) -> Option<(String, LockOp)> {
    let verb = words.first()?;
    let script = words.get(1)?;
    let scripts = leasehold::script::scripts();
    let by_sha = if verb.eq_ignore_ascii_case(b"EVALSHA") {
        true
    } else if verb.eq_ignore_ascii_case(b"EVAL") {
        false
    } else {
        return None;
    };
    let sent = |s: &leasehold::script::LuaScript| {
        if by_sha {
            s.sha().as_bytes().eq_ignore_ascii_case(script)
        } else {
            s.source().as_bytes() == script.as_slice()
        }
    };
    let kind = [
        (&scripts.acquire, OpKind::Acquire),
        (&scripts.renew, OpKind::Renew),
        (&scripts.release, OpKind::Release),
        (&scripts.probe, OpKind::Probe),
    ]
    .into_iter()
    .find(|(s, _)| sent(s))
    .map(|(_, kind)| kind)?;
    let nkeys = usize::try_from(number(words.get(2))?).ok()?;
    let key = String::from_utf8_lossy(words.get(3)?).into_owned();
    let argv = words.get(3 + nkeys..)?;
    let hold = id_of(argv.first()?);
    let queued = kind == OpKind::Acquire && number(argv.get(3)).is_some_and(|ms| ms > 0);
    let (owner, ttl_ms) = match kind {
        OpKind::Acquire => (id_of(argv.get(1)?), number(argv.get(2))?),
        OpKind::Renew => (0, number(argv.get(1))?),
        OpKind::Release => (id_of(argv.get(1)?), 0),
        OpKind::Probe => (0, 0),
    };
    Some((
        key,
        LockOp {
            kind,
            hold,
            owner,
            ttl_ms,
            queued,
        },
    ))
}

fn int(value: &Value) -> Option<i64> {
    match value {
        Value::Int(n) => Some(*n),
        Value::BulkString(bytes) => std::str::from_utf8(bytes).ok()?.parse().ok(),
        Value::SimpleString(text) => text.parse().ok(),
        _ => None,
    }
}

/// The reply of `kind`'s script, read as its header documents; `None` if it does not
/// read that way (left ambiguous).
pub fn read_reply(kind: OpKind, value: &Value) -> Option<LockReply> {
    let items = match value {
        Value::Array(items) => Some(items.as_slice()),
        _ => None,
    };
    let token = |v: Option<&Value>| v.and_then(int).and_then(|t| u64::try_from(t).ok());
    match kind {
        OpKind::Acquire => {
            let items = items?;
            match int(items.first()?)? {
                1 => Some(LockReply::Granted {
                    token: token(items.get(1))?,
                }),
                _ => Some(LockReply::Denied),
            }
        }
        OpKind::Renew => Some(LockReply::Renewed(int(value)? == 1)),
        OpKind::Release => Some(LockReply::Released(int(value)?)),
        OpKind::Probe => {
            let items = items?;
            Some(LockReply::Probed {
                held: int(items.first()?)? == 1,
                token: token(items.get(1)),
            })
        }
    }
}

/// The lock name inside a key's `{hash tag}`, for reports; the key itself if it has none.
pub fn lock_name(key: &str) -> &str {
    key.split_once('{')
        .and_then(|(_, rest)| rest.split_once('}'))
        .map_or(key, |(name, _)| name)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn words(list: &[&str]) -> Vec<Vec<u8>> {
        list.iter().map(|w| w.as_bytes().to_vec()).collect()
    }

    #[test]
    fn an_acquire_by_sha_is_read_by_its_documented_arguments() {
        let sha = leasehold::script::scripts().acquire.sha().to_owned();
        let cmd = words(&[
            "EVALSHA", &sha, "4", "k:{a}", "f", "q", "w", "h1", "o1", "500", "0", "100",
        ]);
        let (key, op) = recognise(&cmd).unwrap();
        assert_eq!(key, "k:{a}");
        assert_eq!(lock_name(&key), "a");
        assert_eq!(op.kind, OpKind::Acquire);
        assert_eq!(
            (op.hold, op.owner, op.ttl_ms, op.queued),
            (id_of(b"h1"), id_of(b"o1"), 500, false)
        );
        let granted = Value::Array(vec![Value::Int(1), Value::BulkString(b"42".to_vec())]);
        assert_eq!(
            read_reply(OpKind::Acquire, &granted),
            Some(LockReply::Granted { token: 42 })
        );
        assert!(recognise(&words(&["GET", "k"])).is_none());
    }
}
