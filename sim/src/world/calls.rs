//! The lock-script calls a client sends, read off the wire for the linearizability
//! history: which script, on which lock key, for which hold, and what its reply said.
//!
//! Why it exists: the checker judges the servers' answers to the calls the production
//! client really made (see [`crate::checker::linear`]), so the calls are recognised where
//! they leave the process, at the backend seam, not re-derived from the client's beliefs.
//!
//! Invariant: every lock operation's script is recognised (the mutex's acquire, renew,
//! release and probe, which RedLock sends to each master and the read-write lock's writer
//! renews and probes with; the read-write lock's `rw_*` scripts; the semaphore's), by the
//! SHA or source the library sends, and named by its [`Family`] and its shape
//! ([`OpKind`]); their arguments are read at the positions each script's header documents;
//! nothing here decides anything, and a reply it cannot read is left unrecorded
//! (ambiguous). `semaphore_resize` changes no hold, so it is read apart ([`recognise_resize`]):
//! the size it asks for and whether the server answered that it stored it, from which the
//! checker derives the size a semaphore had at each point.

use serde::Serialize;

use redis::{RedisResult, Value};

/// Which member of the lock family a script serves: the checker's rules read the calls of
/// the family they judge (the linearizability check and the fair line's rules, the
/// mutex's; writer preference, the read-write lock's; capacity, the semaphore's; the
/// per-hold rules on renewals and abandoned acquires, every family's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Family {
    /// The mutex scripts (`acquire.lua`, `renew.lua`, `release.lua`, `probe.lua`), also
    /// RedLock's per master and the read-write lock writer's renewals and probes.
    Mutex,
    /// A read hold of the read-write lock (`rw_read_*.lua`).
    Read,
    /// A write hold's acquire or release (`rw_write_*.lua`).
    Write,
    /// A semaphore permit (`semaphore_*.lua`).
    Permit,
}

/// Which operation, by the shape of its arguments and reply (each family's scripts share
/// the mutex's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum OpKind {
    /// `acquire.lua` (`rw_read_acquire`, `rw_write_acquire`, `semaphore_acquire`).
    Acquire,
    /// `renew.lua` (`rw_read_renew`, `semaphore_renew`).
    Renew,
    /// `release.lua` (`rw_read_release`, `rw_write_release`, `semaphore_release`).
    Release,
    /// `probe.lua` (`rw_read_probe`, `semaphore_probe`).
    Probe,
}

/// One lock-script call: hold and owner ids are hashed (see [`id_of`]) to keep the
/// history small.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LockOp {
    /// The lock family whose script it is.
    pub family: Family,
    /// The operation.
    pub kind: OpKind,
    /// The hold id (`ARGV[1]` of every lock script).
    pub hold: u64,
    /// The owner (acquire and release; 0 where the script takes none: the semaphore's).
    pub owner: u64,
    /// The lease asked for in ms (acquire and renew; 0 otherwise).
    pub ttl_ms: u64,
    /// An acquire that waits in a line: a fair waiter's attempt (the mutex's and the
    /// semaphore's `ARGV[4]` > 0, a reader's `ARGV[5]`, a writer's `ARGV[7]`), which a
    /// release may grant outright with no call of its own the history sees, or a waiting
    /// writer's that records its intent (`ARGV[4]` > 0 of `rw_write_acquire`). A run waits
    /// one way: only its writers record intents when it does not wait fairly.
    pub queued: bool,
    /// The line entry timeout a fair waiter's attempt asks for, ms (the mutex's and the
    /// semaphore's `ARGV[4]`, a reader's `ARGV[5]`, a writer's `ARGV[7]`); 0 for a call
    /// that does not join the line.
    pub entry_ms: u64,
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
    /// The server refused to run it (`NOSCRIPT`; `NOREPLICAS` from a master short of good
    /// replicas, or `READONLY` from a replica, each refusing a script at its first write):
    /// it had no effect.
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

/// The `KEYS` of an `EVAL`/`EVALSHA` command (`words`: verb, script, key count, keys,
/// arguments), if it reads as one.
pub fn keys(words: &[Vec<u8>]) -> Option<&[Vec<u8>]> {
    let nkeys = usize::try_from(number(words.get(2))?).ok()?;
    words.get(3..3usize.checked_add(nkeys)?)
}

