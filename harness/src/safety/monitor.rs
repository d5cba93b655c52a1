//! A bystander that polls the lock key's PTTL on the server, so a lost-lease signal can be
//! set against the server-side end of the lease it reports: the margin by which `lost()`
//! fired before the TTL really ran out (docs/DESIGN.md §5 item 7).
//!
//! Invariant: an observation is kept only if the server answered; the lease end known at a
//! moment is the latest answered poll's time + its PTTL, which a renewal can only move later.

use std::time::Duration;

use redis::AsyncConnectionConfig;
use redis::aio::MultiplexedConnection;
use tokio::sync::watch;

use crate::safety::run_history::RunHistory;

/// Poll period: small against the shortest TTL of the runs (500 ms), so the estimate of the
/// lease end lags a renewal by at most this.
const POLL: Duration = Duration::from_millis(10);

/// Timeout of one poll: a paused or cut node must not stall the monitor past a few polls.
const POLL_TIMEOUT: Duration = Duration::from_millis(100);

/// One answered poll: run time (ns) and the key's PTTL (ms; negative = no key/no expiry).
pub type Observation = (u64, i64);

/// Polls `key` on `url` until `stop`, returning every answered observation.
pub async fn watch_lease(
    url: String,
    key: String,
    history: std::sync::Arc<RunHistory>,
    mut stop: watch::Receiver<bool>,
) -> Vec<Observation> {
    let mut seen = Vec::new();
    let mut connection: Option<MultiplexedConnection> = None;
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(POLL_TIMEOUT))
        .set_response_timeout(Some(POLL_TIMEOUT));
    while !*stop.borrow() {
        if connection.is_none()
            && let Ok(client) = redis::Client::open(url.as_str())
        {
            connection = client
                .get_multiplexed_async_connection_with_config(&config)
                .await
                .ok();
        }
        if let Some(conn) = connection.as_mut() {
            let sent = history.now_ns();
            match redis::cmd("PTTL").arg(&key).query_async::<i64>(conn).await {
                Ok(pttl) => seen.push((sent, pttl)),
                Err(err) if err.is_io_error() || err.is_connection_dropped() => connection = None,
                Err(_) => {}
            }
        }
        tokio::select! {
            () = tokio::time::sleep(POLL) => {}
            _ = stop.changed() => {}
        }
    }
    seen
}

/// The server-side end of a hold granted at `since` as known at `at` (run ns): the latest
/// positive observation in `[since, at]`, plus its PTTL. Observations before the grant
/// describe an earlier lease and are ignored (a grant whose reply was delayed past its own
/// validity has no observation of its own, hence no margin).
pub fn lease_end_before(observations: &[Observation], since: u64, at: u64) -> Option<u64> {
    observations
        .iter()
        .rev()
        .filter(|(t, pttl)| *t >= since && *t <= at && *pttl > 0)
        .map(|(t, pttl)| t + u64::try_from(*pttl).unwrap_or(0) * 1_000_000)
        .next()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn lease_end_uses_latest_live_observation() {
        let obs = [(0, 1_000), (10_000_000, 990), (20_000_000, -2)];
        assert_eq!(lease_end_before(&obs, 0, 15_000_000), Some(1_000_000_000));
        assert_eq!(lease_end_before(&obs, 0, 30_000_000), Some(1_000_000_000));
        assert_eq!(lease_end_before(&obs, 25_000_000, 30_000_000), None);
        assert_eq!(lease_end_before(&[], 0, 1), None);
    }
}
