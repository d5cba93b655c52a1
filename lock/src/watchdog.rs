//! The watchdog: renews held leases every TTL/3 (sooner when little of one is left) and
//! declares them lost in time, for all the guards of one client runtime from one schedule.
//!
//! Invariants: a lease is registered only for a guard (never for an acquire that was
//! cancelled) and is never renewed once the guard released or dropped it (its state is
//! checked right before each send, and a renewal in flight or a retry pause ends when the
//! lease stops); it is marked lost when the server says the hold is gone or when renewals
//! kept failing until the local validity deadline — by the client's own clock, before the
//! holder could act on an expired lease. Every failed attempt is reported to the lease
//! (metrics, lease events) before it is retried. All time, tasks and randomness come from
//! the [`Runtime`] seams, so the simulator replays the schedule exactly.
//!
//! Shape: a [`Watchdog`] is a min-heap of (next renewal time on the runtime's clock, a
//! `Weak` to the lease and to what renews it) and one background task, spawned on the first
//! registration, that sleeps until the earliest entry is due. A due entry whose guard still
//! holds its lease gets a renewal round in a task of its own (so one slow server answer
//! never delays another lease's renewal), which registers the lease again once renewed.
//! Entries of released, dropped or lost leases are not removed at release: they are dropped
//! lazily, when they come due, when they reach the top of the heap on a wake-up, or by a
//! sweep (below). The task exits when the heap is empty; the next registration spawns it
//! again.
//!
//! Cost: registering is one heap push under the watchdog's mutex — no task spawned, no
//! timer armed, and no task woken unless the new entry is due before the one the task
//! sleeps towards (a TTL shorter than every pending one's), or the task had exited (one
//! spawn). In a steady stream of one TTL, every new entry is due after the pending ones, so
//! registering wakes nobody. Releasing only stops the lease (the lease's own mutex): the
//! schedule is not touched and no task is woken. Short holds therefore cost a push and,
//! later, a pop; the task wakes about once per TTL/3 and discards every dead entry above
//! the first live one. Pending entries number up to the acquisition rate × TTL/3, each
//! about 50 bytes plus, until it is dropped, the memory (not the contents: those go with
//! the guard) of its lease and hold. To bound that, a registration that finds the heap at
//! its sweep mark drops every entry whose guard is gone and sets the mark to twice what
//! is left ([`SWEEP_FLOOR`] at least): at most about twice the live guards' entries stay
//! pending, for an amortised constant cost per registration.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use tokio::sync::Notify;
use tracing::Instrument;

use crate::backend::BoxFuture;
use crate::backoff::{Backoff, Retry};
use crate::events::{LostReason, RenewalFailure};
use crate::lease::Lease;
use crate::protocol::CallError;
use crate::runtime::Runtime;

/// Renew after this fraction of the TTL: with 1/3 (Redisson's `lockWatchdogTimeout / 3`)
/// two renewals in a row can fail before the lease is in danger.
pub const RENEWALS_PER_TTL: u32 = 3;

/// The smallest sweep mark: below this many pending entries a sweep would cost more than
/// the memory it frees (a few kilobytes).
const SWEEP_FLOOR: usize = 64;

/// What a watchdog keeps alive: one hold ([`Hold`](crate::hold::Hold)), or a RedLock's
/// holds on its masters (renewed only when a quorum confirms).
pub(crate) trait Renewable: Send + Sync + 'static {
    /// The span renewals are logged under.
    fn span(&self) -> &tracing::Span;
    /// One renewal for another `ttl`: `Ok(true)` renewed, `Ok(false)` definitely gone.
    fn renew(&self, ttl: Duration) -> BoxFuture<'_, Result<bool, CallError>>;
}

/// The renewal schedule of every lease of one runtime (a client, or a RedLock with a
/// runtime of its own). Cheap to clone: clones share the schedule.
#[derive(Clone)]
pub(crate) struct Watchdog(Arc<Shared>);

struct Shared {
    runtime: Runtime,
    /// A std mutex, held only for heap operations and never across an await.
    schedule: Mutex<Schedule>,
    /// Wakes the sleeping task for an entry due before the one it sleeps towards.
    wake: Notify,
}

