//! Reading a lock's state from code: who holds a lock name, with which fencing token, how
//! much lease is left, and who waits — every family's keys and the server clock, read in
//! one `MULTI` so that no script runs in between.
//!
//! Deadlines in the zsets and waiter hashes are server milliseconds; reading `TIME` in the
//! same transaction turns them into remaining times without trusting this machine's clock.
//! The handles' `inspect()` ([`Mutex::inspect`](crate::Mutex::inspect),
//! [`RwLock::inspect`](crate::RwLock::inspect),
//! [`Semaphore::inspect`](crate::Semaphore::inspect)) read through the client's backend;
//! [`read`] reads over any connection you hold (the `leasehold` ops CLI uses it).
//! Reading never changes a lock.

use std::collections::BTreeMap;
use std::time::Duration;

use redis::Value;
use redis::aio::ConnectionLike;

use crate::error::{self, Error, Result};
use crate::fencing::FencingToken;
use crate::keys::{LockKeys, ReaderKeys};
use crate::owner::client_name_of;

/// Hold fields in a lock hash start with this (the rest is the hold id).
const HOLD_FIELD_PREFIX: char = '#';

/// Flag fields in a lock hash start with this (`~q`: fair waiters queued, `~p`: a waiter
/// listens for the release); they name no owner.
const FLAG_FIELD_PREFIX: char = '~';

/// The name under which a lock key's unrecognised string value is shown.
const LONE_HOLD_FIELD: &str = "(string)";

/// What reading a lock's keys is about, in errors: the lock name's own `Backend` error.
const READING: &str = "reading the lock's keys";

/// Everything stored for one lock name (every family), at one server instant.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct LockState {
    /// Server time of the read, in ms.
    pub now_ms: i64,
    /// The mutex family ([`Client::mutex`](crate::Client::mutex)).
    pub mutex: MutexState,
    /// The read-write lock family ([`Client::rwlock`](crate::Client::rwlock)).
    pub rw: RwState,
    /// The semaphore family ([`Client::semaphore`](crate::Client::semaphore)).
    pub sem: SemState,
}

/// Who holds a lock hash (mutex or rwlock write side).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize),
    serde(rename_all = "snake_case")
)]
pub enum Holding {
    /// No lock hash: nobody holds it.
    Free,
    /// Owners with their claimed hold counts and hold ids.
    Held(Vec<Holder>),
    /// A layout this version does not recognise: the raw fields.
    Unknown(BTreeMap<String, String>),
}

/// One owner of a lock hash.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Holder {
    /// The owner id (`<client id>:a:<n>` or `<client id>:u:<caller's id>`; the client id
    /// followed by `@<name>` for a named client).
    pub owner: String,
    /// The owner's client name ([`ClientBuilder::name`](crate::ClientBuilder::name)), if
    /// its client has one.
    pub client_name: Option<String>,
    /// The owner's count field (claimed holds).
    pub count: i64,
    /// This owner's holds, each with its lease deadline.
    pub holds: Vec<Waiter>,
}

/// The mutex family's state.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct MutexState {
    /// Who holds it.
    pub holding: Holding,
    /// How much longer the lock key lives by the server's clock (its `PTTL`); `None` when
    /// it is absent, or has no expiry (which Leasehold's scripts never leave: with
    /// [`Holding::Held`], someone else wrote the key). Serialised as `lease_left_ms`.
    #[cfg_attr(
        feature = "serde",
        serde(rename = "lease_left_ms", serialize_with = "millis")
    )]
    pub lease_left: Option<Duration>,
    /// The last fencing token issued, if the fence key exists.
    pub fence: Option<FencingToken>,
    /// The fair queue's waiters, head first, with their entry deadlines.
    pub queue: Vec<Waiter>,
}

/// A hold id with its deadline: a fair-queue entry, a deadline-scored member of a zset, or
/// a lock hash's hold field.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Waiter {
    /// The hold id (`<16 hex>:<owner>`).
    pub hold: String,
    /// The client name the hold's owner carries, if its client has one.
    pub client_name: Option<String>,
    /// Deadline in server ms; `None` when the queue names a hold with no waiters entry, or
    /// a hold field's value is not a number.
    pub deadline_ms: Option<i64>,
    /// How long the deadline is away from the read's server time (zero once passed);
    /// `None` without a deadline.
    #[cfg_attr(feature = "serde", serde(skip))]
    pub left: Option<Duration>,
    /// In the read-write lock's fair line: the waiter wants the write lock (its entry ends
    /// in `w`). False everywhere else.
    pub wants_write: bool,
}

