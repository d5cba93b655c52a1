//! `WAIT` waits for the replication offset of its own connection's last write, as Redis
//! keeps it per client (`client->woff`), not for the master's offset when it arrives: a
//! client whose write already reached the replica is answered at once even though another
//! client wrote since, and a connection that wrote nothing waits for nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasehold_sim::world::faults::{Fault, ScheduledFault};
use leasehold_sim::world::net::{NetConfig, Target};
use leasehold_sim::world::process::ProcessCtx;
use leasehold_sim::world::{NodeSpec, ProcessMain, World, WorldConfig};

type Log = Arc<Mutex<Vec<(String, String, u128)>>>;

/// A master (node 0) and its replica (node 1), the replica cut off from 250 ms for 2 s:
/// a write before the cut reaches it, one after waits for the heal.
fn world() -> World {
    World::new(WorldConfig {
        seed: 3,
        nodes: vec![
            NodeSpec::default(),
            NodeSpec {
                replica_of: Some(0),
                ..NodeSpec::default()
            },
        ],
        targets: vec![Target::Node(0)],
        groups: Vec::new(),
        net: NetConfig::default(),
        faults: vec![ScheduledFault {
            at_ms: 250,
            fault: Fault::NodeIsolate { node: 1, ms: 2_000 },
        }],
        trace: true,
        server_clock: Default::default(),
    })
    .unwrap()
}

/// After `start_ms`, sends each command in turn (a number sleeps that many ms instead) and
/// logs each reply with the ms it took.
fn client(start_ms: u64, commands: &'static [&'static str], log: &Log) -> (Duration, ProcessMain) {
    let log = Arc::clone(log);
    let main: ProcessMain = Arc::new(move |ctx: ProcessCtx| {
        let log = Arc::clone(&log);
        Box::pin(async move {
            for line in commands {
                if let Ok(ms) = line.parse::<u64>() {
                    ctx.runtime.clock.sleep(Duration::from_millis(ms)).await;
                    continue;
                }
                let words: Vec<&str> = line.split(' ').collect();
                let mut cmd = redis::cmd(words[0]);
                for word in &words[1..] {
                    cmd.arg(*word);
                }
                let sent = ctx.runtime.clock.now();
                let reply = match ctx.backends[0].query(&cmd).await {
                    Ok(value) => format!("{value:?}"),
                    Err(e) => e.to_string(),
                };
                let took = (ctx.runtime.clock.now() - sent).as_millis();
                log.lock()
                    .unwrap()
                    .push((format!("c{} {line}", ctx.id), reply, took));
            }
        })
    });
    (Duration::from_millis(start_ms), main)
}

#[test]
fn wait_counts_the_replicas_that_have_this_connection_s_writes() {
    let mut world = world();
    let log: Log = Arc::default();
    // c0 writes before the cut and waits after c1 wrote during it.
    let (start, main) = client(200, &["SET a 1", "200", "WAIT 1 200"], &log);
    world.add_process(start, main);
    // c1 writes during the cut, then waits, and so does c2, which wrote nothing.
    let (start, main) = client(300, &["SET b 1", "WAIT 1 200"], &log);
    world.add_process(start, main);
    let (start, main) = client(350, &["WAIT 1 200"], &log);
    world.add_process(start, main);
    world.run(Duration::from_secs(3));
    let log = log.lock().unwrap().clone();
    let reply = |what: &str| {
        log.iter()
            .find(|(line, _, _)| line == what)
            .cloned()
            .unwrap_or_else(|| panic!("no {what} in {log:?}"))
    };
    let (_, c0, c0_took) = reply("c0 WAIT 1 200");
    assert_eq!(c0, "int(1)", "{log:?}");
    assert!(c0_took < 100, "c0's write had reached the replica: {log:?}");
    let (_, c1, c1_took) = reply("c1 WAIT 1 200");
    assert_eq!(c1, "int(0)", "c1's write is held by the cut: {log:?}");
    assert!(c1_took >= 200, "{log:?}");
    let (_, c2, c2_took) = reply("c2 WAIT 1 200");
    assert_eq!(c2, "int(1)", "c2 wrote nothing: {log:?}");
    assert!(c2_took < 100, "{log:?}");
}
