//! Scenarios of faults on the clients and their links (docs/DESIGN.md §5 items 1-3, 7
//! and 8): pauses, delays, slow and cut links, client clock drift, crashes of holders and
//! waiters.

use std::time::Duration;

use super::shape::{Expect, Scenario, all, at, base, holder_cut, holder_pause, long_holds};
use crate::checker::Verdict;
use crate::scenario::run::RunSpec;
use crate::workload::Strategy;
use crate::world::faults::{Fault, ProcSel};

/// The scenarios of this group, in table order.
pub(super) const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "holder-pause",
        design_item: 1,
        summary: "The holder stops for 3 s (GC) mid-hold; its lease expires, another client acquires while the paused holder still believes it holds (exclusion broken, excused by the pause that touched that hold); the holder wakes and writes with its old token, which the fenced resource rejects.",
        build: |s, seed| {
            let mut spec = base(s, seed);
            spec.faults = vec![holder_pause()];
            spec
        },
        expect: all(Expect::Exactly(Verdict::ExclusionBroken)),
    },
    Scenario {
        name: "network-delay",
        design_item: 2,
        summary: "Everything the holder sends or receives is delayed by 1.5 s for 4 s: renewals time out, its write lands after another client was granted the lock and is rejected by fencing.",
        build: |s, seed| {
            let mut spec = base(s, seed);
            spec.faults = vec![at(
                2_000,
                Fault::Slow {
                    who: ProcSel::Holder,
                    extra_ms: 1_500,
                    ms: 4_000,
                },
            )];
            spec
        },
        expect: all(Expect::Exactly(Verdict::SafeWithFencing)),
    },
    Scenario {
        name: "slow-link-lease",
        design_item: 2,
        summary: "Client 0's link is 150 ms slower each way for the whole run and nobody renews (watchdog off, holds past the TTL): its grants reach the server 150 ms after it sent them, and their replies 150 ms later still. A lease counted from the request's send ends before the server's key does, so the lost signal fires in time; one counted from the reply's arrival would outlive the key by up to 300 ms, which the server-truth oracle sees with or without a second client in the gap. Writes delayed past the lost signal are fenced. RedLock: 20 ms each way, so a round trip stays within its 50 ms per-master timeout; its validity counts from before the first request, and one counted from the quorum's answer would outlive the keys by up to 28 ms (the round trip less the drift margin).",
        build: |s, seed| {
            let mut spec = base(s, seed);
            spec.workload.watchdog = false;
            spec.workload.hold = (Duration::from_millis(1_100), Duration::from_millis(1_400));
            spec.faults = vec![at(
                0,
                Fault::Slow {
                    who: ProcSel::Id(0),
                    extra_ms: if s == Strategy::RedLock { 20 } else { 150 },
                    ms: 12_000,
                },
            )];
            spec
        },
        expect: all(Expect::AtWorst(Verdict::SafeWithFencing)),
    },
    Scenario {
        name: "slow-link-partition",
        design_item: 7,
        summary: "Client 0's link is 150 ms slower each way for the whole run, and it is cut off for 1 s every 2 s; holds are long and the watchdog renews. When a cut stops the renewals, the last successful renewal's validity (counted from its send) must end before the server's key does: one counted from the reply would outlive it by up to 300 ms.",
        build: |s, seed| far_client_cut_off(long_holds(base(s, seed))),
        expect: all(Expect::AtWorst(Verdict::SafeWithFencing)),
    },
    Scenario {
        name: "slow-link-extend",
        design_item: 2,
        summary: "As slow-link-partition, but every holder keeps its lease with extend() every half TTL (no watchdog) and holds for 1.5-2.5 TTLs: each extension's validity must count from its own send, so when the far client is cut off its belief still ends before the server's key does.",
        build: |s, seed| {
            let mut spec = far_client_cut_off(base(s, seed));
            spec.workload.watchdog = false;
            spec.workload.extend = true;
            spec.workload.hold = (Duration::from_millis(1_500), Duration::from_millis(2_500));
            spec
        },
        expect: all(Expect::AtWorst(Verdict::SafeWithFencing)),
    },
    Scenario {
        name: "client-clock-drift",
        design_item: 4,
        summary: "All clients' clocks run 30% slow and the watchdog is off with holds past the TTL: the local validity deadline falls after the server-side expiry, so holds overlap (exclusion broken, excused by the drift of the holder's clock beyond the margin); nobody writes after its lost signal, stale writes are fenced.",
        build: |s, seed| {
            let mut spec = base(s, seed);
            spec.workload.watchdog = false;
            spec.workload.hold = (Duration::from_millis(1_200), Duration::from_millis(1_500));
            spec.faults = (0..spec.clients)
                .map(|proc| {
                    at(
                        0,
                        Fault::ClientClockDrift {
                            proc,
                            ppm: -300_000,
                        },
                    )
                })
                .collect();
            spec
        },
        expect: all(Expect::AtWorst(Verdict::ExclusionBroken)),
    },
    Scenario {
        name: "client-clock-drift-within-margin",
        design_item: 4,
        summary: "All clients' clocks run 0.9% slow (within the 1% drift margin the library promises to tolerate) and nobody renews (watchdog off, holds past the TTL): the local validity deadline must still fall before the server-side expiry, so the lost signal fires in time and no belief outlives its key.",
        build: |s, seed| {
            let mut spec = base(s, seed);
            spec.workload.watchdog = false;
            spec.workload.hold = (Duration::from_millis(1_100), Duration::from_millis(1_400));
            spec.faults = (0..spec.clients)
                .map(|proc| at(0, Fault::ClientClockDrift { proc, ppm: -9_000 }))
                .collect();
            spec
        },
        expect: all(Expect::AtWorst(Verdict::SafeWithFencing)),
    },
    Scenario {
        name: "client-clock-drift-watchdog",
        design_item: 4,
        summary: "Control for client-clock-drift: same 30% slow clocks with the watchdog on; renewals every TTL/3 of local time still land well before expiry.",
        build: |s, seed| {
            let mut spec = long_holds(base(s, seed));
            spec.faults = (0..spec.clients)
                .map(|proc| {
                    at(
                        0,
                        Fault::ClientClockDrift {
                            proc,
                            ppm: -300_000,
                        },
                    )
                })
                .collect();
            spec
        },
        expect: all(Expect::Exactly(Verdict::Safe)),
    },
    Scenario {
        name: "partition",
        design_item: 7,
        summary: "The holder is cut from Redis for 3 s: renewals fail and its lost signal fires before the lease ends server-side, so no other grant overlaps (margin reported).",
        build: |s, seed| {
            let mut spec = long_holds(base(s, seed));
            spec.faults = vec![holder_cut()];
            spec
        },
        expect: all(Expect::Exactly(Verdict::Safe)),
    },
    Scenario {
        name: "partial-partition",
        design_item: 7,
        summary: "The holder is cut from node 0 alone for 3 s at 2 s. On one node that is the whole partition: its lost signal fires before the lease ends. RedLock: it still reaches four of five masters, so its renewals keep a quorum and its lease; node 0's key expires, and a waiter reaching node 0 finds it free but gets no quorum.",
        build: |s, seed| {
            let mut spec = long_holds(base(s, seed));
            spec.faults = vec![at(
                2_000,
                Fault::CutFrom {
                    who: ProcSel::Holder,
                    node: 0,
                    ms: 3_000,
                },
            )];
            spec
        },
        expect: all(Expect::Exactly(Verdict::Safe)),
    },
    Scenario {
        name: "one-way-loss",
        design_item: 7,
        summary: "The holder's replies are lost for 3 s at 2 s while its requests still arrive: its renewals run on the servers and extend a lease it never hears of, so its lost signal fires on its own validity, and the lease it no longer trusts lapses a TTL after the last renewal that ran (or its release, which runs too, frees it): no belief outlives its key.",
        build: |s, seed| {
            let mut spec = long_holds(base(s, seed));
            spec.faults = vec![at(
                2_000,
                Fault::OneWay {
                    who: ProcSel::Holder,
                    replies: true,
                    ms: 3_000,
                },
            )];
            spec
        },
        expect: all(Expect::Exactly(Verdict::Safe)),
    },
    Scenario {
        name: "dead-waiter",
        design_item: 8,
        summary: "Two waiters crash for good while queued; the line must move on within the entry timeout (FairQueue) or immediately (others).",
        build: |s, seed| {
            let mut spec = base(s, seed);
            spec.clients = 4;
            spec.faults = vec![
                at(
                    2_000,
                    Fault::Crash {
                        who: ProcSel::Waiter,
                        restart_after_ms: None,
                    },
                ),
                at(
                    2_500,
                    Fault::Crash {
                        who: ProcSel::Waiter,
                        restart_after_ms: None,
                    },
                ),
            ];
            spec
        },
        expect: all(Expect::Exactly(Verdict::Safe)),
    },
    Scenario {
        name: "holder-crash",
        design_item: 8,
        summary: "The holder crashes (restarting 1 s later): its lock is orphaned until the TTL, then the others proceed.",
        build: |s, seed| {
            let mut spec = base(s, seed);
            spec.faults = vec![at(
                2_000,
                Fault::Crash {
                    who: ProcSel::Holder,
                    restart_after_ms: Some(1_000),
                },
            )];
            spec
        },
        expect: all(Expect::Exactly(Verdict::Safe)),
    },
];

/// Client 0 is 150 ms farther from its server each way for the whole run, and cut off for
/// 1 s at every even second from 2 s on.
fn far_client_cut_off(mut spec: RunSpec) -> RunSpec {
    spec.faults.push(at(
        0,
        Fault::Slow {
            who: ProcSel::Id(0),
            extra_ms: 150,
            ms: 12_000,
        },
    ));
    for second in (2..12).step_by(2) {
        spec.faults.push(at(
            second * 1_000,
            Fault::Isolate {
                who: ProcSel::Id(0),
                ms: 1_000,
            },
        ));
    }
    spec
}
