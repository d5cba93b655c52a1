//! Connections driven from outside the world, one command at a time: the seam through
//! which a test runs the world's own replication and `WAIT` in lockstep with real servers
//! (the harness's master-and-replica differential test).
//!
//! Invariant: a driven command takes exactly a client process's path (`Core::send`, the
//! network, `node_execute`, replication batches and acknowledgements, `WAIT`'s
//! per-connection `woff`); the seam only opens connections, moves virtual time forward,
//! freezes a node and reads replies and offsets, so it holds no second copy of `WAIT`'s
//! logic.

use std::io;
use std::sync::Arc;
use std::task::Waker;
use std::time::Duration;

use futures::channel::mpsc::UnboundedReceiver;
use leasehold::backend::Notification;
use redis::{RedisResult, Value};

use super::World;
use crate::model::NodeId;
use crate::world::net::{ConnId, Endpoint, ProcId, RequestBody, io_error};

impl World {
    /// Adds the process that owns driven connections: its main does nothing, so the
    /// world's scheduler never runs client code of its own.
    pub fn add_driver(&mut self) -> ProcId {
        self.add_process(Duration::ZERO, Arc::new(|_| Box::pin(async {})))
    }

    /// Opens a connection from `driver` (see [`World::add_driver`]) to `node`.
    pub fn open_driven(&mut self, driver: ProcId, node: NodeId) -> ConnId {
        let mut core = self.executor.lock();
        let incarnation = core.procs.get(driver).map_or(0, |p| p.incarnation);
        core.open_conn(driver, incarnation, Endpoint::Node(node), false)
            .0
    }

    /// Virtual time now, ns.
    pub fn now(&self) -> u64 {
        self.executor.lock().now
    }

    /// Runs the world until virtual time `t` (nothing happens if it is already later).
    pub fn advance_to(&mut self, t: u64) {
        if t > self.now() {
            self.run(Duration::from_nanos(t));
        }
    }

    /// Sends `args` on `conn` and runs the world, event by event, until the reply (or the
    /// connection's failure) reaches the client; virtual time is then the reply's arrival.
    /// Bounded: every request carries the client's response deadline.
    pub fn call(&mut self, conn: ConnId, args: Vec<Vec<u8>>) -> RedisResult<Value> {
        self.request(conn, RequestBody::Command(args))
    }

    /// Opens a subscriber connection from `driver` to `node` and subscribes it to
    /// `channel` (returning once the node confirmed it): the messages the node pushes on
    /// it, its own publishers' and, on a replica, those replication brings.
    pub fn subscribe_driven(
        &mut self,
        driver: ProcId,
        node: NodeId,
        channel: &str,
    ) -> RedisResult<UnboundedReceiver<Notification>> {
        let (conn, messages) = {
            let mut core = self.executor.lock();
            let incarnation = core.procs.get(driver).map_or(0, |p| p.incarnation);
            core.open_conn(driver, incarnation, Endpoint::Node(node), true)
        };
        let messages =
            messages.ok_or_else(|| io_error(io::ErrorKind::NotConnected, "no message stream"))?;
        self.request(conn, RequestBody::Subscribe(channel.as_bytes().to_vec()))?;
        Ok(messages)
    }

    /// Sends `body` on `conn` and runs the world until its reply (see [`World::call`]).
    fn request(&mut self, conn: ConnId, body: RequestBody) -> RedisResult<Value> {
        let slot = self.executor.lock().send(conn, body);
        loop {
            if let Some(result) = slot.poll_take(Waker::noop()) {
                return result;
            }
            let next = self.executor.lock().next_event_time();
            // The request's deadline stays queued until the slot completes, so this ends.
            let Some(next) = next else {
                return Err(io_error(io::ErrorKind::TimedOut, "nothing left to run"));
            };
            self.run(Duration::from_nanos(next));
        }
    }

    /// Freezes `node` until [`World::thaw`] (a `docker pause`): what reaches it is held.
    pub fn freeze(&mut self, node: NodeId) {
        self.stall_node(node, u64::MAX);
    }

    /// Thaws a node [`World::freeze`] froze: it handles what it held, in arrival order.
    pub fn thaw(&mut self, node: NodeId) {
        self.wake_node(node);
    }

