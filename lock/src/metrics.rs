//! The crate's metrics: their names, their labels, and the calls that record them through
//! the [`metrics`](https://docs.rs/metrics) facade.
//!
//! A library should not pick an exporter, so the lock code only talks to the facade: the
//! application installs a recorder (Prometheus, StatsD, ...) and every call below reaches
//! it; without one, each call is a no-op costing an atomic load. Invariant: every label
//! value is a `'static` string from a closed set, so a process exports a bounded number of
//! series. The lock name is never a label (names are unbounded, and each would be a series
//! of its own); per-lock detail lives in the tracing spans, which carry `name` and `hold`.
//!
//! | Name | Type | Labels | Meaning |
//! |---|---|---|---|
//! | `leasehold_acquire_wait_seconds` | histogram | `strategy`, `kind` | Seconds from the start of a waiting acquire (`lock`, `read`, `write`, `acquire` and their `_within` forms; RedLock `lock` and `lock_within`) to its grant, by the client's clock. `try_*` calls, re-entries and downgrades are not recorded. |
//! | `leasehold_acquisitions_total` | counter | `strategy`, `kind` | Grants of every acquire call: waiting, `try_*`, re-entry, downgrade. |
//! | `leasehold_acquire_timeouts_total` | counter | `strategy`, `kind` | Waiting acquires that ended in [`Error::Timeout`](crate::Error::Timeout). |
//! | `leasehold_handoffs_total` | counter | `strategy`, `kind` | Fair-queue grants claimed by the attempt right after the release script's hand-off message woke the waiter. A hand-off whose message was lost (claimed by a refresh poll) is not counted; a grant after the wake-up every waiter gets when the subscription connection breaks is (rare). |
//! | `leasehold_renewals_total` | counter | `strategy`, `kind` | Confirmed renewals of a guard's lease, by the watchdog or `extend`. |
//! | `leasehold_renewal_failures_total` | counter | `strategy`, `kind`, `reason` | Watchdog renewal attempts that failed without proving the hold gone. `reason`: `transport` (connection lost, or for RedLock too few masters answered; retried while the lease is valid), `timeout` (no answer before the validity ran out), `error` (any other failure; retried). |
//! | `leasehold_leases_lost_total` | counter | `strategy`, `kind`, `reason` | Guards whose lease was lost before they were released, as declared by the watchdog, `extend` or `lost()`, or found run out at the release. `reason`: `expired` (no renewal confirmed before the local validity deadline), `not_held` (the server had no record of the hold). |
//! | `leasehold_ambiguous_total` | counter | `strategy`, `kind`, `operation`, `outcome` | Operations whose reply was lost in transit. `operation`: `acquire`, `release`, `extend`. `outcome`: `probed_held` / `probed_free` (resolved by the read-only probe; acquires only), `surfaced` (returned as [`Error::Ambiguous`](crate::Error::Ambiguous)). |
//! | `leasehold_refusals_total` | counter | `strategy`, `kind`, `reason` | Acquire attempts the server refused to run for now, which a waiting acquire waits out and a `try_*` call reports as [`Error::Backend`](crate::Error::Backend). `reason`: `loading` (restarting), `busy` (a long script runs), `masterdown` (a replica cut from its master), `noreplicas` (a master under `min-replicas-to-write` short of acknowledging replicas). |
//! | `leasehold_hold_seconds` | histogram | `strategy`, `kind` | Seconds from a guard's grant to its end (unlocked, dropped, or after its lease was lost: the guard's end follows every release and loss), by the client's clock. |
//! | `leasehold_held` | gauge | `strategy`, `kind` | Guards alive now: +1 at the grant, −1 when the guard is gone (unlocked, dropped, lost then dropped). |
//! | `leasehold_waiting` | gauge | `strategy`, `kind` | Waiting acquire calls now waiting for a busy lock: +1 at the first busy answer, −1 when the call ends (granted, timed out, failed or cancelled). |
//! | `leasehold_mixed_strategy_total` | counter | `strategy`, `kind` | Attempts that met waiters of another wait strategy on their lock (each name is also warned about once per process): a PubSub mutex attempt that found fair-queue waiters, which the queue can starve; a read-write lock writer waiting by Spin or PubSub that found the fair line, or a FairQueue reader held back by such a writer's intent, which deadlock each other once a holder's lease ends without a release. |
//! | `leasehold_eviction_risks_total` | counter | `policy` | Connects and Sentinel re-resolutions that found a server able to evict live locks (`maxmemory` set, `maxmemory-policy` not `noeviction`). `policy`: the policy (`volatile-ttl`, `allkeys-lru`, ..., `other`), or `unknown` when `CONFIG GET` was refused (counted once per client). See [`EvictionRisk`](crate::EvictionRisk). |
//!
//! `strategy` is `spin`, `pubsub`, `fair_queue` or `redlock`; `kind` is `mutex`, `read`,
//! `write` or `permit` (a RedLock is a `mutex`; RedLock guards do not count in the gauges
//! and the hold histogram). A handle given a
//! [`metrics_label`](crate::Mutex::metrics_label) adds `label` to every metric of its locks
//! but the eviction counter: a `'static` string, so the set of series stays bounded.
//! The gauges are balanced by construction: each +1 is owned by a value whose drop does
//! the −1, so a cancelled call, a dropped guard and a lost lease all give it back. Call [`describe`] once after installing a
//! recorder to give exporters the units and help texts.

