//! Issue 34, defect 2: a server whose `maxmemory-policy` may evict keys deletes live locks
//! under memory pressure. The client checks the policy at connect, warns, counts and
//! exposes it, and on request refuses the server. Each test runs on a fresh node, so the
//! settings it changes need no restoring.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::Write;
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use leasehold::{Client, EVICTION_REMEDY, Error, EvictionRisk, LockKeys, NO_EVICTION};
use leasehold_harness::SingleNode;

/// Small enough that a few thousand 1 KB values fill it, as in the transcript.
const MAXMEMORY: &str = "3mb";
/// The policy that evicts keys with the nearest expiry first: lock keys, always.
const EVICTING_POLICY: &str = "volatile-ttl";
/// Unrelated keys written per round to reach `maxmemory`, and the size of each.
const FILLER_KEYS: usize = 2_000;
const FILLER_BYTES: usize = 1_024;
/// The most fillers the hazard test writes while waiting for the lock key's eviction.
const FILLER_KEYS_CAP: usize = 40_000;

/// A fresh node with `maxmemory` set and `policy` as its eviction policy.
async fn node_with_policy(policy: &str) -> SingleNode {
    let node = SingleNode::start().await.expect("start a Redis container");
    for (parameter, value) in [("maxmemory", MAXMEMORY), ("maxmemory-policy", policy)] {
        let cmd = redis::cmd("CONFIG")
            .arg("SET")
            .arg(parameter)
            .arg(value)
            .clone();
        let _: () = common::query(&node, &cmd).await;
    }
    node
}

