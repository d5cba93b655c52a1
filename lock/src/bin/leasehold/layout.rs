//! Where each lock family keeps its state for one lock name (docs/DESIGN.md §7).
//!
//! The name is validated by `leasehold::LockKeys::new`, the library's own check, so the CLI
//! accepts exactly the names the library does. The mutex keys come from `LockKeys`; the
//! read-write lock and semaphore families come from the library's own key derivation
//! ([`LockKeys::rwlock`], [`LockKeys::semaphore`], [`ReaderKeys`]), so the CLI cannot drift
//! from the layout the scripts use.

use leasehold::{LockKeys, ReaderKeys};

use crate::error::{CliError, CliResult};

/// A lock family sharing the name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Family {
    /// The mutex: lock hash, fair queue, waiters hash.
    Mutex,
    /// The read-write lock: write hash, readers, read owners, writer intents, fair line,
    /// waiters hash.
    Rwlock,
    /// The semaphore: permits, fair queue, waiters hash.
    Semaphore,
}

/// Every key of one lock name.
#[derive(Debug, Clone)]
pub struct Layout {
    pub name: String,
    pub mutex: LockKeys,
    pub rw: RwKeys,
    pub sem: SemKeys,
}

/// The read-write lock's keys.
#[derive(Debug, Clone)]
pub struct RwKeys {
    /// Hash: write holds, in the mutex layout.
    pub write: String,
    /// Zset: read hold id -> lease deadline (server ms).
    pub readers: String,
    /// Hash: owner -> live read holds.
    pub owners: String,
    /// Zset: waiting writer's hold id -> intent deadline (server ms).
    pub intents: String,
    /// List: the fair line, head first.
    pub queue: String,
    /// Hash: waiter hold id -> entry (deadline, TTL, attempt, `r` or `w`).
    pub waiters: String,
}

/// The semaphore's keys.
#[derive(Debug, Clone)]
pub struct SemKeys {
    /// Zset: permit hold id -> lease deadline (server ms).
    pub permits: String,
    /// List: fair waiters, head first.
    pub queue: String,
    /// Hash: waiter hold id -> entry deadline (server ms).
    pub waiters: String,
}

impl Layout {
    /// Validates `name` and derives its keys.
    pub fn new(name: &str) -> CliResult<Self> {
        let mutex = LockKeys::new(name).map_err(CliError::InvalidName)?;
        let rw = LockKeys::rwlock(name).map_err(CliError::InvalidName)?;
        let readers = ReaderKeys::of(&rw);
        let sem = LockKeys::semaphore(name).map_err(CliError::InvalidName)?;
        Ok(Self {
            name: name.to_owned(),
            rw: RwKeys {
                readers: readers.readers,
                owners: readers.owners,
                intents: readers.intents,
                queue: rw.queue,
                waiters: rw.waiters,
                write: rw.lock,
            },
            sem: SemKeys {
                queue: sem.queue,
                waiters: sem.waiters,
                permits: sem.lock,
            },
            mutex,
        })
    }

    /// The keys that hold `family`'s holders and waiters (never its fence key).
    pub fn state_keys(&self, family: Family) -> Vec<String> {
        let keys: &[&String] = match family {
            Family::Mutex => &[&self.mutex.lock, &self.mutex.queue, &self.mutex.waiters],
            Family::Rwlock => &[
                &self.rw.write,
                &self.rw.readers,
                &self.rw.owners,
                &self.rw.intents,
                &self.rw.queue,
                &self.rw.waiters,
            ],
            Family::Semaphore => &[&self.sem.permits, &self.sem.queue, &self.sem.waiters],
        };
        keys.iter().map(|key| (*key).clone()).collect()
    }

    /// The channel `family`'s waiters listen on for "free now, try again".
    pub fn released(&self, family: Family) -> String {
        match family {
            Family::Mutex => self.mutex.released.clone(),
            Family::Rwlock => format!("{}:released", self.rw.write),
            Family::Semaphore => format!("{}:released", self.sem.permits),
        }
    }
}

/// The lock name in a key of ours (`leasehold:{name}...`), if it is one.
pub fn name_of(key: &str) -> Option<&str> {
    let rest = key
        .strip_prefix(leasehold::KEY_PREFIX)?
        .strip_prefix(":{")?;
    rest.split_once('}').map(|(name, _)| name)
}

/// The kind of a fence key: tokens only, no holder or waiter.
pub const FENCE: &str = "fence";

/// What kind of state a key of ours holds, from its suffix after the hash tag.
pub fn kind_of(key: &str) -> Option<&'static str> {
    let (_, suffix) = key.split_once('}')?;
    let kind = if suffix.is_empty() || suffix == ":queue" || suffix == ":waiters" {
        "mutex"
    } else if suffix == ":fence" || suffix == ":rw:fence" {
        FENCE
    } else if suffix.starts_with(":rw") {
        "rwlock"
    } else if suffix.starts_with(":sem") {
        "semaphore"
    } else {
        // The `:wait` marker lives for an instant around `WAIT`; it says nothing about holds.
        return None;
    };
    Some(kind)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn families_share_the_hash_tag() {
        let layout = Layout::new("orders:42").unwrap();
        for family in [Family::Mutex, Family::Rwlock, Family::Semaphore] {
            for key in layout.state_keys(family) {
                assert_eq!(name_of(&key), Some("orders:42"), "{key}");
                assert!(!key.ends_with(":fence"), "{key}");
            }
        }
        assert_eq!(layout.rw.readers, "leasehold:{orders:42}:rw:readers");
        assert_eq!(layout.sem.permits, "leasehold:{orders:42}:sem");
    }

    #[test]
    fn kinds_by_suffix() {
        assert_eq!(kind_of("leasehold:{a}"), Some("mutex"));
        assert_eq!(kind_of("leasehold:{a}:waiters"), Some("mutex"));
        assert_eq!(kind_of("leasehold:{a}:fence"), Some("fence"));
        assert_eq!(kind_of("leasehold:{a}:rw:intents"), Some("rwlock"));
        assert_eq!(kind_of("leasehold:{a}:sem:queue"), Some("semaphore"));
        assert_eq!(kind_of("leasehold:{a}:wait"), None);
    }

    #[test]
    fn rejects_what_the_library_rejects() {
        assert!(matches!(
            Layout::new("a{b"),
            Err(CliError::InvalidName(leasehold::Error::InvalidName { .. }))
        ));
    }
}
