//! `client.rwlock(name)`: a read-write lease lock — many readers or one writer.
//!
//! Invariants: a writer never holds the lock together with a reader or writer of another
//! owner; every reader has a lease of its own (a crashed reader's share expires by server
//! time), the read path is one script round trip, and a waiting writer blocks new readers
//! (writer preference) so a stream of readers cannot starve it. Acquire loop, guard,
//! watchdog and `lost()` are the mutex's (see [`crate::acquire`]).
//!
//! The fair line ([`WaitStrategy::FairQueue`](crate::WaitStrategy::FairQueue), the default). Waiters, readers and writers
//! alike, stand in one FIFO line on the server (`…:rw:queue`, entries in `…:rw:waiters`
//! with their mode and a server-time deadline, as the mutex's). Admission:
//! - a writer enters only when no other owner writes, no reader is live and the line's
//!   first live entry is its own (or the line is empty);
//! - a reader enters while no other owner writes and no live *writer* entry stands ahead of
//!   it in the line (the whole line, for a reader not in it): readers queued before a
//!   writer go before it, readers queued after it wait for it ("phase-fair");
//! - re-entries and a downgrade's read hold go past the line, as the mutex's re-entries do
//!   (their owner already holds the lock: waiting behind the line would deadlock).
//!
//! Hand-off: the release that leaves the lock without a writer grants it outright, in the
//! release script, to the line's head: a writer alone once no reader is live, or every
//! reader from the head up to the first live writer entry at once. Each grant is published
//! to its waiter's inbox with the lease and token in the message, exactly as the mutex's
//! (`rw_read_release.lua`'s header, [`crate::acquire`] for the lease the waiter trusts).
//! A waiter that gives up (a timeout, a dropped acquire) leaves the line in the write
//! release script, and while no writer holds, the line is handed on the same way: the
//! readers a departing writer's entry held back enter at once instead of at their next
//! refresh (the sim's `rwlock-writers-give-up` drives it).
//!
//! Safety argument. Exclusion rests on the same two checks as before, now made by both the
//! acquire and the release scripts: a write hold is only written where no write hold of
//! another owner and no live read lease exist, and a read hold only where no write hold of
//! another owner exists. A hand-off is such a write, made inside one script, so no grant
//! can interleave with it; the give-up hand-off runs only where the write hash is gone (no
//! writer holds), and grants a writer only where no read lease lives, as a release does. The line only orders who may be granted: a bug in it can cost
//! fairness or liveness, never exclusion. Liveness: a crashed waiter's entry expires an
//! entry timeout after its last refresh (server time), every script skips or drops expired
//! entries, and a waiter refreshes its entry three times per entry timeout, each refresh
//! an acquire attempt that also finds a grant whose message was lost.
//!
//! Read tokens: a read hold carries the last write epoch's fencing token, read from the fence
//! key when it is granted. Every read acquire and read renewal keeps that key at least the
//! fence margin past the latest read lease (it never creates one), and so does the write
//! release that leaves a read epoch behind (a downgrade's read hold), so all holds of a read
//! epoch (overlapping reads, re-entries) carry the same token: no write epoch can begin while
//! a read lease lives, and the key cannot expire while one does. Without this, a read epoch
//! longer than the margin saw the key expire, and a re-entry got `0` where its first hold
//! got the token.

use std::time::Duration;

use crate::acquire::{self, Mode, acquire_variants};
use crate::config::lock_options;
use crate::error::{Error, Result};
use crate::fencing::FencingToken;
use crate::guard::{Guard, lease_accessors};
use crate::handle::Handle;
use crate::hold::HoldKind;
use crate::inspect::RwState;
use crate::keys::LockKeys;
use crate::lease::{MAX_TTL, MIN_TTL};
use crate::owner::Owner;
use crate::scoped::{self, Ran, scoped_guard};
use crate::wait::DEFAULT_QUEUE_ENTRY_TIMEOUT;

/// Default lifetime of a waiting writer's intent after its last attempt: while it lives, no
/// new reader is admitted. Same trade-off as a fair-queue entry
/// ([`DEFAULT_QUEUE_ENTRY_TIMEOUT`]): a live writer refreshes it several times per period,
/// a crashed one blocks new readers at most this long.
pub const DEFAULT_WRITER_INTENT_TIMEOUT: Duration = DEFAULT_QUEUE_ENTRY_TIMEOUT;

