//! The simulated network: connections, messages in flight, delay, loss and partitions.
//!
//! Invariant: every message takes at least the configured minimum delay (so a retry loop
//! always advances virtual time), and messages on one connection lane arrive in the order
//! they were sent (TCP). A message sent across a cut link on a connection is held, as TCP
//! retransmits it: it arrives after the heal (the heal plus a drawn delay), and every later
//! message on its lane queues behind it, so a request its client gave up on (its response
//! timeout fired) may still run on the server seconds later. TCP retries only for so long:
//! once a connection's oldest held message has waited [`RETRANSMIT_BUDGET`], the
//! connection breaks (at that instant, healed or not) and nothing it held arrives. A
//! message lost to the loss model breaks its connection too, as TCP would (it retransmits a
//! dropped segment, so a loss it gives up on is the connection's end, never a gap with
//! later messages delivered). A broken connection carries nothing more; its client sees
//! the reset (one network delay after a loss, at once when the budget runs out), every
//! request still pending on it failing with `ConnectionReset` (it may or may not have run)
//! and its pub/sub stream ending. A reset or closed connection's held messages die with its
//! socket. Replication links are not connections here: a batch lost or sent across a cut
//! is gone, a gap the replica resyncs across (see `world::nodes`).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::io;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::Waker;
use std::time::Duration;

use futures::channel::mpsc::UnboundedSender;
use leasehold::backend::Notification;
use redis::{RedisResult, Value};
use serde::{Deserialize, Serialize};

use crate::engine::rng::SimRng;
use crate::engine::timer::TimerState;
use crate::model::NodeId;
use crate::model::commands::Published;
use crate::model::node::EffectBatch;
use crate::model::resp::Reply;

/// redis-rs's default response timeout for multiplexed connections (`client.rs`,
/// `DEFAULT_RESPONSE_TIMEOUT`): a request unanswered for this long fails with `TimedOut`.
pub const DEFAULT_RESPONSE_TIMEOUT: Duration = Duration::from_millis(500);

/// How long TCP keeps retransmitting a connection's oldest unacknowledged message across a
/// cut link before it gives the connection up. Linux's default (`tcp_retries2` = 15) is
/// about 15 minutes, and deployments that care set `TCP_USER_TIMEOUT` to seconds; the
/// simulator takes 3 s. The bound that matters is the checker's: it assumes an unanswered
/// call takes effect within 10 s of its invocation (`checker::linear`), and a held request
/// may meet a slow link (2 s at most in exploration) and a paused node (4 s at most) after
/// the heal: 3 + 2 + 4 s stays below it. Partitions in exploration last up to 4 s, so both
/// sides of the budget are reached: short cuts deliver what they held, long ones reset.
pub const RETRANSMIT_BUDGET: Duration = Duration::from_secs(3);

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
    /// The Sentinels, which name each replication group's master.
    Sentinel,
}

/// Where a deployment sends a client's lock commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Target {
    /// Always this node.
    Node(NodeId),
    /// Whichever node is master of replication group `n`, followed by the production
    /// `SentinelBackend` through the simulated Sentinels (`crate::sentinel`).
    Service(usize),
}

/// Network parameters.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct NetConfig {
    /// Smallest one-way delay.
    #[serde(with = "crate::engine::duration_text")]
    pub min_delay: Duration,
    /// Largest one-way delay (uniform in between).
    #[serde(with = "crate::engine::duration_text")]
    pub max_delay: Duration,
    /// Probability that one message is lost (the request or its reply); on a client
    /// connection the loss resets the connection.
    pub loss: f64,
    /// How long a client waits for a reply before failing with `TimedOut`.
    #[serde(with = "crate::engine::duration_text")]
    pub response_timeout: Duration,
    /// Extra delay on the replication stream, uniform in `[0, repl_lag]`.
    #[serde(with = "crate::engine::duration_text")]
    pub repl_lag: Duration,
    /// Scheduling hiccups of client processes (buggify): after a poll of one of its tasks,
    /// with this chance the process stops for up to [`NetConfig::hiccup_max`], as a host
    /// preempting it between two awaits would.
    #[serde(default)]
    pub hiccup_chance: f64,
    /// The longest scheduling hiccup.
    #[serde(default)]
    #[serde(with = "crate::engine::duration_text")]
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
    /// Where it sends (fixed for its life, as a socket's peer is).
    pub to: Endpoint,
    /// Bumped on every reset; replies from an older epoch are discarded.
    pub epoch: u64,
    /// Requests awaiting a reply.
    pub pending: BTreeMap<ReqId, Arc<Slot>>,
    /// Pub/sub only: where pushed messages go (dropped when the connection resets).
    pub push: Option<UnboundedSender<Notification>>,
    /// Closed by its process crashing.
    pub closed: bool,
}

