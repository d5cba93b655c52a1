//! The `leasehold::backend::Backend` seam over the simulated network and Redis model.
//!
//! Invariant: the client sees only what a redis-rs connection would show it — RESP-parsed
//! replies, `TimedOut` after the response timeout when a link is cut, `ConnectionReset`
//! when the server restarts mid-request or the connection lost a message, a pub/sub stream
//! that ends when its connection drops — and every request costs at least one network
//! delay.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::StreamExt;
use futures::channel::mpsc;

use leasehold::backend::{Backend, BoxFuture, ReplicaWait, Subscription, SubscriptionControl};
use redis::{Cmd, RedisResult, Value};

use crate::model::NodeId;
use crate::world::calls;
use crate::world::executor::{Core, Executor};
use crate::world::history::{HistEvent, HistKind};
use crate::world::net::{
    Conn, ConnId, Endpoint, Event, Lane, ProcId, RequestBody, Slot, Target, io_error,
};

impl Core {
    /// Opens a connection for `proc`'s `incarnation` to `to`.
    pub fn open_conn(
        &mut self,
        proc: ProcId,
        incarnation: u32,
        to: Endpoint,
        pubsub: bool,
    ) -> (
        ConnId,
        Option<mpsc::UnboundedReceiver<leasehold::backend::Notification>>,
    ) {
        let id = self.next_conn;
        self.next_conn += 1;
        let (push, receiver) = if pubsub {
            let (tx, rx) = mpsc::unbounded();
            (Some(tx), Some(rx))
        } else {
            (None, None)
        };
        self.conns.insert(
            id,
            Conn {
                proc,
                incarnation,
                to,
                epoch: 0,
                pending: std::collections::BTreeMap::new(),
                push,
                closed: false,
            },
        );
        (id, receiver)
    }

    /// Sends `body` on connection `conn`; the returned slot completes with the reply or a
    /// failure. A closed connection fails after one network delay.
    pub fn send(&mut self, conn_id: ConnId, body: RequestBody) -> Arc<Slot> {
        let slot = Arc::new(Slot::default());
        let req = self.next_req;
        self.next_req += 1;
        let now = self.now;
        let Some(conn) = self.conns.get(&conn_id) else {
            slot.complete(Err(io_error(
                io::ErrorKind::NotConnected,
                "no such connection",
            )));
            return slot;
        };
        let (proc, epoch, to, live) = (
            conn.proc,
            conn.epoch,
            conn.to,
            !conn.closed
                && conn.incarnation
                    == self
                        .procs
                        .get(conn.proc)
                        .map_or(u32::MAX, |p| p.incarnation),
        );
        if !live {
            slot.complete(Err(io_error(
                io::ErrorKind::NotConnected,
                "process crashed",
            )));
            return slot;
        }
        if self.trace.enabled() {
            let what = describe(&body);
            self.trace_line(|| format!("c{proc} -> {to:?} #{req} {what}"));
        }
        if let Some(conn) = self.conns.get_mut(&conn_id) {
            conn.pending.insert(req, Arc::clone(&slot));
        }
        self.transmit(Endpoint::Process(proc), to, Lane::Up(conn_id), || {
            Event::Request {
                conn: conn_id,
                epoch,
                to,
                req,
                body,
            }
        });
        // The response timeout is the client's: it runs on the process's own clock.
        let timeout = self.net.response_timeout();
        let deadline = self
            .procs
            .get(proc)
            .map_or(now.saturating_add(timeout), |p| p.clock.after(now, timeout));
        self.schedule(deadline, Event::Deadline { conn: conn_id, req });
        slot
    }

    /// Fails every pending request on `conn_id` with `kind`, ends its pub/sub stream and
    /// starts a new epoch (the TCP connection was reset); what the network held on it dies
    /// with the old socket.
    pub fn reset_conn(&mut self, conn_id: ConnId, kind: io::ErrorKind, why: &str) {
        self.net.forget(conn_id);
        let Some(conn) = self.conns.get_mut(&conn_id) else {
            return;
        };
        conn.epoch += 1;
        conn.push = None;
        let pending = std::mem::take(&mut conn.pending);
        for (req, slot) in pending {
            self.trace_line(|| format!("  <- #{req} reset: {why}"));
            slot.complete(Err(io_error(kind, why)));
        }
    }
}