/// A named read-write lock with its settings. Cheap to clone; settings are builder methods.
///
/// Defaults come from the [`ClientBuilder`](crate::ClientBuilder) (TTL, watchdog, wait
/// strategy: [`WaitStrategy::FairQueue`](crate::WaitStrategy::FairQueue) unless chosen
/// otherwise) plus
/// [`DEFAULT_WRITER_INTENT_TIMEOUT`], which only writers waiting by `Spin` or `PubSub`
/// use (a fair writer's line entry keeps new readers out instead). Use one strategy per
/// lock name: a fair waiter is handed the lock by a release, a `PubSub` waiter is woken by
/// its `released` message.
///
/// Re-entry: holds of one owner ([`RwLock::owner`], or [`ReadGuard::reenter`] /
/// [`WriteGuard::reenter`]) re-enter. An owner holding the write lock may also take read
/// holds ([`WriteGuard::downgrade`]); an owner holding only read holds cannot take the
/// write lock ([`Error::UpgradeRefused`]).
#[derive(Clone)]
pub struct RwLock {
    handle: Handle,
    intent: Duration,
}

impl std::fmt::Debug for RwLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.handle
            .debug(f, "RwLock")
            .field("intent", &self.intent)
            .finish_non_exhaustive()
    }
}

impl RwLock {
    pub(crate) fn new(handle: Handle) -> Self {
        Self {
            handle,
            intent: DEFAULT_WRITER_INTENT_TIMEOUT,
        }
    }

    lock_options!((handle.config): ttl, wait, watchdog, acquire_timeout, owner, fence_margin, metrics_label);

    /// How long a writer waiting by `Spin` or `PubSub` keeps new readers out after its last
    /// attempt (it re-attempts several times per period while alive); within
    /// [`MIN_TTL`]..=[`MAX_TTL`]. A fair writer's line entry lives the strategy's
    /// `entry_timeout` instead.
    pub fn writer_intent_timeout(mut self, timeout: Duration) -> Self {
        self.intent = timeout;
        self
    }

    acquire_variants!("a read hold" -> ReadGuard, (handle.config): read, read_within, try_read by read_in);

    acquire_variants!("the write hold (no new reader of another owner is admitted while it waits)" -> WriteGuard, (handle.config): write, write_within, try_write by write_in);

    /// Scoped work under a read hold: waits as [`read`](Self::read) does, runs `work` with
    /// the guard, then unlocks in line and returns the work's value in a [`Ran`] beside
    /// what the unlock found (see [`Mutex::run`](crate::Mutex::run) for the race against a
    /// lost lease and the three outcomes).
    ///
    /// `work` is an async closure, `async |guard| { .. }`: the tokio-style
    /// `|guard| async move { .. }` fails with `error[E0282]: type annotations needed`, and
    /// with the type named, `lifetime may not live long enough` (the future borrows the
    /// guard; see "The closure form" under [`Mutex::run`](crate::Mutex::run)).
    ///
    /// # Errors
    ///
    /// The errors of [`read`](Self::read), and [`Error::LeaseLost`] when the lease was lost
    /// before the work finished (the work was dropped). The errors of
    /// [`ReadGuard::unlock`] after it finished are in [`Ran::lease`].
    pub async fn run_read<T>(&self, work: impl AsyncFnOnce(&ReadGuard) -> T) -> Result<Ran<T>> {
        scoped::run(self.read().await?, work).await
    }

    /// Scoped work under the write hold: waits as [`write`](Self::write) does, runs `work`
    /// with the guard (its [`fencing_token`](WriteGuard::fencing_token) fences the writes),
    /// then unlocks in line and returns the work's value in a [`Ran`] beside what the
    /// unlock found (see [`Mutex::run`](crate::Mutex::run) for the race against a lost
    /// lease and the three outcomes).
    ///
    /// `work` is an async closure, `async |guard| { .. }`: the tokio-style
    /// `|guard| async move { .. }` fails with `error[E0282]: type annotations needed`, and
    /// with the type named, `lifetime may not live long enough` (the future borrows the
    /// guard; see "The closure form" under [`Mutex::run`](crate::Mutex::run)).
    ///
    /// # Errors
    ///
    /// The errors of [`write`](Self::write), and [`Error::LeaseLost`] when the lease was
    /// lost before the work finished (the work was dropped). The errors of
    /// [`WriteGuard::unlock`] after it finished are in [`Ran::lease`].
    pub async fn run_write<T>(&self, work: impl AsyncFnOnce(&WriteGuard) -> T) -> Result<Ran<T>> {
        scoped::run(self.write().await?, work).await
    }

