//! The read-write lock's fair line against a real Redis node: phases granted in line order
//! (the readers at the head together, then the writer that queued before later readers),
//! no reader admitted past a queued writer, a crashed writer at the head blocking the line
//! no longer than its entry, and FairQueue as the read-write lock's default.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasehold::{Client, Error, LockKeys, WaitStrategy};
use tokio::sync::oneshot;

use common::{client_with, eventually, node, query};

const ENTRY: Duration = Duration::from_millis(600);
const TTL: Duration = Duration::from_secs(10);

fn fair() -> WaitStrategy {
    WaitStrategy::FairQueue {
        entry_timeout: ENTRY,
    }
}

async fn line_len(node: &leasehold_harness::SingleNode, name: &str) -> i64 {
    let keys = LockKeys::rwlock(name).unwrap();
    query(node, redis::cmd("LLEN").arg(&keys.queue)).await
}

/// Who has been granted the lock so far, by label, in grant order.
type Granted = Arc<Mutex<Vec<&'static str>>>;

fn granted(log: &Granted) -> Vec<&'static str> {
    log.lock().unwrap().clone()
}

/// Starts a waiter that reads (or writes) `name`, logs its grant and holds until told to
/// release; returns once its entry stands in the line (line length `in_line`).
async fn waiter(
    node: &leasehold_harness::SingleNode,
    client: &Client,
    name: &'static str,
    label: &'static str,
    in_line: i64,
    log: &Granted,
) -> oneshot::Sender<()> {
    let (release, told) = oneshot::channel::<()>();
    let lock = client.rwlock(name);
    let log = Arc::clone(log);
    tokio::spawn(async move {
        let within = Duration::from_secs(30);
        if label.starts_with('R') {
            let guard = lock.read_within(within).await.unwrap();
            log.lock().unwrap().push(label);
            told.await.ok();
            guard.unlock().await.unwrap();
        } else {
            let guard = lock.write_within(within).await.unwrap();
            log.lock().unwrap().push(label);
            told.await.ok();
            guard.unlock().await.unwrap();
        }
    });
    let queued = eventually(Duration::from_secs(3), || async {
        line_len(node, name).await == in_line
    })
    .await;
    assert!(queued, "{label} never stood in the line");
    release
}

/// Waits until `labels` have all been granted, then a little longer, and returns the log.
async fn after_grants(log: &Granted, labels: &[&str]) -> Vec<&'static str> {
    let all = eventually(Duration::from_secs(5), || async {
        let now = granted(log);
        labels.iter().all(|l| now.contains(l))
    })
    .await;
    assert!(all, "{labels:?} were not all granted: {:?}", granted(log));
    // Room for a wrong grant to show up before the caller looks.
    tokio::time::sleep(Duration::from_millis(150)).await;
    granted(log)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn phases_are_granted_in_line_order() {
    const NAME: &str = "rw-fair-phases";
    let node = node().await;
    let mut clients = Vec::new();
    for _ in 0..3 {
        clients.push(client_with(&node, TTL, fair()).await);
    }
    let first = clients[0].rwlock(NAME).write().await.unwrap();
    let log = Granted::default();
    let r1 = waiter(&node, &clients[1], NAME, "R1", 1, &log).await;
    let r2 = waiter(&node, &clients[2], NAME, "R2", 2, &log).await;
    let w2 = waiter(&node, &clients[0], NAME, "W2", 3, &log).await;
    let r3 = waiter(&node, &clients[1], NAME, "R3", 4, &log).await;

    // The writer's release hands the lock to the two readers at the head, together.
    first.unlock().await.unwrap();
    let now = after_grants(&log, &["R1", "R2"]).await;
    assert_eq!(now.len(), 2, "only the readers before W2 enter: {now:?}");
    assert_eq!(line_len(&node, NAME).await, 2, "W2 and R3 still wait");

    // The last of them hands it to W2; R3, which queued after W2, still waits.
    r1.send(()).unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(granted(&log).len(), 2, "W2 waits for the second reader");
    r2.send(()).unwrap();
    // R1 and R2 were granted by one hand-off, so their tasks log in either order.
    let now = after_grants(&log, &["W2"]).await;
    assert_eq!(now[2..], ["W2"], "R3 waits for W2: {now:?}");

    w2.send(()).unwrap();
    let now = after_grants(&log, &["R3"]).await;
    assert_eq!(now[2..], ["W2", "R3"], "{now:?}");
    r3.send(()).unwrap();
    let cleared = eventually(Duration::from_secs(3), || async {
        line_len(&node, NAME).await == 0
    })
    .await;
    assert!(cleared, "the line is empty once everyone was served");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_reader_is_admitted_past_a_queued_writer() {
    const NAME: &str = "rw-fair-no-pass";
    let node = node().await;
    let a = client_with(&node, TTL, fair()).await;
    let b = client_with(&node, TTL, fair()).await;
    let reading = a.rwlock(NAME).read().await.unwrap();
    let log = Granted::default();
    let writer = waiter(&node, &b, NAME, "W", 1, &log).await;

    // Readers share the lock, but not with a writer waiting in line before them.
    assert!(matches!(
        b.rwlock(NAME).try_read().await,
        Err(Error::WouldBlock { .. })
    ));
    let late = b.rwlock(NAME).read_within(Duration::from_millis(300)).await;
    assert!(matches!(late, Err(Error::Timeout { .. })), "{late:?}");
    assert_eq!(
        line_len(&node, NAME).await,
        1,
        "the late reader left the line"
    );
    // Re-entry is not held back: its owner already holds the lock.
    let again = reading.reenter().await.unwrap();

    again.unlock().await.unwrap();
    reading.unlock().await.unwrap();
    assert_eq!(after_grants(&log, &["W"]).await, ["W"]);
    writer.send(()).unwrap();
}

/// A writer that crashed while at the head of the line is handed the lock (its entry was
/// live), which it holds no longer than that entry would have lived; the reader behind it
/// gets the lock then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_writer_at_the_head_blocks_no_longer_than_its_entry() {
    const NAME: &str = "rw-fair-crashed-head";
    let node = node().await;
    let keys = LockKeys::rwlock(NAME).unwrap();
    let a = client_with(&node, TTL, fair()).await;
    let held = a.rwlock(NAME).write().await.unwrap();
    // A writer of a client that is gone: its entry lives 400 ms of server time.
    let time: (String, String) = query(&node, &redis::cmd("TIME")).await;
    let now_ms = time.0.parse::<u64>().unwrap() * 1000 + time.1.parse::<u64>().unwrap() / 1000;
    let crashed = format!("00000000000000ab:{}:a:1", "c".repeat(32));
    let entry = format!("{} 30000 1 w", now_ms + 400);
    let _: i64 = query(&node, redis::cmd("RPUSH").arg(&keys.queue).arg(&crashed)).await;
    let _: i64 = query(
        &node,
        redis::cmd("HSET")
            .arg(&keys.waiters)
            .arg(&crashed)
            .arg(entry),
    )
    .await;
    let log = Granted::default();
    let reader = waiter(&node, &a, NAME, "R", 2, &log).await;

    held.unlock().await.unwrap();
    let handed: Option<String> = query(
        &node,
        redis::cmd("HGET")
            .arg(&keys.lock)
            .arg(format!("#{crashed}")),
    )
    .await;
    let lease_ms: i64 = query(&node, redis::cmd("PTTL").arg(&keys.lock)).await;
    assert!(
        handed.is_some(),
        "the crashed writer at the head was handed the lock"
    );
    assert!(
        (1..=400).contains(&lease_ms),
        "its lease is cut to its entry: {lease_ms} ms"
    );
    assert!(granted(&log).is_empty(), "the reader waits behind it");
    assert_eq!(after_grants(&log, &["R"]).await, ["R"]);
    reader.send(()).unwrap();
}

