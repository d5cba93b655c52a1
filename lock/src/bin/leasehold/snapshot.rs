//! A consistent picture of one lock name's state: every family's keys and the server clock,
//! read in one `MULTI` so that no script runs in between.
//!
//! Deadlines in the zsets and waiter hashes are server milliseconds; reading `TIME` in the
//! same transaction turns them into remaining times without trusting this machine's clock.

use std::collections::BTreeMap;

use redis::Value;
use serde::Serialize;

use crate::error::CliResult;
use crate::layout::Layout;
use crate::target::Server;

/// Hold fields in a lock hash start with this (the rest is the hold id).
const HOLD_FIELD_PREFIX: char = '#';

/// Flag fields in a lock hash start with this (`~q`: fair waiters queued, `~p`: a waiter
/// listens for the release); they name no owner.
const FLAG_FIELD_PREFIX: char = '~';

/// The name under which a lock key's unrecognised string value is shown.
const LONE_HOLD_FIELD: &str = "(string)";

/// Everything stored for one lock name, at one server instant.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Snapshot {
    /// Server time of the read, in ms.
    pub now_ms: i64,
    pub mutex: MutexState,
    pub rw: RwState,
    pub sem: SemState,
}

/// Who holds a lock hash (mutex or rwlock write side).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Holding {
    /// No lock hash.
    Free,
    /// Owners with their claimed hold counts and hold ids.
    Held(Vec<Holder>),
    /// A layout this version does not recognise: the raw fields.
    Unknown(BTreeMap<String, String>),
}

/// One owner of a lock hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Holder {
    pub owner: String,
    /// The owner's count field (claimed holds).
    pub count: i64,
    /// This owner's `#<hold id>` fields, each with its lease deadline.
    pub holds: Vec<Waiter>,
}

/// The mutex family.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MutexState {
    pub holding: Holding,
    /// PTTL of the lock hash (−2: absent, −1: no expiry).
    pub pttl: i64,
    /// The last fencing token issued, if the fence key exists.
    pub fence: Option<String>,
    pub queue: Vec<Waiter>,
}

/// A hold id with its deadline: a fair-queue entry, a deadline-scored member of a zset, or
/// a lock hash's hold field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Waiter {
    pub hold: String,
    /// Deadline in server ms; `None` when the queue names a hold with no waiters entry, or
    /// a hold field's value is not a number.
    pub deadline_ms: Option<i64>,
}

/// The read-write lock family.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RwState {
    pub writer: Holding,
    /// PTTL of the write hash.
    pub pttl: i64,
    pub fence: Option<String>,
    /// Read holds with their lease deadlines.
    pub readers: Vec<Waiter>,
    /// Owner -> live read holds.
    pub owners: BTreeMap<String, String>,
    /// Waiting writers with their intent deadlines.
    pub intents: Vec<Waiter>,
}

/// The semaphore family.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SemState {
    /// Permits with their lease deadlines (a handed, unclaimed permit carries its waiter's
    /// entry deadline instead; the zset does not tell the two apart).
    pub permits: Vec<Waiter>,
    pub queue: Vec<Waiter>,
}

impl RwState {
    /// Whether any read-write lock key exists.
    pub fn is_present(&self) -> bool {
        self.writer != Holding::Free
            || self.fence.is_some()
            || !self.readers.is_empty()
            || !self.owners.is_empty()
            || !self.intents.is_empty()
    }
}

impl SemState {
    /// Whether any semaphore key exists.
    pub fn is_present(&self) -> bool {
        !self.permits.is_empty() || !self.queue.is_empty()
    }
}

impl Snapshot {
    /// Reads every family of `layout` from `server` in one transaction.
    pub async fn read(server: &mut Server, layout: &Layout) -> CliResult<Self> {
        Self::read_with(server, layout, true).await
    }

    /// Reads as [`Snapshot::read`] but in a plain pipeline, for use between `WATCH` and
    /// `MULTI` (an `EXEC` would end the `WATCH`). A change during the reads aborts the
    /// caller's transaction, so the reads need no atomicity of their own there.
    pub async fn read_watched(server: &mut Server, layout: &Layout) -> CliResult<Self> {
        Self::read_with(server, layout, false).await
    }

