//! Polling with a deadline: topologies converge asynchronously (gossip, replication, Sentinel
//! hello messages), so every "until" in the harness is a bounded poll that ends in
//! [`Error::Timeout`] naming what never happened, with the last error seen.

use std::future::Future;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// Pause between polls: short enough to add little latency to start-up, long enough not to
/// hammer a node that is still loading.
pub(crate) const POLL_INTERVAL: Duration = Duration::from_millis(50);

/// Calls `probe` until it yields `Some`, or fails with [`Error::Timeout`] after `limit`.
/// Probe errors are treated as "not yet" (nodes refuse connections while starting).
pub(crate) async fn until<T, F, Fut>(what: &str, limit: Duration, mut probe: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>>>,
{
    let deadline = Instant::now() + limit;
    let mut last_error = None;
    loop {
        match probe().await {
            Ok(Some(value)) => return Ok(value),
            Ok(None) => {}
            Err(err) => last_error = Some(err),
        }
        if Instant::now() >= deadline {
            let what = match last_error {
                Some(err) => format!("{what} (last error: {err})"),
                None => what.to_owned(),
            };
            return Err(Error::Timeout { what, after: limit });
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}
