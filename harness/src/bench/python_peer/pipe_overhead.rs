//! What the pipe between the bench and a Python worker costs, measured alone: sequential
//! `ping` → `pong` round trips that touch no Redis, in the same run as the Python peers'
//! cells. An acquire's latency includes one such round trip and an acquisition (acquire and
//! release) two, so a reader can subtract them from the Python rows; the in-process
//! contenders pay none.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::bench::python_peer::library::PythonLib;
use crate::bench::python_peer::pool;
use crate::error::Result;

/// Sequential round trips per measurement: tens of milliseconds, and enough that the p99 is
/// ten samples, not one.
const ROUND_TRIPS: usize = 1_000;

/// One measurement of the pipe.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PipeOverhead {
    /// Median round trip, µs.
    pub median_us: f64,
    /// 99th-percentile round trip, µs.
    pub p99_us: f64,
    /// Round trips measured.
    pub samples: usize,
}

/// Measures the pipe of a `lib` worker connected to `url` (taken from the pool and given
/// back, so it is one of the workers the cells use).
pub async fn measure(lib: PythonLib, url: &str) -> Result<PipeOverhead> {
    let mut worker = pool::take(lib, url).await?;
    // The first exchange pays for any page faults of a fresh process.
    worker.ping().await?;
    let mut rtts = Vec::with_capacity(ROUND_TRIPS);
    for _ in 0..ROUND_TRIPS {
        let sent = Instant::now();
        worker.ping().await?;
        rtts.push(sent.elapsed());
    }
    pool::give_back(worker);
    rtts.sort();
    let at = |quantile: f64| {
        let index = ((rtts.len() as f64 * quantile) as usize).min(rtts.len().saturating_sub(1));
        rtts.get(index)
            .copied()
            .unwrap_or(Duration::ZERO)
            .as_secs_f64()
            * 1e6
    };
    Ok(PipeOverhead {
        median_us: at(0.5),
        p99_us: at(0.99),
        samples: rtts.len(),
    })
}
