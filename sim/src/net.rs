//! The simulated network: connections, messages in flight, delay, loss and partitions.
//!
//! Invariant: every message takes at least the configured minimum delay (so a retry loop
//! always advances virtual time), messages on one connection lane arrive in the order they
//! were sent (TCP), and a message across a cut link never arrives — the sender learns only
//! through its response timeout, as with a real socket. A message lost to the loss model
//! breaks its connection, as TCP would (it retransmits a dropped segment, so a loss it
//! gives up on is the connection's end, never a gap with later messages delivered): nothing
//! more arrives on it, and one network delay later the client sees the reset, every
//! request still pending on it failing with `ConnectionReset` (it may or may not have run)
//! and its pub/sub stream ending. A replication link's loss is a gap the replica resyncs
//! across (see `world::nodes`).

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::Waker;
use std::time::Duration;

use futures::channel::mpsc::UnboundedSender;
use leasehold::backend::Notification;
use redis::{RedisResult, Value};
use serde::{Deserialize, Serialize};

use crate::model::NodeId;
use crate::model::node::EffectBatch;
use crate::resp::Reply;
use crate::rng::SimRng;
use crate::timer::TimerState;

/// redis-rs's default response timeout for multiplexed connections (`client.rs`,
/// `DEFAULT_RESPONSE_TIMEOUT`): a request unanswered for this long fails with `TimedOut`.
pub const DEFAULT_RESPONSE_TIMEOUT: Duration = Duration::from_millis(500);

/// A process (client) index in the world.
pub type ProcId = usize;
/// A connection id, unique over the run.
pub type ConnId = u64;
/// A request id, unique over the run.
pub type ReqId = u64;

/// Something that sends and receives messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Endpoint {
    /// A client process.
    Process(ProcId),
    /// A Redis node.
    Node(NodeId),
    /// The fenced resource the clients protect.
    Resource,
}

/// Where a connection sends its commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Target {
    /// Always this node.
    Node(NodeId),
    /// Whichever node is master of replication group `n` (Sentinel-style discovery).
    Service(usize),
    /// The fenced resource.
    Resource,
}

/// Network parameters.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct NetConfig {
    /// Smallest one-way delay.
    pub min_delay: Duration,
    /// Largest one-way delay (uniform in between).
    pub max_delay: Duration,
    /// Probability that one message is lost (the request or its reply); on a client
    /// connection the loss resets the connection.
    pub loss: f64,
    /// How long a client waits for a reply before failing with `TimedOut`.
    pub response_timeout: Duration,
    /// Extra delay on the replication stream, uniform in `[0, repl_lag]`.
    pub repl_lag: Duration,
    /// Scheduling hiccups of client processes (buggify): after a poll of one of its tasks,
    /// with this chance the process stops for up to [`NetConfig::hiccup_max`], as a host
    /// preempting it between two awaits would.
    #[serde(default)]
    pub hiccup_chance: f64,
    /// The longest scheduling hiccup.
    #[serde(default)]
    pub hiccup_max: Duration,
    /// Spurious error replies (buggify): with this chance a node answers a script call
    /// with `NOSCRIPT` (its script cache just lost the script: `EVALSHA` only) or
    /// `READONLY` (it was demoted that instant) without running it.
    #[serde(default)]
    pub glitch_chance: f64,
}

impl Default for NetConfig {
    fn default() -> Self {
        Self {
            // A LAN round trip of 0.1-1 ms, like the loopback baseline in docs/DESIGN.md
            // §4 plus some switch latency.
            min_delay: Duration::from_micros(50),
            max_delay: Duration::from_micros(500),
            loss: 0.0,
            response_timeout: DEFAULT_RESPONSE_TIMEOUT,
            repl_lag: Duration::from_millis(5),
            hiccup_chance: 0.0,
            hiccup_max: Duration::ZERO,
            glitch_chance: 0.0,
        }
    }
}

/// A FIFO lane: one direction of one connection, or one replication link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Lane {
    /// Client -> server on a connection.
    Up(ConnId),
    /// Server -> client on a connection.
    Down(ConnId),
    /// Master -> replica stream.
    Repl(NodeId, NodeId),
    /// Replica -> master acknowledgements.
    Ack(NodeId, NodeId),
}

/// What travels from a client to a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestBody {
    /// A command (name and arguments).
    Command(Vec<Vec<u8>>),
    /// Subscribe this (pub/sub) connection to a channel.
    Subscribe(Vec<u8>),
    /// Unsubscribe this connection from a channel.
    Unsubscribe(Vec<u8>),
}

/// The client's side of one outstanding request.
#[derive(Debug, Default)]
pub struct Slot {
    inner: Mutex<SlotInner>,
}

#[derive(Debug, Default)]
struct SlotInner {
    result: Option<RedisResult<Value>>,
    waker: Option<Waker>,
}

