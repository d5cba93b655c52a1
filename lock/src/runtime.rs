//! Time, task spawning and randomness as seams, with the tokio implementations.
//!
//! The lock client never calls `tokio::time`, `tokio::spawn` or a global RNG directly: the
//! watchdog cadence, RedLock validity, backoff jitter and background releases all go
//! through these traits, so the simulator can run each client on its own skewed, drifting
//! clock under virtual time and replay a seed exactly.

use std::sync::Arc;
use std::time::Duration;

use crate::backend::BoxFuture;

/// A process's view of time.
pub trait Clock: Send + Sync + 'static {
    /// Monotonic time since an arbitrary origin fixed when the clock was made.
    fn now(&self) -> Duration;
    /// Resolves once `duration` has passed on this clock.
    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()>;
}

/// Runs background tasks (watchdog renewal, releases from `Drop`).
pub trait Spawner: Send + Sync + 'static {
    /// Runs `task` to completion in the background.
    fn spawn(&self, task: BoxFuture<'static, ()>);
}

/// A source of random numbers (owner ids, backoff jitter).
pub trait Entropy: Send + Sync + 'static {
    /// A uniformly distributed random `u64`.
    fn next_u64(&self) -> u64;
}

/// The three process seams, bundled so they travel together.
#[derive(Clone)]
pub struct Runtime {
    /// Time source and timers.
    pub clock: Arc<dyn Clock>,
    /// Background task runner.
    pub spawner: Arc<dyn Spawner>,
    /// Randomness.
    pub entropy: Arc<dyn Entropy>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime").finish_non_exhaustive()
    }
}

impl Runtime {
    /// The tokio runtime the caller is running on, with the thread-local RNG.
    ///
    /// Must be called from inside a tokio runtime (it captures the current handle).
    pub fn tokio() -> Self {
        Self {
            clock: Arc::new(TokioClock::new()),
            spawner: Arc::new(TokioSpawner(tokio::runtime::Handle::current())),
            entropy: Arc::new(OsEntropy),
        }
    }

    /// Runs `future` with a deadline of `duration` on this runtime's clock.
    /// Returns `None` if the deadline passed first (the future is then dropped).
    pub async fn timeout<F: std::future::Future>(
        &self,
        duration: Duration,
        future: F,
    ) -> Option<F::Output> {
        let sleep = self.clock.sleep(duration);
        tokio::pin!(future);
        tokio::select! {
            biased;
            out = &mut future => Some(out),
            () = sleep => None,
        }
    }

    /// A random duration uniformly drawn from `[0, max]` ("full jitter").
    pub fn jitter(&self, max: Duration) -> Duration {
        let nanos = u64::try_from(max.as_nanos()).unwrap_or(u64::MAX);
        match nanos.checked_add(1) {
            Some(bound) => Duration::from_nanos(self.entropy.next_u64() % bound),
            None => Duration::from_nanos(self.entropy.next_u64()),
        }
    }
}

/// [`Clock`] over tokio's timer (so `tokio::time::pause` also works in tests).
#[derive(Debug)]
pub struct TokioClock {
    origin: tokio::time::Instant,
}

impl TokioClock {
    /// A clock whose origin is now.
    pub fn new() -> Self {
        Self {
            origin: tokio::time::Instant::now(),
        }
    }
}

impl Default for TokioClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for TokioClock {
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        Box::pin(tokio::time::sleep(duration))
    }
}

/// [`Spawner`] onto a tokio runtime.
#[derive(Debug, Clone)]
pub struct TokioSpawner(pub tokio::runtime::Handle);

impl Spawner for TokioSpawner {
    fn spawn(&self, task: BoxFuture<'static, ()>) {
        drop(self.0.spawn(task));
    }
}

/// [`Entropy`] from the thread-local cryptographically seeded RNG.
#[derive(Debug, Clone, Copy, Default)]
pub struct OsEntropy;

impl Entropy for OsEntropy {
    fn next_u64(&self) -> u64 {
        rand::random()
    }
}
