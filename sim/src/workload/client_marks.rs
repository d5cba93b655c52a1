//! Which of the lock client's own paths a run took, read from the counters the library
//! already keeps for operators (`leasehold::metrics`): an ambiguous acquire resolved by
//! the probe, a lease declared lost for each reason, a renewal that failed for each reason,
//! a fair hand-off claimed, an acquire that timed out. The script call sites
//! ([`crate::model::coverage`]) show what the server ran; these show what the client did about it.
//!
//! Invariant: a run records into a recorder of its own thread (`metrics`' local recorder),
//! so parallel runs never mix, and recording only observes: the lock code is the same with
//! or without a recorder, and the simulator never reads what it records.

use std::collections::{BTreeMap, BTreeSet};

use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use serde::Serialize;

/// The labels every series carries, left out of a mark (the report is per path, not per
/// strategy or lock kind).
const PER_LOCK_LABELS: [&str; 2] = ["strategy", "kind"];

/// Runs `f`, recording the client marks of the lock code it drives; returns its result and
/// the marks, each a counter's name with its labels beyond [`PER_LOCK_LABELS`], e.g.
/// `leasehold_ambiguous_total{operation=acquire,outcome=probed_held}`.
pub fn recording<T>(f: impl FnOnce() -> T) -> (T, BTreeSet<String>) {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let result = metrics::with_local_recorder(&recorder, f);
    let marks = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter(|(_, _, _, value)| matches!(value, DebugValue::Counter(n) if *n > 0))
        .map(|(key, _, _, _)| {
            let key = key.key();
            let labels: Vec<String> = key
                .labels()
                .filter(|label| !PER_LOCK_LABELS.contains(&label.key()))
                .map(|label| format!("{}={}", label.key(), label.value()))
                .collect();
            if labels.is_empty() {
                key.name().to_owned()
            } else {
                format!("{}{{{}}}", key.name(), labels.join(","))
            }
        })
        .collect();
    (result, marks)
}

/// One client mark and how many runs took it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MarkCount {
    /// The counter and its path labels.
    pub mark: String,
    /// Runs in which it counted at least once.
    pub runs: u64,
}

/// Marks by the number of runs that took each, in name order.
pub fn tally<'a>(runs: impl IntoIterator<Item = &'a BTreeSet<String>>) -> Vec<MarkCount> {
    let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
    for marks in runs {
        for mark in marks {
            *counts.entry(mark).or_default() += 1;
        }
    }
    counts
        .into_iter()
        .map(|(mark, runs)| MarkCount {
            mark: mark.to_owned(),
            runs,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_is_a_counter_with_its_path_labels() {
        let ((), marks) = recording(|| {
            metrics::counter!("c_total", "strategy" => "spin", "kind" => "mutex", "reason" => "x")
                .increment(2);
            metrics::counter!("d_total", "strategy" => "spin", "kind" => "mutex").increment(1);
            metrics::counter!("never_total", "strategy" => "spin").increment(0);
        });
        let expected: BTreeSet<String> = ["c_total{reason=x}", "d_total"].map(str::to_owned).into();
        assert_eq!(marks, expected);
        let ((), none) = recording(|| ());
        assert!(none.is_empty());
        let counts = tally([&marks, &none, &marks]);
        assert_eq!(
            counts[0],
            MarkCount {
                mark: "c_total{reason=x}".to_owned(),
                runs: 2
            }
        );
    }
}
