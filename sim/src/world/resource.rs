//! The fenced resource the clients protect: it accepts a write only with a token at least
//! as high as any it has seen, and records every write in the history.
//!
//! Invariant: the resource judges a write when it arrives, in true time, so a stale holder
//! whose write lands after a newer holder's is rejected and the checker sees both.

use super::World;
use crate::model::resp::Reply;
use crate::world::history::{HistEvent, HistKind};
use crate::world::net::{ConnId, Endpoint, RequestBody};

impl World {
    /// A write reached the resource: judged by its token, recorded, acknowledged.
    pub(super) fn resource_request(
        &mut self,
        conn: ConnId,
        epoch: u64,
        req: u64,
        body: &RequestBody,
    ) {
        let RequestBody::Command(args) = body else {
            return;
        };
        let (Some(lock), Some(token)) = (
            args.get(1).map(|l| String::from_utf8_lossy(l).into_owned()),
            args.get(2)
                .and_then(|t| std::str::from_utf8(t).ok())
                .and_then(|t| t.parse::<u64>().ok()),
        ) else {
            self.respond(
                Endpoint::Resource,
                conn,
                epoch,
                req,
                Ok(Reply::error("ERR bad write")),
            );
            return;
        };
        let highest = self.highest_token.get(&lock).copied().unwrap_or(0);
        let accepted = token >= highest;
        if accepted {
            self.highest_token.insert(lock.clone(), token);
        }
        {
            let mut core = self.executor.lock();
            let Some((proc, incarnation)) = core.conns.get(&conn).map(|c| (c.proc, c.incarnation))
            else {
                return;
            };
            let at = core.now;
            core.trace_line(|| {
                format!("resource {lock}: write token {token} from c{proc}.{incarnation}: highest {highest}, accepted {accepted}")
            });
            core.history.push(HistEvent {
                at,
                proc,
                incarnation,
                lock,
                kind: HistKind::Write {
                    token,
                    highest,
                    accepted,
                },
            });
        }
        self.respond(
            Endpoint::Resource,
            conn,
            epoch,
            req,
            Ok(Reply::Int(i64::from(accepted))),
        );
    }
}