    /// The replication offset of `conn`'s last write on `node` (Redis's `client->woff`; 0
    /// if it wrote nothing): what its `WAIT` waits for.
    pub fn write_offset(&self, node: NodeId, conn: ConnId) -> u64 {
        self.woff.get(&(node, conn)).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::model::node::MinReplicas;
    use crate::world::net::NetConfig;
    use crate::world::{NodeSpec, WorldConfig};

    /// A master (node 0) and its replica (node 1) with two driven connections to the
    /// master.
    fn pair() -> (World, ConnId, ConnId) {
        let replica = NodeSpec {
            replica_of: Some(0),
            ..NodeSpec::default()
        };
        let mut world = World::new(WorldConfig {
            seed: 1,
            nodes: vec![NodeSpec::default(), replica],
            targets: Vec::new(),
            groups: Vec::new(),
            net: NetConfig::default(),
            faults: Vec::new(),
            trace: false,
            server_clock: Default::default(),
        })
        .unwrap();
        let driver = world.add_driver();
        let a = world.open_driven(driver, 0);
        let b = world.open_driven(driver, 0);
        (world, a, b)
    }

    fn command(words: &[&str]) -> Vec<Vec<u8>> {
        words.iter().map(|w| w.as_bytes().to_vec()).collect()
    }

    /// `WAIT` waits for the connection's own last write, not the master's latest: with
    /// the replica frozen, the connection that wrote times out with 0 while the one that
    /// wrote nothing answers 1 (the replica, online) at once. A model that waited for the
    /// master's global offset answers 0 to both, the second after its timeout.
    #[test]
    fn wait_counts_the_connections_own_write() {
        let (mut world, a, b) = pair();
        world.freeze(1);
        let set = world.call(a, command(&["SET", "k", "v"]));
        assert_eq!(set.unwrap(), Value::Okay);
        let asked = world.now();
        let idle = world.call(b, command(&["WAIT", "1", "100"]));
        assert_eq!(idle.unwrap(), Value::Int(1));
        assert!(
            world.now() - asked < 100_000_000,
            "answered at once, not at the timeout"
        );
        let writer = world.call(a, command(&["WAIT", "1", "50"]));
        assert_eq!(writer.unwrap(), Value::Int(0));
        world.thaw(1);
        let settled = world.call(a, command(&["WAIT", "1", "0"]));
        assert_eq!(settled.unwrap(), Value::Int(1));
        assert_eq!(world.node(1).unwrap().data().iter().count(), 1);
    }

    /// A master with `min-replicas-to-write 1` refuses writes, a script's at its write
    /// call, with `NOREPLICAS` once its frozen replica's last acknowledgement is older than
    /// `min-replicas-max-lag`; reads go on, and writes again once the replica is back.
    #[test]
    fn a_master_short_of_good_replicas_refuses_writes() {
        let (mut world, a, _) = pair();
        let min = MinReplicas {
            to_write: 1,
            max_lag: Duration::from_secs(1),
        };
        world.set_min_replicas(0, Some(min));
        let refused = |result: RedisResult<Value>| matches!(result, Err(err) if err.code() == Some("NOREPLICAS"));
        assert_eq!(
            world.call(a, command(&["SET", "k", "v"])).unwrap(),
            Value::Okay
        );
        world.freeze(1);
        // Still within the lag: the replica acknowledged a moment ago.
        assert_eq!(
            world.call(a, command(&["SET", "k", "w"])).unwrap(),
            Value::Okay
        );
        world.advance_to(world.now() + 2_500_000_000);
        assert!(refused(world.call(a, command(&["SET", "k", "x"]))));
        let script = ["EVAL", "return redis.call('SET', KEYS[1], 'y')", "1", "k"];
        assert!(refused(world.call(a, command(&script))));
        let read = world.call(a, command(&["GET", "k"])).unwrap();
        assert_eq!(read, Value::BulkString(b"w".to_vec()));
        world.thaw(1);
        assert_eq!(
            world.call(a, command(&["SET", "k", "z"])).unwrap(),
            Value::Okay
        );
    }

    /// A `PUBLISH` is propagated to replicas, as Redis does: it moves the connection's
    /// write offset though it writes no key.
    #[test]
    fn publish_moves_the_write_offset() {
        let (mut world, a, _) = pair();
        let published = world.call(a, command(&["PUBLISH", "ch", "m"]));
        assert_eq!(published.unwrap(), Value::Int(0));
        assert_eq!(world.write_offset(0, a), 1);
    }

    /// A client subscribed on a replica hears what its master published, a script's
    /// `PUBLISH` included, once replication brings it, in order; a replica frozen
    /// meanwhile delivers it when it thaws. A model that did not replicate `PUBLISH`
    /// delivers nothing on the replica.
    #[test]
    fn a_replica_publishes_what_its_master_published() {
        let (mut world, a, _) = pair();
        let driver = world.add_driver();
        let mut on_replica = world.subscribe_driven(driver, 1, "ch").unwrap();
        let mut on_master = world.subscribe_driven(driver, 0, "ch").unwrap();
        let received = |rx: &mut UnboundedReceiver<Notification>| {
            std::iter::from_fn(|| rx.try_recv().ok())
                .map(|n| (n.channel, String::from_utf8(n.payload).unwrap()))
                .collect::<Vec<_>>()
        };
        let published = world.call(a, command(&["PUBLISH", "ch", "one"]));
        assert_eq!(
            published.unwrap(),
            Value::Int(1),
            "the master's own subscriber"
        );
        let script = ["EVAL", "redis.call('PUBLISH', KEYS[1], 'two')", "1", "ch"];
        world.call(a, command(&script)).unwrap();
        world.advance_to(world.now() + 1_000_000_000);
        world.freeze(1);
        world.call(a, command(&["PUBLISH", "ch", "three"])).unwrap();
        world.advance_to(world.now() + 1_000_000_000);
        let all = |words: &[&str]| {
            words
                .iter()
                .map(|w| ("ch".to_owned(), (*w).to_owned()))
                .collect::<Vec<_>>()
        };
        assert_eq!(received(&mut on_master), all(&["one", "two", "three"]));
        assert_eq!(received(&mut on_replica), all(&["one", "two"]));
        world.thaw(1);
        world.advance_to(world.now() + 1_000_000_000);
        assert_eq!(received(&mut on_replica), all(&["three"]));
    }
}
