//! Scoped work: acquire, run the caller's work under the lease, release — the `run` family
//! ([`Mutex::run`](crate::Mutex::run), [`RwLock::run_read`](crate::RwLock::run_read),
//! [`RwLock::run_write`](crate::RwLock::run_write), [`Semaphore::run`](crate::Semaphore::run)).
//!
//! Invariant: the work never goes on past its lease. The work's future races the guard's
//! `lost()` signal; when the lease goes first the work is dropped at its next await point
//! (so nothing it would do after that point runs unprotected) and the call fails with
//! [`Error::LeaseLost`]. When the work finishes first the guard is unlocked in line, and an
//! unlock that finds the lease gone replaces the work's value with its error: the work then
//! ran, but maybe not alone.

use std::future::Future;

use crate::error::{Error, Result};

/// A guard that scoped work can run under: it signals a lost lease and unlocks in line.
pub(crate) trait Scoped: Sized {
    /// The lock name, for the error of a lost lease.
    fn lock_name(&self) -> &str;

    /// Resolves when the lease is lost (the guard's `lost()`).
    fn lease_lost(&self) -> impl Future<Output = ()> + Send + '_;

    /// Releases the hold in line (the guard's `unlock()` or `release()`).
    fn unlock_in_line(self) -> impl Future<Output = Result<()>> + Send;
}

/// Runs `work` under `guard` as the module doc says.
pub(crate) async fn run<G, T>(guard: G, work: impl AsyncFnOnce(&G) -> T) -> Result<T>
where
    G: Scoped,
{
    let finished = {
        let work = work(&guard);
        // Biased towards the work: a value that is ready when the lease goes still gets the
        // unlock's verdict on the lease, which is exact where `lost()` is a local bound.
        tokio::select! {
            biased;
            value = work => Some(value),
            () = guard.lease_lost() => None,
        }
    };
    match finished {
        Some(value) => {
            guard.unlock_in_line().await?;
            Ok(value)
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

/// Implements [`Scoped`] for a guard type with `name()`, `lost()` and `$unlock()`.
macro_rules! scoped_guard {
    ($guard:ty, $unlock:ident) => {
        impl $crate::scoped::Scoped for $guard {
            fn lock_name(&self) -> &str {
                self.name()
            }

            fn lease_lost(&self) -> impl std::future::Future<Output = ()> + Send + '_ {
                self.lost()
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