use std::sync::Arc;
use std::time::Duration;

use ::metrics::Label;

use crate::runtime::Clock;

/// Histogram: seconds from the start of a waiting acquire to its grant.
pub const ACQUIRE_WAIT_SECONDS: &str = "leasehold_acquire_wait_seconds";
/// Counter: grants of every acquire call.
pub const ACQUISITIONS: &str = "leasehold_acquisitions_total";
/// Counter: waiting acquires that timed out.
pub const ACQUIRE_TIMEOUTS: &str = "leasehold_acquire_timeouts_total";
/// Counter: fair-queue grants claimed after a hand-off message.
pub const HANDOFFS: &str = "leasehold_handoffs_total";
/// Counter: acquire attempts that met waiters of another wait strategy on their lock (a
/// mixed-strategy deployment: the fair queue can starve a PubSub mutex waiter, and a
/// read-write lock's fair line and a Spin or PubSub writer's intent deadlock each other).
pub const MIXED_STRATEGY: &str = "leasehold_mixed_strategy_total";
/// Counter: confirmed lease renewals.
pub const RENEWALS: &str = "leasehold_renewals_total";
/// Counter: failed watchdog renewal attempts, by `reason`.
pub const RENEWAL_FAILURES: &str = "leasehold_renewal_failures_total";
/// Counter: leases lost before their guard was released, by `reason`.
pub const LEASES_LOST: &str = "leasehold_leases_lost_total";
/// Counter: operations whose reply was lost, by `operation` and `outcome`.
pub const AMBIGUOUS: &str = "leasehold_ambiguous_total";
/// Counter: acquire attempts the server refused to run for now, by `reason`.
pub const REFUSALS: &str = "leasehold_refusals_total";

/// Histogram: seconds from a guard's grant to its end.
pub const HOLD_SECONDS: &str = "leasehold_hold_seconds";
/// Gauge: guards alive now.
pub const HELD: &str = "leasehold_held";
/// Gauge: waiting acquire calls now waiting for a busy lock.
pub const WAITING: &str = "leasehold_waiting";

/// Counter: connects that found a server able to evict live locks, by `policy`.
pub const EVICTION_RISKS: &str = "leasehold_eviction_risks_total";

