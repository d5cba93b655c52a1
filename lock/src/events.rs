//! Lease events: how a holder learns, without polling, that its lease was renewed, that a
//! renewal failed, or that the lease was lost — per guard ([`Guard::events`]) or for every
//! guard of a client ([`ClientBuilder::on_lease_event`]).
//!
//! Invariant: emitting never waits for a consumer. The watchdog emits from its renewal
//! loop, and a consumer that stalled it would delay the very renewal that keeps the lease
//! alive. So the client-wide listener is called in line and is documented as required to
//! be cheap (a panic in it is caught and logged), and each guard's [`LeaseEvents`] reads a
//! bounded broadcast buffer that overwrites its oldest event when the reader lags (counted
//! in [`LeaseEvents::missed`]). [`LeaseEvent::Lost`] is final: emitted at most once per
//! lease, the last event, and never after the guard was released or dropped.
//!
//! [`Guard::events`]: crate::Guard::events
//! [`ClientBuilder::on_lease_event`]: crate::ClientBuilder::on_lease_event

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures::Stream;
use redis::RedisError;
use tokio::sync::broadcast;

use crate::error::{self, Error};
use crate::metrics::{self, Labels};
use crate::owner::HoldId;

/// How many events a [`LeaseEvents`] reader may fall behind before the oldest are
/// overwritten. A lease emits about three events per TTL (the watchdog renews every
/// TTL/3), so a reader would have to sleep for several TTLs to miss one; the buffer is
/// allocated only when a guard's events are first asked for.
pub const LEASE_EVENT_BUFFER: usize = 16;

/// Something that happened to a held lease.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum LeaseEvent {
    /// A renewal (watchdog or `extend`) was confirmed: the lease is surely valid for
    /// `remaining` more by the local clock.
    Renewed {
        /// Validity left right after the renewal.
        remaining: Duration,
    },
    /// A watchdog renewal attempt failed without proving the hold gone. The watchdog
    /// retries while the lease is valid; `remaining` is how long that still is.
    RenewalFailed {
        /// Why the attempt failed ([`Error::Backend`] for a lost connection or a renewal
        /// that got no answer in time).
        error: Arc<Error>,
        /// Validity left when the attempt failed.
        remaining: Duration,
    },
    /// The lease is lost (final): work under the guard is no longer protected.
    Lost {
        /// Why.
        reason: LostReason,
    },
}

/// Why a lease was lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LostReason {
    /// No renewal was confirmed before the local validity deadline (the server may still
    /// hold the key for a moment, but the client can no longer trust it).
    Expired,
    /// The server had no record of the hold (deleted, expired early, lost in a failover).
    NotHeld,
}

impl LostReason {
    /// The `reason` label of `leasehold_leases_lost_total`.
    fn label(self) -> &'static str {
        match self {
            Self::Expired => "expired",
            Self::NotHeld => "not_held",
        }
    }
}

/// One event as the client-wide listener sees it: which lease, and what happened.
#[derive(Debug)]
#[non_exhaustive]
pub struct LeaseNotice<'a> {
    /// The lock name.
    pub name: &'a str,
    /// The hold whose lease this is (for a RedLock, its hold on the first master).
    pub hold: &'a HoldId,
    /// `mutex`, `read`, `write` or `permit`.
    pub kind: &'static str,
    /// `spin`, `pubsub`, `fair_queue` or `redlock`.
    pub strategy: &'static str,
    /// What happened.
    pub event: &'a LeaseEvent,
}

