//! The Python lock libraries the bench runs as peers, as data: a plain, ordered, serialisable
//! name for each, the `--lib` the worker script takes, the key the library writes for a lock
//! name, and the plain commands its client sends itself (for the round-trip attribution of
//! [`commandstats`](crate::bench::commandstats)).

use serde::{Deserialize, Serialize};

/// A Python Redis lock library, used the way its README shows a user.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum PythonLib {
    /// redis-py's `redis.lock.Lock` (`r.lock(name, timeout=…, blocking=True)`): `SET NX PX`,
    /// retried after its default 0.1 s sleep; released by a compare-and-delete script.
    RedisPy,
    /// python-redis-lock's `redis_lock.Lock(r, name, expire=…)`: a GET (is it already mine?),
    /// `SET NX EX`, and on failure a BLPOP on a signal list that the release script pushes to,
    /// so a release wakes one waiter.
    PythonRedisLock,
}

/// Plain commands redis-py's lock sends itself: `SET NX PX`; its release script's GET and DEL
/// are script-internal, EVALSHA is `noscript`.
const REDIS_PY_DIRECT: &[&str] = &["set"];
/// Plain commands python-redis-lock sends itself: the GET of `acquire`'s "already held?"
/// check and `SET NX EX`; BLPOP and EVALSHA are `noscript`.
const PYTHON_REDIS_LOCK_DIRECT: &[&str] = &["get", "set"];
/// python-redis-lock's release script (the only script the bench runs through it) starts with
/// a GET of the lock key: one per script call, not the client's.
const PYTHON_REDIS_LOCK_SCRIPTED: &[&str] = &["get"];

impl PythonLib {
    /// Both libraries.
    pub const ALL: [PythonLib; 2] = [PythonLib::RedisPy, PythonLib::PythonRedisLock];

    /// The worker script's `--lib` value.
    pub fn worker_arg(self) -> &'static str {
        match self {
            PythonLib::RedisPy => "redis-py",
            PythonLib::PythonRedisLock => "python-redis-lock",
        }
    }

    /// The Redis key the library stores a held lock `name` under (its value is the holder's
    /// token).
    pub fn key(self, name: &str) -> String {
        match self {
            PythonLib::RedisPy => name.to_owned(),
            PythonLib::PythonRedisLock => format!("lock:{name}"),
        }
    }

    /// Plain commands the library's client sends itself.
    pub fn direct_commands(self) -> &'static [&'static str] {
        match self {
            PythonLib::RedisPy => REDIS_PY_DIRECT,
            PythonLib::PythonRedisLock => PYTHON_REDIS_LOCK_DIRECT,
        }
    }

    /// Those of [`Self::direct_commands`] that the library's scripts also run, once per
    /// script call.
    pub fn scripted_commands(self) -> &'static [&'static str] {
        match self {
            PythonLib::RedisPy => &[],
            PythonLib::PythonRedisLock => PYTHON_REDIS_LOCK_SCRIPTED,
        }
    }
}
