//! The Redis nodes of the world: commands on them, pub/sub fan-out, asynchronous
//! replication and `WAIT`, persistence ticks, node crashes, restarts and failover.
//!
//! Invariant: replication follows Redis's asynchronous semantics — a master answers before
//! its replicas apply, a replica applies batches in offset order and resynchronises on a
//! gap, and `WAIT` counts only acknowledged offsets — so lost writes on failover happen
//! here exactly as they do in production.

use std::collections::BTreeSet;
use std::io;
use std::sync::Arc;

use leasehold::backend::Notification;

use super::{FSYNC_PERIOD_NS, World, ns_from_ms};
use crate::engine::rng::SimRng;
use crate::model::commands::Published;
use crate::model::eviction::EvictionPolicy;
use crate::model::node::EffectBatch;
use crate::model::resp::Reply;
use crate::model::{Executed, Keyspace, NOSCRIPT_ERROR, NodeId, READONLY_ERROR, Role, ServerClock};
use crate::world::calls::{self, OpKind};
use crate::world::executor::Core;
use crate::world::history::{HistEvent, HistKind};
use crate::world::kept;
use crate::world::net::{ConnId, Endpoint, Event, Lane, NetConfig, RequestBody};

/// A spurious error reply to script call `args`, with the configured chance (see
/// `NetConfig::glitch_chance`): `NOSCRIPT` or `READONLY` for `EVALSHA`, `READONLY` for
/// `EVAL`. The node runs nothing. The generator is drawn only when the chance is set, so
/// runs without glitches keep their draws.
fn glitch(rng: &mut SimRng, net: &NetConfig, args: &[Vec<u8>]) -> Option<Reply> {
    let name = args.first()?;
    let evalsha = name.eq_ignore_ascii_case(b"evalsha");
    if net.glitch_chance <= 0.0 || !(evalsha || name.eq_ignore_ascii_case(b"eval")) {
        return None;
    }
    if !rng.chance(net.glitch_chance) {
        return None;
    }
    Some(if evalsha && rng.chance(0.5) {
        Reply::error(NOSCRIPT_ERROR)
    } else {
        Reply::error(READONLY_ERROR)
    })
}

/// Salts the seed of an eviction's random picks (see [`World::evict`]).
const EVICT_SALT: u64 = 0x4556_4943_5400_0000;

/// A client blocked in `WAIT` until enough replicas acknowledge `offset`.
pub(super) struct WaitWaiter {
    node: NodeId,
    conn: ConnId,
    epoch: u64,
    req: u64,
    numreplicas: i64,
    offset: u64,
}

impl World {
    /// Whether connection `conn` is still in `epoch`: a request on a connection that was
    /// reset meanwhile died with the old socket.
    pub(super) fn conn_current(&self, conn: ConnId, epoch: u64) -> bool {
        self.executor
            .lock()
            .conns
            .get(&conn)
            .is_some_and(|c| c.epoch == epoch && !c.closed)
    }

