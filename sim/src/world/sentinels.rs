//! The simulated Sentinels: they name each replication group's master, as the world's
//! failovers left it.
//!
//! Why it exists: the production Sentinel backend asks them (through
//! `crate::discovery`) whenever it drops its master, so when they start naming a new one
//! decides which master a client talks to after a failure.
//!
//! Invariant: they answer with the group's master as of the promotion (a split failover
//! promotes only after its detection delay, so until then they name the cut-off old
//! master; a crash failover promotes at once); they are never cut off, and a request for
//! a group that does not exist is an error reply.

use super::World;
use crate::discovery::GET_MASTER;
use crate::net::{ConnId, Endpoint, RequestBody};
use crate::resp::Reply;

impl World {
    /// A request reached the Sentinels: the named group's master, or an error.
    pub(super) fn sentinel_request(&self, conn: ConnId, epoch: u64, req: u64, body: &RequestBody) {
        let master = match body {
            RequestBody::Command(args)
                if args.len() == GET_MASTER.len() + 1
                    && args
                        .iter()
                        .zip(GET_MASTER)
                        .all(|(word, expected)| word.eq_ignore_ascii_case(expected)) =>
            {
                let core = self.executor.lock();
                std::str::from_utf8(&args[GET_MASTER.len()])
                    .ok()
                    .and_then(|group| group.parse::<usize>().ok())
                    .and_then(|group| core.service_master.get(group).copied())
            }
            _ => None,
        };
        let reply = match master.and_then(|node| i64::try_from(node).ok()) {
            Some(node) => Reply::Int(node),
            None => Reply::error("ERR No such master with that name"),
        };
        self.respond(Endpoint::Sentinel, conn, epoch, req, Ok(reply));
    }
}