/// Link state: partitions, slow links and the delay/loss generator.
#[derive(Debug)]
pub struct NetState {
    /// Parameters.
    pub config: NetConfig,
    /// Directions cut: (from, to).
    cut: BTreeSet<(Endpoint, Endpoint)>,
    slow: BTreeMap<ProcId, u64>,
    lane_clock: BTreeMap<Lane, u64>,
    /// Connections that lost a message: nothing more travels on them until the reset.
    broken: BTreeSet<ConnId>,
    /// Messages the network holds on connection lanes, in the order they were sent: the
    /// front one waits for its link to heal, the others (if their own link is up) only for
    /// the front one. Kept here rather than as deferred events in the executor's queue
    /// because their arrival time is unknown until the heal, and a lane's order must hold
    /// across them.
    held: BTreeMap<Lane, VecDeque<Held>>,
    /// Connections with a retransmission-budget check pending ([`NetState::expire`]): one
    /// per connection, so a cut that holds many messages arms one check.
    armed: BTreeSet<ConnId>,
    /// Messages the loss model lost on client connections so far (each broke its
    /// connection): the evidence that a lossy run's fault landed.
    pub losses: u64,
    rng: SimRng,
}

/// A message held on a connection lane until its link heals.
#[derive(Debug)]
struct Held {
    from: Endpoint,
    to: Endpoint,
    /// When it was sent: the retransmission budget counts from the oldest.
    sent: u64,
    event: Event,
}

/// What becomes of one message.
#[derive(Debug)]
pub enum Arrival {
    /// It arrives at this virtual time, as this event.
    At(u64, Event),
    /// The network holds it until its link heals ([`NetState::set_cut`] hands it back
    /// then). With `Some(at)`, its connection's retransmission budget must be checked at
    /// `at` ([`NetState::expire`]).
    Held(Option<u64>),
    /// It never arrives (a broken connection, a replication batch lost or sent across a
    /// cut).
    Lost,
    /// It is lost and breaks connection `ConnId`, whose client sees the reset at this time.
    Reset(u64, ConnId),
}

