//! Loom models of the in-process state shared between tasks: the waiter registry behind
//! the shared subscription, and the lease cell raced by the watchdog and the guard.
//!
//! Run: `RUSTFLAGS="--cfg leasehold_loom" cargo test -p leasehold --test loom_state --release`
//! (not `--cfg loom`: that also switches tokio to its loom mode, which drops `tokio::net`
//! and so breaks redis).
#![cfg(leasehold_loom)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use leasehold::loom_models::{LeaseCell, Registry};
use loom::sync::Arc;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;

/// A waiter registered before a message is dispatched is woken by it; the channel stays
/// wanted exactly while a waiter remains, whatever the interleaving of joins and leaves.
#[test]
fn registry_never_loses_a_registered_waiter_or_a_channel() {
    loom::model(|| {
        let registry = Arc::new(Registry::<Arc<AtomicUsize>>::new());
        let woken = Arc::new(AtomicUsize::new(0));
        let ticket = registry.register("chan", "topic", Arc::clone(&woken));

        let leaver = {
            let registry = Arc::clone(&registry);
            thread::spawn(move || {
                let other = registry.register("chan", "other", Arc::new(AtomicUsize::new(0)));
                registry.unregister(&other)
            })
        };
        let dispatcher = {
            let registry = Arc::clone(&registry);
            thread::spawn(move || {
                for signal in registry.signals_for("topic") {
                    signal.fetch_add(1, Ordering::SeqCst);
                }
            })
        };
        let last_of_leaver = leaver.join().unwrap();
        dispatcher.join().unwrap();

        assert_eq!(
            woken.load(Ordering::SeqCst),
            1,
            "registered waiter missed the message"
        );
        assert!(
            !last_of_leaver,
            "channel reported idle while a waiter remained"
        );
        assert!(registry.wants("chan"));
        assert!(
            registry.unregister(&ticket),
            "last waiter leaves the channel idle"
        );
        assert!(!registry.wants("chan"));
    });
}

/// Concurrent leaves of the last two waiters: exactly one of them sees the channel go idle
/// (so exactly one unsubscribe is scheduled).
#[test]
fn exactly_one_leaver_unsubscribes() {
    loom::model(|| {
        let registry = Arc::new(Registry::<u8>::new());
        let a = registry.register("chan", "a", 1);
        let b = registry.register("chan", "b", 2);
        let handles: Vec<_> = [a, b]
            .into_iter()
            .map(|ticket| {
                let registry = Arc::clone(&registry);
                thread::spawn(move || registry.unregister(&ticket))
            })
            .collect();
        let idle: usize = handles
            .into_iter()
            .map(|h| usize::from(h.join().unwrap()))
            .sum();
        assert_eq!(idle, 1);
        assert!(!registry.wants("chan"));
    });
}

/// The watchdog (renew, then maybe mark lost) races the guard's release (stop): once the
/// stop is done, no renewal or loss is recorded; a loss is never undone by a renewal.
#[test]
fn watchdog_and_release_race() {
    loom::model(|| {
        let cell = Arc::new(LeaseCell::new(Duration::from_millis(10)));
        let watchdog = {
            let cell = Arc::clone(&cell);
            thread::spawn(move || {
                let renewed = cell.renewed(Duration::from_millis(20));
                let lost = cell.mark_lost();
                (renewed, lost)
            })
        };
        let before_stop = cell.stop();
        let (renewed, lost) = watchdog.join().unwrap();
        let after = cell.snapshot();

        assert!(after.stopped);
        // Whatever the watchdog recorded happened before the stop, and the stop saw it.
        assert_eq!(before_stop, after.clone_without_stop());
        if renewed {
            assert_eq!(after.valid_until, Duration::from_millis(20));
        }
        assert_eq!(after.lost, lost);
        assert!(!(cell.renewed(Duration::from_millis(30)) || cell.mark_lost()));
    });
}

trait WithoutStop {
    fn clone_without_stop(&self) -> Self;
}

impl WithoutStop for leasehold::loom_models::LeaseState {
    fn clone_without_stop(&self) -> Self {
        Self {
            stopped: false,
            ..*self
        }
    }
}
