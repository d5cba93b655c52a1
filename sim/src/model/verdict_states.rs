//! The catalogue of verdict-relevant states: named situations a lock script can run into
//! on a node, each one the checker's verdicts depend on getting right.
//!
//! Line coverage saturates fast: every seed runs the grant, the release, the queue. What
//! the verdicts care about is the state a call site ran in (a grant over a sibling hold
//! that lapsed unreleased, a hand-off past a waiter whose entry expired, a grant while
//! the node's clock reads behind a time it already showed). The model observes these
//! when a script runs ([`crate::model::state_watch`]), coverage pairs each with the call
//! sites of that run ([`crate::model::coverage`]), and steering weighs the pairs by rarity.
//!
//! Only the scripts the simulated clients run count (`leasehold::script::scripts().all()`:
//! the operator's `semaphore_resize.lua` is not among them, the simulator never resizes).
//!
//! Invariant: this is a fixed, named list; the report lists every entry, so a state no run
//! reached shows as such rather than by absence.

use serde::{Deserialize, Serialize};

/// A verdict-relevant state a script run found itself in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum VerdictState {
    /// A grant (of the mutex or the write lock) while a sibling hold of the same owner
    /// lapsed unreleased (its deadline passed, its field still in the hash): exclusion and
    /// tokens must not ride on it.
    GrantOverLapsedSibling,
    /// A grant to an owner already holding one hold (re-entry into its epoch).
    Reentry,
    /// A grant to an owner already holding two or more holds.
    DeepReentry,
    /// A grant to a hold already in the hash: a retry after a lost reply, or a waiter
    /// claiming the hand-off the release granted it.
    ClaimOfGrantedHold,
    /// A grant while the lock key is there but its fence key is gone (a restart or an
    /// eviction took it): the token must still not go backwards.
    FenceLostUnderHold,
    /// A grant while the node's clock reads behind the highest time it has shown (after a
    /// backward step): deadlines and tokens written before are in its future.
    GrantBehindClockPeak,
    /// A grant within one lease TTL after the node restarted (what it lost may be held).
    GrantAfterRestart,
    /// A grant within one lease TTL after the node evicted keys.
    GrantAfterEviction,
    /// An acquire of a free lock whose queue head's entry deadline has passed.
    FreeLockPastExpiredHead,
    /// A fair waiter's entry in only one of the line and the waiters hash (one was lost).
    WaiterEntryHalfGone,
    /// A non-queuing attempt finding fair waiters (mixed strategies).
    PlainAttemptMeetsQueue,
    /// A release of a hold whose own lease had lapsed.
    ReleaseOfLapsedHold,
    /// A release (of the mutex or the write lock) while a sibling hold of the same owner
    /// has lapsed unreleased.
    ReleaseWithDeadSibling,
    /// A release that hands off while the queue head's entry deadline has passed.
    HandOffPastExpiredHead,
    /// A release that hands off with the lease cut short by the head's entry deadline.
    HandOffLeaseCut,
    /// A renewal of a hold whose own lease lapsed while a sibling kept the key alive.
    RenewOfLapsedHold,
    /// A reader granted while a writer's intent is recorded and live.
    ReaderPastWriterIntent,
    /// A writer granted while lapsed readers are still in the readers set.
    WriterOverLapsedReaders,
    /// A writer refused because its owner holds read locks (an upgrade).
    UpgradeRefused,
    /// A semaphore acquire with waiters queued while a permit is free.
    PermitFreeWithQueue,
    /// A permit granted while lapsed permits are still in the set.
    PermitOverLapsed,
    /// A release of a permit whose lease had lapsed.
    ReleaseOfLapsedPermit,
}

impl VerdictState {
    /// Every state, in catalogue order.
    pub const ALL: [VerdictState; 22] = [
        Self::GrantOverLapsedSibling,
        Self::Reentry,
        Self::DeepReentry,
        Self::ClaimOfGrantedHold,
        Self::FenceLostUnderHold,
        Self::GrantBehindClockPeak,
        Self::GrantAfterRestart,
        Self::GrantAfterEviction,
        Self::FreeLockPastExpiredHead,
        Self::WaiterEntryHalfGone,
        Self::PlainAttemptMeetsQueue,
        Self::ReleaseOfLapsedHold,
        Self::ReleaseWithDeadSibling,
        Self::HandOffPastExpiredHead,
        Self::HandOffLeaseCut,
        Self::RenewOfLapsedHold,
        Self::ReaderPastWriterIntent,
        Self::WriterOverLapsedReaders,
        Self::UpgradeRefused,
        Self::PermitFreeWithQueue,
        Self::PermitOverLapsed,
        Self::ReleaseOfLapsedPermit,
    ];