/// What a retransmission-budget check finds ([`NetState::expire`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    /// Nothing is held on the connection any more.
    Clear,
    /// Messages are held, the oldest since less than the budget: check again at this time.
    Recheck(u64),
    /// The budget ran out: the connection is broken and what it held is gone; its client
    /// must see the reset now.
    Broken,
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
            held: BTreeMap::new(),
            armed: BTreeSet::new(),
            losses: 0,
            rng,
        }
    }

    /// Cuts (or, at `now`, heals) the link between `a` and `b`. A heal returns the held
    /// messages free to travel again with their arrival times, in the order to schedule
    /// them: each lane's from its front up to the first one whose link is still cut.
    #[must_use = "a heal hands back the held messages, which must be scheduled"]
    pub fn set_cut(&mut self, now: u64, a: Endpoint, b: Endpoint, cut: bool) -> Vec<(u64, Event)> {
        self.set_directions(now, &[(a, b), (b, a)], cut)
    }

    /// Cuts (or, at `now`, heals) what `from` sends to `to`, the other way left alone (one
    /// way loss: a request arrives and its reply does not, or the reverse). A heal returns
    /// the held messages as [`NetState::set_cut`] does.
    #[must_use = "a heal hands back the held messages, which must be scheduled"]
    pub fn set_one_way(
        &mut self,
        now: u64,
        from: Endpoint,
        to: Endpoint,
        cut: bool,
    ) -> Vec<(u64, Event)> {
        self.set_directions(now, &[(from, to)], cut)
    }

    /// Cuts or heals each (from, to) of `directions`; a heal releases, in one pass, what
    /// may travel again.
    fn set_directions(
        &mut self,
        now: u64,
        directions: &[(Endpoint, Endpoint)],
        cut: bool,
    ) -> Vec<(u64, Event)> {
        if cut {
            self.cut.extend(directions.iter().copied());
            return Vec::new();
        }
        let mut healed = false;
        for direction in directions {
            healed |= self.cut.remove(direction);
        }
        if !healed {
            return Vec::new();
        }
        let mut released = Vec::new();
        let mut held = std::mem::take(&mut self.held);
        for (&lane, queue) in &mut held {
            while let Some(front) = queue.front()
                && !self.is_cut(front.from, front.to)
            {
                let Some(message) = queue.pop_front() else {
                    break;
                };
                let at = self.deliver(now, message.from, message.to, lane);
                released.push((at, message.event));
            }
        }
        held.retain(|_, queue| !queue.is_empty());
        self.held = held;
        released
    }

    /// Whether what `from` sends cannot reach `to`.
    pub fn is_cut(&self, from: Endpoint, to: Endpoint) -> bool {
        self.cut.contains(&(from, to))
    }

    /// Adds `extra` one-way delay to everything `proc` sends or receives (0 clears).
    pub fn set_slow(&mut self, proc: ProcId, extra: Duration) {
        if extra.is_zero() {
            self.slow.remove(&proc);
        } else {
            self.slow.insert(proc, nanos(extra));
        }
    }

    /// Sends the message `arrive` builds from `from` to `to` on `lane` at `now`: says
    /// when it arrives, or keeps it while its link is cut (or its lane holds an earlier
    /// message), or loses it. Replication lanes add the replication lag.
    pub fn send(
        &mut self,
        now: u64,
        from: Endpoint,
        to: Endpoint,
        lane: Lane,
        arrive: impl FnOnce() -> Event,
    ) -> Arrival {
        let conn = match lane {
            Lane::Up(conn) | Lane::Down(conn) => conn,
            Lane::Repl(..) | Lane::Ack(..) => {
                if self.is_cut(from, to) || self.rng.chance(self.config.loss) {
                    return Arrival::Lost;
                }
                return Arrival::At(self.deliver(now, from, to, lane), arrive());
            }
        };
        if self.broken.contains(&conn) {
            return Arrival::Lost;
        }
        if self.is_cut(from, to) || self.held.contains_key(&lane) {
            self.held.entry(lane).or_default().push_back(Held {
                from,
                to,
                sent: now,
                event: arrive(),
            });
            let check = self
                .armed
                .insert(conn)
                .then(|| now.saturating_add(nanos(RETRANSMIT_BUDGET)));
            return Arrival::Held(check);
        }
        if self.rng.chance(self.config.loss) {
            let at = now.saturating_add(self.delay(from, to, lane));
            self.losses += 1;
            self.broken.insert(conn);
            return Arrival::Reset(at, conn);
        }
        Arrival::At(self.deliver(now, from, to, lane), arrive())
    }

    /// A one-way delay drawn for a message from `from` to `to` on `lane`.
    fn delay(&mut self, from: Endpoint, to: Endpoint, lane: Lane) -> u64 {
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
        delay
    }

    /// When a message leaving at `now` arrives: a drawn delay, and never before the
    /// message sent ahead of it on its lane.
    fn deliver(&mut self, now: u64, from: Endpoint, to: Endpoint, lane: Lane) -> u64 {
        let earliest = now.saturating_add(self.delay(from, to, lane));
        let last = self.lane_clock.entry(lane).or_insert(0);
        let at = earliest.max(*last);
        *last = at;
        at
    }

    /// The retransmission-budget check of connection `conn` at `now`: whether it still
    /// holds messages, and if its oldest has waited the whole budget, breaks it, dropping
    /// what it held.
    pub fn expire(&mut self, now: u64, conn: ConnId) -> Expiry {
        let lanes = [Lane::Up(conn), Lane::Down(conn)];
        let oldest = lanes
            .iter()
            .filter_map(|lane| self.held.get(lane)?.front().map(|m| m.sent))
            .min();
        let Some(oldest) = oldest else {
            self.armed.remove(&conn);
            return Expiry::Clear;
        };
        let due = oldest.saturating_add(nanos(RETRANSMIT_BUDGET));
        if due > now {
            return Expiry::Recheck(due);
        }
        self.forget(conn);
        self.armed.remove(&conn);
        self.broken.insert(conn);
        Expiry::Broken
    }

    /// Connection `conn` was reset or closed: what it held dies with its socket.
    pub fn forget(&mut self, conn: ConnId) {
        self.held.remove(&Lane::Up(conn));
        self.held.remove(&Lane::Down(conn));
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
        /// Messages the write published (channel, message), which the replica publishes
        /// to its own subscribers as it applies the batch, as Redis replicates `PUBLISH`.
        published: Arc<Published>,
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
    /// A connection broken by a lost message or a spent retransmission budget is reset:
    /// its client learns of it.
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
mod tests;
