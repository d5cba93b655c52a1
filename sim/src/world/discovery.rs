//! Master discovery through the simulated Sentinels: the [`MasterSource`] under which the
//! production `leasehold::SentinelBackend` follows a replicated group's master.
//!
//! Why it exists: Sentinel deployments lose locks in how clients follow the master (a
//! client that keeps a demoted or cut-off master, a lookup while Sentinel still names the
//! dead one), and that policy is production code. The simulator supplies only the
//! transport: asking the Sentinels (one round trip to [`Endpoint::Sentinel`], answered by
//! the world with the master Sentinel names now) and connecting to that node (a `PING`
//! round trip, as a real connect costs one and fails on a dead or unreachable node). When
//! to ask, what to cache and which failures drop the cache are the production backend's.
//!
//! Invariant: every resolution is recorded in the core's routes, so the server-truth
//! oracle looks up a process's believed holds on the master that process actually uses.

use std::io;
use std::sync::Arc;

use leasehold::backend::{Backend, BoxFuture};
use leasehold::{MasterSource, ResolvedMaster};
use redis::{RedisResult, Value};

use crate::model::NodeId;
use crate::world::backend::{SimBackend, SlotFuture};
use crate::world::executor::Executor;
use crate::world::net::{ConnId, Endpoint, ProcId, RequestBody, Target, io_error};

/// The Sentinels' command naming a group's master: `SENTINEL GET-MASTER-ADDR-BY-NAME
/// <group>`, answered with the master's node id (a real Sentinel answers host and port).
pub const GET_MASTER: [&[u8]; 2] = [b"SENTINEL", b"GET-MASTER-ADDR-BY-NAME"];

/// One process's view of replication group `group` through the Sentinels.
#[derive(Debug)]
pub struct SimSentinel {
    executor: Arc<Executor>,
    proc: ProcId,
    incarnation: u32,
    group: usize,
    /// Its connection to the Sentinels.
    conn: ConnId,
    service: String,
}

impl SimSentinel {
    /// Opens `proc`'s connection to the Sentinels of `group`.
    pub fn connect(executor: &Arc<Executor>, proc: ProcId, incarnation: u32, group: usize) -> Self {
        let (conn, _) = executor
            .lock()
            .open_conn(proc, incarnation, Endpoint::Sentinel, false);
        Self {
            executor: Arc::clone(executor),
            proc,
            incarnation,
            group,
            conn,
            service: format!("group-{group}"),
        }
    }

    /// The master the Sentinels name now (one round trip). A lookup sent while the
    /// process is cut from them is counted as evidence of the cut.
    async fn ask(&self) -> RedisResult<NodeId> {
        let mut words: Vec<Vec<u8>> = GET_MASTER.iter().map(|w| w.to_vec()).collect();
        words.push(self.group.to_string().into_bytes());
        let slot = {
            let mut core = self.executor.lock();
            if core
                .net
                .is_cut(Endpoint::Process(self.proc), Endpoint::Sentinel)
            {
                core.sentinel_evidence.cut_lookups += 1;
            }
            core.send(self.conn, RequestBody::Command(words))
        };
        match SlotFuture(slot).await? {
            Value::Int(node) => NodeId::try_from(node)
                .map_err(|_| io_error(io::ErrorKind::InvalidData, "bad Sentinel answer")),
            other => Err(io_error(
                io::ErrorKind::InvalidData,
                &format!("bad Sentinel answer {other:?}"),
            )),
        }
    }
}

impl MasterSource for SimSentinel {
    fn service(&self) -> &str {
        &self.service
    }

    fn resolve(&self) -> BoxFuture<'_, RedisResult<ResolvedMaster>> {
        Box::pin(async move {
            let node = self.ask().await?;
            let master = SimBackend::connect(
                &self.executor,
                self.proc,
                self.incarnation,
                node,
                Target::Service(self.group),
            );
            master.query(&redis::cmd("PING")).await?;
            self.executor
                .lock()
                .routes
                .insert((self.proc, self.group), node);
            Ok(ResolvedMaster {
                address: format!("n{node}"),
                backend: Arc::new(master) as Arc<dyn Backend>,
            })
        })
    }
}
