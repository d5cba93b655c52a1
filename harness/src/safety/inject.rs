//! Fault application: injects a scenario's [`RealFault`] into the tries of a running cell —
//! once on the shared node for node faults (`node_faults`, `clock_faults`, `clock_drift`,
//! `lost_grant`),
//! once per try for faults aimed at a try's holder (`holder_faults`) — and reports, per
//! try, when it started and ended and the evidence that it landed.
//!
//! Invariant: a try's fault counts as landed only on evidence read from the system, not on
//! the injection having been attempted: the target held when it hit, the process or node
//! was observed stopped or silent, a grant was missing where the fault should remove it, a
//! clock jump expired the held key, a drifting clock ran the key down at its rate. Every client a fault hampers is marked `Impaired` for
//! the outage (plus the TTLs it takes the lock to come back), so the checker does not judge
//! their waits then as starvation.

use futures::future::{join_all, try_join_all};

use crate::error::Result;
use crate::safety::fault_target::Injector;
use crate::safety::holder_faults::{holder_freeze, holder_partition, holder_pause};
use crate::safety::lost_grant;
use crate::safety::node_faults::{
    client_kill, crash_recover, node_cut, node_pause, restart, script_flush,
};
use crate::safety::report::FaultTiming;
use crate::safety::run_history::ms_from_ns;
use crate::safety::scenario::RealFault;
use crate::safety::{clock_drift, clock_faults};

impl Injector<'_> {
    /// Injects `fault` and returns each try's timing and evidence once it is over.
    pub(super) async fn inject(&self, fault: RealFault) -> Result<Vec<FaultTiming>> {
        let hits = match fault {
            RealFault::HolderPause(pause) => {
                join_all(self.tries.iter().map(|t| holder_pause(t, pause))).await
            }
            RealFault::HolderFreeze(pause) => {
                try_join_all(self.tries.iter().map(|t| holder_freeze(self, t, pause))).await?
            }
            RealFault::HolderPartition(length) => {
                join_all(self.tries.iter().map(|t| holder_partition(self, t, length))).await
            }
            RealFault::NodePause(length) => node_pause(self, length).await?,
            RealFault::NodeCut(length) => node_cut(self, length).await?,
            RealFault::Restart(down) => restart(self, down).await?,
            RealFault::CrashRecover(down) => crash_recover(self, down).await?,
            RealFault::ScriptFlush(every) => script_flush(self, every).await?,
            RealFault::ClientKill(every) => client_kill(self, every).await?,
            RealFault::NodeClockJump(by) => clock_faults::jump(self, by).await?,
            RealFault::NodeClockDrift { ppm, masters } => {
                clock_drift::drift(self, ppm, masters).await?
            }
            RealFault::FailoverLostGrant { replica_behind, .. } => {
                lost_grant::inject(self, replica_behind).await?
            }
        };
        Ok(self
            .tries
            .iter()
            .zip(hits)
            .map(|(t, hit)| FaultTiming {
                start_ms: ms_from_ns(hit.start),
                end_ms: ms_from_ns(t.history.now_ns()),
                note: hit.note,
                landed: hit.landed,
                evidence: hit.evidence,
            })
            .collect())
    }
}
