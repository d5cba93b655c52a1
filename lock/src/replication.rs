//! Optional `WAIT n timeout` after an acquire: how many replicas acknowledged the lock.
//!
//! Redis replicates asynchronously, so a lock acknowledged by a master that dies before
//! replicating can vanish in a failover (docs/DESIGN.md §5, scenario 6). `WAIT` narrows that window
//! — the guard reports how many replicas had the write — but does not close it: a replica
//! that acknowledged may still not be the one promoted, and `WAIT` makes nothing durable.
//! The count is reported, never trusted as safety; a caller who would rather not hold a
//! grant that fewer replicas acknowledged can require them (`required`): the grant is then
//! released and the acquire fails with [`Error::ReplicasShort`]. `WAIT` blocks the connection it runs on
//! until the replicas answer or the timeout passes, so it runs on a connection of its own
//! ([`Backend::wait_replicas`]), never on the one every renewal of the client shares.
//!
//! Invariant: `WAIT` runs only once the guard exists (its watchdog running, its release
//! armed by its drop), and never longer than the caller's budget: what is left of the
//! acquire deadline and of the lease's validity. A cancelled or timed-out `WAIT` so never
//! strands a hold, never delays `lock_within` past its deadline, and never hands back a
//! guard whose lease ran out while it waited. A required count that is not met releases
//! the grant before the acquire returns (in line; should that be cancelled or not
//! answered, the guard's drop or unlock hands it to the background).

use std::time::Duration;

use redis::Value;

use crate::backend::{Backend, ReplicaWait};
use crate::error::{Error, Result};
use crate::protocol::MIN_REPLY_WAIT;
use crate::runtime::Runtime;

/// The shortest `WAIT` timeout: `WAIT` counts in whole milliseconds and blocks forever on 0.
const MIN_WAIT_TIMEOUT: Duration = Duration::from_millis(1);

/// `WAIT` settings: wait for `replicas` acknowledgements, at most `timeout`; with
/// `required`, a grant acknowledged by fewer is released and the acquire fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Replication {
    pub(crate) replicas: u32,
    pub(crate) timeout: Duration,
    pub(crate) required: bool,
}

impl Replication {
    /// `WAIT` with a zero timeout would block forever; refuse it.
    pub(crate) fn validate(&self, name: &str) -> Result<()> {
        if self.timeout < MIN_WAIT_TIMEOUT {
            return Err(Error::InvalidConfig {
                name: name.to_owned(),
                reason: "the replication wait timeout must be at least 1 ms".into(),
            });
        }
        Ok(())
    }

    /// Runs `WAIT` on the backend's own `WAIT` connection (so other locks' renewals never
    /// queue behind it), marking the lock's `marker` key, and returns the number of
    /// replicas that acknowledged (0 when the command failed or did not answer in time:
    /// unknown is reported as "none").
    ///
    /// The whole call, the reply's [`MIN_REPLY_WAIT`] included, fits in `budget`: the
    /// server's timeout is cut to `budget` less that reply wait, and with less than
    /// [`MIN_WAIT_TIMEOUT`] left for it, `WAIT` is not sent at all.
    pub(crate) async fn acknowledged(
        &self,
        backend: &dyn Backend,
        runtime: &Runtime,
        marker: &str,
        budget: Duration,
    ) -> u32 {
        let timeout = self.timeout.min(budget.saturating_sub(MIN_REPLY_WAIT));
        if timeout < MIN_WAIT_TIMEOUT {
            tracing::warn!(?budget, "no time left to WAIT; reporting no replica");
            return 0;
        }
        let request = ReplicaWait {
            marker: marker.to_owned(),
            replicas: self.replicas,
            timeout,
        };
        let wait = backend.wait_replicas(&request);
        match runtime.timeout(timeout + MIN_REPLY_WAIT, wait).await {
            Some(Ok(Value::Int(n))) => u32::try_from(n).unwrap_or(0),
            Some(Ok(other)) => {
                tracing::warn!(reply = ?other, "unexpected WAIT reply");
                0
            }
            Some(Err(err)) => {
                tracing::warn!(error = %err, "WAIT failed; reporting no replica");
                0
            }
            None => {
                tracing::warn!("WAIT did not answer in time; reporting no replica");
                0
            }
        }
    }
}
