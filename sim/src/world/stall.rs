//! Stalled nodes: a node that is frozen (`docker pause`, a long fork or disk stall) keeps
//! what reaches it and works through it, in arrival order, when it wakes.
//!
//! Why it exists: a frozen Redis neither answers nor forgets. Requests that reached its
//! socket before a client gave up on them still run when it wakes (the client sees a
//! timeout, the server a grant: an ambiguous outcome), and its clock has run on meanwhile,
//! so leases that ended during the stall are gone when it looks.
//!
//! Invariant: every event aimed at a stalled node (a request, a replication batch or
//! acknowledgement, an fsync tick, a `WAIT` timeout) is held back and handled, in the order
//! it arrived, at the instant the stall ends; a crash of the node discards what it held.

use super::World;
use crate::model::NodeId;
use crate::world::net::{Endpoint, Event};

/// What a stalled node holds back.
pub(super) struct Stall {
    /// The node.
    node: NodeId,
    /// Virtual time it wakes.
    until: u64,
    /// Events that reached it meanwhile, in arrival order.
    held: Vec<Event>,
}

impl World {
    /// Freezes `node` until virtual time `until`.
    pub(super) fn stall_node(&mut self, node: NodeId, until: u64) {
        if self.nodes.get(node).is_some_and(|n| n.up) {
            self.stalls.retain(|s| s.node != node);
            self.stalls.push(Stall {
                node,
                until,
                held: Vec::new(),
            });
        }
    }

    /// Holds `event` back if it is aimed at a stalled node; gives it back otherwise. A
    /// request on a connection reset before it arrived died with the old socket.
    pub(super) fn hold_if_stalled(&mut self, event: Event) -> Option<Event> {
        // Every event of a run passes here: with no stall, nothing else is looked at.
        if self.stalls.is_empty() {
            return Some(event);
        }
        let Some(node) = target_node(&event) else {
            return Some(event);
        };
        let now = self.executor.lock().now;
        let Some(index) = self
            .stalls
            .iter()
            .position(|stall| stall.node == node && stall.until > now)
        else {
            return Some(event);
        };
        if let Event::Request { conn, epoch, .. } = event
            && !self.conn_current(conn, epoch)
        {
            return None;
        }
        self.stalls[index].held.push(event);
        None
    }

    /// Whether `node` is frozen at `now`.
    pub(super) fn stalled(&self, node: NodeId, now: u64) -> bool {
        self.stalls.iter().any(|s| s.node == node && s.until > now)
    }

    /// `node` wakes: what it held runs now, requests included even when their client has
    /// given up on them since (they were already in the server's socket buffer).
    pub(super) fn wake_node(&mut self, node: NodeId) {
        let Some(index) = self.stalls.iter().position(|s| s.node == node) else {
            return;
        };
        let stall = self.stalls.swap_remove(index);
        self.executor
            .lock()
            .trace_line(|| format!("node n{node} wakes ({} held)", stall.held.len()));
        for event in stall.held {
            match event {
                Event::Request {
                    conn,
                    epoch,
                    to: Endpoint::Node(node),
                    req,
                    body,
                } => self.node_execute(node, conn, epoch, req, body),
                other => self.handle(other),
            }
        }
    }

    /// A crashed node loses what it held back.
    pub(super) fn drop_stall(&mut self, node: NodeId) {
        self.stalls.retain(|s| s.node != node);
    }
}

/// The node an event acts on, if any.
fn target_node(event: &Event) -> Option<NodeId> {
    match event {
        Event::Request {
            to: Endpoint::Node(node),
            ..
        }
        | Event::Repl { replica: node, .. }
        | Event::ReplAck { master: node, .. }
        | Event::Fsync(node)
        | Event::WaitTimeout { node, .. } => Some(*node),
        _ => None,
    }
}