/// The lock key and call of a command, if it runs one of the lock scripts.
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
    let (family, kind) = [
        (&scripts.acquire, Family::Mutex, OpKind::Acquire),
        (&scripts.renew, Family::Mutex, OpKind::Renew),
        (&scripts.release, Family::Mutex, OpKind::Release),
        (&scripts.probe, Family::Mutex, OpKind::Probe),
        (&scripts.rw_read_acquire, Family::Read, OpKind::Acquire),
        (&scripts.rw_read_renew, Family::Read, OpKind::Renew),
        (&scripts.rw_read_release, Family::Read, OpKind::Release),
        (&scripts.rw_read_probe, Family::Read, OpKind::Probe),
        (&scripts.rw_write_acquire, Family::Write, OpKind::Acquire),
        (&scripts.rw_write_release, Family::Write, OpKind::Release),
        (&scripts.semaphore_acquire, Family::Permit, OpKind::Acquire),
        (&scripts.semaphore_renew, Family::Permit, OpKind::Renew),
        (&scripts.semaphore_release, Family::Permit, OpKind::Release),
        (&scripts.semaphore_probe, Family::Permit, OpKind::Probe),
    ]
    .into_iter()
    .find(|(s, _, _)| sent(s))
    .map(|(_, family, kind)| (family, kind))?;
    let keys = keys(words)?;
    let key = String::from_utf8_lossy(keys.first()?).into_owned();
    let argv = words.get(3 + keys.len()..)?;
    let hold = id_of(argv.first()?);
    // Every family's acquire takes its TTL at `ARGV[3]` and its renewal at `ARGV[2]`; the
    // semaphore's `ARGV[2]` is its size, not an owner.
    let owner = |argv: &[Vec<u8>]| match family {
        Family::Permit => Some(0),
        Family::Mutex | Family::Read | Family::Write => Some(id_of(argv.get(1)?)),
    };
    // Where each family's acquire says it joins the line (a reader's `ARGV[4]` is its fence
    // margin), and a writer that waits without one records an intent (`ARGV[4]`).
    let entry_at = match family {
        Family::Mutex | Family::Permit => 3,
        Family::Read => 4,
        Family::Write => 6,
    };
    let entry_ms = match kind {
        OpKind::Acquire => number(argv.get(entry_at)).unwrap_or(0),
        OpKind::Renew | OpKind::Release | OpKind::Probe => 0,
    };
    let intent = family == Family::Write && number(argv.get(3)).is_some_and(|ms| ms > 0);
    let queued = kind == OpKind::Acquire && (entry_ms > 0 || intent);
    let (owner, ttl_ms) = match kind {
        OpKind::Acquire => (owner(argv)?, number(argv.get(2))?),
        OpKind::Renew => (0, number(argv.get(1))?),
        OpKind::Release => (owner(argv)?, 0),
        OpKind::Probe => (0, 0),
    };
    Some((
        key,
        LockOp {
            family,
            kind,
            hold,
            owner,
            ttl_ms,
            queued,
            entry_ms,
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

/// The error a server gives a script it does not have: the call had no effect.
const NO_SCRIPT: redis::ErrorKind = redis::ErrorKind::Server(redis::ServerErrorKind::NoScript);

/// What the result of `kind`'s script call says, as the client would read it: a reply read
/// as the script's header documents, or "not run" for a server that lacks the script or
/// refused its writes (short of replicas, or a replica); `None` for anything else (lost,
/// timed out, failed mid-way: ambiguous).
pub fn read_result(kind: OpKind, result: &RedisResult<Value>) -> Option<LockReply> {
    match result {
        Ok(value) => read_reply(kind, value),
        Err(err)
            if err.kind() == NO_SCRIPT || matches!(err.code(), Some("NOREPLICAS" | "READONLY")) =>
        {
            Some(LockReply::NotRun)
        }
        Err(_) => None,
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

/// The permits key and the size asked for, if `words` run `semaphore_resize.lua` (by its
/// SHA or source).
pub fn recognise_resize(words: &[Vec<u8>]) -> Option<(String, u32)> {
    let verb = words.first()?;
    let script = words.get(1)?;
    let resize = &leasehold::script::scripts().semaphore_resize;
    let sent = if verb.eq_ignore_ascii_case(b"EVALSHA") {
        resize.sha().as_bytes().eq_ignore_ascii_case(script)
    } else {
        verb.eq_ignore_ascii_case(b"EVAL") && resize.source().as_bytes() == script.as_slice()
    };
    if !sent {
        return None;
    }
    let keys = keys(words)?;
    let key = String::from_utf8_lossy(keys.first()?).into_owned();
    let permits = u32::try_from(number(words.get(3 + keys.len()))?).ok()?;
    Some((key, permits))
}

/// What a resize's reply says (its header: 1 if the semaphore was live and now stores the
/// size, 0 if it was idle and stores nothing); `None` for a reply that does not read so
/// (lost, failed or not run: ambiguous, as a lock call's).
pub fn read_resize(result: &RedisResult<Value>) -> Option<bool> {
    match int(result.as_ref().ok()?)? {
        1 => Some(true),
        0 => Some(false),
        _ => None,
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
        assert_eq!((op.family, op.kind), (Family::Mutex, OpKind::Acquire));
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

    #[test]
    fn a_resize_is_read_apart_by_its_header() {
        let sha = leasehold::script::scripts()
            .semaphore_resize
            .sha()
            .to_owned();
        let cmd = words(&[
            "EVALSHA", &sha, "4", "s:{a}", "q", "w", "z", "3", "ch", "in",
        ]);
        assert_eq!(recognise_resize(&cmd), Some(("s:{a}".to_owned(), 3)));
        assert!(recognise(&cmd).is_none());
        assert_eq!(read_resize(&Ok(Value::Int(1))), Some(true));
        assert_eq!(read_resize(&Ok(Value::Int(0))), Some(false));
        assert_eq!(read_resize(&Ok(Value::Nil)), None);
        let acquire = leasehold::script::scripts().acquire.sha().to_owned();
        assert!(recognise_resize(&words(&["EVALSHA", &acquire, "1", "k", "h"])).is_none());
    }

    #[test]
    fn the_read_write_locks_and_the_semaphores_calls_are_read_by_their_headers() {
        let scripts = leasehold::script::scripts();
        let (write, sem) = (
            scripts.rw_write_acquire.sha(),
            scripts.semaphore_acquire.sha(),
        );
        let keys = ["k:{a}:rw", "r", "o", "i", "f", "q", "w"];
        let write_by = |intent, entry| {
            let mut cmd = vec!["EVALSHA", write, "7"];
            cmd.extend(keys);
            cmd.extend(["h1", "o1", "500", intent, "60000", "1000", entry, "0"]);
            recognise(&words(&cmd)).unwrap()
        };
        let (key, op) = write_by("5000", "0");
        assert_eq!(lock_name(&key), "a");
        assert_eq!((op.family, op.kind), (Family::Write, OpKind::Acquire));
        assert_eq!((op.owner, op.ttl_ms, op.queued), (id_of(b"o1"), 500, true));
        // A fair writer waits by its line entry, a try by neither.
        assert!(write_by("0", "3000").1.queued);
        assert!(!write_by("0", "0").1.queued);
        // A reader's `ARGV[4]` is its fence margin; it waits in the line by `ARGV[5]`.
        let read = scripts.rw_read_acquire.sha();
        let read_by = |entry| {
            let mut cmd = vec!["EVALSHA", read, "7"];
            cmd.extend(keys);
            cmd.extend(["h3", "o1", "500", "60000", entry, "1"]);
            recognise(&words(&cmd)).unwrap().1
        };
        assert_eq!(
            (read_by("0").family, read_by("0").queued),
            (Family::Read, false)
        );
        assert!(read_by("3000").queued);
        let cmd = [
            "EVALSHA",
            sem,
            "4",
            "k:{a}:sem",
            "q",
            "w",
            "s",
            "h2",
            "3",
            "700",
            "0",
            "i:",
        ];
        let (_, op) = recognise(&words(&cmd)).unwrap();
        assert_eq!((op.family, op.kind), (Family::Permit, OpKind::Acquire));
        assert_eq!(
            (op.hold, op.owner, op.ttl_ms, op.queued),
            (id_of(b"h2"), 0, 700, false)
        );
        let refused = Value::Array(vec![Value::Int(-1), Value::BulkString(b"2".to_vec())]);
        assert_eq!(read_reply(op.kind, &refused), Some(LockReply::Denied));
    }
}
