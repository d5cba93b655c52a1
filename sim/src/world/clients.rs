//! The world's client processes: starting them with their seams, crashing them,
//! delivering what the network brings to their connections, and their scheduling hiccups.
//!
//! Invariant: a crash ends every task and connection of the incarnation at once (its
//! pending requests fail, its subscriptions end on the server), and a restart is a new
//! incarnation with fresh handles, so nothing of a crashed holder acts afterwards.

use std::io;
use std::sync::Arc;

use leasehold::SentinelBackend;
use leasehold::backend::{Backend, Notification};

use super::World;
use crate::model::resp::Reply;
use crate::world::backend::{ResourceClient, SimBackend};
use crate::world::discovery::SimSentinel;
use crate::world::executor;
use crate::world::history::{HistEvent, HistKind};
use crate::world::net::{ConnId, Endpoint, Event, ProcId, Target, io_error};
use crate::world::process::{ProcessCtx, recorder_for, runtime_for};

impl World {
    /// After a poll of one of `proc`'s tasks: with the configured chance, the process stops
    /// for a moment (up to `hiccup_max`), as a preempted host thread does between two
    /// awaits. Its timers fire meanwhile; it acts on them when it runs again. Not a fault:
    /// hiccups stay far below the drift margin, so they excuse nothing.
    pub(super) fn maybe_hiccup(&mut self, proc: ProcId) {
        let net = self.config.net;
        if net.hiccup_chance <= 0.0 || !self.hiccup_rng.chance(net.hiccup_chance) {
            return;
        }
        let max = u64::try_from(net.hiccup_max.as_nanos()).unwrap_or(u64::MAX);
        let len = self.hiccup_rng.between(1, max.max(1));
        let mut core = self.executor.lock();
        let until = core.now.saturating_add(len);
        if let Some(state) = core.procs.get_mut(proc) {
            state.paused_until = state.paused_until.max(until);
        }
        // Time must reach the hiccup's end even if nothing else is due before it.
        core.schedule(until, Event::Timer(Arc::default()));
    }

    /// Starts (or restarts) `proc`: a new incarnation with fresh seams and connections runs
    /// its main.
    pub(super) fn start_process(&mut self, proc: ProcId) {
        let Some(main) = self.mains.get(proc).cloned() else {
            return;
        };
        let incarnation = {
            let mut core = self.executor.lock();
            let Some(state) = core.procs.get_mut(proc) else {
                return;
            };
            state.alive = true;
            state.paused_until = 0;
            let incarnation = state.incarnation;
            core.trace_line(|| format!("c{proc}.{incarnation} starts"));
            incarnation
        };
        let backends: Vec<Arc<dyn Backend>> =
            self.config
                .targets
                .iter()
                .map(|&target| match target {
                    Target::Node(node) => Arc::new(SimBackend::connect(
                        &self.executor,
                        proc,
                        incarnation,
                        node,
                        target,
                    )) as Arc<dyn Backend>,
                    // The production backend, following the master the simulated Sentinels
                    // name; it resolves at its first command.
                    Target::Service(group) => Arc::new(SentinelBackend::lazy(
                        SimSentinel::connect(&self.executor, proc, incarnation, group),
                    )),
                })
                .collect();
        let ctx = ProcessCtx {
            id: proc,
            incarnation,
            runtime: runtime_for(&self.executor, proc, incarnation),
            backends,
            resource: ResourceClient::connect(&self.executor, proc, incarnation),
            recorder: recorder_for(&self.executor, proc, incarnation),
        };
        let future = main(ctx);
        if let Err(refused) = executor::spawn_task(&self.executor, proc, incarnation, future) {
            drop(refused);
        }
    }