    /// The read-write lock's state on the server, read in one transaction without
    /// changing it: the writer (with its lease left), the last write fencing token, the
    /// readers with their leases, and the waiting writers. See [`crate::inspect`].
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`](crate::Error::InvalidName) for a name no lock can have;
    /// [`Error::WrongType`](crate::Error::WrongType) when something else uses the keys;
    /// [`Error::Backend`](crate::Error::Backend) when the read failed (or the backend
    /// cannot send pipelines, as the simulator's).
    pub async fn inspect(&self) -> Result<RwState> {
        Ok(self.handle.inspect().await?.rw)
    }

    async fn read_in(&self, mode: Mode) -> Result<ReadGuard> {
        let inner = self.acquire(HoldKind::Read, mode).await?;
        Ok(ReadGuard { inner })
    }

    async fn write_in(&self, mode: Mode) -> Result<WriteGuard> {
        let inner = self.acquire(self.write_kind(), mode).await?;
        Ok(WriteGuard { inner })
    }

    fn write_kind(&self) -> HoldKind {
        HoldKind::Write {
            intent: self.intent,
        }
    }

    async fn acquire(&self, kind: HoldKind, mode: Mode) -> Result<Guard> {
        if !(MIN_TTL..=MAX_TTL).contains(&self.intent) {
            return Err(self.handle.invalid(format!(
                "writer intent timeout {:?} outside {MIN_TTL:?}..={MAX_TTL:?}",
                self.intent
            )));
        }
        let keys = LockKeys::rwlock(&self.handle.name);
        let hold = self.handle.hold(keys, kind)?;
        Guard::acquire(hold, mode).await
    }
}

/// A shared read hold of an [`RwLock`]. Dropping it releases in the background; see
/// [`Guard`] for the lease rules, which are the same.
#[must_use = "dropping the guard releases the read hold"]
#[derive(Debug)]
pub struct ReadGuard {
    inner: Guard,
}

impl ReadGuard {
    lease_accessors!();

    /// The owner this hold counts for.
    pub fn owner(&self) -> &Owner {
        self.inner.owner()
    }

    /// The fencing token of the last write epoch when this hold was granted: what the data
    /// read under this hold was written with. `0` if the lock was never written, or its last
    /// write epoch ended more than the fence margin before this read epoch began (the fence
    /// key expires like the mutex's, see [`DEFAULT_FENCE_MARGIN`](crate::DEFAULT_FENCE_MARGIN);
    /// read holds keep it alive while any of them lives). Every hold of one read epoch,
    /// re-entries included, gets the same token.
    pub fn write_token(&self) -> FencingToken {
        self.inner.fencing_token()
    }

    /// Another read hold for the same owner: admitted even while a writer waits.
    pub async fn reenter(&self) -> Result<ReadGuard> {
        Ok(ReadGuard {
            inner: self.inner.reenter().await?,
        })
    }

    /// Releases this read hold (see [`Guard::unlock`]).
    pub async fn unlock(self) -> Result<()> {
        self.inner.unlock().await
    }
}

scoped_guard!(ReadGuard, unlock);

/// The exclusive write hold of an [`RwLock`]. Dropping it releases in the background; see
/// [`Guard`] for the lease rules, which are the same.
#[must_use = "dropping the guard releases the write hold"]
#[derive(Debug)]
pub struct WriteGuard {
    inner: Guard,
}

impl WriteGuard {
    lease_accessors!();

    /// The owner this hold counts for.
    pub fn owner(&self) -> &Owner {
        self.inner.owner()
    }

    /// The fencing token of this write epoch: strictly greater than every write token
    /// issued for this lock before. Re-entrant write holds share it.
    pub fn fencing_token(&self) -> FencingToken {
        self.inner.fencing_token()
    }

    /// Another write hold for the same owner (same epoch and token); never waits.
    pub async fn reenter(&self) -> Result<WriteGuard> {
        Ok(WriteGuard {
            inner: self.inner.reenter().await?,
        })
    }

    /// Turns this write hold into a read hold without a gap: the read hold is granted
    /// while the write hold is still held (no other writer can slip in), then the write
    /// hold is released and other readers may join.
    ///
    /// Fails with [`Error::LeaseLost`] if the write lease had already ended; if the write
    /// release then reports the lease lost, the new read hold is released again and that
    /// error is returned.
    pub async fn downgrade(self) -> Result<ReadGuard> {
        let write = self.inner.hold();
        if self.inner.is_lost() {
            return Err(Error::LeaseLost {
                name: write.lock.name.clone(),
            });
        }
        let read = write.with_kind(HoldKind::Read);
        let read = match acquire::acquire(read, Mode::Try).await {
            Ok(grant) => ReadGuard {
                inner: Guard::new(grant),
            },
            Err(Error::WouldBlock { name, .. }) => return Err(Error::LeaseLost { name }),
            Err(err) => return Err(err),
        };
        self.inner.unlock().await?;
        Ok(read)
    }

    /// Releases this write hold (see [`Guard::unlock`]).
    pub async fn unlock(self) -> Result<()> {
        self.inner.unlock().await
    }
}

scoped_guard!(WriteGuard, unlock);
