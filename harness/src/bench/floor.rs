//! The round-trip floor (DESIGN section 3): one client sending a trivial script with EVALSHA,
//! one call at a time, in the same run and against the same server as the contenders. No lock
//! can hand a hot lock over faster than one such round trip, so it sets the ceiling each
//! contender's throughput is measured against.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::bench::server_counters::admin_connections;
use crate::error::{Error, Result};

/// The trivial script: the server does as little as a script can, so what is measured is
/// the client library, the network path and Redis's command dispatch.
const TRIVIAL_SCRIPT: &str = "return 1";
/// Sequential round trips per measurement: about 0.1 s on loopback or a bridge, and enough
/// that the median does not move with a stray scheduler hiccup.
const ROUND_TRIPS: usize = 1_000;

/// Percentile of the sequential round trips taken as a repetition's floor: a low one, because
/// on a shared machine other load only ever adds to a round trip (medians of one run ranged
/// 27–99 µs while its uncontended cells needed about 50 µs per round trip), and a floor is a
/// lower bound.
pub const FLOOR_PERCENTILE: f64 = 10.0;

/// One floor measurement.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Floor {
    /// The EVALSHA round trip at [`FLOOR_PERCENTILE`], µs.
    pub rtt_us: f64,
    /// The median round trip, µs, for the record.
    #[serde(default)]
    pub median_us: f64,
    /// Round trips measured.
    pub samples: usize,
}

impl Floor {
    /// The one-hot-lock ceiling, acquisitions (hand-offs) per second: a hand-off needs at least
    /// the release to reach the server and the grant to reach the next holder, half a round
    /// trip each, so one round trip per hand-off (DESIGN section 3: 1 / floor RTT).
    pub fn ceiling_per_s(&self) -> Option<f64> {
        (self.rtt_us > 0.0).then(|| 1e6 / self.rtt_us)
    }
}

/// Measures the floor against the server at `url` (the script is loaded first, so every
/// measured call is an EVALSHA).
pub async fn measure(url: &str) -> Result<Floor> {
    let mut conns = admin_connections(&[url.to_owned()]).await?;
    let Some(conn) = conns.first_mut() else {
        return Err(Error::Report {
            what: "round-trip floor".to_owned(),
            reason: "no connection".to_owned(),
        });
    };
    let script = redis::Script::new(TRIVIAL_SCRIPT);
    let _: i64 = script
        .invoke_async(conn)
        .await
        .map_err(|err| Error::redis(url, err))?;
    let mut rtts = Vec::with_capacity(ROUND_TRIPS);
    for _ in 0..ROUND_TRIPS {
        let sent = Instant::now();
        let _: i64 = script
            .invoke_async(conn)
            .await
            .map_err(|err| Error::redis(url, err))?;
        rtts.push(sent.elapsed());
    }
    rtts.sort();
    let at = |percentile: f64| {
        let index = (rtts.len() as f64 * percentile / 100.0) as usize;
        rtts.get(index.min(rtts.len().saturating_sub(1)))
            .copied()
            .unwrap_or(Duration::ZERO)
            .as_secs_f64()
            * 1e6
    };
    Ok(Floor {
        rtt_us: at(FLOOR_PERCENTILE),
        median_us: at(50.0),
        samples: rtts.len(),
    })
}