/// The read-write lock family's state.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct RwState {
    /// Who holds the write side.
    pub writer: Holding,
    /// How much longer the write hash lives by the server's clock (its `PTTL`); `None`
    /// when it is absent or has no expiry. Serialised as `lease_left_ms`.
    #[cfg_attr(
        feature = "serde",
        serde(rename = "lease_left_ms", serialize_with = "millis")
    )]
    pub lease_left: Option<Duration>,
    /// The last write fencing token issued, if the fence key exists.
    pub fence: Option<FencingToken>,
    /// Read holds with their lease deadlines.
    pub readers: Vec<Waiter>,
    /// Owner -> live read holds.
    pub owners: BTreeMap<String, String>,
    /// Waiting writers (`Spin`, `PubSub`) with their intent deadlines.
    pub intents: Vec<Waiter>,
    /// The fair line's waiters, head first, with their entry deadlines.
    pub queue: Vec<Waiter>,
}

/// The semaphore family's state.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct SemState {
    /// Permits with their lease deadlines (a handed, unclaimed permit carries its waiter's
    /// entry deadline instead; the zset does not tell the two apart).
    pub permits: Vec<Waiter>,
    /// The fair queue's waiters, head first, with their entry deadlines.
    pub queue: Vec<Waiter>,
}

impl MutexState {
    /// The last fencing token issued, if the fence key exists (the `fence` field).
    pub fn fencing_token(&self) -> Option<FencingToken> {
        self.fence
    }

    /// How much longer the lock hash lives by the server's clock (the `lease_left` field).
    pub fn lease_left(&self) -> Option<Duration> {
        self.lease_left
    }
}

impl RwState {
    /// Whether any read-write lock key exists.
    pub fn is_present(&self) -> bool {
        self.writer != Holding::Free
            || self.fence.is_some()
            || !self.readers.is_empty()
            || !self.owners.is_empty()
            || !self.intents.is_empty()
            || !self.queue.is_empty()
    }

    /// The last write fencing token issued, if the fence key exists (the `fence` field).
    pub fn fencing_token(&self) -> Option<FencingToken> {
        self.fence
    }

    /// How much longer the write hash lives by the server's clock (the `lease_left`
    /// field).
    pub fn lease_left(&self) -> Option<Duration> {
        self.lease_left
    }
}

impl SemState {
    /// Whether any semaphore key exists.
    pub fn is_present(&self) -> bool {
        !self.permits.is_empty() || !self.queue.is_empty()
    }
}

/// A `PTTL` reply as a remaining time: `None` for Redis's −2 (no key) and −1 (no expiry).
fn lease_left(pttl: i64) -> Option<Duration> {
    u64::try_from(pttl).ok().map(Duration::from_millis)
}

/// A fence key's value as a token; a value the scripts cannot have written (not a decimal
/// `u64`) is a protocol error naming the lock rather than a token silently dropped.
fn fence_token(name: &str, value: Option<String>) -> Result<Option<FencingToken>> {
    match value {
        None => Ok(None),
        Some(text) => match FencingToken::parse(&text) {
            Some(token) => Ok(Some(token)),
            None => Err(Error::Protocol {
                name: name.to_owned(),
                script: READING,
                reply: format!("the fence key holds {text:?}, not a fencing token"),
            }),
        },
    }
}

/// Serialises a remaining time as whole milliseconds (`null` without one).
#[cfg(feature = "serde")]
fn millis<S: serde::Serializer>(
    left: &Option<Duration>,
    out: S,
) -> std::result::Result<S::Ok, S::Error> {
    match left {
        Some(left) => out.serialize_some(&u64::try_from(left.as_millis()).unwrap_or(u64::MAX)),
        None => out.serialize_none(),
    }
}

