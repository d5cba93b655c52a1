//! How fast lock keys' PTTLs run down on a node against real time: the evidence that a
//! node's clock drift landed (`clock_drift`). Each try's key is sampled every
//! [`SAMPLE_EVERY`] in one pipelined round trip; a clock 30 % fast shows as a PTTL falling
//! 1.3 ms per real millisecond, so a key set with `PX t` is gone after t/1.3.
//!
//! Invariant: a rate is read only off one grant's key at a time (a run of live, never
//! rising PTTLs: a new grant or a renewal starts a new run, the key's end closes it), and
//! only from samples whose round trip was short enough to stamp them with the real time the
//! server read its clock; runs are pooled by least squares, so PTTL's millisecond rounding
//! averages out.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::topology::node::Node;

/// Sampling period: ~75 samples over a 1 s key on a clock 30 % fast.
const SAMPLE_EVERY: Duration = Duration::from_millis(10);

/// Longest round trip of a sample that is kept: the local bridge answers in well under a
/// millisecond, so a slower one was held up by the loaded host, and its midpoint may be
/// off from when the server read its clock by more than the rounding of PTTL.
const MAX_ROUND_TRIP: Duration = Duration::from_millis(4);

/// Fewest samples of one grant's key that count towards the rate.
const MIN_RUN_SAMPLES: usize = 10;

/// What one key's PTTL did while sampled.
#[derive(Debug, Clone, Default)]
pub(super) struct KeyRate {
    /// PTTL milliseconds per real millisecond, pooled over the runs (`None`: no run long
    /// enough, e.g. nobody held).
    pub rate: Option<f64>,
    /// Samples in the runs that count.
    pub samples: usize,
    /// Runs that count (one per grant whose key was seen long enough).
    pub runs: usize,
    /// The longest run, for the reader: (first PTTL, last PTTL, real ms between them).
    pub longest: Option<(i64, i64, f64)>,
}

impl KeyRate {
    /// The evidence line: how fast the key ran down and when a fresh `ttl` key is gone.
    pub(super) fn describe(&self, node: &str, ttl: Duration) -> String {
        let Some(rate) = self.rate else {
            return format!("no lock key on {node} lived long enough to time its PTTL");
        };
        let ttl_ms = ttl.as_secs_f64() * 1e3;
        let example = self.longest.map_or(String::new(), |(first, last, real)| {
            format!(", e.g. {first} → {last} ms in {real:.0} ms")
        });
        format!(
            "lock key PTTL on {node} ran down {rate:.4}× real time ({} samples, {} grants{example}): \
             a {ttl_ms:.0} ms key is gone after ≈{:.0} ms",
            self.samples,
            self.runs,
            ttl_ms / rate
        )
    }
}

/// One key's samples: finished runs and the one in progress, as (real ms, PTTL ms).
#[derive(Default)]
struct Series {
    runs: Vec<Vec<(f64, f64)>>,
    current: Vec<(f64, f64)>,
}

impl Series {
    fn push(&mut self, real_ms: f64, pttl: i64) {
        let pttl = pttl as f64;
        let continues = pttl > 0.0 && self.current.last().is_some_and(|&(_, last)| pttl <= last);
        if !continues {
            self.close();
        }
        if pttl > 0.0 {
            self.current.push((real_ms, pttl));
        }
    }

    fn close(&mut self) {
        let run = std::mem::take(&mut self.current);
        if run.len() >= MIN_RUN_SAMPLES {
            self.runs.push(run);
        }
    }

    /// The pooled least-squares slope (each run with its own intercept), negated.
    fn rate(mut self) -> KeyRate {
        self.close();
        let (mut sxy, mut sxx, mut samples) = (0.0, 0.0, 0);
        let mut longest: Option<(i64, i64, f64)> = None;
        for run in &self.runs {
            let n = run.len() as f64;
            let mx = run.iter().map(|p| p.0).sum::<f64>() / n;
            let my = run.iter().map(|p| p.1).sum::<f64>() / n;
            sxy += run.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum::<f64>();
            sxx += run.iter().map(|p| (p.0 - mx).powi(2)).sum::<f64>();
            samples += run.len();
            if let (Some(first), Some(last)) = (run.first(), run.last()) {
                let span = last.0 - first.0;
                if longest.is_none_or(|(_, _, s)| span > s) {
                    longest = Some((first.1 as i64, last.1 as i64, span));
                }
            }
        }
        KeyRate {
            rate: (sxx > 0.0).then(|| -sxy / sxx),
            samples,
            runs: self.runs.len(),
            longest,
        }
    }
}

/// Runs `work` while sampling the PTTL of each of `keys` on `node`; its output and each
/// key's rate.
pub(super) async fn during<T>(
    node: &Node,
    keys: &[&str],
    work: impl Future<Output = T>,
) -> (T, Result<Vec<KeyRate>>) {
    let done = AtomicBool::new(false);
    let work = async {
        let output = work.await;
        done.store(true, Ordering::SeqCst);
        output
    };
    tokio::join!(work, sample_while(node, keys, &done))
}

/// Samples the PTTL of each of `keys` on `node` until `done` is set; each key's rate.
async fn sample_while(node: &Node, keys: &[&str], done: &AtomicBool) -> Result<Vec<KeyRate>> {
    let mut pttls = redis::pipe();
    for key in keys {
        pttls.cmd("PTTL").arg(*key);
    }
    let mut connection = node.connection().await?;
    let origin = Instant::now();
    let mut series: Vec<Series> = keys.iter().map(|_| Series::default()).collect();
    while !done.load(Ordering::SeqCst) {
        tokio::time::sleep(SAMPLE_EVERY).await;
        let sent = Instant::now();
        let read: Vec<i64> = pttls
            .query_async(&mut connection)
            .await
            .map_err(|err| Error::redis(node.url(), err))?;
        let round_trip = sent.elapsed();
        if round_trip > MAX_ROUND_TRIP {
            continue;
        }
        let at_ms = (sent - origin + round_trip / 2).as_secs_f64() * 1e3;
        for (s, pttl) in series.iter_mut().zip(read) {
            s.push(at_ms, pttl);
        }
    }
    Ok(series.into_iter().map(Series::rate).collect())
}

#[cfg(test)]
mod tests {
    use super::Series;

    #[test]
    fn the_rate_pools_grants_and_ignores_the_jump_between_them() {
        let mut series = Series::default();
        // Two grants of a 1000 ms key on a clock 30 % fast, sampled every 10 ms, with the
        // key gone for a while between them.
        for grant in 0..2 {
            let base = f64::from(grant) * 1_000.0;
            for i in 0..70 {
                let real = base + f64::from(i) * 10.0;
                series.push(real, (1_000.0 - f64::from(i) * 13.0).floor() as i64);
            }
            series.push(base + 800.0, -2);
        }
        let rate = series.rate();
        assert_eq!((rate.runs, rate.samples), (2, 140));
        let measured = rate.rate.unwrap_or_default();
        assert!((measured - 1.3).abs() < 1e-9, "{measured}");
    }

    #[test]
    fn no_long_enough_run_gives_no_rate() {
        let mut series = Series::default();
        for i in 0..5 {
            series.push(f64::from(i), 100 - i64::from(i));
        }
        assert!(series.rate().rate.is_none());
    }
}