/// FairQueue is the read-write lock's default, on a client with no strategy of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_queue_is_the_default() {
    const NAME: &str = "rw-fair-default";
    let node = node().await;
    let client = Client::connect(&node.url()).await.unwrap();
    let held = client.rwlock(NAME).write().await.unwrap();
    let log = Granted::default();
    let writer = waiter(&node, &client, NAME, "W", 1, &log).await;
    held.unlock().await.unwrap();
    assert_eq!(after_grants(&log, &["W"]).await, ["W"]);
    writer.send(()).unwrap();
}

/// A fair writer that gives up while readers hold the lock hands it to the readers queued
/// behind it: its entry leaving the line frees them, so they are granted at once by that
/// departure, not at their own next entry refresh (a third of the entry timeout later).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_giving_up_hands_the_lock_to_the_readers_behind_it() {
    const NAME: &str = "rw-fair-give-up";
    // A long entry timeout: the reader's own refresh comes 5 s / 3 after it queued, far
    // later than the hand-off this test waits for.
    let slow = WaitStrategy::FairQueue {
        entry_timeout: Duration::from_secs(5),
    };
    let node = node().await;
    let a = client_with(&node, TTL, slow).await;
    let b = client_with(&node, TTL, slow).await;
    let c = client_with(&node, TTL, slow).await;
    let reading = a.rwlock(NAME).read().await.unwrap();
    let writer = tokio::spawn({
        let lock = b.rwlock(NAME);
        async move { lock.write_within(Duration::from_millis(400)).await }
    });
    assert!(
        eventually(Duration::from_secs(3), || async {
            line_len(&node, NAME).await == 1
        })
        .await,
        "the writer never stood in the line"
    );
    let log = Granted::default();
    let reader = waiter(&node, &c, NAME, "R", 2, &log).await;
    let gave_up = writer.await.unwrap();
    assert!(matches!(gave_up, Err(Error::Timeout { .. })), "{gave_up:?}");
    let served = eventually(Duration::from_millis(800), || async {
        granted(&log) == ["R"]
    })
    .await;
    assert!(
        served,
        "the reader behind the writer that gave up was not handed the lock while the first \
         reader still holds it: {:?}",
        granted(&log)
    );
    assert_eq!(line_len(&node, NAME).await, 0, "the line is empty");
    reader.send(()).unwrap();
    reading.unlock().await.unwrap();
}