    /// A request reached a node on a live connection (see [`World::conn_current`]): runs
    /// it (a command may block in `WAIT`), then ships its effects.
    pub(super) fn node_execute(
        &mut self,
        node: NodeId,
        conn: ConnId,
        epoch: u64,
        req: u64,
        body: RequestBody,
    ) {
        let now = self.executor.lock().now;
        let Some(n) = self.nodes.get_mut(node) else {
            return;
        };
        if !n.up {
            self.respond(
                Endpoint::Node(node),
                conn,
                epoch,
                req,
                Err(io::ErrorKind::ConnectionRefused),
            );
            return;
        }
        match body {
            RequestBody::Command(args) => {
                if let Some(reply) = glitch(&mut self.glitch_rng, &self.config.net, &args) {
                    self.executor
                        .lock()
                        .trace_line(|| format!("  n{node} glitch: {}", reply.render()));
                    self.respond(Endpoint::Node(node), conn, epoch, req, Ok(reply));
                    return;
                }
                let call = self.executor.lock().calls_in_flight.remove(&req);
                self.count_good_replicas(node, now);
                // The fence the script will read, taken before it runs.
                let fence = call.and_then(|index| {
                    kept::fence(self.nodes.get(node)?, (&self.call_op(index)?, &args), now)
                });
                let Some(n) = self.nodes.get_mut(node) else {
                    return;
                };
                let outcome = match self.config.server_clock {
                    ServerClock::Frozen => n.execute(&args, now),
                    ServerClock::Moving { max_call_ns } => {
                        let per_call_ns = self.pace_rng.between(0, max_call_ns);
                        n.execute_paced(&args, now, per_call_ns)
                    }
                };
                let is_master = n.role == Role::Master;
                if let Some(index) = call {
                    self.witness_call(index, (node, now), (&args, &outcome.executed), fence);
                }
                match outcome.executed {
                    Executed::Reply(reply) => {
                        self.respond(Endpoint::Node(node), conn, epoch, req, Ok(reply));
                    }
                    Executed::Wait {
                        numreplicas,
                        timeout_ms,
                    } => {
                        // Redis waits for the offset of this connection's own last write,
                        // and a connection that wrote nothing waits for nothing.
                        let offset = self.woff.get(&(node, conn)).copied().unwrap_or(0);
                        let id = self.next_waiter;
                        self.next_waiter += 1;
                        self.waits.insert(
                            id,
                            WaitWaiter {
                                node,
                                conn,
                                epoch,
                                req,
                                numreplicas,
                                offset,
                            },
                        );
                        if timeout_ms > 0 {
                            // WAIT's timeout runs on the node's clock.
                            let after = ns_from_ms(timeout_ms.unsigned_abs());
                            let at = self
                                .nodes
                                .get(node)
                                .map_or(now + after, |n| n.clock.after(now, after));
                            self.executor
                                .lock()
                                .schedule(at, Event::WaitTimeout { node, waiter: id });
                        }
                        self.check_waits(node, false);
                    }
                }
                // Redis propagates a `PUBLISH` to its replicas (so it moves the
                // connection's `woff`) even when it writes no key.
                let propagates =
                    !outcome.effects.dirty.is_empty() || !outcome.effects.published.is_empty();
                if is_master && propagates {
                    let offset =
                        self.replicate(node, &outcome.effects.dirty, &outcome.effects.published);
                    self.woff.insert((node, conn), offset);
                }
                self.record_hand_off(node, conn, &args, &outcome.effects.published);
                for (channel, message) in outcome.effects.published {
                    self.publish(node, &channel, message);
                }
            }
            RequestBody::Subscribe(channel) => {
                n.subscribe(&channel, conn);
                let reply = Reply::Array(vec![
                    Reply::bulk("subscribe"),
                    Reply::Bulk(channel),
                    Reply::Int(1),
                ]);
                self.respond(Endpoint::Node(node), conn, epoch, req, Ok(reply));
            }
            RequestBody::Unsubscribe(channel) => {
                n.unsubscribe(Some(&channel), conn);
                let reply = Reply::Array(vec![
                    Reply::bulk("unsubscribe"),
                    Reply::Bulk(channel),
                    Reply::Int(0),
                ]);
                self.respond(Endpoint::Node(node), conn, epoch, req, Ok(reply));
            }
        }
    }

    /// Records the hand-off a release (`args`, from connection `conn`) made on `node`, if
    /// it published one: the message `<token> <lease ms> <seq> <hold id>` of
    /// `release.lua`, whatever the script's code around it does.
    fn record_hand_off(
        &self,
        node: NodeId,
        conn: ConnId,
        args: &[Vec<u8>],
        published: &[(Vec<u8>, Vec<u8>)],
    ) {
        // Most commands publish nothing: only those are read as script calls.
        if published.is_empty() {
            return;
        }
        let Some((key, op)) = calls::recognise(args) else {
            return;
        };
        if op.kind != OpKind::Release {
            return;
        }
        for (_, message) in published {
            let text = String::from_utf8_lossy(message);
            let words: Vec<&str> = text.split(' ').collect();
            let [token, lease, _seq, hold] = words[..] else {
                continue;
            };
            let (Ok(lease_ms), Ok(token)) = (lease.parse::<u64>(), token.parse::<u64>()) else {
                continue;
            };
            let mut core = self.executor.lock();
            let Some(proc) = core.conns.get(&conn).map(|c| c.proc) else {
                continue;
            };
            let incarnation = core.procs.get(proc).map_or(0, |p| p.incarnation);
            let at = core.now;
            let clock_ms = self.clock_ms(node, at);
            core.history.push(HistEvent {
                at,
                proc,
                incarnation,
                lock: key.clone(),
                kind: HistKind::HandedOff {
                    hold: calls::id_of(hold.as_bytes()),
                    lease_ms,
                    node,
                    token,
                    clock_ms,
                },
            });
        }
    }

