//! Scenarios of the lock's own operations under message loss and pauses (docs/DESIGN.md
//! §5 items 9 and 10, and the lock's invariants): ambiguous outcomes, script cache flushes,
//! single attempts, cancelled acquires, fence expiry, re-entry, the lone hold form of an
//! uncontended grant, the read-write lock and the semaphore (its sizes too: mixed counts
//! and resizes).

use std::time::Duration;

use super::shape::{
    Expect, Scenario, TTL, all, at, base, family, holder_pause, long_holds, single_and_redlock,
    single_node_cells,
};
use crate::checker::Verdict;
use crate::scenario::run::RunSpec;
use crate::workload::{Cancel, LockKind, Reentry, SemaphoreSizes};
use crate::world::faults::{Fault, ProcSel};

/// The scenarios of this group, in table order.
pub(super) const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "ambiguous-acquire",
        design_item: 9,
        summary: "2% of messages are lost (requests and replies alike): acquires and releases time out after possibly running; the client must resolve them, never leak nor double-believe a hold.",
        build: |s, seed| {
            let mut spec = base(s, seed);
            spec.net.loss = 0.02;
            spec
        },
        expect: all(Expect::Exactly(Verdict::Safe)),
    },
    Scenario {
        name: "script-flush",
        design_item: 10,
        summary: "SCRIPT FLUSH every second: EVALSHA answers NOSCRIPT and the client falls back to EVAL transparently.",
        build: |s, seed| {
            let mut spec = base(s, seed);
            spec.faults = (1..10)
                .map(|i| at(i * 1_000, Fault::ScriptFlush { node: 0 }))
                .collect();
            spec
        },
        expect: all(Expect::Exactly(Verdict::Safe)),
    },
    Scenario {
        name: "try-lock-lossy",
        design_item: 9,
        summary: "Every acquire is one attempt (`try_lock`, RedLock's `try_lock`) that fails at once when the lock is taken, and 2% of messages are lost: an attempt whose reply is lost must be resolved like a waiting acquire's, never leak nor double-believe a hold.",
        build: |s, seed| {
            let mut spec = base(s, seed);
            spec.workload.try_percent = 100;
            spec.net.loss = 0.02;
            spec
        },
        expect: all(Expect::Exactly(Verdict::Safe)),
    },
    Scenario {
        name: "acquire-cancel",
        design_item: 9,
        summary: "Half the acquires are dropped mid-flight, up to 600 ms after they start (before the first reply, while queued or waiting, or after the grant was sent), and 2% of messages are lost: whatever a dropped acquire was granted or queued for must be given up, so nobody believes a hold nobody was granted and the line does not stall past the liveness bound.",
        build: |s, seed| {
            let mut spec = cancelling(base(s, seed));
            spec.net.loss = 0.02;
            spec
        },
        expect: all(Expect::Exactly(Verdict::Safe)),
    },
    Scenario {
        name: "acquire-cancel-stranded",
        design_item: 9,
        summary: "As acquire-cancel on a clean network, with 5 s leases and a liveness bound of half a lease: a dropped acquire's grant must be given back at once (its pending release runs in the background), so the lock is never left held by nobody for long. A grant kept until its lease ends strands the lock for up to 5 s while the others wait (starvation).",
        build: |s, seed| {
            let mut spec = cancelling(base(s, seed));
            spec.workload.ttl = STRANDED_TTL;
            spec.check.lease_ttl = STRANDED_TTL;
            spec.check.liveness_bound = STRANDED_TTL / 2;
            spec
        },
        expect: all(Expect::Exactly(Verdict::Safe)),
    },
    Scenario {
        name: "fence-expiry-mid-stream",
        design_item: 0,
        summary: "Fence keys outlive their lock by only 200 ms and clients think 250-700 ms between holds, so the fence key expires again and again mid-stream; at 5 s the node's clock steps back 120 ms (less than the margin) during the run. Every token must still exceed every earlier one: server time has moved on by the margin since the forgotten token was issued.",
        build: |s, seed| {
            let mut spec = base(s, seed);
            spec.workload.fence_margin = Some(FENCE_MARGIN);
            spec.workload.think = (Duration::from_millis(250), Duration::from_millis(700));
            spec.faults = vec![at(
                5_000,
                Fault::NodeClockJump {
                    node: 0,
                    by_ms: -120,
                },
            )];
            spec
        },
        expect: all(Expect::Exactly(Verdict::Safe)),
    },
    Scenario {
        name: "reentry-shorter-ttl",
        design_item: 0,
        summary: "Every holder re-enters its lock with a tenth of its TTL and releases that inner hold at once. The outer lease must keep its length: nobody else may be granted the lock while the outer guard trusts its lease (a script that set the key's TTL to the last hold's would let them in).",
        build: |s, seed| nested_reentries(base(s, seed), Duration::ZERO),
        expect: single_and_redlock(
            Expect::Exactly(Verdict::Safe),
            Expect::Pending("RedLock does not re-enter"),
        ),
    },
    Scenario {
        name: "reentry-lost-inner-release",
        design_item: 9,
        summary: "As reentry-shorter-ttl, with 5% of messages lost (each breaking its connection) and every client cut off from Redis for 150 ms each second; each inner hold works 40 ms before its release. A release sent into a cut is given up after the inner TTL (100 ms) and runs only once the cut heals, so meanwhile the hold stays in the lock hash with its own deadline while the outer hold renews on. Each hold is a lease of its own: the scripts drop an inner hold once its deadline passes (at the owner's next re-entry or release) and must never drop a hold its client still trusts, nor keep the lock for the owner once its last live hold is released. The server-truth oracle checks every belief against its own hold's deadline.",
        build: |s, seed| {
            let mut spec = blips(nested_reentries(base(s, seed), INNER_WORK));
            spec.net.loss = HANDOFF_LOSS;
            spec
        },
        expect: single_and_redlock(
            Expect::Exactly(Verdict::Safe),
            Expect::Pending("RedLock does not re-enter"),
        ),
    },
    Scenario {
        name: "reentry-sibling-handoff",
        design_item: 0,
        summary: "Each client waits with two holds of one owner side by side; the second granted must join the first one's epoch and token. With FairQueue a release grants the lock to one of them (a new epoch and token for their owner) while the other refreshes its place: that refresh re-enters the granted epoch and must get its new token, never the previous holder's. 5% of messages are lost, so some grant messages never arrive and the head learns of its grant only at its next refresh, racing its sibling's.",
        build: |s, seed| {
            let mut spec = base(s, seed);
            spec.workload.reentry = Some(Reentry::Sibling { ttl: TTL });
            // A lost grant message leaves the head to learn of it at its next refresh, which
            // races its sibling's refresh: the window this scenario is about.
            spec.net.loss = HANDOFF_LOSS;
            spec
        },
        expect: single_and_redlock(
            Expect::AtWorst(Verdict::SafeWithFencing),
            Expect::Pending("RedLock does not re-enter"),
        ),
    },
    Scenario {
        name: "lone-hold-lossy",
        design_item: 9,
        summary: "Three clients think 1-2.5 s between holds of 0.5-1.5 s with 1 s leases, so most grants find the lock free and take the lone hold form (the lock key a string: acquire.lua's header), a Spin retry is refused by it as it stands, and a PubSub listener or a fair waiter rewrites it into the hash it stands for mid-hold to set its flag; the watchdog renews both forms, and 5% of messages are lost, so releases, renewals, retries and probes of a lone hold race its rewrite. The string must mean exactly its hash: no hold released, renewed or probed as another's, no lease shortened by the rewrite, and no waiter left untold because a flag was lost.",
        build: |s, seed| {
            let mut spec = long_holds(base(s, seed));
            spec.workload.think = (Duration::from_millis(1_000), Duration::from_millis(2_500));
            spec.net.loss = HANDOFF_LOSS;
            spec
        },
        expect: single_and_redlock(
            Expect::Exactly(Verdict::Safe),
            Expect::Exactly(Verdict::Safe),
        ),
    },
    Scenario {
        name: "rwlock-lossy",
        design_item: 9,
        summary: "Read-write lock, 4 clients reading 60% of the time, 2% of messages lost: acquires, renewals and releases of read and write holds time out after possibly running. A writer must never share the lock with anyone, readers only with readers, and no belief may outlive its hold (read holds are scored by their deadline in the readers set).",
        build: |s, seed| {
            let mut spec = family(s, seed, LockKind::ReadWrite { read_percent: 60 });
            spec.net.loss = 0.02;
            spec
        },
        expect: single_node_cells(Expect::Exactly(Verdict::Safe)),
    },
    Scenario {
        name: "rwlock-access-changes",
        design_item: 9,
        summary: "Read-write lock, 4 clients reading 60% of the time, 2% of messages lost; half the write holds are downgraded (`WriteGuard::downgrade`: a read hold granted while the write is held, then the write released), and half the read holds first ask to write as their owner (an upgrade, refused). A downgrade never lets a writer in between, an upgrade is never granted, and no belief outlives its hold.",
        build: |s, seed| {
            let mut spec = family(s, seed, LockKind::ReadWrite { read_percent: 60 });
            spec.net.loss = 0.02;
            spec.workload.downgrade_percent = 50;
            spec.workload.upgrade_percent = 50;
            // A re-entry of depth 0: the holds share their process's owner (an upgrade is
            // asked as that owner), and nothing else re-enters.
            spec.workload.reentry = Some(Reentry::Nested {
                ttl: TTL,
                work: Duration::ZERO,
            });
            spec.workload.reentry_depth = 0;
            spec
        },
        expect: single_node_cells(Expect::Exactly(Verdict::Safe)),
    },
    Scenario {
        name: "rwlock-holder-pause",
        design_item: 1,
        summary: "Read-write lock, 4 clients reading 60% of the time; whoever holds at 2 s stops for 3 s. A paused writer's or reader's lease expires and a conflicting hold is granted while it still believes (excused by the pause, and only by it): exclusion broken, fencing keeps writes safe.",
        build: |s, seed| {
            let mut spec = family(s, seed, LockKind::ReadWrite { read_percent: 60 });
            spec.faults = vec![holder_pause()];
            spec
        },
        expect: single_node_cells(Expect::Exactly(Verdict::ExclusionBroken)),
    },
    Scenario {
        name: "semaphore-lossy",
        design_item: 9,
        summary: "Semaphore with 2 permits, 4 clients, 2% of messages lost: never more holders than permits, and no permit believed after it left the permits set.",
        build: |s, seed| {
            let mut spec = family(s, seed, LockKind::Semaphore { permits: 2 });
            spec.net.loss = 0.02;
            spec
        },
        expect: single_node_cells(Expect::Exactly(Verdict::Safe)),
    },
    Scenario {
        name: "semaphore-holder-pause",
        design_item: 1,
        summary: "Semaphore with 2 permits, 4 clients, 500 ms queue entries; a holder stops for 3 s at 2 s. Its permit expires and is granted again while it still believes: a third believed holder of two permits (exclusion broken, excused by the pause, and only by it). A permit a release handed over keeps its waiter's entry deadline when claimed, if that is later than the claim's TTL, so the entries are shorter than the pause.",
        build: |s, seed| {
            let mut spec = family(s, seed, LockKind::Semaphore { permits: 2 });
            spec.workload.entry_timeout = Some(SEMAPHORE_PAUSE_ENTRY);
            spec.faults = vec![holder_pause()];
            spec
        },
        expect: single_node_cells(Expect::Exactly(Verdict::ExclusionBroken)),
    },
    Scenario {
        name: "semaphore-resize",
        design_item: 9,
        summary: "Semaphore of 4 clients asking for 2 or 3 permits (one number is stored at a time: the others are refused as mismatched), and half the holders resize it while holding, to 1 to 4 (growing and shrinking it under its holders): never more holders than the size the server held when each was granted, as the resizes and their answers say.",
        build: |s, seed| {
            let mut spec = family(s, seed, LockKind::Semaphore { permits: 2 });
            spec.workload.sizes = Some(SemaphoreSizes {
                spread: 2,
                resize_percent: 50,
            });
            spec
        },
        expect: single_node_cells(Expect::Exactly(Verdict::Safe)),
    },
];