/// The client-wide listener ([`ClientBuilder::on_lease_event`](crate::ClientBuilder::on_lease_event)).
pub(crate) type Listener = Arc<dyn Fn(&LeaseNotice<'_>) + Send + Sync>;

/// Why a watchdog renewal attempt failed.
pub(crate) enum RenewalFailure {
    /// The connection failed (or, for RedLock, too few masters answered).
    Transport(RedisError),
    /// No answer before the lease's validity ran out.
    Timeout,
    /// Any other failure.
    Failed(Error),
}

/// Reports one guard's lease transitions to the metrics, the client's listener and the
/// guard's event readers.
pub(crate) struct Observer {
    labels: Labels,
    name: String,
    hold: HoldId,
    listener: Option<Listener>,
    /// Created when a reader first asks, so a guard nobody watches allocates nothing.
    readers: OnceLock<broadcast::Sender<LeaseEvent>>,
    /// Set when the lease is lost, so a reader that subscribes later still learns it.
    lost: OnceLock<LostReason>,
}

impl Observer {
    pub(crate) fn new(
        labels: Labels,
        name: String,
        hold: HoldId,
        listener: Option<Listener>,
    ) -> Self {
        Self {
            labels,
            name,
            hold,
            listener,
            readers: OnceLock::new(),
            lost: OnceLock::new(),
        }
    }

    pub(crate) fn renewed(&self, remaining: Duration) {
        metrics::renewed(self.labels);
        self.emit(LeaseEvent::Renewed { remaining });
    }

    pub(crate) fn renewal_failed(&self, failure: RenewalFailure, remaining: Duration) {
        let (reason, error) = match failure {
            RenewalFailure::Transport(err) => ("transport", error::from_backend(&self.name, err)),
            RenewalFailure::Timeout => ("timeout", error::from_backend(&self.name, no_answer())),
            RenewalFailure::Failed(err) => ("error", err),
        };
        metrics::renewal_failed(self.labels, reason);
        self.emit(LeaseEvent::RenewalFailed {
            error: Arc::new(error),
            remaining,
        });
    }

    /// Called once, by the lease's first `mark_lost`. Logged with the lock name and hold
    /// id: a loss noticed by `lost()` or a drop is logged outside the hold's span.
    pub(crate) fn lost(&self, reason: LostReason) {
        tracing::warn!(name = %self.name, hold = %self.hold, ?reason, "lease lost");
        metrics::lost(self.labels, reason.label());
        let _ = self.lost.set(reason);
        self.emit(LeaseEvent::Lost { reason });
    }

    /// A reader of the events from now on (a lost lease's first reads `Lost`).
    pub(crate) fn subscribe(&self) -> LeaseEvents {
        let sender = self
            .readers
            .get_or_init(|| broadcast::channel(LEASE_EVENT_BUFFER).0);
        let receiver = sender.subscribe();
        // Checked after subscribing: a loss in between is read twice, and the reader
        // stops after the first.
        let pending = self.lost.get().map(|&reason| LeaseEvent::Lost { reason });
        LeaseEvents::new(receiver, pending)
    }

    fn emit(&self, event: LeaseEvent) {
        if let Some(listener) = &self.listener {
            let notice = LeaseNotice {
                name: &self.name,
                hold: &self.hold,
                kind: self.labels.kind,
                strategy: self.labels.strategy,
                event: &event,
            };
            // A panicking listener must not take the watchdog (and so the lease) with it.
            if catch_unwind(AssertUnwindSafe(|| listener(&notice))).is_err() {
                tracing::error!("the lease event listener panicked; event dropped");
            }
        }
        if let Some(sender) = self.readers.get() {
            // No reader left is not an error: events are offered, not owed.
            let _ = sender.send(event);
        }
    }
}

/// The error of a renewal that got no answer before the lease ran out.
fn no_answer() -> RedisError {
    RedisError::from(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        "no renewal answer before the lease's validity ran out",
    ))
}

/// The events of one guard's lease, from when it was asked for ([`Guard::events`]).
///
/// Ends (`None`) after [`LeaseEvent::Lost`], or once the guard is released or dropped and
/// the events before that were read. Events come from whoever observes them: the watchdog
/// (renewals, failures, loss), `extend`, `lost()` and the release. With the watchdog off,
/// a lease that simply runs out is reported `Lost` only when one of those notices; await
/// [`Guard::lost`](crate::Guard::lost) to be woken at the deadline itself.
///
/// [`Guard::events`]: crate::Guard::events
#[derive(Debug)]
pub struct LeaseEvents {
    receiver: broadcast::Receiver<LeaseEvent>,
    pending: Option<LeaseEvent>,
    done: bool,
    missed: u64,
}

impl LeaseEvents {
    fn new(receiver: broadcast::Receiver<LeaseEvent>, pending: Option<LeaseEvent>) -> Self {
        Self {
            receiver,
            pending,
            done: false,
            missed: 0,
        }
    }

    /// Events of a lease that has nobody to report them: ends at once.
    pub(crate) fn closed() -> Self {
        Self::new(broadcast::channel(1).1, None)
    }