impl Slot {
    /// Stores the result (first one wins) and wakes the waiting task.
    pub fn complete(&self, result: RedisResult<Value>) {
        let waker = {
            let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            if inner.result.is_some() {
                return;
            }
            inner.result = Some(result);
            inner.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// Takes the result if present, else registers `waker`.
    pub fn poll_take(&self, waker: &Waker) -> Option<RedisResult<Value>> {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        match inner.result.take() {
            Some(result) => Some(result),
            None => {
                inner.waker = Some(waker.clone());
                None
            }
        }
    }
}

/// A simulated I/O failure as redis-rs reports it.
pub fn io_error(kind: io::ErrorKind, what: &str) -> redis::RedisError {
    io::Error::new(kind, format!("simulated: {what}")).into()
}

/// One client connection (a multiplexed command connection or a pub/sub connection).
#[derive(Debug)]
pub struct Conn {
    /// Owning process.
    pub proc: ProcId,
    /// Incarnation of the process that opened it.
    pub incarnation: u32,
    /// Where it sends.
    pub target: Target,
    /// Bumped on every reset; replies from an older epoch are discarded.
    pub epoch: u64,
    /// Requests awaiting a reply.
    pub pending: BTreeMap<ReqId, Arc<Slot>>,
    /// Pub/sub only: where pushed messages go (dropped when the connection resets).
    pub push: Option<UnboundedSender<Notification>>,
    /// Pub/sub only: the node it is attached to.
    pub pinned: Option<NodeId>,
    /// Closed by its process crashing.
    pub closed: bool,
}

/// Link state: partitions, slow links and the delay/loss generator.
#[derive(Debug)]
pub struct NetState {
    /// Parameters.
    pub config: NetConfig,
    cut: BTreeSet<(Endpoint, Endpoint)>,
    slow: BTreeMap<ProcId, u64>,
    lane_clock: BTreeMap<Lane, u64>,
    /// Connections that lost a message: nothing more travels on them until the reset.
    broken: BTreeSet<ConnId>,
    rng: SimRng,
}

/// What becomes of one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// It arrives at this virtual time.
    At(u64),
    /// It never arrives (a cut link, a broken connection, a lost replication batch).
    Lost,
    /// It is lost and breaks connection `ConnId`, whose client sees the reset at this time.
    Reset(u64, ConnId),
}

fn ordered(a: Endpoint, b: Endpoint) -> (Endpoint, Endpoint) {
    if a <= b { (a, b) } else { (b, a) }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl NetState {
    /// A fully connected network.
    pub fn new(config: NetConfig, rng: SimRng) -> Self {
        Self {
            config,
            cut: BTreeSet::new(),
            slow: BTreeMap::new(),
            lane_clock: BTreeMap::new(),
            broken: BTreeSet::new(),
            rng,
        }
    }

    /// Cuts (or heals) the link between `a` and `b`.
    pub fn set_cut(&mut self, a: Endpoint, b: Endpoint, cut: bool) {
        if cut {
            self.cut.insert(ordered(a, b));
        } else {
            self.cut.remove(&ordered(a, b));
        }
    }

    /// Whether `a` and `b` cannot talk.
    pub fn is_cut(&self, a: Endpoint, b: Endpoint) -> bool {
        self.cut.contains(&ordered(a, b))
    }

    /// Adds `extra` one-way delay to everything `proc` sends or receives (0 clears).
    pub fn set_slow(&mut self, proc: ProcId, extra: Duration) {
        if extra.is_zero() {
            self.slow.remove(&proc);
        } else {
            self.slow.insert(proc, nanos(extra));
        }
    }

    /// What becomes of a message sent now from `from` to `to` on `lane`. Replication
    /// lanes add the replication lag.
    pub fn arrival(&mut self, now: u64, from: Endpoint, to: Endpoint, lane: Lane) -> Arrival {
        let conn = match lane {
            Lane::Up(conn) | Lane::Down(conn) => Some(conn),
            Lane::Repl(..) | Lane::Ack(..) => None,
        };
        if self.is_cut(from, to) || conn.is_some_and(|c| self.broken.contains(&c)) {
            return Arrival::Lost;
        }
        let lost = self.rng.chance(self.config.loss);
        if lost && conn.is_none() {
            return Arrival::Lost;
        }
        let mut delay = self
            .rng
            .between(nanos(self.config.min_delay), nanos(self.config.max_delay));
        if matches!(lane, Lane::Repl(..)) {
            delay += self.rng.between(0, nanos(self.config.repl_lag));
        }
        for end in [from, to] {
            if let Endpoint::Process(p) = end {
                delay += self.slow.get(&p).copied().unwrap_or(0);
            }
        }
        let earliest = now.saturating_add(delay);
        if let (true, Some(conn)) = (lost, conn) {
            self.broken.insert(conn);
            return Arrival::Reset(earliest, conn);
        }
        let last = self.lane_clock.entry(lane).or_insert(0);
        let at = earliest.max(*last);
        *last = at;
        Arrival::At(at)
    }

    /// Connection `conn` was reset: messages travel on it again (in its new epoch).
    pub fn mend(&mut self, conn: ConnId) {
        self.broken.remove(&conn);
    }

    /// The response timeout in nanoseconds.
    pub fn response_timeout(&self) -> u64 {
        nanos(self.config.response_timeout)
    }
}

/// Everything that can happen at a virtual instant.
#[derive(Debug)]
pub enum Event {
    /// A timer reached its deadline.
    Timer(Arc<TimerState>),
    /// A request reaches its server (node or resource).
    Request {
        /// Connection it was sent on.
        conn: ConnId,
        /// Connection epoch when sent.
        epoch: u64,
        /// Destination resolved at send time.
        to: Endpoint,
        /// Request id.
        req: ReqId,
        /// Payload.
        body: RequestBody,
    },
    /// A reply (or a connection-level failure) reaches the client.
    Response {
        /// Connection.
        conn: ConnId,
        /// Epoch it belongs to.
        epoch: u64,
        /// Request id.
        req: ReqId,
        /// The reply, or the I/O failure the client observes.
        result: Result<Reply, io::ErrorKind>,
    },
    /// The client's response timeout for `req`.
    Deadline {
        /// Connection.
        conn: ConnId,
        /// Request id.
        req: ReqId,
    },
    /// A published message reaches a subscriber.
    Push {
        /// Pub/sub connection.
        conn: ConnId,
        /// Epoch it belongs to.
        epoch: u64,
        /// The message.
        notification: Notification,
    },
    /// A replication batch reaches a replica.
    Repl {
        /// Master that produced it.
        master: NodeId,
        /// Receiving replica.
        replica: NodeId,
        /// Master offset after this batch.
        offset: u64,
        /// Effects, shared by the copies sent to each replica.
        batch: Arc<EffectBatch>,
    },
    /// A replica's acknowledgement reaches its master.
    ReplAck {
        /// Acknowledging replica.
        replica: NodeId,
        /// Master.
        master: NodeId,
        /// Offset applied.
        offset: u64,
    },
    /// `appendfsync everysec` tick.
    Fsync(NodeId),
    /// A blocked `WAIT` times out.
    WaitTimeout {
        /// Node holding the waiter.
        node: NodeId,
        /// Waiter id.
        waiter: u64,
    },
    /// A scheduled fault begins (index into the schedule).
    Fault(usize),
    /// A scheduled fault with a duration ends.
    FaultEnd(usize),
    /// A crashed node starts again.
    NodeRestart(NodeId),
    /// A connection that lost a message is reset: its client learns of it.
    Reset {
        /// Connection.
        conn: ConnId,
        /// Epoch it broke in.
        epoch: u64,
    },
    /// A process (re)starts and runs its main task.
    Start(ProcId),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lossy(loss: f64) -> NetState {
        NetState::new(
            NetConfig {
                loss,
                ..NetConfig::default()
            },
            SimRng::new(7),
        )
    }

    const CLIENT: Endpoint = Endpoint::Process(0);
    const NODE: Endpoint = Endpoint::Node(0);

    /// TCP never loses one message and delivers the next: a loss breaks the connection,
    /// everything after it on either lane is lost, and once reset it carries messages again.
    #[test]
    fn a_lost_message_breaks_its_connection_until_the_reset() {
        let mut net = lossy(1.0);
        let Arrival::Reset(at, conn) = net.arrival(1_000, CLIENT, NODE, Lane::Up(3)) else {
            panic!("a lost request must reset its connection");
        };
        assert_eq!(conn, 3);
        assert!(at >= 1_000 + nanos(net.config.min_delay));
        net.config.loss = 0.0;
        assert_eq!(net.arrival(2_000, CLIENT, NODE, Lane::Up(3)), Arrival::Lost);
        assert_eq!(
            net.arrival(2_000, NODE, CLIENT, Lane::Down(3)),
            Arrival::Lost
        );
        assert!(matches!(
            net.arrival(2_000, CLIENT, NODE, Lane::Up(4)),
            Arrival::At(_)
        ));
        net.mend(3);
        assert!(matches!(
            net.arrival(3_000, CLIENT, NODE, Lane::Up(3)),
            Arrival::At(_)
        ));
    }

    /// A replication batch lost is a gap the replica resyncs across, not a reset.
    #[test]
    fn a_lost_replication_batch_is_only_lost() {
        let mut net = lossy(1.0);
        let (master, replica) = (Endpoint::Node(0), Endpoint::Node(1));
        assert_eq!(
            net.arrival(0, master, replica, Lane::Repl(0, 1)),
            Arrival::Lost
        );
        net.config.loss = 0.0;
        assert!(matches!(
            net.arrival(0, master, replica, Lane::Repl(0, 1)),
            Arrival::At(_)
        ));
    }
}
