//! A partition holds what a connection sends into it, as TCP retransmits it: a request its
//! client gave up on runs on the server after the heal, in order with the ones sent after
//! it, unless the cut outlasts the retransmission budget, which resets the connection; a
//! connection reset during the cut drops what it held with the old socket.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasehold_sim::model::resp::Reply;
use leasehold_sim::world::faults::{Fault, ProcSel, ScheduledFault};
use leasehold_sim::world::net::{NetConfig, RETRANSMIT_BUDGET, Target};
use leasehold_sim::world::process::ProcessCtx;
use leasehold_sim::world::{NodeSpec, ProcessMain, World, WorldConfig};

type Log = Arc<Mutex<Vec<String>>>;

/// When c0 is cut off from every node, and when it starts sending.
const CUT_AT_MS: u64 = 100;
const START: Duration = Duration::from_millis(200);

/// One node, c0 cut off from it at [`CUT_AT_MS`] for `cut_ms`, with `net` and the
/// `other` faults.
fn world(cut_ms: u64, net: NetConfig, other: Vec<ScheduledFault>) -> World {
    let cut = ScheduledFault {
        at_ms: CUT_AT_MS,
        fault: Fault::Isolate {
            who: ProcSel::Id(0),
            ms: cut_ms,
        },
    };
    World::new(WorldConfig {
        seed: 11,
        nodes: vec![NodeSpec::default()],
        targets: vec![Target::Node(0)],
        groups: Vec::new(),
        net,
        faults: std::iter::once(cut).chain(other).collect(),
        trace: true,
        server_clock: Default::default(),
    })
    .unwrap()
}

/// A response timeout longer than the budget, so a request is still pending when its
/// connection gives up.
fn patient() -> NetConfig {
    NetConfig {
        response_timeout: Duration::from_secs(6),
        ..NetConfig::default()
    }
}

/// c0 sends each command in turn on its connection and logs how each ended.
fn sender(commands: &'static [&'static [&'static str]], log: &Log) -> ProcessMain {
    let log = Arc::clone(log);
    Arc::new(move |ctx: ProcessCtx| {
        let log = Arc::clone(&log);
        Box::pin(async move {
            for args in commands {
                let mut cmd = redis::cmd(args[0]);
                for arg in &args[1..] {
                    cmd.arg(*arg);
                }
                let outcome = match ctx.backends[0].query(&cmd).await {
                    Ok(_) => "ok".to_owned(),
                    Err(e) => e.to_string(),
                };
                log.lock()
                    .unwrap()
                    .push(format!("{}: {outcome}", args.join(" ")));
            }
        })
    })
}

fn get(world: &mut World, key: &str) -> Reply {
    world.direct(0, &["GET", key]).unwrap()
}

/// Two writes sent into a 2 s cut both time out for their client, and both still run
/// after the heal, in the order they were sent (the key ends with the second's value).
#[test]
fn requests_sent_into_a_cut_run_after_the_heal_in_order() {
    let mut world = world(2_000, NetConfig::default(), Vec::new());
    let log: Log = Arc::default();
    world.add_process(
        START,
        sender(&[&["SET", "k", "first"], &["SET", "k", "second"]], &log),
    );
    world.run(Duration::from_millis(2_000));
    let given_up = log.lock().unwrap().clone();
    assert_eq!(given_up.len(), 2, "{given_up:?}");
    assert!(
        given_up.iter().all(|l| l.contains("response timeout")),
        "{given_up:?}"
    );
    assert_eq!(
        get(&mut world, "k"),
        Reply::Nil,
        "nothing ran during the cut"
    );
    world.run(Duration::from_millis(2_200));
    assert_eq!(
        get(&mut world, "k"),
        Reply::Bulk(b"second".to_vec()),
        "both ran after the heal, the second last"
    );
    let trace = world.trace();
    assert!(
        trace.contains("Process(0)-Node(0) heals: 2 held released"),
        "{trace}"
    );
    assert!(!trace.contains("retransmission budget"), "{trace}");
}

/// A cut longer than the budget resets the connection at the budget's end: the pending
/// request fails with a reset and never runs, even after the heal, and the connection
/// carries what is sent on it afterwards.
#[test]
fn a_cut_longer_than_the_budget_resets_the_connection() {
    let cut_ms = 5_000;
    let mut world = world(cut_ms, patient(), Vec::new());
    let log: Log = Arc::default();
    world.add_process(
        START,
        sender(&[&["SET", "k", "zombie"], &["SET", "after", "ok"]], &log),
    );
    let budget_end = START + RETRANSMIT_BUDGET;
    world.run(budget_end + Duration::from_millis(1));
    assert_eq!(
        log.lock().unwrap().first().map(String::as_str),
        Some("SET k zombie: simulated: connection reset by peer")
    );
    assert!(
        world
            .trace()
            .contains("gives up: held past the retransmission budget")
    );
    world.run(Duration::from_millis(CUT_AT_MS + cut_ms + 500));
    assert_eq!(
        get(&mut world, "k"),
        Reply::Nil,
        "the held request never ran"
    );
    assert_eq!(
        log.lock().unwrap().get(1).map(String::as_str),
        Some("SET after ok: ok")
    );
    assert_eq!(get(&mut world, "after"), Reply::Bulk(b"ok".to_vec()));
}

/// A connection reset for another reason during the cut (its node crashed) drops what it
/// held with the old socket: the budget then counts from what the new one sends, which
/// arrives after the heal instead of being reset for the old socket's sake.
#[test]
fn a_reset_during_the_cut_restarts_the_budget() {
    let crash_at_ms = 1_500;
    let crash = ScheduledFault {
        at_ms: crash_at_ms,
        fault: Fault::NodeCrash {
            node: 0,
            restart_after_ms: Some(100),
        },
    };
    // Healed after the budget counted from the first send, before it counted from the
    // crash.
    let cut_ms = 4_000;
    assert!(START + RETRANSMIT_BUDGET < Duration::from_millis(CUT_AT_MS + cut_ms));
    assert!(
        Duration::from_millis(crash_at_ms) + RETRANSMIT_BUDGET
            > Duration::from_millis(CUT_AT_MS + cut_ms)
    );
    let mut world = world(cut_ms, patient(), vec![crash]);
    let log: Log = Arc::default();
    world.add_process(
        START,
        sender(&[&["SET", "k", "old"], &["SET", "after", "ok"]], &log),
    );
    world.run(Duration::from_millis(CUT_AT_MS + cut_ms + 500));
    let log = log.lock().unwrap().clone();
    assert_eq!(
        log,
        ["SET k old: simulated: server went away", "SET after ok: ok"],
        "{}",
        world.trace()
    );
    assert!(!world.trace().contains("retransmission budget"));
    assert_eq!(get(&mut world, "after"), Reply::Bulk(b"ok".to_vec()));
}