    /// The next event, or `None` once the lease is lost or its guard released.
    pub async fn next(&mut self) -> Option<LeaseEvent> {
        if self.done {
            return None;
        }
        let event = match self.pending.take() {
            Some(event) => event,
            None => loop {
                match self.receiver.recv().await {
                    Ok(event) => break event,
                    Err(broadcast::error::RecvError::Lagged(missed)) => self.missed += missed,
                    Err(broadcast::error::RecvError::Closed) => {
                        self.done = true;
                        return None;
                    }
                }
            },
        };
        self.done = matches!(event, LeaseEvent::Lost { .. });
        Some(event)
    }

    /// How many events were overwritten because this reader fell more than
    /// [`LEASE_EVENT_BUFFER`] behind (never `Lost`: it is the last event).
    pub fn missed(&self) -> u64 {
        self.missed
    }

    /// The events as a [`Stream`].
    pub fn into_stream(self) -> impl Stream<Item = LeaseEvent> + Send + Unpin {
        Box::pin(futures::stream::unfold(self, |mut events| async move {
            events.next().await.map(|event| (event, events))
        }))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::owner::Owner;
    use crate::runtime::Entropy;
    use std::sync::Mutex;

    struct Fixed;
    impl Entropy for Fixed {
        fn next_u64(&self) -> u64 {
            7
        }
    }

    fn hold() -> HoldId {
        let counter = std::sync::atomic::AtomicU64::new(0);
        let client = crate::owner::ClientId::random(&Fixed);
        HoldId::new(&Fixed, &Owner::fresh(&client, None, &counter))
    }

    const LABELS: Labels = Labels {
        strategy: "pubsub",
        kind: "mutex",
        label: None,
    };

    #[tokio::test]
    async fn a_reader_sees_events_in_order_and_ends_after_lost() {
        let observer = Observer::new(LABELS, "n".into(), hold(), None);
        let mut events = observer.subscribe();
        observer.renewed(Duration::from_secs(1));
        observer.renewal_failed(RenewalFailure::Timeout, Duration::from_millis(5));
        observer.lost(LostReason::Expired);
        assert!(matches!(
            events.next().await,
            Some(LeaseEvent::Renewed { .. })
        ));
        let Some(LeaseEvent::RenewalFailed { error, .. }) = events.next().await else {
            panic!("expected a renewal failure");
        };
        assert!(matches!(*error, Error::Backend { ref name, .. } if name == "n"));
        assert!(matches!(
            events.next().await,
            Some(LeaseEvent::Lost {
                reason: LostReason::Expired
            })
        ));
        assert!(events.next().await.is_none());
    }

    #[tokio::test]
    async fn a_late_reader_learns_the_loss_and_a_closed_one_ends() {
        let observer = Observer::new(LABELS, "n".into(), hold(), None);
        observer.lost(LostReason::NotHeld);
        let mut events = observer.subscribe();
        assert!(matches!(
            events.next().await,
            Some(LeaseEvent::Lost {
                reason: LostReason::NotHeld
            })
        ));
        assert!(events.next().await.is_none());
        assert!(LeaseEvents::closed().next().await.is_none());
    }

    #[tokio::test]
    async fn a_lagging_reader_counts_what_it_missed() {
        let observer = Observer::new(LABELS, "n".into(), hold(), None);
        let mut events = observer.subscribe();
        let extra = 3;
        for _ in 0..LEASE_EVENT_BUFFER + extra {
            observer.renewed(Duration::from_secs(1));
        }
        observer.lost(LostReason::Expired);
        let mut read = 0;
        while let Some(event) = events.next().await {
            read += 1;
            if matches!(event, LeaseEvent::Lost { .. }) {
                break;
            }
        }
        assert_eq!(read, LEASE_EVENT_BUFFER);
        assert_eq!(events.missed(), extra as u64 + 1);
    }

    #[test]
    fn the_listener_sees_name_hold_and_event_and_may_panic() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        let listener: Listener = Arc::new(move |notice: &LeaseNotice<'_>| {
            log.lock()
                .unwrap()
                .push((notice.name.to_owned(), notice.hold.clone(), notice.kind));
            if matches!(notice.event, LeaseEvent::Lost { .. }) {
                panic!("listener bug");
            }
        });
        let id = hold();
        let observer = Observer::new(LABELS, "orders".into(), id.clone(), Some(listener));
        observer.renewed(Duration::from_secs(1));
        observer.lost(LostReason::Expired);
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 2);
        assert!(
            seen.iter()
                .all(|s| *s == ("orders".to_owned(), id.clone(), "mutex"))
        );
    }
}
