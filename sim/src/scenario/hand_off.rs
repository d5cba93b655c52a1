//! Scenarios of the fair queue's claimless hand-off: the races the release script's grant
//! creates, where a waiter holds the lock from the moment a message it has not yet read
//! was published (see `leasehold`'s acquire module for the safety argument).
//!
//! Each is run for every strategy like any scenario (the others face the same faults
//! without a hand-off); what they are built for is the FairQueue cell.

use std::time::Duration;

use super::shape::{
    Expect, Scenario, all, at, base, family, kind_bound, liveness_bound, single_node_cells,
};
use crate::checker::Verdict;
use crate::scenario::run::RunSpec;
use crate::workload::{Cancel, LockKind, Strategy};
use crate::world::faults::{Fault, ProcSel};

/// A short queue entry, so that waiters refresh every 100 ms and their refreshes race the
/// releases that grant to them.
const SHORT_ENTRY: Duration = Duration::from_millis(300);

/// `spec` with [`SHORT_ENTRY`] and five clients, so a queue forms behind every holder.
fn short_entries(mut spec: RunSpec) -> RunSpec {
    spec.clients = 5;
    spec.workload.entry_timeout = Some(SHORT_ENTRY);
    spec
}

/// Lease of `handoff-dead-waiters`: long beside the entry timeout, so a hand-off whose
/// lease is not cut to the waiter's entry deadline stalls the line visibly.
const DEAD_WAITERS_TTL: Duration = Duration::from_secs(4);

/// The read-write lock's mix in `rwlock-dead-queued-writer`: half the waiters write, so
/// some waiter the crashes take is a queued writer with readers queued behind it.
const DEAD_WRITER_MIX: LockKind = LockKind::ReadWrite { read_percent: 50 };

/// Waiters `rwlock-dead-queued-writer` crashes for good, 10 ms apart from 2 s on.
const DEAD_WRITER_CRASHES: u64 = 3;

/// The read-write lock's mix in `rwlock-writers-give-up`: mostly readers, so a waiting
/// writer usually stands in the line behind readers that hold, with readers queued behind
/// it.
const GIVE_UP_MIX: LockKind = LockKind::ReadWrite { read_percent: 60 };

/// How long an acquire of `rwlock-writers-give-up` waits: shorter than most holds, so a
/// writer queued behind readers usually gives up while they hold, and longer than a short
/// hold, so some waiters are granted just as they give up.
const GIVE_UP_AFTER: Duration = Duration::from_millis(250);

/// Four-second leases, [`SHORT_ENTRY`] queue entries, short holds and `clients` clients,
/// of which `dead` waiters crash for good from 2 s on (`handoff-dead-waiters`, and the
/// read-write lock's `rwlock-dead-queued-writer`).
fn dead_waiters(mut spec: RunSpec, clients: usize, dead: u64) -> RunSpec {
    spec = short_entries(spec);
    spec.clients = clients;
    spec.workload.ttl = DEAD_WAITERS_TTL;
    spec.workload.hold = (Duration::from_millis(100), Duration::from_millis(300));
    spec.faults = (0..dead)
        .map(|i| {
            at(
                2_000 + i * 10,
                Fault::Crash {
                    who: ProcSel::Waiter,
                    restart_after_ms: None,
                },
            )
        })
        .collect();
    spec.check.lease_ttl = DEAD_WAITERS_TTL;
    spec
}

