//! Round trips per acquisition (docs/DESIGN.md §3), counted with `INFO commandstats` deltas:
//! client-issued commands (EVALSHA/EVAL and pub/sub control) and all commands including
//! those the scripts run. Each figure is asserted against the bound the protocol implies;
//! the benchmark (`leasehold-harness bench`) reports the same counts under load.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use leasehold::{DEFAULT_TTL, WaitStrategy};
use leasehold_harness::SingleNode;

/// Commands a client sends itself (everything else in the stats ran inside a script).
const CLIENT_ISSUED: [&str; 4] = ["evalsha", "eval", "subscribe", "unsubscribe"];

/// Server commands of one uncontended acquire + release, scripts' own calls included:
/// `acquire.lua` on a free lock with no queue (the EVALSHA, TIME, EXISTS, SET … GET, HSET,
/// PEXPIRE) and `release.lua` of the last hold with nobody waiting (the EVALSHA, HMGET,
/// DEL and the fence key's PEXPIRE): 10 today. A script change that adds work shows up
/// here first.
const UNCONTENDED_COMMANDS: u64 = 10;

/// Client round trips per contended acquisition with 4 clients and a 1 ms hold, by
/// strategy: the least each design needs plus the retries it may add.
/// - Spin: acquire + release, plus the busy polls of its backoff (about one or two).
/// - PubSub: acquire + release, plus a busy attempt and the wake-up retry of the
///   clients that lose the race after each release (the herd).
/// - FairQueue: enqueue and release; the release grants the lock to the next waiter in its
///   message (no claim), and refreshes and subscriptions are rare.
const CONTENDED_BOUNDS: [(&str, f64); 3] = [("spin", 6.0), ("pubsub", 7.0), ("fair-queue", 2.5)];

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
async fn uncontended_acquire_and_release_cost_two_round_trips() {
    let node = common::node().await;
    let client = common::client(&node).await;
    let mutex = client.mutex("rt-solo");
    common::lock_and_unlock(&mutex).await; // load scripts
    reset(&node).await;
    const SOLO: u64 = 100;
    for _ in 0..SOLO {
        common::lock_and_unlock(&mutex).await;
    }
    let (issued, all) = counts(&node).await;
    assert_eq!(
        issued,
        2 * SOLO,
        "one round trip to acquire, one to release"
    );
    assert!(
        all <= UNCONTENDED_COMMANDS * SOLO,
        "uncontended acquire+release cost {:.2} server commands, more than {UNCONTENDED_COMMANDS}",
        all as f64 / SOLO as f64
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contended_round_trips_stay_within_each_strategys_bound() {
    let node = common::node().await;
    const CLIENTS: usize = 4;
    const ROUNDS: u64 = 15;
    let strategies = [
        WaitStrategy::spin(),
        WaitStrategy::PubSub,
        WaitStrategy::fair_queue(),
    ];
    for ((label, bound), strategy) in CONTENDED_BOUNDS.into_iter().zip(strategies) {
        let name = format!("rt-{label}");
        let mut clients = Vec::new();
        for _ in 0..CLIENTS {
            let client = common::client_with(&node, DEFAULT_TTL, strategy).await;
            common::lock_and_unlock(&client.mutex(&name)).await;
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
        common::tasks::join_all(tasks).await;
        let (issued, _) = counts(&node).await;
        let acquisitions = CLIENTS as u64 * ROUNDS;
        let per_acquisition = issued as f64 / acquisitions as f64;
        assert!(
            per_acquisition <= bound,
            "{label}: {per_acquisition:.2} client round trips per acquisition, above {bound}"
        );
        assert!(
            per_acquisition >= 2.0,
            "{label}: {per_acquisition:.2} round trips per acquisition cannot cover acquire and release"
        );
    }
}
