//! Scoped work: acquire, run the caller's work under the lease, release — the `run` family
//! ([`Mutex::run`](crate::Mutex::run), [`RwLock::run_read`](crate::RwLock::run_read),
//! [`RwLock::run_write`](crate::RwLock::run_write), [`Semaphore::run`](crate::Semaphore::run)).
//!
//! Invariant: the work never goes on past its lease, and work that finished is never
//! reported as not done. The work's future races the guard's `lost()` signal; when the
//! lease goes first the work is dropped at its next await point (so nothing it would do
//! after that point runs unprotected) and the call fails with [`Error::LeaseLost`]. When the
//! work finishes first its value comes back in a [`Ran`], whatever the closing unlock finds:
//! [`LeaseAtEnd`] says beside it whether the lease was still valid when the work finished
//! and what the unlock answered, so a caller of non-idempotent work (charge a card, then
//! unlock) can tell "done" from "not done".

use std::future::Future;

use crate::error::{Error, Result};

/// What a `run` whose work finished hands back: the work's value, and what became of the
/// lease (see [`LeaseAtEnd`]).
///
/// The three outcomes of a `run` call:
///
/// | outcome | returned |
/// |---|---|
/// | the lease was lost before the work finished: the work was dropped at an await point | `Err(Error::LeaseLost)` |
/// | the work finished, the unlock found the hold and released it | `Ok(Ran)`, [`LeaseAtEnd::released`] |
/// | the work finished, the unlock found the hold gone or could not tell | `Ok(Ran)`, [`LeaseAtEnd::unlock`] is the unlock's error |
///
/// In the last case [`LeaseAtEnd::valid_at_finish`] tells a lapse after the work (the
/// lease was still valid by local reckoning when it finished: its writes were made under
/// the lease) from one that may have come before.
///
/// ```no_run
/// # async fn demo(client: leasehold::Client) -> leasehold::Result<()> {
/// let ran = client
///     .mutex("payments:order-42")
///     .run(async |guard| charge_card(guard.fencing_token().get()).await)
///     .await?; // Err(LeaseLost): the work was dropped before it finished
/// let receipt = ran.value; // the work finished: never charge again
/// if !ran.lease.released() {
///     // Done, but the unlock found the lease gone (or could not tell): the work may not
///     // have run alone unless the lease was still valid when it finished.
///     let lapsed_after_the_work = ran.lease.valid_at_finish();
///     tracing::warn!(lapsed_after_the_work, error = ?ran.lease.unlock(), "lease gone at unlock");
/// }
/// # let _ = receipt;
/// # Ok(())
/// # }
/// # async fn charge_card(_token: u64) -> u64 { 0 }
/// ```
#[derive(Debug)]
#[must_use = "the work ran: use its value and check `lease` for how the lease ended"]
pub struct Ran<T> {
    /// The work's value: the work ran to completion.
    pub value: T,
    /// The lease when the work finished, and what the closing unlock found.
    pub lease: LeaseAtEnd,
}

/// How the lease of finished scoped work ended (see [`Ran`]).
#[derive(Debug)]
pub struct LeaseAtEnd {
    valid_at_finish: bool,
    unlock: Result<()>,
}

impl LeaseAtEnd {
    /// True when the lease was still valid by the guard's local reckoning (not
    /// [`lost`](crate::Guard::lost), within its validity deadline) at the moment the work's
    /// future completed. False only when the work became ready in the same instant the
    /// lease ran out (the work wins that tie, so a finished value is never thrown away).
    ///
    /// Local reckoning is a bound the server can break: an unlock answering
    /// [`Error::NotHeld`] means the hold vanished early (deleted, or expired by a server
    /// clock jump) at a moment the client cannot know, perhaps before the work finished.
    pub fn valid_at_finish(&self) -> bool {
        self.valid_at_finish
    }

    /// True when the closing unlock found the hold live on the server and released it: the
    /// lease covered the whole work.
    pub fn released(&self) -> bool {
        self.unlock.is_ok()
    }

    /// What the closing unlock answered: `Ok` as for [`released`](Self::released), else
    /// the unlock's error ([`Error::LeaseLost`] or [`Error::NotHeld`]: the hold had already
    /// ended, so the work may not have run alone; [`Error::Ambiguous`]: no answer in time).
    pub fn unlock(&self) -> Result<(), &Error> {
        self.unlock.as_ref().map(|&()| ())
    }

    /// The unlock's answer by value, to propagate with `?` once the work's value is safe.
    pub fn into_unlock(self) -> Result<()> {
        self.unlock
    }
}

/// A guard that scoped work can run under: it signals a lost lease and unlocks in line.
pub(crate) trait Scoped: Sized {
    /// The lock name, for the error of a lost lease.
    fn lock_name(&self) -> &str;

    /// Resolves when the lease is lost (the guard's `lost()`).
    fn lease_lost(&self) -> impl Future<Output = ()> + Send + '_;

    /// True once the lease is lost or past its local validity (the guard's `is_lost()`).
    fn lease_is_lost(&self) -> bool;

    /// Releases the hold in line (the guard's `unlock()` or `release()`).
    fn unlock_in_line(self) -> impl Future<Output = Result<()>> + Send;
}

/// Runs `work` under `guard` as the module doc says.
pub(crate) async fn run<G, T>(guard: G, work: impl AsyncFnOnce(&G) -> T) -> Result<Ran<T>>
where
    G: Scoped,
{
    let finished = {
        let work = work(&guard);
        // Biased towards the work: a value that is ready when the lease goes is still
        // returned (work that finished is never reported as dropped).
        tokio::select! {
            biased;
            value = work => Some((value, !guard.lease_is_lost())),
            () = guard.lease_lost() => None,
        }
    };
    match finished {
        Some((value, valid_at_finish)) => {
            let unlock = guard.unlock_in_line().await;
            if let Err(err) = &unlock {
                tracing::debug!(
                    valid_at_finish,
                    error = %err,
                    "scoped work finished; its unlock failed"
                );
            }
            Ok(Ran {
                value,
                lease: LeaseAtEnd {
                    valid_at_finish,
                    unlock,
                },
            })
        }
        None => {
            let name = guard.lock_name().to_owned();
            tracing::debug!(name, "lease lost during scoped work; the work was dropped");
            // The server may still have the hold (lost by local reckoning): the drop
            // releases it in the background without holding up the caller.
            drop(guard);
            Err(Error::LeaseLost { name })
        }
    }
}

/// Implements [`Scoped`] for a guard type with `name()`, `lost()`, `is_lost()` and
/// `$unlock()`.
macro_rules! scoped_guard {
    ($guard:ty, $unlock:ident) => {
        impl $crate::scoped::Scoped for $guard {
            fn lock_name(&self) -> &str {
                self.name()
            }

            fn lease_lost(&self) -> impl std::future::Future<Output = ()> + Send + '_ {
                self.lost()
            }

            fn lease_is_lost(&self) -> bool {
                self.is_lost()
            }

            fn unlock_in_line(
                self,
            ) -> impl std::future::Future<Output = $crate::Result<()>> + Send {
                self.$unlock()
            }
        }
    };
}
pub(crate) use scoped_guard;