/// Reads every family of lock `name` over `connection`, in one transaction.
///
/// For a lock on a client you already have, the handles' `inspect()` read the same through
/// it; this is for a connection of your own (a health endpoint's, an admin tool's).
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let redis = leasehold::redis::Client::open("redis://127.0.0.1:6379")?;
/// let mut connection = redis.get_multiplexed_async_connection().await?;
/// let state = leasehold::inspect::read(&mut connection, "orders:42").await?;
/// if let leasehold::inspect::Holding::Held(holders) = &state.mutex.holding {
///     for holder in holders {
///         println!("{} ({:?}) holds orders:42", holder.owner, holder.client_name);
///     }
/// }
/// println!("lease left: {:?}, {} waiting", state.mutex.lease_left(), state.mutex.queue.len());
/// # Ok(())
/// # }
/// ```
///
/// # Errors
///
/// [`Error::InvalidName`] for a name the lock handles would reject;
/// [`Error::WrongType`] or [`Error::Backend`] (naming the lock) when the server refused
/// a read or the connection failed.
pub async fn read(connection: &mut impl ConnectionLike, name: &str) -> Result<LockState> {
    let pipe = reads(name, true)?;
    let replies = pipe.query_async(connection).await;
    parse_state(name, replies.map_err(|err| error::from_backend(name, err))?)
}

/// Reads as [`read`] but in a plain pipeline, for use between `WATCH` and `MULTI` (an
/// `EXEC` would end the `WATCH`). A change during the reads aborts the caller's
/// transaction, so the reads need no atomicity of their own there.
///
/// # Errors
///
/// As [`read`].
pub async fn read_watched(connection: &mut impl ConnectionLike, name: &str) -> Result<LockState> {
    let pipe = reads(name, false)?;
    let replies = pipe.query_async(connection).await;
    parse_state(name, replies.map_err(|err| error::from_backend(name, err))?)
}

/// Reads lock `name`'s state through `backend` (the handles' `inspect()`).
pub(crate) async fn read_through(
    backend: &dyn crate::backend::Backend,
    name: &str,
) -> Result<LockState> {
    let pipe = reads(name, true)?;
    let replies = backend.query_pipeline(&pipe).await;
    parse_state(name, replies.map_err(|err| error::from_backend(name, err))?)
}

/// The reads of every family's keys of `name`, in a transaction if `atomic`.
fn reads(name: &str, atomic: bool) -> Result<redis::Pipeline> {
    let m = LockKeys::new(name)?;
    let rw = LockKeys::rwlock(name)?;
    let readers = ReaderKeys::of(&rw);
    let sem = LockKeys::semaphore(name)?;
    let mut pipe = redis::pipe();
    if atomic {
        pipe.atomic();
    }
    // Each reply, error or not, is judged on its own (`parse`): the lock key's `HGETALL`
    // fails with WRONGTYPE when the key is a lone hold's string, and is then unused.
    pipe.ignore_errors();
    pipe.cmd("TIME")
        .cmd("MGET")
        .arg(&m.lock)
        .hgetall(&m.lock)
        .pttl(&m.lock)
        .get(&m.fence)
        .lrange(&m.queue, 0, -1)
        .hgetall(&m.waiters)
        .hgetall(&rw.lock)
        .pttl(&rw.lock)
        .get(&rw.fence)
        .zrange_withscores(&readers.readers, 0, -1)
        .hgetall(&readers.owners)
        .zrange_withscores(&readers.intents, 0, -1)
        .lrange(&rw.queue, 0, -1)
        .hgetall(&rw.waiters)
        .zrange_withscores(&sem.lock, 0, -1)
        .lrange(&sem.queue, 0, -1)
        .hgetall(&sem.waiters);
    Ok(pipe)
}