/// Everything logged through `tracing` on this thread while `f` runs.
#[derive(Clone, Default)]
struct Captured(Arc<StdMutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

/// A subscriber that writes WARN and above into `captured`, for this thread only.
fn capture_warnings(captured: &Captured) -> tracing::subscriber::DefaultGuard {
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    tracing::subscriber::set_default(subscriber)
}

/// The hazard itself, shown on a real server: with `volatile-ttl` and memory full, the
/// server evicts a live lock and a second owner is granted it.
#[tokio::test]
async fn an_evicting_policy_deletes_a_live_lock_under_memory_pressure() {
    let node = node_with_policy(EVICTING_POLICY).await;
    let (a, b) = common::two_clients(&node).await;
    let name = "eviction-victim";
    let held = common::lock_unrenewed(&a, name, Duration::from_secs(60)).await;
    let key = LockKeys::new(name).unwrap().lock;
    assert!(common::exists(&node, &key).await, "the lock was granted");

    // The server samples keys to choose its victim, so a few hundred evictions may miss
    // the lock key: keep writing until it is gone, with a cap far above what the samples
    // need (each eviction samples `maxmemory-samples` keys and keeps the nearest expiry).
    let filler = "x".repeat(FILLER_BYTES);
    let mut connection = node.node().connection().await.unwrap();
    let mut written = 0;
    while written < FILLER_KEYS_CAP && common::exists(&node, &key).await {
        for i in written..written + FILLER_KEYS {
            let cmd = redis::cmd("SET")
                .arg(format!("filler:{i}"))
                .arg(&filler)
                .arg("EX")
                .arg(3_600)
                .clone();
            // Once memory is full the server may refuse writes too (OOM): that is fine here.
            let _: redis::RedisResult<redis::Value> = cmd.query_async(&mut connection).await;
        }
        written += FILLER_KEYS;
    }
    let evicted: String = common::query(&node, redis::cmd("INFO").arg("stats")).await;
    println!(
        "{written} fillers written; {}",
        evicted
            .lines()
            .find(|l| l.starts_with("evicted_keys"))
            .unwrap_or("?")
    );
    assert!(
        !common::exists(&node, &key).await,
        "the live lock key was not evicted after {written} fillers"
    );
    let stolen = b
        .mutex(name)
        .try_lock()
        .await
        .expect("granted to a second owner");
    assert!(
        stolen.fencing_token() > held.fencing_token(),
        "fencing still orders them"
    );
    drop(stolen);
    drop(held);
}

/// The pin: connecting to a server that may evict lock keys logs a warning naming the
/// policy and the remedy.
#[tokio::test(flavor = "current_thread")]
async fn connect_warns_when_the_server_may_evict_locks() {
    let node = node_with_policy(EVICTING_POLICY).await;
    let captured = Captured::default();
    let guard = capture_warnings(&captured);
    let client = Client::connect(&node.url()).await.expect("connect");
    drop(guard);
    let log = captured.text();
    println!("{log}");
    assert!(log.contains("WARN"), "no warning: {log:?}");
    assert!(log.contains(EVICTING_POLICY), "{log}");
    assert!(
        log.contains("CONFIG SET maxmemory-policy noeviction"),
        "{log}"
    );
    drop(client);
}

/// The finding is exposed on the client, and a default server (no `maxmemory`) is safe.
#[tokio::test]
async fn the_client_exposes_the_policy_it_found() {
    let node = node_with_policy(EVICTING_POLICY).await;
    let client = common::client(&node).await;
    match client.eviction_risk() {
        EvictionRisk::Evicting {
            policy, maxmemory, ..
        } => {
            assert_eq!(policy, EVICTING_POLICY);
            assert_eq!(maxmemory, 3 * 1024 * 1024);
        }
        other => panic!("expected Evicting, got {other:?}"),
    }
    let safe = common::node().await;
    let client = common::client(&safe).await;
    assert!(
        matches!(client.eviction_risk(), EvictionRisk::Safe { .. }),
        "{:?}",
        client.eviction_risk()
    );
}

/// Strict mode refuses the evicting server with a typed error naming the policy and the
/// remedy, and still connects to a safe one.
#[tokio::test]
async fn refuse_eviction_refuses_an_evicting_server_naming_the_remedy() {
    let node = node_with_policy("allkeys-lru").await;
    let err = Client::builder()
        .refuse_eviction(true)
        .connect(&node.url())
        .await
        .expect_err("an evicting server is refused");
    let message = err.to_string();
    println!("{message}");
    assert!(matches!(err, Error::EvictionPolicy { .. }), "{err:?}");
    assert!(message.contains("allkeys-lru"), "{message}");
    assert!(message.contains(EVICTION_REMEDY), "{message}");

    let _: () = common::query(
        &node,
        redis::cmd("CONFIG")
            .arg("SET")
            .arg("maxmemory-policy")
            .arg(NO_EVICTION),
    )
    .await;
    let client = Client::builder()
        .refuse_eviction(true)
        .connect(&node.url())
        .await
        .expect("a noeviction server is accepted");
    assert_eq!(client.eviction_risk().policy(), NO_EVICTION);
}

/// A user not allowed `CONFIG GET` still connects (the risk is unknown, and logged), and
/// strict mode refuses it, saying why.
#[tokio::test]
async fn a_server_that_hides_its_policy_is_unknown_and_refused_only_when_strict() {
    let node = node_with_policy(EVICTING_POLICY).await;
    let _: () = common::query(
        &node,
        redis::cmd("ACL")
            .arg("SETUSER")
            .arg("locker")
            .arg("on")
            .arg(">pw")
            .arg("~*")
            .arg("&*")
            .arg("+@all")
            .arg("-config"),
    )
    .await;
    let url = format!("redis://locker:pw@{}", node.node().addr());
    let client = Client::connect(&url)
        .await
        .expect("connects without CONFIG");
    assert!(
        matches!(client.eviction_risk(), EvictionRisk::Unknown { .. }),
        "{:?}",
        client.eviction_risk()
    );
    let err = Client::builder()
        .refuse_eviction(true)
        .connect(&url)
        .await
        .expect_err("strict mode refuses an unchecked server");
    let message = err.to_string();
    println!("{message}");
    assert!(message.contains("unknown"), "{message}");
    assert!(message.contains(EVICTION_REMEDY), "{message}");
    assert!(!message.contains(":pw@"), "{message}");
}