    /// Crashes `proc`: its tasks are dropped, its connections reset, its subscriptions end.
    pub(super) fn crash_process(&mut self, proc: ProcId) {
        let (futures, pubsubs) = {
            let mut core = self.executor.lock();
            let Some(state) = core.procs.get_mut(proc) else {
                return;
            };
            if !state.alive {
                return;
            }
            let state_incarnation = state.incarnation;
            state.alive = false;
            state.incarnation += 1;
            state.paused_until = 0;
            core.trace_line(|| format!("c{proc} crashes"));
            let (at, incarnation) = (core.now, state_incarnation);
            core.history.push(HistEvent {
                at,
                proc,
                incarnation,
                lock: String::new(),
                kind: HistKind::Crashed,
            });
            core.beliefs.retain(|(p, _, _), _| *p != proc);
            let futures = executor::take_tasks_of(&mut core, Some(proc));
            let mut pubsubs = Vec::new();
            let ids: Vec<ConnId> = core
                .conns
                .iter()
                .filter(|(_, c)| c.proc == proc && !c.closed)
                .map(|(id, _)| *id)
                .collect();
            for id in ids {
                if let Some(c) = core.conns.get_mut(&id) {
                    c.closed = true;
                    if let Endpoint::Node(node) = c.to {
                        pubsubs.push((node, id));
                    }
                }
                core.reset_conn(id, io::ErrorKind::ConnectionAborted, "process crashed");
            }
            (futures, pubsubs)
        };
        // The server notices the closed sockets.
        for (node, conn) in pubsubs {
            if let Some(n) = self.nodes.get_mut(node) {
                n.unsubscribe(None, conn);
            }
        }
        drop(futures);
    }

    /// A reply (or connection failure) reached the client: completes its request, unless
    /// the connection was reset since it was sent.
    pub(super) fn deliver_response(
        &mut self,
        conn: ConnId,
        epoch: u64,
        req: u64,
        result: Result<Reply, io::ErrorKind>,
    ) {
        let mut core = self.executor.lock();
        let slot = core
            .conns
            .get_mut(&conn)
            .filter(|c| c.epoch == epoch)
            .and_then(|c| c.pending.remove(&req));
        if let Some(slot) = slot {
            if core.trace.enabled() {
                let text = match &result {
                    Ok(reply) => reply.render(),
                    Err(kind) => format!("io error {kind:?}"),
                };
                core.trace_line(|| format!("  <- #{req} {text}"));
            }
            drop(core);
            slot.complete(match result {
                Ok(reply) => reply.into_result(),
                Err(kind) => Err(io_error(kind, "connection failure")),
            });
        }
    }

    /// The client's response timeout for `req` passed: fails the request if still pending.
    pub(super) fn response_timeout(&mut self, conn: ConnId, req: u64) {
        let mut core = self.executor.lock();
        let slot = core
            .conns
            .get_mut(&conn)
            .and_then(|c| c.pending.remove(&req));
        if let Some(slot) = slot {
            core.trace_line(|| format!("  <- #{req} timed out"));
            drop(core);
            slot.complete(Err(io_error(io::ErrorKind::TimedOut, "response timeout")));
        }
    }

    /// Connection `conn` lost a message in `epoch`: its client sees the reset, and the
    /// connection carries messages again in its next epoch (redis-rs reconnects).
    pub(super) fn connection_reset(&mut self, conn: ConnId, epoch: u64) {
        let mut core = self.executor.lock();
        core.net.mend(conn);
        if core.conns.get(&conn).is_some_and(|c| c.epoch == epoch) {
            core.trace_line(|| format!("  connection {conn} reset (a message was lost)"));
            core.reset_conn(
                conn,
                io::ErrorKind::ConnectionReset,
                "connection reset by peer",
            );
        }
    }

    /// A published message reached a subscriber's connection.
    pub(super) fn deliver_push(&mut self, conn: ConnId, epoch: u64, notification: Notification) {
        let mut core = self.executor.lock();
        let Some((proc, push)) = core
            .conns
            .get(&conn)
            .filter(|c| c.epoch == epoch)
            .and_then(|c| Some((c.proc, c.push.clone()?)))
        else {
            return;
        };
        core.trace_line(|| {
            let payload = String::from_utf8_lossy(&notification.payload);
            format!("c{proc} <= {} {payload}", notification.channel)
        });
        // The receiver may be gone (subscription dropped): nothing to deliver to.
        let _ = push.unbounded_send(notification);
    }
}