struct Schedule {
    entries: BinaryHeap<Reverse<Entry>>,
    /// Registration counter: entries due at the same instant come due in registration order.
    registered: u64,
    /// At this many entries the next registration sweeps out those of dropped guards.
    sweep_at: usize,
    task: Task,
}

/// What the background task is doing, as far as registration needs to know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Task {
    /// No task: the next registration spawns one.
    Idle,
    /// Running, and will read the heap before it sleeps again.
    Awake,
    /// Sleeping until this clock reading (or a wake-up).
    Sleeping(Duration),
}

struct Entry {
    due: Duration,
    order: u64,
    lease: Weak<Lease>,
    renewable: Weak<dyn Renewable>,
}

impl Entry {
    /// The guard is gone (released or dropped, and no renewal round runs for it).
    fn dropped(&self) -> bool {
        self.lease.strong_count() == 0
    }
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Entry {}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Entry {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.due, self.order).cmp(&(other.due, other.order))
    }
}

/// How a registration gets the task to look at its entry.
enum Nudge {
    Spawn,
    Wake,
}

impl std::fmt::Debug for Watchdog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watchdog").finish_non_exhaustive()
    }
}

impl Watchdog {
    /// An empty schedule on `runtime`; its task starts with the first registration.
    pub(crate) fn new(runtime: Runtime) -> Self {
        Self(Arc::new(Shared {
            runtime,
            schedule: Mutex::new(Schedule {
                entries: BinaryHeap::new(),
                registered: 0,
                sweep_at: SWEEP_FLOOR,
                task: Task::Idle,
            }),
            wake: Notify::new(),
        }))
    }