/// Interprets the replies of [`reads`], in order.
fn parse_state(name: &str, replies: Vec<Value>) -> Result<LockState> {
    let mut replies = replies.into_iter();
    let mut next = || replies.next().unwrap_or(Value::Nil);

    let (secs, micros): (i64, i64) = parse(name, next())?;
    let now = secs * 1000 + micros / 1000;
    // The lock key is a lone hold's string or a hash (acquire.lua's header); `MGET`
    // reads the string (nil for a hash) and `HGETALL` then fails on it.
    let lone: Vec<Option<String>> = parse(name, next())?;
    let lone = lone.into_iter().next().flatten();
    let lock = next();
    let pttl = parse(name, next())?;
    let held = match lone {
        Some(hold) => lone_holding(hold, now + pttl, now),
        None => holding(parse(name, lock)?, now),
    };
    let fence = fence_token(name, parse(name, next())?)?;
    let queue: Vec<String> = parse(name, next())?;
    let waiters: BTreeMap<String, String> = parse(name, next())?;
    let mutex = MutexState {
        holding: held,
        lease_left: lease_left(pttl),
        fence,
        queue: with_deadlines(queue, &waiters, now),
    };

    let write: BTreeMap<String, String> = parse(name, next())?;
    let rw = RwState {
        writer: holding(write, now),
        lease_left: lease_left(parse(name, next())?),
        fence: fence_token(name, parse(name, next())?)?,
        readers: scored(parse(name, next())?, now),
        owners: parse(name, next())?,
        intents: scored(parse(name, next())?, now),
        queue: {
            let queue: Vec<String> = parse(name, next())?;
            let waiters: BTreeMap<String, String> = parse(name, next())?;
            with_deadlines(queue, &waiters, now)
        },
    };

    let permits = scored(parse(name, next())?, now);
    let queue: Vec<String> = parse(name, next())?;
    let waiters: BTreeMap<String, String> = parse(name, next())?;
    let sem = SemState {
        permits,
        queue: with_deadlines(queue, &waiters, now),
    };
    Ok(LockState {
        now_ms: now,
        mutex,
        rw,
        sem,
    })
}

fn parse<T: redis::FromRedisValue>(name: &str, value: Value) -> Result<T> {
    if let Value::ServerError(err) = value {
        return Err(error::from_backend(name, err.into()));
    }
    redis::from_redis_value(value).map_err(|err| Error::Protocol {
        name: name.to_owned(),
        script: READING,
        reply: err.to_string(),
    })
}

/// A hold id's entry with its deadline, as seen at server time `now`.
fn waiter(hold: String, deadline_ms: Option<i64>, now: i64) -> Waiter {
    let left = deadline_ms.map(|at| Duration::from_millis(u64::try_from(at - now).unwrap_or(0)));
    let client_name = owner_of(&hold).and_then(client_name_of).map(str::to_owned);
    Waiter {
        hold,
        client_name,
        deadline_ms,
        left,
        wants_write: false,
    }
}

/// Interprets a lock hash (DESIGN §7): `<owner> = count`, `#<hold id> = lease deadline`,
/// and the `~` flags, which say nothing about who holds it.
fn holding(fields: BTreeMap<String, String>, now: i64) -> Holding {
    if fields.is_empty() {
        return Holding::Free;
    }
    let mut holders: Vec<Holder> = Vec::new();
    let mut holds = Vec::new();
    for (field, value) in &fields {
        if field.starts_with(FLAG_FIELD_PREFIX) {
            continue;
        }
        match field.strip_prefix(HOLD_FIELD_PREFIX) {
            Some(hold) => holds.push(waiter(hold.to_owned(), value.parse().ok(), now)),
            None => match value.parse() {
                Ok(count) => holders.push(Holder {
                    client_name: client_name_of(field).map(str::to_owned),
                    owner: field.clone(),
                    count,
                    holds: Vec::new(),
                }),
                Err(_) => return Holding::Unknown(fields),
            },
        }
    }
    for hold in holds {
        let owner = owner_of(&hold.hold);
        match holders.iter_mut().find(|h| Some(h.owner.as_str()) == owner) {
            Some(holder) => holder.holds.push(hold),
            None => return Holding::Unknown(fields),
        }
    }
    Holding::Held(holders)
}

/// The owner a hold id names: a hold id is `<16 hex>:<owner>`.
fn owner_of(hold: &str) -> Option<&str> {
    hold.split_once(':').map(|(_, owner)| owner)
}