/// Queue entry timeout of `semaphore-holder-pause`: a claimed hand-off keeps its entry
/// deadline where that is later than the claim's TTL (`semaphore_acquire.lua`'s `ZADD GT`),
/// so with the default 5 s entries a paused holder of a handed permit would keep it across
/// the 3 s pause; half a second lets every permit expire within it.
const SEMAPHORE_PAUSE_ENTRY: Duration = Duration::from_millis(500);

/// Fence margin of `fence-expiry-mid-stream`: short enough that fence keys expire between
/// holds in every run.
const FENCE_MARGIN: Duration = Duration::from_millis(200);

/// Message loss of `reentry-sibling-handoff` and `reentry-lost-inner-release`: enough lost
/// messages in a run that a sibling's refresh often comes before the head learns of its
/// grant, and that some releases need their retry.
const HANDOFF_LOSS: f64 = 0.05;

/// The lease of `acquire-cancel-stranded`: long enough that a stranded grant outlasts the
/// liveness bound (half of it) by seconds.
const STRANDED_TTL: Duration = Duration::from_secs(5);

/// How long after it starts `acquire-cancel` drops an acquire at most: past a round trip
/// and well into a wait for a held lock (1 s leases).
const CANCEL_WITHIN: Duration = Duration::from_millis(600);