/// The catalogue of this group, in table order.
pub(super) const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "handoff-give-up",
        design_item: 9,
        summary: "Five clients with 300 ms queue entries (refreshes every 100 ms race the releases that grant to them), acquires that give up after 400 ms, a fifth of them dropped mid-flight, and 3% of messages lost. Grants reach waiters that have just timed out or been cancelled (their release must give the grant back and pass the lock on), grant messages are lost (the next refresh finds the lock already granted), and a refresh crosses the release that grants it. Nobody may believe a hold the server does not keep, and the line must not stall.",
        build: |s, seed| {
            let mut spec = short_entries(base(s, seed));
            spec.workload.acquire_timeout = Some(Duration::from_millis(400));
            spec.workload.cancel = Some(Cancel {
                percent: 20,
                within: Duration::from_millis(600),
            });
            spec.net.loss = 0.03;
            spec
        },
        expect: all(Expect::Exactly(Verdict::Safe)),
    },
    Scenario {
        name: "handoff-slow-waiter",
        design_item: 2,
        summary: "Five clients; client 0's link is 250 ms slower each way for the whole run and nobody renews (watchdog off, holds up to past the TTL): client 0's queue entry reaches the server 250 ms after it sent it, and a grant's message arrives 250 ms after the grant. The waiter's lease must be counted from the send of the attempt the grant names (a lease counted from the message's arrival outlives the key by the delay, which the server-truth oracle sees); when that leaves less than half the TTL, the waiter asks the server before trusting the grant. Writes delayed past the lost signal are fenced.",
        build: |s, seed| {
            let mut spec = base(s, seed);
            spec.clients = 5;
            spec.workload.watchdog = false;
            spec.workload.hold = (Duration::from_millis(300), Duration::from_millis(1_200));
            spec.faults = vec![at(
                0,
                Fault::Slow {
                    who: ProcSel::Id(0),
                    extra_ms: 250,
                    ms: 12_000,
                },
            )];
            spec
        },
        expect: all(Expect::AtWorst(Verdict::SafeWithFencing)),
    },
    Scenario {
        name: "handoff-waiter-pause",
        design_item: 1,
        summary: "Every 1.5 s from 2 s on, a waiting client stops for 1.2 s (longer than the TTL): a grant published while it is stopped is read when it wakes, after the lease the message names may have run out, and its own timers fire late. It must trust the grant only as far as the send time of its named attempt allows, and otherwise ask the server, which has given the lock on by then. A waiter granted just before its stop holds across it: exclusion broken, excused by the pause.",
        build: |s, seed| {
            let mut spec = short_entries(base(s, seed));
            spec.faults = (0..6)
                .map(|i| {
                    at(
                        2_000 + i * 1_500,
                        Fault::Pause {
                            who: ProcSel::Waiter,
                            ms: 1_200,
                        },
                    )
                })
                .collect();
            spec
        },
        expect: all(Expect::AtWorst(Verdict::ExclusionBroken)),
    },
    Scenario {
        name: "handoff-dead-waiters",
        design_item: 8,
        summary: "Four-second leases, 300 ms queue entries, holds of 100-300 ms, and three waiters crash for good at 2 s. A release that grants the lock to a dead waiter must cut its lease to the waiter's entry deadline, and expired entries must be skipped, so the three stall the line for about an entry timeout each, not a lease each: FairQueue's liveness bound here is three entry timeouts plus a second.",
        build: |s, seed| {
            let mut spec = dead_waiters(base(s, seed), 6, 3);
            spec.check.liveness_bound = if s == Strategy::FairQueue {
                SHORT_ENTRY * 3 + Duration::from_secs(1)
            } else {
                // A waiter of the others that dies with a grant in flight orphans a lease.
                liveness_bound(s, DEAD_WAITERS_TTL)
            };
            spec
        },
        expect: all(Expect::Exactly(Verdict::Safe)),
    },
    Scenario {
        name: "rwlock-dead-queued-writer",
        design_item: 8,
        summary: "A read-write lock read half the time by seven clients, with four-second leases, 300 ms queue entries and holds of 100-300 ms; three waiters crash for good at 2 s, on most seeds a writer queued with readers behind it among them. No reader may pass the dead writer while its entry lives (writer preference), and none may wait much longer: its entry expires, or the release that hands it the lock cuts the lease to the entry's deadline, and the readers behind it proceed. FairQueue's liveness bound is three entry timeouts plus a second; the others' a lease and a dead writer's intent, for a waiter that dies with a grant in flight orphans a lease.",
        build: |s, seed| {
            let mut spec = dead_waiters(family(s, seed, DEAD_WRITER_MIX), 7, DEAD_WRITER_CRASHES);
            spec.check.liveness_bound = if s == Strategy::FairQueue {
                SHORT_ENTRY * 3 + Duration::from_secs(1)
            } else {
                kind_bound(s, DEAD_WAITERS_TTL, DEAD_WRITER_MIX)
            };
            spec
        },
        expect: single_node_cells(Expect::Exactly(Verdict::Safe)),
    },
    Scenario {
        name: "rwlock-writers-give-up",
        design_item: 9,
        summary: "A read-write lock read 60 % of the time by six clients with 300 ms queue entries, holds of 100-500 ms and acquires that give up after 250 ms, a fifth of them dropped mid-flight. Writers queued behind holding readers give up; each departure from the line hands it on while no writer holds (the readers it held back enter at once, or the next writer once no reader is live), racing the releases and refreshes that grant the same waiters. No grant may join a holding writer, and the line must not stall.",
        build: |s, seed| {
            let mut spec = short_entries(family(s, seed, GIVE_UP_MIX));
            spec.clients = 6;
            spec.workload.hold = (Duration::from_millis(100), Duration::from_millis(500));
            spec.workload.acquire_timeout = Some(GIVE_UP_AFTER);
            spec.workload.cancel = Some(Cancel {
                percent: 20,
                within: Duration::from_millis(400),
            });
            spec
        },
        expect: single_node_cells(Expect::Exactly(Verdict::Safe)),
    },
];