/// Registers the unit and help text of every metric above with the installed recorder.
pub fn describe() {
    use ::metrics::{Unit, describe_counter, describe_histogram};
    describe_histogram!(
        ACQUIRE_WAIT_SECONDS,
        Unit::Seconds,
        "Time from the start of a waiting acquire to its grant"
    );
    describe_counter!(ACQUISITIONS, "Grants of every acquire call");
    describe_counter!(ACQUIRE_TIMEOUTS, "Waiting acquires that timed out");
    describe_counter!(
        MIXED_STRATEGY,
        "PubSub acquire attempts that found fair-queue waiters on their lock"
    );
    describe_counter!(
        HANDOFFS,
        "Fair-queue grants claimed after a hand-off message"
    );
    describe_counter!(RENEWALS, "Confirmed lease renewals");
    describe_counter!(RENEWAL_FAILURES, "Failed watchdog renewal attempts");
    describe_counter!(LEASES_LOST, "Leases lost before their guard was released");
    describe_counter!(AMBIGUOUS, "Operations whose reply was lost in transit");
    describe_counter!(
        REFUSALS,
        "Acquire attempts the server refused to run for now"
    );
    ::metrics::describe_histogram!(
        HOLD_SECONDS,
        Unit::Seconds,
        "Time from a guard's grant to its end"
    );
    ::metrics::describe_gauge!(HELD, "Guards alive now");
    ::metrics::describe_gauge!(WAITING, "Acquire calls now waiting for a busy lock");
    describe_counter!(
        EVICTION_RISKS,
        "Connects that found a server able to evict live locks"
    );
}

/// The labels every metric of one lock carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Labels {
    /// `spin`, `pubsub`, `fair_queue` or `redlock`.
    pub(crate) strategy: &'static str,
    /// `mutex`, `read`, `write` or `permit`.
    pub(crate) kind: &'static str,
    /// The handle's [`metrics_label`](crate::Mutex::metrics_label), if set.
    pub(crate) label: Option<&'static str>,
}

impl Labels {
    /// A RedLock's: it has no wait strategy of its own (it retries after a random pause).
    pub(crate) const REDLOCK: Self = Self {
        strategy: "redlock",
        kind: "mutex",
        label: None,
    };

    /// These labels and `extra`, as the facade takes them (no allocation for the values:
    /// every one is `'static`).
    fn with(self, extra: &[(&'static str, &'static str)]) -> Vec<Label> {
        let mut all = Vec::with_capacity(3 + extra.len());
        all.push(Label::from_static_parts("strategy", self.strategy));
        all.push(Label::from_static_parts("kind", self.kind));
        if let Some(label) = self.label {
            all.push(Label::from_static_parts("label", label));
        }
        all.extend(extra.iter().map(|&(k, v)| Label::from_static_parts(k, v)));
        all
    }
}

/// A grant; `waited` is the wait of a waiting acquire (`None` for a try), `handed_off`
/// whether a hand-off message preceded it.
pub(crate) fn acquired(labels: Labels, waited: Option<Duration>, handed_off: bool) {
    ::metrics::counter!(ACQUISITIONS, labels.with(&[])).increment(1);
    if let Some(waited) = waited {
        ::metrics::histogram!(ACQUIRE_WAIT_SECONDS, labels.with(&[])).record(waited.as_secs_f64());
    }
    if handed_off {
        ::metrics::counter!(HANDOFFS, labels.with(&[])).increment(1);
    }
}

/// A waiting acquire that ran out of time.
pub(crate) fn timed_out(labels: Labels) {
    ::metrics::counter!(ACQUIRE_TIMEOUTS, labels.with(&[])).increment(1);
}

/// An attempt that met waiters of another wait strategy on its lock.
pub(crate) fn mixed_strategy(labels: Labels) {
    ::metrics::counter!(MIXED_STRATEGY, labels.with(&[])).increment(1);
}

/// A confirmed renewal.
pub(crate) fn renewed(labels: Labels) {
    ::metrics::counter!(RENEWALS, labels.with(&[])).increment(1);
}

/// A failed watchdog renewal attempt.
pub(crate) fn renewal_failed(labels: Labels, reason: &'static str) {
    ::metrics::counter!(RENEWAL_FAILURES, labels.with(&[("reason", reason)])).increment(1);
}