fn describe(body: &RequestBody) -> String {
    let words = |args: &[Vec<u8>]| {
        args.iter()
            .map(|a| {
                if a.len() > 48 {
                    format!("<{} bytes>", a.len())
                } else {
                    String::from_utf8_lossy(a).into_owned()
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    match body {
        RequestBody::Command(args) => words(args),
        RequestBody::Subscribe(channel) => {
            format!("SUBSCRIBE {}", String::from_utf8_lossy(channel))
        }
        RequestBody::Unsubscribe(channel) => {
            format!("UNSUBSCRIBE {}", String::from_utf8_lossy(channel))
        }
    }
}

/// Awaits a slot.
pub(crate) struct SlotFuture(pub(crate) Arc<Slot>);

impl Future for SlotFuture {
    type Output = RedisResult<Value>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.0.poll_take(cx.waker()) {
            Some(result) => Poll::Ready(result),
            None => Poll::Pending,
        }
    }
}

fn command_words(cmd: &Cmd) -> Vec<Vec<u8>> {
    cmd.args_iter()
        .filter_map(|arg| match arg {
            redis::Arg::Simple(bytes) => Some(bytes.to_vec()),
            _ => None,
        })
        .collect()
}

/// One process's multiplexed connection to a node.
#[derive(Debug)]
pub struct SimBackend {
    executor: Arc<Executor>,
    proc: ProcId,
    incarnation: u32,
    node: NodeId,
    /// The deployment target its lock-script calls are recorded under: the node itself, or
    /// the service it is the master of (the linearizability check orders a service's calls
    /// together, whichever master answered them).
    target: Target,
    conn: ConnId,
}

impl SimBackend {
    /// Opens the connection to `node`, reached as deployment target `target`.
    pub fn connect(
        executor: &Arc<Executor>,
        proc: ProcId,
        incarnation: u32,
        node: NodeId,
        target: Target,
    ) -> Self {
        let (conn, _) = executor
            .lock()
            .open_conn(proc, incarnation, Endpoint::Node(node), false);
        Self {
            executor: Arc::clone(executor),
            proc,
            incarnation,
            node,
            target,
            conn,
        }
    }
}

impl SimBackend {
    /// Appends a lock-script call's event to the history, stamped with true time.
    fn record(&self, core: &mut Core, key: &str, kind: HistKind) {
        let at = core.now;
        core.history.push(HistEvent {
            at,
            proc: self.proc,
            incarnation: self.incarnation,
            lock: key.to_owned(),
            kind,
        });
    }
}

impl Backend for SimBackend {
    fn query<'a>(&'a self, cmd: &'a Cmd) -> BoxFuture<'a, RedisResult<Value>> {
        let words = command_words(cmd);
        let call = calls::recognise(&words);
        let resize = calls::recognise_resize(&words);
        Box::pin(async move {
            let (slot, (call, resize)) = {
                let mut core = self.executor.lock();
                // Invoked when it leaves the process: recorded before the send.
                let call = call.map(|(key, op)| {
                    let index = core.history.len();
                    let id = index as u64;
                    let target = self.target;
                    self.record(&mut core, &key, HistKind::Call { id, target, op });
                    // `send` takes the next request id; the node that runs it takes the
                    // entry out (a call never run keeps it to the end of the run).
                    let req = core.next_req;
                    core.calls_in_flight.insert(req, index);
                    (id, key, op.kind)
                });
                let resize = resize.map(|(key, permits)| {
                    let id = core.history.len() as u64;
                    self.record(&mut core, &key, HistKind::Resize { id, permits });
                    (id, key)
                });
                (
                    core.send(self.conn, RequestBody::Command(words)),
                    (call, resize),
                )
            };
            let reply = SlotFuture(slot).await;
            if let Some((id, key, kind)) = call {
                // Lost, timed out or failed mid-way: ambiguous, so not recorded.
                if let Some(reply) = calls::read_result(kind, &reply) {
                    let mut core = self.executor.lock();
                    self.record(&mut core, &key, HistKind::Return { id, reply });
                }
            }
            if let Some((id, key)) = resize
                && let Some(live) = calls::read_resize(&reply)
            {
                let mut core = self.executor.lock();
                self.record(&mut core, &key, HistKind::Resized { id, live });
            }
            reply
        })
    }

    fn wait_replicas<'a>(&'a self, wait: &'a ReplicaWait) -> BoxFuture<'a, RedisResult<Value>> {
        Box::pin(async move {
            // A connection of its own, as in production: WAIT blocks its connection.
            let (conn, _) = self.executor.lock().open_conn(
                self.proc,
                self.incarnation,
                Endpoint::Node(self.node),
                false,
            );
            let mut reply = Ok(Value::Nil);
            for cmd in wait.pipeline().cmd_iter() {
                let slot = self
                    .executor
                    .lock()
                    .send(conn, RequestBody::Command(command_words(cmd)));
                reply = SlotFuture(slot).await;
                if reply.is_err() {
                    break;
                }
            }
            reply
        })
    }

    fn subscribe(&self) -> BoxFuture<'_, RedisResult<Subscription>> {
        Box::pin(async move {
            let (conn, receiver) = self.executor.lock().open_conn(
                self.proc,
                self.incarnation,
                Endpoint::Node(self.node),
                true,
            );
            // Connecting costs a round trip and fails like one.
            let ping = self
                .executor
                .lock()
                .send(conn, RequestBody::Command(vec![b"PING".to_vec()]));
            SlotFuture(ping).await?;
            let messages = receiver
                .ok_or_else(|| io_error(io::ErrorKind::NotConnected, "no pub/sub channel"))?;
            Ok(Subscription {
                control: Box::new(SimSubscriptionControl {
                    executor: Arc::clone(&self.executor),
                    conn,
                }),
                messages: messages.boxed(),
            })
        })
    }
}

/// Channel changes on a simulated pub/sub connection.
#[derive(Debug)]
struct SimSubscriptionControl {
    executor: Arc<Executor>,
    conn: ConnId,
}

impl SubscriptionControl for SimSubscriptionControl {
    fn subscribe<'a>(&'a self, channel: &'a str) -> BoxFuture<'a, RedisResult<()>> {
        self.change(RequestBody::Subscribe(channel.as_bytes().to_vec()))
    }

    fn unsubscribe<'a>(&'a self, channel: &'a str) -> BoxFuture<'a, RedisResult<()>> {
        self.change(RequestBody::Unsubscribe(channel.as_bytes().to_vec()))
    }
}

impl SimSubscriptionControl {
    /// Sends a (un)subscribe request and resolves with its acknowledgement.
    fn change(&self, body: RequestBody) -> BoxFuture<'_, RedisResult<()>> {
        Box::pin(async move {
            let slot = self.executor.lock().send(self.conn, body);
            SlotFuture(slot).await.map(drop)
        })
    }
}

/// A process's connection to the fenced resource.
#[derive(Debug, Clone)]
pub struct ResourceClient {
    executor: Arc<Executor>,
    conn: ConnId,
}

/// The resource's answer to a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOutcome {
    /// Accepted: the token was the highest seen.
    Accepted,
    /// Rejected: a newer token was already seen (the writer's lease is stale).
    Rejected,
    /// No answer (lost or timed out): unknown.
    Unknown,
}

impl ResourceClient {
    /// Opens the connection.
    pub fn connect(executor: &Arc<Executor>, proc: ProcId, incarnation: u32) -> Self {
        let (conn, _) = executor
            .lock()
            .open_conn(proc, incarnation, Endpoint::Resource, false);
        Self {
            executor: Arc::clone(executor),
            conn,
        }
    }

    /// Sends a write on behalf of `lock` holding `token` now; the returned future only
    /// awaits the resource's answer (the write is on the wire whether or not it is polled).
    pub fn write(
        &self,
        lock: &str,
        token: u64,
    ) -> impl Future<Output = WriteOutcome> + Send + 'static {
        let body = RequestBody::Command(vec![
            b"WRITE".to_vec(),
            lock.as_bytes().to_vec(),
            token.to_string().into_bytes(),
        ]);
        let slot = self.executor.lock().send(self.conn, body);
        async move {
            match SlotFuture(slot).await {
                Ok(Value::Int(1)) => WriteOutcome::Accepted,
                Ok(_) => WriteOutcome::Rejected,
                Err(_) => WriteOutcome::Unknown,
            }
        }
    }
}