    /// The lock-script call `history[index]` asks for, if it is a call.
    fn call_op(&self, index: usize) -> Option<calls::LockOp> {
        match &self.executor.lock().history.get(index)?.kind {
            HistKind::Call { op, .. } => Some(*op),
            _ => None,
        }
    }

    /// What `node`'s clock read at virtual time `at`, ms (the time a script run then saw).
    fn clock_ms(&self, node: NodeId, at: u64) -> u64 {
        self.nodes.get(node).map_or(at, |n| n.clock.local_nanos(at)) / 1_000_000
    }

    /// Records that `node` ran the lock-script call whose [`HistKind::Call`] is
    /// `history[index]` at `now`, and what it answered ([`HistKind::Ran`]): the
    /// server-side witness of when, and how, an unanswered call took effect.
    /// `fence` is what the node's fence key held right before (see [`kept::fence`]).
    fn witness_call(
        &self,
        index: usize,
        (node, now): (NodeId, u64),
        (args, executed): (&[Vec<u8>], &Executed),
        fence: Option<u64>,
    ) {
        let clock_ms = self.clock_ms(node, now);
        let op = self.call_op(index);
        let mut core = self.executor.lock();
        let Some(call) = core.history.get(index) else {
            return;
        };
        let reply = match (op, executed) {
            (Some(op), Executed::Reply(reply)) => {
                calls::read_result(op.kind, &reply.clone().into_result())
            }
            _ => None,
        };
        let kept = op.and_then(|op| kept::read(self.nodes.get(node)?, (&op, args), now));
        let ran = HistEvent {
            at: now,
            proc: call.proc,
            incarnation: call.incarnation,
            lock: call.lock.clone(),
            kind: HistKind::Ran {
                id: index as u64,
                reply,
                node,
                clock_ms,
                fence,
            },
        };
        let keep = kept.map(|(now_ms, keys)| HistEvent {
            kind: HistKind::Kept {
                id: index as u64,
                node,
                now_ms,
                keys,
            },
            ..ran.clone()
        });
        core.history.push(ran);
        core.history.extend(keep);
    }

    /// Pushes a published message to every subscriber of `channel` on `node`.
    fn publish(&self, node: NodeId, channel: &[u8], message: Vec<u8>) {
        let Some(n) = self.nodes.get(node) else {
            return;
        };
        let subs = n.subscribers_of(channel);
        let mut core = self.executor.lock();
        for sub in subs {
            let Some((proc, epoch)) = core.conns.get(&sub).map(|c| (c.proc, c.epoch)) else {
                continue;
            };
            core.transmit(
                Endpoint::Node(node),
                Endpoint::Process(proc),
                Lane::Down(sub),
                || Event::Push {
                    conn: sub,
                    epoch,
                    notification: Notification {
                        channel: String::from_utf8_lossy(channel).into_owned(),
                        payload: message.clone(),
                    },
                },
            );
        }
    }

    /// Ships the new state of `dirty` keys, and the messages the write `published`, from
    /// `master` to its live replicas; returns the replication offset of the write.
    fn replicate(
        &mut self,
        master: NodeId,
        dirty: &BTreeSet<Vec<u8>>,
        published: &Published,
    ) -> u64 {
        let Some(m) = self.nodes.get_mut(master) else {
            return 0;
        };
        m.repl_offset += 1;
        let offset = m.repl_offset;
        let batch = Arc::new(m.effect_batch(dirty));
        let published = Arc::new(published.clone());
        let replicas = self.live_replicas(master);
        let mut core = self.executor.lock();
        for replica in replicas {
            transmit_link(&mut core, master, replica, Lane::Repl, || Event::Repl {
                master,
                replica,
                offset,
                batch: Arc::clone(&batch),
                published: Arc::clone(&published),
            });
        }
        offset
    }