/// `spec` with half its acquires dropped mid-flight, within [`CANCEL_WITHIN`] of their
/// start (the `acquire-cancel` scenarios' workload).
fn cancelling(mut spec: RunSpec) -> RunSpec {
    spec.workload.cancel = Some(Cancel {
        percent: 50,
        within: CANCEL_WITHIN,
    });
    spec
}

/// How long each of [`blips`]' cuts lasts: longer than a nested re-entry's inner TTL (a
/// tenth of the lease), so a release sent into one is given up, and far shorter than the
/// lease, which renewals keep.
const BLIP: Duration = Duration::from_millis(150);

/// `spec` with every client cut off from Redis for [`BLIP`] once a second, the clients'
/// cuts spread over the second. A connection that loses a message resets at once (TCP), so
/// a lost release is retried; one sent into a cut waits for its response timeout instead,
/// and runs late, after the heal.
fn blips(mut spec: RunSpec) -> RunSpec {
    let clients = spec.clients.max(1);
    let horizon = usize::try_from(spec.horizon.as_millis()).unwrap_or(usize::MAX);
    let ms = u64::try_from(BLIP.as_millis()).unwrap_or(u64::MAX);
    for client in 0..clients {
        let first = 1_000 + client * 1_000 / clients;
        for start in (first..horizon).step_by(1_000) {
            spec.faults.push(at(
                u64::try_from(start).unwrap_or(u64::MAX),
                Fault::Isolate {
                    who: ProcSel::Id(client),
                    ms,
                },
            ));
        }
    }
    spec
}

/// `spec` with long holds, each re-entered with a tenth of the TTL and that inner hold
/// kept for `work` (the nested re-entry scenarios' workload).
fn nested_reentries(spec: RunSpec, work: Duration) -> RunSpec {
    let mut spec = long_holds(spec);
    spec.workload.reentry = Some(Reentry::Nested {
        ttl: TTL / 10,
        work,
    });
    spec
}

/// How long `reentry-lost-inner-release`'s inner holds work before their release: under
/// half their TTL, and long enough that [`blips`]' cuts often begin meanwhile.
const INNER_WORK: Duration = Duration::from_millis(40);