/// A guard's lease lost.
pub(crate) fn lost(labels: Labels, reason: &'static str) {
    ::metrics::counter!(LEASES_LOST, labels.with(&[("reason", reason)])).increment(1);
}

/// A server found able to evict live locks (`policy` from a closed set, or `unknown`).
pub(crate) fn eviction_risk(policy: &'static str) {
    ::metrics::counter!(EVICTION_RISKS, "policy" => policy).increment(1);
}

/// How an operation whose reply was lost ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ambiguity {
    /// The probe found the hold granted.
    ProbedHeld,
    /// The probe found no such hold.
    ProbedFree,
    /// Returned to the caller as `Error::Ambiguous`.
    Surfaced,
}

/// An operation (`acquire`, `release`, `extend`) whose reply was lost, and how it ended.
pub(crate) fn ambiguous(labels: Labels, operation: &'static str, outcome: Ambiguity) {
    let outcome = match outcome {
        Ambiguity::ProbedHeld => "probed_held",
        Ambiguity::ProbedFree => "probed_free",
        Ambiguity::Surfaced => "surfaced",
    };
    let labels = labels.with(&[("operation", operation), ("outcome", outcome)]);
    ::metrics::counter!(AMBIGUOUS, labels).increment(1);
}

/// An acquire attempt the server refused to run for now, for `reason`
/// ([`crate::error::refusal`]).
pub(crate) fn refused(labels: Labels, reason: &'static str) {
    ::metrics::counter!(REFUSALS, labels.with(&[("reason", reason)])).increment(1);
}

/// One live guard in [`HELD`]; its drop records [`HOLD_SECONDS`] and gives the gauge back.
pub(crate) struct Held {
    labels: Labels,
    clock: Arc<dyn Clock>,
    since: Duration,
}

impl Held {
    /// A guard of `labels` granted now by `clock`.
    pub(crate) fn start(labels: Labels, clock: Arc<dyn Clock>) -> Self {
        ::metrics::gauge!(HELD, labels.with(&[])).increment(1.0);
        let since = clock.now();
        Self {
            labels,
            clock,
            since,
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let held = self.clock.now().saturating_sub(self.since);
        ::metrics::histogram!(HOLD_SECONDS, self.labels.with(&[])).record(held.as_secs_f64());
        ::metrics::gauge!(HELD, self.labels.with(&[])).decrement(1.0);
    }
}

/// One acquire call in [`WAITING`]; its drop gives the gauge back.
pub(crate) struct Waiting(Labels);

impl Waiting {
    /// An acquire call of `labels` that starts waiting now.
    pub(crate) fn start(labels: Labels) -> Self {
        ::metrics::gauge!(WAITING, labels.with(&[])).increment(1.0);
        Self(labels)
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        ::metrics::gauge!(WAITING, self.0.with(&[])).decrement(1.0);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};

    const LABELS: Labels = Labels {
        strategy: "fair_queue",
        kind: "permit",
        label: None,
    };

    /// (name, sorted labels) -> value, of everything recorded.
    fn recorded(f: impl FnOnce()) -> Vec<(String, Vec<String>, DebugValue)> {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        ::metrics::with_local_recorder(&recorder, f);
        let mut all: Vec<_> = snapshotter
            .snapshot()
            .into_vec()
            .into_iter()
            .map(|(key, _, _, value)| {
                let key = key.key();
                let mut labels: Vec<String> = key
                    .labels()
                    .map(|l| format!("{}={}", l.key(), l.value()))
                    .collect();
                labels.sort();
                (key.name().to_owned(), labels, value)
            })
            .collect();
        all.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
        all
    }