    /// A replication batch reached a replica: applies it in order, or resynchronises on a
    /// gap, and publishes the batch's messages to the replica's own subscribers (Redis
    /// replicates `PUBLISH`, so a client subscribed on a replica hears its master's
    /// messages; one subscribed on a demoted master hears the new master's).
    pub(super) fn repl_apply(
        &mut self,
        master: NodeId,
        replica: NodeId,
        offset: u64,
        batch: &EffectBatch,
        published: &Published,
    ) {
        let Some(expected) = self
            .nodes
            .get(replica)
            .filter(|r| r.up && r.role == Role::Replica(master))
            .map(|r| r.repl_offset + 1)
        else {
            return;
        };
        let resync = if offset == expected {
            None
        } else if offset > expected {
            // A gap (lost batch): resynchronise from the master's current dataset. Only
            // here is the dataset copied; an in-order batch touches just its keys.
            let Some(state) = self.master_dataset(master) else {
                return;
            };
            Some(state)
        } else {
            return;
        };
        let Some(r) = self.nodes.get_mut(replica) else {
            return;
        };
        match resync {
            None => r.apply_batch(batch, offset),
            Some((data, master_offset)) => r.full_sync(data, master_offset),
        }
        let applied = r.repl_offset;
        {
            let mut core = self.executor.lock();
            transmit_link(&mut core, replica, master, Lane::Ack, || Event::ReplAck {
                replica,
                master,
                offset: applied,
            });
        }
        for (channel, message) in published {
            self.publish(replica, channel, message.clone());
        }
    }

    /// A replica's acknowledgement reached its master: it may release `WAIT`ers.
    pub(super) fn repl_ack(&mut self, replica: NodeId, master: NodeId, offset: u64) {
        if let Some(node) = self.nodes.get_mut(master)
            && node.up
            && node.role == Role::Master
        {
            let acked = node.replica_acks.entry(replica).or_insert(0);
            *acked = (*acked).max(offset);
            let now = self.executor.lock().now;
            self.acked_at.insert(replica, now);
            self.check_waits(master, false);
        }
    }

    /// An `appendfsync everysec` tick: flushes the node's log and arms the next tick.
    pub(super) fn fsync(&mut self, node: NodeId) {
        if let Some(n) = self.nodes.get_mut(node)
            && n.up
        {
            n.fsync_tick();
        }
        let mut core = self.executor.lock();
        // The tick runs on the node's clock.
        let next = self
            .nodes
            .get(node)
            .map_or(core.now + FSYNC_PERIOD_NS, |n| {
                n.clock.after(core.now, FSYNC_PERIOD_NS)
            });
        core.schedule(next, Event::Fsync(node));
    }

    /// A blocked `WAIT` timed out: it answers with the replicas that acknowledged so far.
    pub(super) fn wait_timeout(&mut self, node: NodeId, waiter: u64) {
        if let Some(w) = self.waits.remove(&waiter) {
            let count = self.acked(node, &w);
            self.answer_wait(node, &w, count);
        }
    }

    /// How many replicas of `node` have acknowledged the offset `w` waits for.
    fn acked(&self, node: NodeId, w: &WaitWaiter) -> i64 {
        self.nodes
            .get(node)
            .map_or(0, |n| n.acked_replicas(w.offset))
    }

    /// Answers the `WAIT`er `w` on `node`: `count` replicas acknowledged.
    fn answer_wait(&self, node: NodeId, w: &WaitWaiter, count: i64) {
        let reply = Ok(Reply::Int(count));
        self.respond(Endpoint::Node(node), w.conn, w.epoch, w.req, reply);
    }

