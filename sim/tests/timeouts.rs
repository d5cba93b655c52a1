//! Timeouts run on the clock of whoever keeps them: a client's response timeout on its own
//! clock, a node's `WAIT` timeout and `appendfsync everysec` tick on the node's. A clock
//! running at half speed doubles them in true time, as a drifting host's would.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use leasehold_sim::model::Persistence;
use leasehold_sim::scenario;
use leasehold_sim::scenario::run::{Deployment, RunSpec, run};
use leasehold_sim::workload::{Strategy, WaitReplicas};
use leasehold_sim::world::faults::{Fault, ScheduledFault};

/// Half speed.
const HALF: i64 = -500_000;

fn trace_of(mut spec: RunSpec) -> String {
    spec.trace = true;
    run(&spec).unwrap().trace
}

fn at(line: &str) -> f64 {
    line.split_whitespace().next().unwrap().parse().unwrap()
}

/// The first request whose line contains `what`, sent by c0 inside `window` (seconds),
/// with the time from its send to its answer's arrival (which must `end` as given).
fn answered_after(trace: &str, what: &str, window: (f64, f64), end: &str) -> f64 {
    let sent = trace
        .lines()
        .find(|l| {
            l.contains("c0 -> Node(0) #")
                && l.contains(what)
                && (window.0..window.1).contains(&at(l))
        })
        .unwrap_or_else(|| panic!("no {what} sent in {window:?}"));
    let id = sent.split('#').nth(1).unwrap().split(' ').next().unwrap();
    let answer = trace
        .lines()
        .find(|l| l.contains(&format!("<- #{id} ")))
        .unwrap_or_else(|| panic!("#{id} never answered"));
    assert!(answer.ends_with(end), "#{id}: {answer}");
    at(answer) - at(sent)
}

fn fault(at_ms: u64, fault: Fault) -> ScheduledFault {
    ScheduledFault { at_ms, fault }
}

/// One client on `spec`, `trigger` at `at_ms`: how long the first request containing
/// `what` sent in `window` took to be answered with `end`, with clocks steady and with
/// `slow` (a clock at half speed) from the start.
fn steady_and_slowed(
    mut spec: RunSpec,
    (at_ms, trigger): (u64, Fault),
    slow: Fault,
    (what, window, end): (&str, (f64, f64), &str),
) -> (f64, f64) {
    spec.clients = 1;
    spec.horizon = Duration::from_secs(6);
    spec.faults = vec![fault(at_ms, trigger.clone())];
    let steady = answered_after(&trace_of(spec.clone()), what, window, end);
    spec.faults = vec![fault(0, slow), fault(at_ms, trigger)];
    (steady, answered_after(&trace_of(spec), what, window, end))
}

#[test]
fn a_response_timeout_runs_on_the_client_clock() {
    let (steady, drifting) = steady_and_slowed(
        scenario::base(Strategy::Spin, 0),
        (2_000, Fault::NodePause { node: 0, ms: 3_000 }),
        Fault::ClientClockDrift { proc: 0, ppm: HALF },
        ("EVALSHA", (2.0, 3.0), "timed out"),
    );
    assert!((steady - 0.5).abs() < 0.001, "{steady}");
    assert!((drifting - 1.0).abs() < 0.001, "{drifting}");
}

#[test]
fn a_wait_timeout_runs_on_the_node_clock() {
    let mut spec = scenario::base(Strategy::Spin, 0);
    spec.deployment = Deployment::replicated_for(Strategy::Spin, 1);
    spec.workload.wait_replicas = Some(WaitReplicas {
        replicas: 1,
        timeout: Duration::from_millis(200),
    });
    let replica = spec.deployment.first_replica().unwrap();
    let (steady, drifting) = steady_and_slowed(
        spec,
        (
            1_000,
            Fault::NodeIsolate {
                node: replica,
                ms: 5_000,
            },
        ),
        Fault::NodeClockDrift { node: 0, ppm: HALF },
        ("WAIT 1 200", (1.5, 5.0), ":0"),
    );
    assert!((steady - 0.2).abs() < 0.002, "{steady}");
    assert!((drifting - 0.4).abs() < 0.002, "{drifting}");
}

#[test]
fn an_everysec_fsync_ticks_on_the_node_clock() {
    let mut spec = scenario::base(Strategy::Spin, 0);
    spec.clients = 1;
    spec.horizon = Duration::from_secs(3);
    spec.workload.hold = (Duration::from_millis(2_500), Duration::from_millis(2_500));
    spec.deployment.nodes[0].persistence = Persistence::AofEverySec;
    // Down from 1.1 s to 1.2 s. With a tick at 1 s the node comes back with the lease as
    // renewed before it, and the watchdog keeps renewing it; with none yet, empty, and the
    // first renewal after the restart finds the lease gone.
    let crash = Fault::NodeCrash {
        node: 0,
        restart_after_ms: Some(100),
    };
    let lost = |faults: Vec<ScheduledFault>| {
        trace_of(RunSpec {
            faults,
            ..spec.clone()
        })
        .lines()
        .any(|l| l.ends_with("res0 Lost"))
    };
    assert!(
        !lost(vec![fault(1_100, crash.clone())]),
        "the 1 s tick kept the lease"
    );
    let slow = Fault::NodeClockDrift { node: 0, ppm: HALF };
    assert!(
        lost(vec![fault(0, slow), fault(1_100, crash)]),
        "at half speed the first tick is at 2 s: the node came back empty"
    );
}