/// Interprets a lock key holding a string: a lone hold, `<16 hex>:<owner>`, whose lease
/// ends with the key (`deadline_ms`); any other string is shown raw.
fn lone_holding(hold: String, deadline_ms: i64, now: i64) -> Holding {
    match owner_of(&hold) {
        Some(owner) if !owner.is_empty() => Holding::Held(vec![Holder {
            client_name: client_name_of(owner).map(str::to_owned),
            owner: owner.to_owned(),
            count: 1,
            holds: vec![waiter(hold, Some(deadline_ms), now)],
        }]),
        _ => Holding::Unknown(BTreeMap::from([(LONE_HOLD_FIELD.to_owned(), hold)])),
    }
}

fn with_deadlines(queue: Vec<String>, waiters: &BTreeMap<String, String>, now: i64) -> Vec<Waiter> {
    queue
        .into_iter()
        .map(|hold| {
            // An entry is `<deadline ms> <lease TTL ms> <attempt>`, and in the read-write
            // lock's line then ` r` or ` w`.
            let entry = waiters.get(&hold);
            let deadline = entry.and_then(|entry| entry.split(' ').next()?.parse().ok());
            let wants_write = entry.is_some_and(|entry| entry.ends_with(" w"));
            Waiter {
                wants_write,
                ..waiter(hold, deadline, now)
            }
        })
        .collect()
}

fn scored(members: Vec<(String, f64)>, now: i64) -> Vec<Waiter> {
    members
        .into_iter()
        // Scores are whole server milliseconds, exact in an f64 until the year 287396.
        .map(|(hold, score)| waiter(hold, Some(score as i64), now))
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn fields(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn groups_holds_by_owner() {
        let owner = "c:a:1";
        let hold = format!("{:016x}:{owner}", 7);
        let held = holding(
            fields(&[(owner, "1"), (&format!("#{hold}"), "1700000000123")]),
            1_700_000_000_000,
        );
        assert_eq!(
            held,
            Holding::Held(vec![Holder {
                client_name: None,
                owner: owner.into(),
                count: 1,
                holds: vec![Waiter {
                    client_name: None,
                    hold,
                    deadline_ms: Some(1_700_000_000_123),
                    left: Some(Duration::from_millis(123)),
                    wants_write: false,
                }]
            }])
        );
    }

    #[test]
    fn flags_name_no_owner() {
        let hold = "0000000000000001:c:a:2";
        let held = holding(
            fields(&[
                ("c:a:2", "1"),
                (&format!("#{hold}"), "not a deadline"),
                ("~q", "1"),
                ("~p", "1"),
            ]),
            0,
        );
        assert_eq!(
            held,
            Holding::Held(vec![Holder {
                client_name: None,
                owner: "c:a:2".into(),
                count: 1,
                holds: vec![Waiter {
                    client_name: None,
                    hold: hold.into(),
                    deadline_ms: None,
                    left: None,
                    wants_write: false,
                }]
            }])
        );
    }

    #[test]
    fn reads_a_lone_hold_string_as_its_owner_s_one_hold() {
        let hold = format!("{:016x}:c:a:3", 9);
        assert_eq!(
            lone_holding(hold.clone(), 1_700_000_000_500, 1_700_000_000_600),
            Holding::Held(vec![Holder {
                client_name: None,
                owner: "c:a:3".into(),
                count: 1,
                holds: vec![Waiter {
                    client_name: None,
                    hold,
                    deadline_ms: Some(1_700_000_000_500),
                    left: Some(Duration::ZERO),
                    wants_write: false,
                }]
            }])
        );
        assert_eq!(
            lone_holding("not a lease".into(), 0, 0),
            Holding::Unknown(fields(&[(LONE_HOLD_FIELD, "not a lease")]))
        );
    }

    #[test]
    fn reads_a_waiter_entry_s_deadline() {
        let waiters = fields(&[("h", "1700000000123 30000 3")]);
        let queue = with_deadlines(vec!["h".into()], &waiters, 1_700_000_000_000);
        assert_eq!(queue[0].deadline_ms, Some(1_700_000_000_123));
        assert_eq!(queue[0].left, Some(Duration::from_millis(123)));
    }

    #[test]
    fn keeps_unknown_layouts_raw() {
        let raw = fields(&[("owner", "many")]);
        assert_eq!(holding(raw.clone(), 0), Holding::Unknown(raw));
    }
}