    /// Answers the `WAIT`ers on `node` that have enough acknowledgements (or drops them all).
    fn check_waits(&mut self, node: NodeId, drop_all: bool) {
        let ids: Vec<u64> = self
            .waits
            .iter()
            .filter(|(_, w)| w.node == node)
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            let Some(w) = self.waits.get(&id) else {
                continue;
            };
            if drop_all {
                self.waits.remove(&id);
                continue;
            }
            let count = self.acked(node, w);
            if count >= w.numreplicas
                && let Some(w) = self.waits.remove(&id)
            {
                self.answer_wait(node, &w, count);
            }
        }
    }

    /// `node` runs out of memory (fault `index` of the schedule): it evicts up to `count`
    /// keys with a TTL as `policy` picks them and replicates their deletion, as Redis
    /// propagates an eviction as a `DEL`. Returns the keys it evicted.
    pub(super) fn evict(
        &mut self,
        index: usize,
        node: NodeId,
        policy: EvictionPolicy,
        count: u32,
    ) -> Vec<String> {
        let now = self.executor.lock().now;
        // A stream of its own: runs without evictions keep every other draw.
        let mut rng = SimRng::new(self.config.seed ^ EVICT_SALT ^ index as u64);
        let Some(n) = self.nodes.get_mut(node) else {
            return Vec::new();
        };
        let dirty = n.evict(policy, count, now, |len| rng.index(len));
        if !dirty.is_empty() {
            self.replicate(node, &dirty, &Published::new());
        }
        let evicted: Vec<String> = dirty
            .iter()
            .map(|key| String::from_utf8_lossy(key).into_owned())
            .collect();
        self.executor
            .lock()
            .trace_line(|| format!("  n{node} evicts {evicted:?}"));
        evicted
    }

    /// Cuts `replica` from its master for `ms` (fault `index` of the schedule): what the
    /// master replicates meanwhile is lost across the cut.
    pub(super) fn cut_replica(&mut self, index: usize, replica: NodeId, ms: u64) {
        let Some(Role::Replica(master)) = self.nodes.get(replica).map(|n| n.role) else {
            return;
        };
        self.link_cuts.insert(index, (master, replica));
        let mut core = self.executor.lock();
        core.set_cut(Endpoint::Node(master), Endpoint::Node(replica), true);
        core.trace_line(|| format!("  replication n{master} -> n{replica} cut for {ms} ms"));
        let until = core.now + ns_from_ms(ms);
        core.schedule(until, Event::FaultEnd(index));
    }

    /// The replication link fault `index` cut heals: the replica reconnects and, as Redis's
    /// `PSYNC` does, catches up with its master (if that is still its live master).
    pub(super) fn heal_replica(&mut self, index: usize) {
        let Some((master, replica)) = self.link_cuts.remove(&index) else {
            return;
        };
        self.executor
            .lock()
            .set_cut(Endpoint::Node(master), Endpoint::Node(replica), false);
        let state = self.master_dataset(master);
        let Some(r) = self
            .nodes
            .get_mut(replica)
            .filter(|r| r.up && r.role == Role::Replica(master))
        else {
            return;
        };
        let Some((data, offset)) = state else {
            return;
        };
        r.full_sync(data, offset);
        let mut core = self.executor.lock();
        core.trace_line(|| format!("  replication n{master} -> n{replica} heals (resync)"));
        transmit_link(&mut core, replica, master, Lane::Ack, || Event::ReplAck {
            replica,
            master,
            offset,
        });
    }

    /// Crashes `node`: its `WAIT`ers are dropped and the connections to it reset.
    pub(super) fn crash_node(&mut self, node: NodeId) {
        let Some(n) = self.nodes.get_mut(node) else {
            return;
        };
        if !n.up {
            return;
        }
        n.crash();
        self.drop_stall(node);
        self.check_waits(node, true);
        let mut core = self.executor.lock();
        if let Some(up) = core.node_up.get_mut(node) {
            *up = false;
        }
        core.trace_line(|| format!("node n{node} crashes"));
        let ids: Vec<ConnId> = core
            .conns
            .iter()
            .filter(|(_, c)| c.to == Endpoint::Node(node))
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            core.reset_conn(id, io::ErrorKind::ConnectionReset, "server went away");
        }
    }

    /// Restarts a crashed `node`; a replica first resynchronises from its master.
    pub(super) fn node_restart(&mut self, node: NodeId) {
        let master = match self.nodes.get(node).map(|n| n.role) {
            Some(Role::Replica(master)) => self
                .nodes
                .get(master)
                .filter(|m| m.up)
                .map(|m| (m.data().clone(), m.repl_offset)),
            _ => None,
        };
        let Some(n) = self.nodes.get_mut(node) else {
            return;
        };
        if n.up {
            return;
        }
        n.restart();
        if let Some((data, offset)) = master {
            n.full_sync(data, offset);
        }
        let mut core = self.executor.lock();
        if let Some(up) = core.node_up.get_mut(node) {
            *up = true;
        }
        core.trace_line(|| format!("node n{node} restarts"));
    }

    /// A copy of `node`'s dataset and replication offset for a full resynchronisation, if
    /// it is a live master.
    pub(super) fn master_dataset(&self, node: NodeId) -> Option<(Keyspace, u64)> {
        self.nodes
            .get(node)
            .filter(|m| m.up && m.role == Role::Master)
            .map(|m| (m.data().clone(), m.repl_offset))
    }
}

/// Sends a message between two nodes on the replication link `from` -> `to`: `lane` is
/// [`Lane::Repl`] (master to replica) or [`Lane::Ack`] (back), each named sender first.
fn transmit_link(
    core: &mut Core,
    from: NodeId,
    to: NodeId,
    lane: fn(NodeId, NodeId) -> Lane,
    arrive: impl FnOnce() -> Event,
) {
    core.transmit(
        Endpoint::Node(from),
        Endpoint::Node(to),
        lane(from, to),
        arrive,
    );
}
