//! The fair queue against a real Redis node: FIFO hand-off, dead waiters (behind a holder
//! and at the head of a free lock), giving up, and a waiter that cannot subscribe.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasehold::{
    DEFAULT_QUEUE_ENTRY_TIMEOUT, DEFAULT_TTL, LockKeys, QUEUE_REFRESHES_PER_TIMEOUT, RedisBackend,
    WaitStrategy,
};
use redis::Value;
use tokio::time::Instant;

use common::faulty::Faulty;
use common::scripts::Hold;
use common::tasks::join_all;
use common::{client_with, eventually, exists, gone_within, lock_unrenewed, node, query};

const ENTRY: Duration = Duration::from_millis(600);

fn fair() -> WaitStrategy {
    WaitStrategy::FairQueue {
        entry_timeout: ENTRY,
    }
}

async fn queue_len(node: &leasehold_harness::SingleNode, keys: &LockKeys) -> i64 {
    query(node, redis::cmd("LLEN").arg(&keys.queue)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_get_the_lock_in_arrival_order() {
    let node = node().await;
    let keys = LockKeys::new("fifo").unwrap();
    let mut clients = Vec::new();
    for _ in 0..3 {
        clients.push(client_with(&node, DEFAULT_TTL, fair()).await);
    }
    let held = clients[0].mutex("fifo").lock().await.unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..6usize {
        let mutex = clients[i % clients.len()].mutex("fifo");
        let order = Arc::clone(&order);
        tasks.push(tokio::spawn(async move {
            let guard = mutex.lock().await.unwrap();
            order.lock().unwrap().push((i, guard.fencing_token()));
            tokio::time::sleep(Duration::from_millis(5)).await;
            guard.unlock().await.unwrap();
        }));
        // Start the next waiter only once this one is queued.
        let queued = eventually(Duration::from_secs(2), || async {
            queue_len(&node, &keys).await == i as i64 + 1
        })
        .await;
        assert!(queued, "waiter {i} never queued");
    }
    held.unlock().await.unwrap();
    join_all(tasks).await;
    let order = order.lock().unwrap().clone();
    let indices: Vec<usize> = order.iter().map(|(i, _)| *i).collect();
    assert_eq!(indices, (0..6).collect::<Vec<_>>());
    assert!(order.windows(2).all(|w| w[0].1 < w[1].1), "tokens grow");
    assert!(!exists(&node, &keys.queue).await);
    assert!(!exists(&node, &keys.waiters).await);
}

/// Scenario 8 (dead-waiter): a waiter that queued and then crashed (never refreshes, never
/// claims) delays the next waiter by at most its entry timeout, not by a lease TTL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_waiter_stalls_the_queue_at_most_its_entry_timeout() {
    let node = node().await;
    let keys = LockKeys::new("dead").unwrap();
    let client = client_with(&node, Duration::from_secs(20), fair()).await;
    let held = client.mutex("dead").lock().await.unwrap();
    // The crashed waiter: queued by the real acquire script, then silent forever.
    let raw = RedisBackend::connect(&node.url()).await.unwrap();
    let crashed = Hold::new("f", "crashed");
    common::scripts::acquire(&raw, &keys, &crashed, Duration::from_secs(20), ENTRY)
        .await
        .unwrap();
    assert_eq!(queue_len(&node, &keys).await, 1);
    let mutex = client.mutex("dead");
    let live = tokio::spawn(async move {
        let guard = mutex.lock().await.unwrap();
        let at = Instant::now();
        guard.unlock().await.unwrap();
        at
    });
    assert!(
        eventually(Duration::from_secs(2), || async {
            queue_len(&node, &keys).await == 2
        })
        .await
    );
    // Release while the dead entry is still live: the lock is handed to the dead waiter.
    let released = Instant::now();
    held.unlock().await.unwrap();
    let acquired = live.await.unwrap();
    let stall = acquired - released;
    eprintln!("dead waiter stalled the queue for {stall:?}");
    assert!(
        stall <= ENTRY + Duration::from_millis(400),
        "stalled {stall:?}"
    );
}

/// The lease of the holder in the dead-head tests: short, so the lock is soon free while the
/// crashed waiter still heads the line.
const SHORT_LEASE: Duration = Duration::from_millis(300);

/// The crashed head's entry timeout in the dead-head tests (the transcript).
const DEAD_ENTRY: Duration = Duration::from_secs(3);

/// Issue 34, defect 4, at the script: a free lock whose line is headed by a live entry (here
/// a waiter that crashed) answers a later waiter with the head's remaining entry time, by
/// which the head has taken the lock or its entry is gone. It used to answer -2 (the PTTL
/// of the absent lock key), and the waiter slept a whole queue refresh.
#[tokio::test]
async fn a_free_lock_behind_a_live_head_answers_the_heads_remaining_entry_time() {
    let node = node().await;
    let keys = LockKeys::new("headtime").unwrap();
    let (raw, (sent, replied)) = holder_and_dead_head(&node, &keys).await;
    let apart = replied - sent;
    assert_eq!(
        queue_len(&node, &keys).await,
        1,
        "the dead waiter never queued"
    );
    assert!(
        gone_within(&node, &keys.lock, Duration::from_secs(2)).await,
        "the holder's lease never ended"
    );
    let waiter = Hold::new("e", "waiter");
    let reply = common::scripts::acquire(&raw, &keys, &waiter, DEFAULT_TTL, ENTRY)
        .await
        .unwrap();
    let Value::Array(items) = &reply else {
        panic!("not an acquire reply: {reply:?}");
    };
    let left = match items.as_slice() {
        [Value::Int(0), Value::Int(ms)] => *ms,
        _ => panic!("not a busy reply: {reply:?}"),
    };
    // The head's entry ends at most `apart` after the holder's lease would have if both
    // had been taken at once: entry - lease + apart is all it can have left.
    let bound = i64::try_from((DEAD_ENTRY - SHORT_LEASE + apart).as_millis()).unwrap() + 1;
    assert!(
        (1..=bound).contains(&left),
        "a free lock behind a live head answered {left} ms (the head's entry has at most {bound} ms left)"
    );
}

/// A raw connection to `node`, on which a holder holds `keys`' lock for [`SHORT_LEASE`] and
/// a waiter that will never refresh (a crashed one) heads its line for [`DEAD_ENTRY`]; and
/// when the holder's script was sent and the dead head's answered: both scripts ran on the
/// server between the two (connecting comes before, however long it takes).
async fn holder_and_dead_head(
    node: &leasehold_harness::SingleNode,
    keys: &LockKeys,
) -> (RedisBackend, (Instant, Instant)) {
    let raw = RedisBackend::connect(&node.url()).await.unwrap();
    let sent = Instant::now();
    let holder = Hold::new("a", "holder");
    common::scripts::acquire(&raw, keys, &holder, SHORT_LEASE, DEAD_ENTRY)
        .await
        .unwrap();
    let dead = Hold::new("d", "dead");
    common::scripts::acquire(&raw, keys, &dead, DEFAULT_TTL, DEAD_ENTRY)
        .await
        .unwrap();
    (raw, (sent, Instant::now()))
}

/// Issue 34, defect 4 (the transcript): the holder's lease ends while a crashed
/// waiter heads the line. The live waiter behind it takes the lock soon after the dead
/// head's entry expires, not at its next queue refresh (here up to 2 s later: its
/// refreshes fall at about 0.3, 2.3 and 4.3 s, well clear of the head's expiry at 3 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_behind_a_dead_head_takes_the_free_lock_when_the_head_expires() {
    let live_entry = Duration::from_secs(6);
    let node = node().await;
    let keys = LockKeys::new("deadhead").unwrap();
    // The dead head's entry expires no earlier than its script's send, no later than its
    // answer, plus the entry.
    let (_raw, (sent, replied)) = holder_and_dead_head(&node, &keys).await;
    let (dead_expires, dead_expired) = (sent + DEAD_ENTRY, replied + DEAD_ENTRY);
    let fair = WaitStrategy::FairQueue {
        entry_timeout: live_entry,
    };
    let client = client_with(&node, DEFAULT_TTL, fair).await;
    let mutex = client.mutex("deadhead");
    let live = tokio::spawn(async move {
        let guard = mutex.lock_within(Duration::from_secs(10)).await;
        (guard, Instant::now())
    });
    let queued = eventually(Duration::from_secs(2), || async {
        queue_len(&node, &keys).await == 2
    })
    .await;
    assert!(queued, "the live waiter never queued behind the dead head");
    let (guard, acquired) = live.await.unwrap();
    let guard = guard.expect("the live waiter never got the lock");
    // Evidence that the dead head did hold the free lock back (the bound on a crash holds).
    let early = dead_expires.saturating_duration_since(acquired);
    assert!(
        early < Duration::from_millis(50),
        "the live waiter took the lock {early:?} before the dead head's entry expired"
    );
    let late = acquired.saturating_duration_since(dead_expired);
    let refresh = live_entry / QUEUE_REFRESHES_PER_TIMEOUT;
    eprintln!("the live waiter took the lock {late:?} after the dead head's entry expired");
    assert!(
        late < refresh / 4,
        "the live waiter took the lock {late:?} after the dead head's entry expired (a refresh is {refresh:?})"
    );
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn a_timed_out_waiter_leaves_the_queue() {
    let node = node().await;
    let keys = LockKeys::new("leave").unwrap();
    let client = client_with(&node, DEFAULT_TTL, fair()).await;
    let held = client.mutex("leave").lock().await.unwrap();
    let waited = client
        .mutex("leave")
        .lock_within(Duration::from_millis(150))
        .await;
    assert!(matches!(waited, Err(leasehold::Error::Timeout { .. })));
    assert_eq!(queue_len(&node, &keys).await, 0);
    assert!(!exists(&node, &keys.waiters).await);
    held.unlock().await.unwrap();
    assert!(
        !exists(&node, &keys.lock).await,
        "nobody to hand the lock to"
    );
}

/// A waiter whose subscription cannot be set up (a server restart closed it and the server
/// refuses for now) cannot hear the hand-off its release grants it. It polls at the spin
/// pace instead of once per queue refresh (1.7 s with the default 5 s entries), so it holds
/// the lock soon after the release, not a refresh later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_that_cannot_subscribe_finds_its_hand_off_by_polling() {
    let node = node().await;
    let keys = LockKeys::new("unsubscribed").unwrap();
    let holder = client_with(&node, DEFAULT_TTL, WaitStrategy::default()).await;
    let held = lock_unrenewed(&holder, "unsubscribed", Duration::from_secs(10)).await;
    let faulty = Faulty::connect(&node.url()).await;
    faulty.no_subscribe.store(true, Ordering::SeqCst);
    // The default strategy: FairQueue with the default entry timeout.
    let waiter = faulty.client(DEFAULT_TTL, true);
    let waiting = tokio::spawn(async move {
        let guard = waiter
            .mutex("unsubscribed")
            .lock_within(Duration::from_secs(5))
            .await;
        (guard, Instant::now())
    });
    let queued = eventually(Duration::from_secs(2), || async {
        queue_len(&node, &keys).await == 1
    })
    .await;
    assert!(queued, "the waiter never queued");
    let released = Instant::now();
    held.unlock().await.unwrap();
    let (guard, granted) = waiting.await.unwrap();
    let guard = guard.expect("the waiter never got the lock");
    let waited = granted - released;
    let refresh = DEFAULT_QUEUE_ENTRY_TIMEOUT / QUEUE_REFRESHES_PER_TIMEOUT;
    assert!(
        waited < refresh / 2,
        "the unsubscribed waiter took {waited:?} after the release to find its hand-off (a refresh is {refresh:?})"
    );
    guard.unlock().await.unwrap();
}