    async fn read_with(server: &mut Server, layout: &Layout, atomic: bool) -> CliResult<Self> {
        let (m, rw, sem) = (&layout.mutex, &layout.rw, &layout.sem);
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
            .hgetall(&rw.write)
            .pttl(&rw.write)
            .get(&rw.fence)
            .zrange_withscores(&rw.readers, 0, -1)
            .hgetall(&rw.owners)
            .zrange_withscores(&rw.intents, 0, -1)
            .zrange_withscores(&sem.permits, 0, -1)
            .lrange(&sem.queue, 0, -1)
            .hgetall(&sem.waiters);
        let replies: Vec<Value> = pipe
            .query_async(&mut server.connection)
            .await
            .map_err(|err| server.failed("reading the lock's keys", err))?;
        let mut replies = replies.into_iter();
        let mut next = || replies.next().unwrap_or(Value::Nil);

        let (secs, micros): (i64, i64) = parse(server, next())?;
        let now_ms = secs * 1000 + micros / 1000;
        // The lock key is a lone hold's string or a hash (acquire.lua's header); `MGET`
        // reads the string (nil for a hash) and `HGETALL` then fails on it.
        let lone: Vec<Option<String>> = parse(server, next())?;
        let lone = lone.into_iter().next().flatten();
        let lock = next();
        let pttl = parse(server, next())?;
        let held = match lone {
            Some(hold) => lone_holding(hold, now_ms + pttl),
            None => holding(parse(server, lock)?),
        };
        let fence = parse(server, next())?;
        let queue: Vec<String> = parse(server, next())?;
        let waiters: BTreeMap<String, String> = parse(server, next())?;
        let mutex = MutexState {
            holding: held,
            pttl,
            fence,
            queue: with_deadlines(queue, &waiters),
        };

        let write: BTreeMap<String, String> = parse(server, next())?;
        let rw = RwState {
            writer: holding(write),
            pttl: parse(server, next())?,
            fence: parse(server, next())?,
            readers: scored(parse(server, next())?),
            owners: parse(server, next())?,
            intents: scored(parse(server, next())?),
        };

        let permits = scored(parse(server, next())?);
        let queue: Vec<String> = parse(server, next())?;
        let waiters: BTreeMap<String, String> = parse(server, next())?;
        let sem = SemState {
            permits,
            queue: with_deadlines(queue, &waiters),
        };
        Ok(Self {
            now_ms,
            mutex,
            rw,
            sem,
        })
    }
}

fn parse<T: redis::FromRedisValue>(server: &Server, value: Value) -> CliResult<T> {
    if let Value::ServerError(err) = value {
        return Err(server.failed("reading the lock's keys", err.into()));
    }
    redis::from_redis_value(value)
        .map_err(|err| server.failed("reading the lock's keys", err.into()))
}

/// Interprets a lock hash (DESIGN §7): `<owner> = count`, `#<hold id> = lease deadline`,
/// and the `~` flags, which say nothing about who holds it.
fn holding(fields: BTreeMap<String, String>) -> Holding {
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
            Some(hold) => holds.push(Waiter {
                hold: hold.to_owned(),
                deadline_ms: value.parse().ok(),
            }),
            None => match value.parse() {
                Ok(count) => holders.push(Holder {
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
fn lone_holding(hold: String, deadline_ms: i64) -> Holding {
    match owner_of(&hold) {
        Some(owner) if !owner.is_empty() => Holding::Held(vec![Holder {
            owner: owner.to_owned(),
            count: 1,
            holds: vec![Waiter {
                hold,
                deadline_ms: Some(deadline_ms),
            }],
        }]),
        _ => Holding::Unknown(BTreeMap::from([(LONE_HOLD_FIELD.to_owned(), hold)])),
    }
}

fn with_deadlines(queue: Vec<String>, waiters: &BTreeMap<String, String>) -> Vec<Waiter> {
    queue
        .into_iter()
        .map(|hold| Waiter {
            // An entry is `<deadline ms> <lease TTL ms> <attempt>`.
            deadline_ms: waiters
                .get(&hold)
                .and_then(|entry| entry.split(' ').next()?.parse().ok()),
            hold,
        })
        .collect()
}

fn scored(members: Vec<(String, f64)>) -> Vec<Waiter> {
    members
        .into_iter()
        .map(|(hold, score)| Waiter {
            hold,
            // Scores are whole server milliseconds, exact in an f64 until the year 287396.
            deadline_ms: Some(score as i64),
        })
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
        let held = holding(fields(&[
            (owner, "1"),
            (&format!("#{hold}"), "1700000000123"),
        ]));
        assert_eq!(
            held,
            Holding::Held(vec![Holder {
                owner: owner.into(),
                count: 1,
                holds: vec![Waiter {
                    hold,
                    deadline_ms: Some(1_700_000_000_123)
                }]
            }])
        );
    }

    #[test]
    fn flags_name_no_owner() {
        let hold = "0000000000000001:c:a:2";
        let held = holding(fields(&[
            ("c:a:2", "1"),
            (&format!("#{hold}"), "not a deadline"),
            ("~q", "1"),
            ("~p", "1"),
        ]));
        assert_eq!(
            held,
            Holding::Held(vec![Holder {
                owner: "c:a:2".into(),
                count: 1,
                holds: vec![Waiter {
                    hold: hold.into(),
                    deadline_ms: None
                }]
            }])
        );
    }

    #[test]
    fn reads_a_lone_hold_string_as_its_owner_s_one_hold() {
        let hold = format!("{:016x}:c:a:3", 9);
        assert_eq!(
            lone_holding(hold.clone(), 1_700_000_000_500),
            Holding::Held(vec![Holder {
                owner: "c:a:3".into(),
                count: 1,
                holds: vec![Waiter {
                    hold,
                    deadline_ms: Some(1_700_000_000_500)
                }]
            }])
        );
        assert_eq!(
            lone_holding("not a lease".into(), 0),
            Holding::Unknown(fields(&[(LONE_HOLD_FIELD, "not a lease")]))
        );
    }

    #[test]
    fn reads_a_waiter_entry_s_deadline() {
        let waiters = fields(&[("h", "1700000000123 30000 3")]);
        let queue = with_deadlines(vec!["h".into()], &waiters);
        assert_eq!(queue[0].deadline_ms, Some(1_700_000_000_123));
    }

    #[test]
    fn keeps_unknown_layouts_raw() {
        let raw = fields(&[("owner", "many")]);
        assert_eq!(holding(raw.clone()), Holding::Unknown(raw));
    }
}
