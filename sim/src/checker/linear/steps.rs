//! A call of the search as a step of its family's sequential spec: its point's window, in
//! the node's own time where the simulator witnessed it run, and what the search knows of
//! its hold (granted for certain before, or possibly by a hand-off, or after a reset).

use crate::checker::lease_spec::Step;
use crate::checker::seq_spec::SeqSpec;

use super::{NS_PER_MS, Search};

impl<S: SeqSpec> Search<'_, S> {
    /// Call `y` as a step whose point is at most `to` ms.
    pub(super) fn step(&self, y: usize, to: u64) -> Step {
        let call = &self.calls[y];
        // A witnessed call took effect exactly where its node ran it.
        let from = call.ran_at.unwrap_or(call.inv);
        // The latest restart before the call: no grant answered before it is known to
        // hold on the server after it.
        let restarted = self
            .restarts
            .iter()
            .map(|&(_, at)| at)
            .take_while(|&at| at <= from)
            .last()
            .unwrap_or(0);
        // A witnessed call is judged in the time its node's clock read: the time its script
        // saw, in which a correct server's answers follow the spec whatever the clock's
        // rate or steps forward (a step back restarts the key: `resets`).
        let point = call.ran_at.and(call.clock_ms);
        Step {
            op: call.op,
            reply: call.reply.map(|(_, reply)| reply),
            from: point.unwrap_or(from / NS_PER_MS),
            fogged: self
                .fog_until
                .is_some_and(|until| from / NS_PER_MS <= until),
            to: point.unwrap_or(to),
            strict: self
                .held_by_answer
                .get(&call.op.hold)
                .is_some_and(|answers| {
                    answers
                        .iter()
                        .rev()
                        .find(|&&(at, _)| at < call.inv)
                        .is_some_and(|&(at, held)| held && at >= restarted)
                }),
            hand_off_ttl: self.hand_off_ttl,
            clock_read: point.is_some(),
        }
    }
}