    #[test]
    fn a_waited_hand_off_grant_records_count_wait_and_hand_off() {
        let all = recorded(|| acquired(LABELS, Some(Duration::from_millis(250)), true));
        let labels = vec!["kind=permit".to_owned(), "strategy=fair_queue".to_owned()];
        assert_eq!(
            all,
            vec![
                (
                    ACQUIRE_WAIT_SECONDS.to_owned(),
                    labels.clone(),
                    DebugValue::Histogram(vec![0.25.into()])
                ),
                (
                    ACQUISITIONS.to_owned(),
                    labels.clone(),
                    DebugValue::Counter(1)
                ),
                (HANDOFFS.to_owned(), labels, DebugValue::Counter(1)),
            ]
        );
    }

    #[test]
    fn a_try_grant_records_no_wait_and_outcomes_carry_their_labels() {
        let all = recorded(|| {
            acquired(Labels::REDLOCK, None, false);
            ambiguous(LABELS, "release", Ambiguity::Surfaced);
            lost(LABELS, "expired");
        });
        let names: Vec<(&str, usize)> = all.iter().map(|(n, l, _)| (n.as_str(), l.len())).collect();
        assert_eq!(
            names,
            vec![(ACQUISITIONS, 2), (AMBIGUOUS, 4), (LEASES_LOST, 3)]
        );
        assert!(all[0].1.contains(&"strategy=redlock".to_owned()));
        assert!(all[1].1.contains(&"outcome=surfaced".to_owned()));
        assert!(all[2].1.contains(&"reason=expired".to_owned()));
    }

    /// A clock the test moves by hand.
    struct Manual(std::sync::Mutex<Duration>);

    impl Clock for Manual {
        fn now(&self) -> Duration {
            *self.0.lock().unwrap()
        }

        fn sleep(&self, _: Duration) -> crate::backend::BoxFuture<'static, ()> {
            Box::pin(std::future::pending())
        }
    }

    fn gauge(all: &[(String, Vec<String>, DebugValue)], name: &str) -> Option<f64> {
        all.iter().find(|(n, ..)| n == name).map(|(.., v)| match v {
            DebugValue::Gauge(g) => g.into_inner(),
            other => panic!("{name} is not a gauge: {other:?}"),
        })
    }

    #[test]
    fn gauges_balance_when_their_owners_drop_and_the_hold_time_is_recorded() {
        let labelled = Labels {
            label: Some("billing"),
            ..LABELS
        };
        let clock = Arc::new(Manual(std::sync::Mutex::new(Duration::from_secs(10))));
        let all = recorded(|| {
            let held = Held::start(labelled, Arc::clone(&clock) as Arc<dyn Clock>);
            let waiting = Waiting::start(labelled);
            let cancelled = Waiting::start(labelled);
            *clock.0.lock().unwrap() += Duration::from_millis(1500);
            drop((held, waiting, cancelled));
        });
        assert_eq!(gauge(&all, HELD), Some(0.0));
        assert_eq!(gauge(&all, WAITING), Some(0.0));
        let hold = all.iter().find(|(n, ..)| n == HOLD_SECONDS).unwrap();
        assert_eq!(hold.2, DebugValue::Histogram(vec![1.5.into()]));
        assert!(hold.1.contains(&"label=billing".to_owned()), "{:?}", hold.1);
    }

    #[test]
    fn live_guards_and_waiters_show_in_the_gauges() {
        let clock: Arc<dyn Clock> = Arc::new(Manual(std::sync::Mutex::new(Duration::ZERO)));
        let (mut kept, mut waiting) = (Vec::new(), Vec::new());
        let all = recorded(|| {
            kept.push(Held::start(LABELS, Arc::clone(&clock)));
            kept.push(Held::start(LABELS, Arc::clone(&clock)));
            drop(Waiting::start(LABELS));
            waiting.push(Waiting::start(LABELS));
        });
        assert_eq!(gauge(&all, HELD), Some(2.0));
        assert_eq!(gauge(&all, WAITING), Some(1.0));
        assert!(
            all.iter().all(|(_, labels, _)| labels.len() == 2),
            "no label unless set"
        );
        drop((kept, waiting));
    }
}
