//! Optional `WAIT n timeout` after an acquire: how many replicas acknowledged the lock.
//!
//! Redis replicates asynchronously, so a lock acknowledged by a master that dies before
//! replicating can vanish in a failover (DESIGN §5, scenario 6). `WAIT` narrows that window
//! — the guard reports how many replicas had the write — but does not close it: a replica
//! that acknowledged may still not be the one promoted, and `WAIT` makes nothing durable.
//! The count is reported, never trusted as safety. `WAIT` covers every earlier write on
//! the client's shared connection and holds that connection until the replicas answer or
//! the timeout passes.

use std::time::Duration;

use redis::Value;

use crate::backend::Backend;
use crate::error::{Error, Result};

/// `WAIT` settings: wait for `replicas` acknowledgements, at most `timeout`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Replication {
    pub(crate) replicas: u32,
    pub(crate) timeout: Duration,
}

impl Replication {
    /// `WAIT` with a zero timeout would block forever; refuse it.
    pub(crate) fn validate(&self, name: &str) -> Result<()> {
        if self.timeout < Duration::from_millis(1) {
            return Err(Error::InvalidConfig {
                name: name.to_owned(),
                reason: "the replication wait timeout must be at least 1 ms".into(),
            });
        }
        Ok(())
    }

    /// Runs `WAIT` and returns the number of replicas that acknowledged (0 when the command
    /// failed: unknown is reported as "none").
    pub(crate) async fn acknowledged(&self, backend: &dyn Backend) -> u32 {
        let timeout = u64::try_from(self.timeout.as_millis()).unwrap_or(u64::MAX);
        let mut cmd = redis::cmd("WAIT");
        cmd.arg(self.replicas).arg(timeout);
        match backend.query(&cmd).await {
            Ok(Value::Int(n)) => u32::try_from(n).unwrap_or(0),
            Ok(other) => {
                tracing::warn!(reply = ?other, "unexpected WAIT reply");
                0
            }
            Err(err) => {
                tracing::warn!(error = %err, "WAIT failed; reporting no replica");
                0
            }
        }
    }
}
