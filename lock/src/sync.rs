//! The lock primitive behind the in-process shared state that loom models check.
//!
//! Under `--cfg leasehold_loom` it is loom's model-checked mutex, otherwise std's; only the
//! small synchronous cores (waiter registry, lease cell) use it, so loom explores exactly
//! them.

#[cfg(leasehold_loom)]
pub(crate) use loom::sync::{Mutex, MutexGuard};
#[cfg(not(leasehold_loom))]
pub(crate) use std::sync::{Mutex, MutexGuard};

/// Locks `mutex`, recovering the data if a panicking thread poisoned it: every critical
/// section in this crate leaves the state consistent before anything that can panic.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