    /// The state's name in reports, e.g. `grant-over-lapsed-sibling`.
    pub fn name(self) -> &'static str {
        match self {
            Self::GrantOverLapsedSibling => "grant-over-lapsed-sibling",
            Self::Reentry => "reentry",
            Self::DeepReentry => "deep-reentry",
            Self::ClaimOfGrantedHold => "claim-of-granted-hold",
            Self::FenceLostUnderHold => "fence-lost-under-hold",
            Self::GrantBehindClockPeak => "grant-behind-clock-peak",
            Self::GrantAfterRestart => "grant-after-restart",
            Self::GrantAfterEviction => "grant-after-eviction",
            Self::FreeLockPastExpiredHead => "free-lock-past-expired-head",
            Self::WaiterEntryHalfGone => "waiter-entry-half-gone",
            Self::PlainAttemptMeetsQueue => "plain-attempt-meets-queue",
            Self::ReleaseOfLapsedHold => "release-of-lapsed-hold",
            Self::ReleaseWithDeadSibling => "release-with-dead-sibling",
            Self::HandOffPastExpiredHead => "hand-off-past-expired-head",
            Self::HandOffLeaseCut => "hand-off-lease-cut",
            Self::RenewOfLapsedHold => "renew-of-lapsed-hold",
            Self::ReaderPastWriterIntent => "reader-past-writer-intent",
            Self::WriterOverLapsedReaders => "writer-over-lapsed-readers",
            Self::UpgradeRefused => "upgrade-refused",
            Self::PermitFreeWithQueue => "permit-free-with-queue",
            Self::PermitOverLapsed => "permit-over-lapsed",
            Self::ReleaseOfLapsedPermit => "release-of-lapsed-permit",
        }
    }

    /// What the script's reply must show for the state to count: the situation alone
    /// (found before the run) is not enough when the state is about a grant or a refusal.
    pub fn needs(self) -> Needs {
        match self {
            Self::GrantOverLapsedSibling
            | Self::Reentry
            | Self::DeepReentry
            | Self::ClaimOfGrantedHold
            | Self::FenceLostUnderHold
            | Self::GrantBehindClockPeak
            | Self::GrantAfterRestart
            | Self::GrantAfterEviction
            | Self::ReaderPastWriterIntent
            | Self::WriterOverLapsedReaders
            | Self::PermitOverLapsed => Needs::Granted,
            Self::PlainAttemptMeetsQueue => Needs::QueueFlagged,
            Self::UpgradeRefused => Needs::UpgradeRefused,
            Self::FreeLockPastExpiredHead
            | Self::WaiterEntryHalfGone
            | Self::ReleaseOfLapsedHold
            | Self::ReleaseWithDeadSibling
            | Self::HandOffPastExpiredHead
            | Self::HandOffLeaseCut
            | Self::RenewOfLapsedHold
            | Self::PermitFreeWithQueue
            | Self::ReleaseOfLapsedPermit => Needs::Ran,
        }
    }
}

/// What a state asks of the script's reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    /// Any reply, errors included.
    Ran,
    /// An acquire's `{1, ...}`.
    Granted,
    /// An acquire's busy answer carrying the fair-waiters flag (`{0, ms, 1}`).
    QueueFlagged,
    /// The write acquire's `{2, 0}`.
    UpgradeRefused,
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn every_state_is_listed_once_with_its_own_name() {
        let names: BTreeSet<&str> = VerdictState::ALL.iter().map(|s| s.name()).collect();
        assert_eq!(names.len(), VerdictState::ALL.len());
        let sorted: BTreeSet<VerdictState> = VerdictState::ALL.into_iter().collect();
        assert_eq!(sorted.len(), VerdictState::ALL.len());
    }
}