/// The two keys of a line part when a full node evicts one of them. A waiter's next
/// refresh puts its hold back in the list when only the list went (gated on the entries'
/// hash, it found its entry and never rejoined, so every release handed off past it), and
/// does not queue it twice when only the hash went.
#[tokio::test]
async fn a_refresh_puts_the_waiter_back_in_a_line_whose_keys_parted() {
    let node = node().await;
    let keys = LockKeys::new("parted").unwrap();
    let raw = RedisBackend::connect(&node.url()).await.unwrap();
    let holder = Hold::new("a", "holder");
    let waiter = Hold::new("b", "waiter");
    let entry = Duration::from_secs(30);
    common::scripts::acquire(&raw, &keys, &holder, DEFAULT_TTL, entry)
        .await
        .unwrap();
    // One attempt (a refresh) of the waiter, and the line after it.
    let refresh = || async {
        common::scripts::acquire(&raw, &keys, &waiter, DEFAULT_TTL, entry)
            .await
            .unwrap();
        let ids: Vec<String> =
            query(&node, redis::cmd("LRANGE").arg(&keys.queue).arg(0).arg(-1)).await;
        ids
    };
    for gone in [&keys.queue, &keys.waiters] {
        assert_eq!(
            refresh().await,
            vec![waiter.id.clone()],
            "the waiter never queued"
        );
        let deleted: i64 = query(&node, redis::cmd("DEL").arg(gone)).await;
        assert_eq!(deleted, 1, "{gone} was not there to evict");
        assert_eq!(
            refresh().await,
            vec![waiter.id.clone()],
            "after {gone} went, the waiter's refresh left the line without it or with it twice"
        );
    }
    let handed = || async {
        let held: i64 = query(
            &node,
            redis::cmd("HEXISTS")
                .arg(&keys.lock)
                .arg(format!("#{}", waiter.id)),
        )
        .await;
        held == 1
    };
    assert!(
        !handed().await,
        "the waiter holds the lock before its holder released it"
    );
    common::scripts::release(&raw, &keys, &holder)
        .await
        .unwrap();
    assert!(
        handed().await,
        "the release did not hand the lock to the waiter back in line"
    );
}
