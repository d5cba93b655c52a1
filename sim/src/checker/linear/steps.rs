//! A call of the search as a step of its family's sequential spec: its point's window, in
//! the node's own time where the simulator witnessed it run, and what the search knows of
//! its hold (granted for certain before, or possibly by a hand-off, or after a reset).

use crate::checker::lease_spec::{Step, TOLERANCE_MS};
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
                        .is_some_and(|&(at, held)| {
                            held && at >= restarted
                                && !self.confirms_unseen(call.op.hold, at, restarted)
                        })
                }),
            hand_off_ttl: self.hand_off_ttl,
            clock_read: point.is_some(),
            all_seen: restarted == 0 && from < self.blind_from,
        }
    }

    /// Whether a grant of `hold` answered at `at` (ns) may confirm one the server made
    /// before the key's state was lost at `restarted` (ns), which the search never saw:
    /// the hold was asked for before then (a fair waiter the lost state's release may have
    /// handed the lock to, a retry whose first try took effect), and the grant came while
    /// holds granted before the reset may still live on (the longest lease a call on the key asks for).
    /// Such a grant's lease is the pre-reset server's: the lock key may keep the deadline
    /// it set then, longer in the node's time than the grant's own (a clock that stepped
    /// back, a replica behind), so a later "live" answer about the hold is judged
    /// leniently, as one about a hold an ambiguous call granted.
    fn confirms_unseen(&self, hold: u64, at: u64, restarted: u64) -> bool {
        let fog_ns = (self.longest_lease + TOLERANCE_MS) * NS_PER_MS;
        restarted > 0
            && at <= restarted + fog_ns
            && self
                .first_sent
                .get(&hold)
                .is_some_and(|&sent| sent < restarted)
    }
}
