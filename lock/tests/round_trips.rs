//! Round trips per acquisition (DESIGN §3), counted with `INFO commandstats` deltas:
//! client-issued commands (EVALSHA/EVAL and pub/sub control) and all commands including
//! those the scripts run. Run with `--no-capture` to see the table.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use leasehold::{Client, WaitStrategy};
use leasehold_harness::SingleNode;

/// Commands a client sends itself (everything else in the stats ran inside a script).
const CLIENT_ISSUED: [&str; 4] = ["evalsha", "eval", "subscribe", "unsubscribe"];

async fn command_calls(node: &SingleNode) -> BTreeMap<String, u64> {
    let info: String = common::query(node, redis::cmd("INFO").arg("commandstats")).await;
    info.lines()
        .filter_map(|line| {
            let (name, stats) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = stats.split(',').find_map(|kv| kv.strip_prefix("calls="))?;
            Some((name.to_owned(), calls.parse().ok()?))
        })
        .collect()
}

async fn reset(node: &SingleNode) {
    let _: () = common::query(node, redis::cmd("CONFIG").arg("RESETSTAT")).await;
}

/// (client-issued, all) commands since the last reset, excluding the harness' own.
async fn counts(node: &SingleNode) -> (u64, u64) {
    let calls = command_calls(node).await;
    let issued = CLIENT_ISSUED
        .iter()
        .filter_map(|c| calls.get(*c))
        .sum::<u64>();
    let all = calls
        .iter()
        .filter(|(name, _)| !["info", "config|resetstat"].contains(&name.as_str()))
        .map(|(_, n)| n)
        .sum::<u64>();
    (issued, all)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_trips_per_acquisition() {
    let node = common::node().await;
    let client = common::client(&node).await;
    let mutex = client.mutex("rt-solo");
    mutex.lock().await.unwrap().unlock().await.unwrap(); // load scripts
    reset(&node).await;
    const SOLO: u64 = 100;
    for _ in 0..SOLO {
        mutex.lock().await.unwrap().unlock().await.unwrap();
    }
    let (issued, all) = counts(&node).await;
    eprintln!(
        "uncontended acquire+release: {:.2} client round trips, {:.2} commands incl. in-script",
        issued as f64 / SOLO as f64,
        all as f64 / SOLO as f64
    );
    assert_eq!(
        issued,
        2 * SOLO,
        "one round trip to acquire, one to release"
    );

    const CLIENTS: usize = 4;
    const ROUNDS: u64 = 15;
    for (label, strategy) in [
        ("spin", WaitStrategy::spin()),
        ("pubsub", WaitStrategy::PubSub),
        ("fair-queue", WaitStrategy::fair_queue()),
    ] {
        let name = format!("rt-{label}");
        let mut clients = Vec::new();
        for _ in 0..CLIENTS {
            let client = Client::builder()
                .wait(strategy)
                .connect(&node.url())
                .await
                .unwrap();
            client
                .mutex(&name)
                .lock()
                .await
                .unwrap()
                .unlock()
                .await
                .unwrap();
            clients.push(client);
        }
        reset(&node).await;
        let tasks: Vec<_> = clients
            .iter()
            .map(|client| {
                let mutex = client.mutex(&name);
                tokio::spawn(async move {
                    for _ in 0..ROUNDS {
                        let guard = mutex.lock().await.unwrap();
                        tokio::time::sleep(Duration::from_millis(1)).await;
                        guard.unlock().await.unwrap();
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        let (issued, all) = counts(&node).await;
        let acquisitions = CLIENTS as u64 * ROUNDS;
        eprintln!(
            "{label:>10}, {CLIENTS} clients, 1 ms hold: {:.2} client round trips/acq, {:.2} commands/acq",
            issued as f64 / acquisitions as f64,
            all as f64 / acquisitions as f64
        );
    }
}