    /// Renews a freshly granted `lease` through `renewable` from now on, until its guard
    /// releases or drops it. Holds neither: the guard keeps both alive.
    pub(crate) fn register<R: Renewable>(&self, renewable: &Arc<R>, lease: &Arc<Lease>) {
        let due = next_renewal(lease, self.0.runtime.clock.now());
        let renewable: Weak<R> = Arc::downgrade(renewable);
        Shared::schedule(&self.0, due, Arc::downgrade(lease), renewable);
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Schedule> {
        // Every critical section leaves the heap consistent before anything can panic.
        self.schedule.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn schedule(
        shared: &Arc<Self>,
        due: Duration,
        lease: Weak<Lease>,
        renewable: Weak<dyn Renewable>,
    ) {
        let nudge = {
            let mut schedule = shared.lock();
            let order = schedule.registered;
            schedule.registered += 1;
            schedule.entries.push(Reverse(Entry {
                due,
                order,
                lease,
                renewable,
            }));
            if schedule.entries.len() >= schedule.sweep_at {
                schedule.entries.retain(|Reverse(entry)| !entry.dropped());
                schedule.sweep_at = (schedule.entries.len() * 2).max(SWEEP_FLOOR);
            }
            let nudge = match schedule.task {
                Task::Idle => Some(Nudge::Spawn),
                Task::Sleeping(until) if due < until => Some(Nudge::Wake),
                Task::Sleeping(_) | Task::Awake => None,
            };
            if nudge.is_some() {
                schedule.task = Task::Awake;
            }
            nudge
        };
        // Outside the lock: a refused spawn drops the task at once, and its drop locks.
        match nudge {
            Some(Nudge::Spawn) => {
                let task = run(Running {
                    shared: Arc::clone(shared),
                    armed: true,
                });
                shared.runtime.spawner.spawn(Box::pin(task));
            }
            Some(Nudge::Wake) => shared.wake.notify_one(),
            None => {}
        }
    }

    /// Starts a renewal round for `entry` if its guard still holds a live lease.
    fn renew_in_background(self: &Arc<Self>, entry: Entry) {
        let (Some(lease), Some(renewable)) = (entry.lease.upgrade(), entry.renewable.upgrade())
        else {
            return;
        };
        let state = lease.snapshot();
        if state.stopped || state.lost {
            return;
        }
        let shared = Arc::clone(self);
        let span = renewable.span().clone();
        let round = async move {
            if let Some(sent) = renew_until_valid(&shared.runtime, renewable.as_ref(), &lease).await
            {
                let due = next_renewal(&lease, sent);
                Shared::schedule(
                    &shared,
                    due,
                    Arc::downgrade(&lease),
                    Arc::downgrade(&renewable),
                );
            }
        };
        self.runtime.spawner.spawn(Box::pin(round.instrument(span)));
    }
}

/// The background task's claim on the schedule: if the task is dropped before it exits on
/// its own (its runtime shut down), the next registration spawns a new one.
struct Running {
    shared: Arc<Shared>,
    armed: bool,
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.armed {
            self.shared.lock().task = Task::Idle;
        }
    }
}

/// The background task: sleeps until the earliest entry is due, starts the due renewals,
/// drops dead entries, and exits once the schedule is empty.
async fn run(mut running: Running) {
    let shared = Arc::clone(&running.shared);
    let clock = Arc::clone(&shared.runtime.clock);
    // A timer that fired has reached its deadline, whatever the clock reads just after.
    let mut reached = Duration::ZERO;
    loop {
        let now = clock.now().max(reached);
        let mut due = Vec::new();
        let until = {
            let mut schedule = shared.lock();
            while let Some(Reverse(top)) = schedule.entries.peek() {
                if top.due > now && !top.dropped() {
                    break;
                }
                if let Some(Reverse(entry)) = schedule.entries.pop() {
                    due.push(entry);
                }
            }
            let until = schedule.entries.peek().map(|Reverse(top)| top.due);
            schedule.task = until.map_or(Task::Idle, Task::Sleeping);
            running.armed = until.is_some();
            until
        };
        for entry in due.into_iter().filter(|entry| entry.due <= now) {
            shared.renew_in_background(entry);
        }
        let Some(until) = until else { return };
        tokio::select! {
            biased;
            () = shared.wake.notified() => {}
            () = clock.sleep(until.saturating_sub(now)) => reached = until,
        }
    }
}

/// When to renew next, from `from`: after TTL/3, or halfway through what is left of the
/// lease if that is sooner. A lease born with little validity (a grant resolved by the
/// probe with a small PTTL, a slow reply, a handed-over permit's short entry) is renewed
/// in time instead of being declared lost.
fn next_renewal(lease: &Lease, from: Duration) -> Duration {
    let interval = lease.ttl() / RENEWALS_PER_TTL;
    let left = lease.snapshot().valid_until.saturating_sub(from);
    from + interval.min(left / 2)
}

/// Renews, retrying failures while the lease is still valid. Returns when the renewal was
/// sent, or `None` when the watchdog must stop (stopped, lost, or validity ran out).
async fn renew_until_valid(
    runtime: &Runtime,
    renewable: &dyn Renewable,
    lease: &Lease,
) -> Option<Duration> {
    let mut retry = Retry::new(Backoff::RECONNECT);
    loop {
        let state = lease.snapshot();
        if state.stopped || state.lost {
            return None;
        }
        let sent = runtime.clock.now();
        let Some(left) = state.valid_until.checked_sub(sent).filter(|d| !d.is_zero()) else {
            tracing::warn!("renewals failed until the lease's validity ran out");
            lease.mark_lost(LostReason::Expired);
            return None;
        };
        let renewal = renewable.renew(lease.ttl());
        let outcome = tokio::select! {
            biased;
            () = lease.stopped() => return None,
            outcome = runtime.timeout(left, renewal) => outcome,
        };
        match outcome {
            Some(Ok(true)) => {
                lease.renewed(sent);
                return Some(sent);
            }
            Some(Ok(false)) => {
                tracing::warn!("renewal found the hold gone");
                lease.mark_lost(LostReason::NotHeld);
                return None;
            }
            Some(Err(CallError::Transport(err))) => {
                tracing::debug!(error = %err, "renewal failed; retrying");
                lease.renewal_failed(RenewalFailure::Transport(err));
            }
            Some(Err(CallError::Failed(err))) => {
                tracing::warn!(error = %err, "renewal failed");
                lease.renewal_failed(RenewalFailure::Failed(err));
            }
            None => {
                // The validity ran out waiting for the answer: the next round declares it lost.
                lease.renewal_failed(RenewalFailure::Timeout);
                continue;
            }
        }
        let left = lease
            .snapshot()
            .valid_until
            .saturating_sub(runtime.clock.now());
        let delay = retry.next_delay(runtime, Some(left));
        tokio::select! {
            biased;
            () = lease.stopped() => return None,
            () = runtime.clock.sleep(delay) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::sync::atomic::{AtomicUsize, Ordering as Atomic};

    use super::*;
    use crate::runtime::{Clock, OsEntropy, Spawner, TokioClock, TokioSpawner};

    /// How far a paused-time renewal may sit from its planned instant (timer ticks are 1 ms).
    const TICK: Duration = Duration::from_millis(1);

    /// Spawns on the test's tokio runtime, counting the tasks.
    struct CountingSpawner {
        inner: TokioSpawner,
        spawned: Arc<AtomicUsize>,
    }

    impl Spawner for CountingSpawner {
        fn spawn(&self, task: BoxFuture<'static, ()>) {
            self.spawned.fetch_add(1, Atomic::SeqCst);
            self.inner.spawn(task);
        }
    }

    /// A hold whose every renewal gets `answer` at once, recording when each was sent.
    struct FakeHold {
        span: tracing::Span,
        clock: Arc<dyn Clock>,
        answer: fn() -> Result<bool, CallError>,
        sent: Mutex<Vec<Duration>>,
    }

    impl Renewable for FakeHold {
        fn span(&self) -> &tracing::Span {
            &self.span
        }

        fn renew(&self, _: Duration) -> BoxFuture<'_, Result<bool, CallError>> {
            self.sent.lock().unwrap().push(self.clock.now());
            let answer = (self.answer)();
            Box::pin(async move { answer })
        }
    }

    impl FakeHold {
        fn sent(&self) -> Vec<Duration> {
            self.sent.lock().unwrap().clone()
        }
    }

    fn renewed() -> Result<bool, CallError> {
        Ok(true)
    }

    fn gone() -> Result<bool, CallError> {
        Ok(false)
    }

    fn unreachable() -> Result<bool, CallError> {
        let reset = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset");
        Err(CallError::Transport(reset.into()))
    }

    /// A watchdog on a paused tokio runtime whose clock starts now, and its spawn count.
    struct Setup {
        watchdog: Watchdog,
        clock: Arc<dyn Clock>,
        spawned: Arc<AtomicUsize>,
    }

    impl Setup {
        fn new() -> Self {
            let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
            let spawned = Arc::new(AtomicUsize::new(0));
            let runtime = Runtime {
                clock: Arc::clone(&clock),
                spawner: Arc::new(CountingSpawner {
                    inner: TokioSpawner(tokio::runtime::Handle::current()),
                    spawned: Arc::clone(&spawned),
                }),
                entropy: Arc::new(OsEntropy),
            };
            Self {
                watchdog: Watchdog::new(runtime),
                clock,
                spawned,
            }
        }

        fn hold(&self, answer: fn() -> Result<bool, CallError>) -> Arc<FakeHold> {
            Arc::new(FakeHold {
                span: tracing::Span::none(),
                clock: Arc::clone(&self.clock),
                answer,
                sent: Mutex::new(Vec::new()),
            })
        }

        /// A lease granted for `ttl` now, registered for renewal by `hold`.
        fn granted(&self, hold: &Arc<FakeHold>, ttl: Duration) -> Arc<Lease> {
            let now = self.clock.now();
            let lease = Arc::new(Lease::new(Arc::clone(&self.clock), ttl, now, ttl));
            self.watchdog.register(hold, &lease);
            lease
        }

        fn spawned(&self) -> usize {
            self.spawned.load(Atomic::SeqCst)
        }
    }

    fn assert_near(at: Duration, planned: Duration) {
        assert!(
            at.abs_diff(planned) <= TICK,
            "at {at:?}, planned {planned:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn short_holds_share_one_task_and_are_never_renewed() {
        let setup = Setup::new();
        let ttl = Duration::from_secs(3);
        let hold = setup.hold(renewed);
        let mut releasing = Vec::new();
        // A hot lock: 500 holds of 100 µs within 100 ms, far below TTL/3.
        for n in 0..500 {
            let lease = setup.granted(&hold, ttl);
            tokio::time::sleep(Duration::from_micros(100)).await;
            lease.stop();
            // Half of them stay stopped but alive, as during an unlock awaiting the server.
            if n % 2 == 0 {
                releasing.push(lease);
            }
            tokio::time::sleep(Duration::from_micros(100)).await;
        }
        tokio::time::sleep(ttl * 2).await;
        assert_eq!(setup.spawned(), 1, "one background task for all 500 holds");
        assert!(hold.sent().is_empty(), "renewed: {:?}", hold.sent());
    }

    #[tokio::test(start_paused = true)]
    async fn a_long_hold_is_renewed_every_third_of_its_ttl_until_stopped() {
        let setup = Setup::new();
        let ttl = Duration::from_secs(3);
        let hold = setup.hold(renewed);
        let lease = setup.granted(&hold, ttl);
        tokio::time::sleep(ttl * 3 + ttl / 6).await;
        let sent = hold.sent();
        assert_eq!(sent.len(), 9, "renewals at {sent:?}");
        for (n, at) in (1..).zip(&sent) {
            assert_near(*at, ttl / RENEWALS_PER_TTL * n);
        }
        assert!(!lease.is_lost());
        assert!(lease.remaining() > ttl / 2);
        lease.stop();
        tokio::time::sleep(ttl * 2).await;
        assert_eq!(hold.sent().len(), 9, "a stopped lease was renewed");
    }

    #[tokio::test(start_paused = true)]
    async fn each_lease_keeps_its_own_cadence() {
        let setup = Setup::new();
        let (slow_ttl, fast_ttl) = (Duration::from_secs(30), Duration::from_millis(300));
        let (slow, fast) = (setup.hold(renewed), setup.hold(renewed));
        let _slow_lease = setup.granted(&slow, slow_ttl);
        // The task is asleep until the slow lease's renewal at 10 s ...
        tokio::time::sleep(Duration::from_millis(10)).await;
        // ... and this lease is due at 110 ms: registering it must wake the task.
        let _fast_lease = setup.granted(&fast, fast_ttl);
        tokio::time::sleep(slow_ttl / 3 + Duration::from_millis(500)).await;
        assert_eq!(slow.sent().len(), 1, "slow renewals at {:?}", slow.sent());
        assert_near(slow.sent()[0], slow_ttl / 3);
        let sent = fast.sent();
        assert!(sent.len() >= 100, "fast renewals at {sent:?}");
        assert_near(sent[0], Duration::from_millis(110));
        for pair in sent.windows(2) {
            assert_near(pair[1] - pair[0], fast_ttl / 3);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_hold_found_gone_is_lost_at_its_first_renewal() {
        let setup = Setup::new();
        let ttl = Duration::from_secs(3);
        let hold = setup.hold(gone);
        let lease = setup.granted(&hold, ttl);
        tokio::time::sleep(ttl / 2).await;
        assert!(lease.snapshot().lost, "the watchdog marked it lost");
        tokio::time::sleep(ttl * 2).await;
        assert_eq!(hold.sent().len(), 1, "a lost lease was renewed again");
    }

    #[tokio::test(start_paused = true)]
    async fn renewals_that_keep_failing_lose_the_lease_when_its_validity_ends() {
        let setup = Setup::new();
        let ttl = Duration::from_secs(3);
        let hold = setup.hold(unreachable);
        let lease = setup.granted(&hold, ttl);
        let valid_until = lease.snapshot().valid_until;
        tokio::time::sleep(valid_until - Duration::from_millis(50)).await;
        assert!(!lease.snapshot().lost, "lost while still valid");
        assert!(hold.sent().len() > 1, "failures were not retried");
        tokio::time::sleep(Duration::from_millis(50) + TICK).await;
        assert!(lease.snapshot().lost, "still trusted past its validity");
    }

    #[tokio::test(start_paused = true)]
    async fn a_dropped_guards_entry_does_not_keep_its_hold_until_due() {
        let setup = Setup::new();
        let ttl = Duration::from_secs(30);
        let first = setup.hold(renewed);
        let lease = setup.granted(&first, ttl);
        lease.stop();
        drop(lease);
        let other = setup.hold(renewed);
        for _ in 0..SWEEP_FLOOR {
            setup.granted(&other, ttl).stop();
        }
        assert_eq!(Arc::weak_count(&first), 0, "its entry is still pending");
    }
}
