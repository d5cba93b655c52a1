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
//! | `leasehold_acquire_wait_seconds` | histogram | `strategy`, `kind` | Seconds from the start of a waiting acquire (`lock`, `read`, `write`, `acquire` and their `_timeout`/`_within` forms; RedLock `lock`) to its grant, by the client's clock. `try_*` calls, re-entries and downgrades are not recorded. |
//! | `leasehold_acquisitions_total` | counter | `strategy`, `kind` | Grants of every acquire call: waiting, `try_*`, re-entry, downgrade. |
//! | `leasehold_acquire_timeouts_total` | counter | `strategy`, `kind` | Waiting acquires that ended in [`Error::Timeout`](crate::Error::Timeout). |
//! | `leasehold_handoffs_total` | counter | `strategy`, `kind` | Fair-queue grants claimed by the attempt right after the release script's hand-off message woke the waiter. A hand-off whose message was lost (claimed by a refresh poll) is not counted; a grant after the wake-up every waiter gets when the subscription connection breaks is (rare). |
//! | `leasehold_renewals_total` | counter | `strategy`, `kind` | Confirmed renewals of a guard's lease, by the watchdog or `extend`. |
//! | `leasehold_renewal_failures_total` | counter | `strategy`, `kind`, `reason` | Watchdog renewal attempts that failed without proving the hold gone. `reason`: `transport` (connection lost, or for RedLock too few masters answered; retried while the lease is valid), `timeout` (no answer before the validity ran out), `error` (any other failure; retried). |
//! | `leasehold_leases_lost_total` | counter | `strategy`, `kind`, `reason` | Guards whose lease was lost before they were released, as declared by the watchdog, `extend` or `lost()`, or found run out at the release. `reason`: `expired` (no renewal confirmed before the local validity deadline), `not_held` (the server had no record of the hold). |
//! | `leasehold_ambiguous_total` | counter | `strategy`, `kind`, `operation`, `outcome` | Operations whose reply was lost in transit. `operation`: `acquire`, `release`, `extend`. `outcome`: `probed_held` / `probed_free` (resolved by the read-only probe; acquires only), `surfaced` (returned as [`Error::Ambiguous`](crate::Error::Ambiguous)). |
//! | `leasehold_eviction_risks_total` | counter | `policy` | Connects and Sentinel re-resolutions that found a server able to evict live locks (`maxmemory` set, `maxmemory-policy` not `noeviction`). `policy`: the policy (`volatile-ttl`, `allkeys-lru`, ..., `other`), or `unknown` when `CONFIG GET` was refused (counted once per client). See [`EvictionRisk`](crate::EvictionRisk). |
//!
//! `strategy` is `spin`, `pubsub`, `fair_queue` or `redlock`; `kind` is `mutex`, `read`,
//! `write` or `permit` (a RedLock is a `mutex`). Call [`describe`] once after installing a
//! recorder to give exporters the units and help texts.

use std::time::Duration;

/// Histogram: seconds from the start of a waiting acquire to its grant.
pub const ACQUIRE_WAIT_SECONDS: &str = "leasehold_acquire_wait_seconds";
/// Counter: grants of every acquire call.
pub const ACQUISITIONS: &str = "leasehold_acquisitions_total";
/// Counter: waiting acquires that timed out.
pub const ACQUIRE_TIMEOUTS: &str = "leasehold_acquire_timeouts_total";
/// Counter: fair-queue grants claimed after a hand-off message.
pub const HANDOFFS: &str = "leasehold_handoffs_total";
/// Counter: confirmed lease renewals.
pub const RENEWALS: &str = "leasehold_renewals_total";
/// Counter: failed watchdog renewal attempts, by `reason`.
pub const RENEWAL_FAILURES: &str = "leasehold_renewal_failures_total";
/// Counter: leases lost before their guard was released, by `reason`.
pub const LEASES_LOST: &str = "leasehold_leases_lost_total";
/// Counter: operations whose reply was lost, by `operation` and `outcome`.
pub const AMBIGUOUS: &str = "leasehold_ambiguous_total";

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
        HANDOFFS,
        "Fair-queue grants claimed after a hand-off message"
    );
    describe_counter!(RENEWALS, "Confirmed lease renewals");
    describe_counter!(RENEWAL_FAILURES, "Failed watchdog renewal attempts");
    describe_counter!(LEASES_LOST, "Leases lost before their guard was released");
    describe_counter!(AMBIGUOUS, "Operations whose reply was lost in transit");
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
}

impl Labels {
    /// A RedLock's: it has no wait strategy of its own (it retries after a random pause).
    pub(crate) const REDLOCK: Self = Self {
        strategy: "redlock",
        kind: "mutex",
    };
}

/// A grant; `waited` is the wait of a waiting acquire (`None` for a try), `handed_off`
/// whether a hand-off message preceded it.
pub(crate) fn acquired(labels: Labels, waited: Option<Duration>, handed_off: bool) {
    let Labels { strategy, kind } = labels;
    ::metrics::counter!(ACQUISITIONS, "strategy" => strategy, "kind" => kind).increment(1);
    if let Some(waited) = waited {
        ::metrics::histogram!(ACQUIRE_WAIT_SECONDS, "strategy" => strategy, "kind" => kind)
            .record(waited.as_secs_f64());
    }
    if handed_off {
        ::metrics::counter!(HANDOFFS, "strategy" => strategy, "kind" => kind).increment(1);
    }
}

/// A waiting acquire that ran out of time.
pub(crate) fn timed_out(labels: Labels) {
    let Labels { strategy, kind } = labels;
    ::metrics::counter!(ACQUIRE_TIMEOUTS, "strategy" => strategy, "kind" => kind).increment(1);
}

/// A confirmed renewal.
pub(crate) fn renewed(labels: Labels) {
    let Labels { strategy, kind } = labels;
    ::metrics::counter!(RENEWALS, "strategy" => strategy, "kind" => kind).increment(1);
}

/// A failed watchdog renewal attempt.
pub(crate) fn renewal_failed(labels: Labels, reason: &'static str) {
    let Labels { strategy, kind } = labels;
    ::metrics::counter!(RENEWAL_FAILURES, "strategy" => strategy, "kind" => kind, "reason" => reason)
        .increment(1);
}

/// A guard's lease lost.
pub(crate) fn lost(labels: Labels, reason: &'static str) {
    let Labels { strategy, kind } = labels;
    ::metrics::counter!(LEASES_LOST, "strategy" => strategy, "kind" => kind, "reason" => reason)
        .increment(1);
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
    let Labels { strategy, kind } = labels;
    let outcome = match outcome {
        Ambiguity::ProbedHeld => "probed_held",
        Ambiguity::ProbedFree => "probed_free",
        Ambiguity::Surfaced => "surfaced",
    };
    ::metrics::counter!(
        AMBIGUOUS,
        "strategy" => strategy,
        "kind" => kind,
        "operation" => operation,
        "outcome" => outcome
    )
    .increment(1);
}

#[cfg(test)]
mod tests {
    use super::*;
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};

    const LABELS: Labels = Labels {
        strategy: "fair_queue",
        kind: "permit",
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
}
