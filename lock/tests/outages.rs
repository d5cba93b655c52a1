//! Outages, slow replies and refusals against a real Redis node: unlock stays cancellation-
//! safe and bounded, the watchdog renews a lease born short, a refused attempt (`BUSY`,
//! `NOREPLICAS`) is retried, `WAIT` blocks no other lock, and a failed script leaves no lock
//! behind (nor a hand-off half done).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use leasehold::{Error, Guard, LockKeys, RedisBackend, UNLOCK_WAIT, WaitStrategy};
use leasehold_harness::SingleNode;

use common::faulty::Faulty;
use common::scripts::Hold;
use common::{client_with, exists, gone_within, hold_count, node, pttl, query};

/// The mutex `name` held (lease `ttl`, no watchdog) through a faulty backend that then goes
/// down: every command fails until `down` is switched off again.
async fn held_into_an_outage(node: &SingleNode, name: &str, ttl: Duration) -> (Arc<Faulty>, Guard) {
    let faulty = Faulty::connect(&node.url()).await;
    let guard = faulty.client(ttl, false).mutex(name).lock().await.unwrap();
    faulty.down.store(true, Ordering::SeqCst);
    (faulty, guard)
}

/// An unlock cancelled while its release is being retried still releases: the guard's drop
/// hands the release to the background, which finishes once the server is reachable.
#[tokio::test]
async fn a_cancelled_unlock_still_releases() {
    let node = node().await;
    let keys = LockKeys::new("cancelled").unwrap();
    let (faulty, guard) = held_into_an_outage(&node, "cancelled", Duration::from_secs(20)).await;
    let cancelled = tokio::time::timeout(Duration::from_millis(300), guard.unlock()).await;
    assert!(cancelled.is_err(), "the unlock should still be retrying");
    faulty.down.store(false, Ordering::SeqCst);
    let released = gone_within(&node, &keys.lock, Duration::from_secs(5)).await;
    assert!(
        released,
        "nothing released the lock after the unlock was cancelled"
    );
}

/// During an outage `unlock` returns after about `UNLOCK_WAIT`, not the lease TTL, with
/// `Ambiguous`; the release goes on in the background and lands once the server is back.
#[tokio::test]
async fn unlock_during_an_outage_is_bounded_and_finishes_in_the_background() {
    let node = node().await;
    let keys = LockKeys::new("outage").unwrap();
    let (faulty, guard) = held_into_an_outage(&node, "outage", Duration::from_secs(60)).await;
    let bound = UNLOCK_WAIT * 3;
    let unlocked = tokio::time::timeout(bound, guard.unlock()).await;
    let outcome = unlocked.expect("unlock blocked past its bound during the outage");
    assert!(
        matches!(
            outcome,
            Err(Error::Ambiguous {
                operation: "release",
                ..
            })
        ),
        "{outcome:?}"
    );
    assert!(
        exists(&node, &keys.lock).await,
        "the outage kept the release away"
    );
    faulty.down.store(false, Ordering::SeqCst);
    let released = gone_within(&node, &keys.lock, Duration::from_secs(5)).await;
    assert!(released, "the background release never landed");
}

/// A grant whose reply was slow is born with less validity than TTL/3: the watchdog must
/// renew it in time instead of declaring it lost.
#[tokio::test]
async fn the_watchdog_renews_a_lease_born_short() {
    let node = node().await;
    let faulty = Faulty::connect(&node.url()).await;
    let ttl = Duration::from_millis(1_000);
    let client = faulty.client(ttl, true);
    faulty.slow_acquire_ms.store(750, Ordering::SeqCst);
    let guard = client.mutex("short").lock().await.unwrap();
    let born = guard.remaining();
    assert!(
        born < ttl / 3,
        "the lease should be born short, was {born:?}"
    );
    tokio::time::sleep(ttl).await;
    assert!(!guard.is_lost(), "the watchdog let a renewable lease go");
    guard.unlock().await.unwrap();
}

/// `BUSY` (a long script runs) refuses a command without running it: a waiting acquire
/// retries instead of failing.
#[tokio::test]
async fn a_busy_server_delays_an_acquire_instead_of_failing_it() {
    let node = node().await;
    let _: () = query(
        &node,
        redis::cmd("CONFIG")
            .arg("SET")
            .arg("busy-reply-threshold")
            .arg(50),
    )
    .await;
    let client = common::client(&node).await;
    let mut busy = node.node().connection().await.unwrap();
    let spin = tokio::spawn(async move {
        // Busy for 600 ms of server time; other clients get BUSY after 50 ms.
        let script = "local t0 = redis.call('TIME') local s = tonumber(t0[1]) * 1000000 + tonumber(t0[2]) \
                      while true do local t = redis.call('TIME') \
                      if tonumber(t[1]) * 1000000 + tonumber(t[2]) - s > 600000 then return 1 end end";
        let _: i64 = redis::cmd("EVAL")
            .arg(script)
            .arg(0)
            .query_async(&mut busy)
            .await
            .unwrap();
    });
    tokio::time::sleep(Duration::from_millis(150)).await;
    let guard = client
        .mutex("busy")
        .lock_within(Duration::from_secs(10))
        .await;
    spin.await.unwrap();
    let guard = guard.expect("a BUSY reply aborted the acquire");
    guard.unlock().await.unwrap();
}

/// A master under `min-replicas-to-write` with too few replicas acknowledging refuses every
/// write (`NOREPLICAS`) without running it, for as long as its replicas lag: a waiting
/// acquire waits it out, a try says why it failed, and an unlock refused meanwhile goes on
/// in the background and lands once the master takes writes again.
#[tokio::test]
async fn a_master_short_of_replicas_delays_an_acquire_instead_of_failing_it() {
    let node = node().await;
    let keys = LockKeys::new("short-of-replicas").unwrap();
    let min_replicas = |n: u32| {
        let mut cmd = redis::cmd("CONFIG");
        cmd.arg("SET").arg("min-replicas-to-write").arg(n);
        cmd
    };
    let _: () = query(&node, &min_replicas(1)).await;
    let client = common::client(&node).await;
    let tried = client.mutex("short-of-replicas").try_lock().await;
    assert!(
        matches!(&tried, Err(Error::Backend { source, .. }) if source.code() == Some("NOREPLICAS")),
        "{tried:?}"
    );
    let mutex = client.mutex("short-of-replicas");
    let waiting = tokio::spawn(async move { mutex.lock_within(Duration::from_secs(10)).await });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !waiting.is_finished(),
        "the acquire ended while the master refused writes: {:?}",
        waiting.await
    );
    let _: () = query(&node, &min_replicas(0)).await;
    let guard = waiting
        .await
        .unwrap()
        .expect("a NOREPLICAS reply aborted the acquire");
    let _: () = query(&node, &min_replicas(1)).await;
    let unlocked = guard.unlock().await;
    assert!(
        matches!(
            unlocked,
            Err(Error::Ambiguous {
                operation: "release",
                ..
            })
        ),
        "{unlocked:?}"
    );
    assert!(exists(&node, &keys.lock).await, "the refused release ran");
    let _: () = query(&node, &min_replicas(0)).await;
    let released = gone_within(&node, &keys.lock, Duration::from_secs(5)).await;
    assert!(released, "the background release never landed");
}

/// `WAIT` runs on a connection of its own: while one acquire waits for a replica that does
/// not exist, another lock's watchdog keeps renewing over the shared connection.
#[tokio::test]
async fn wait_replicas_does_not_block_other_locks() {
    let node = node().await;
    let client = client_with(&node, Duration::from_millis(600), WaitStrategy::default()).await;
    let held = client.mutex("renewing").lock().await.unwrap();
    let waiting = client
        .mutex("replicated")
        .ttl(Duration::from_secs(10))
        .wait_replicas(1, Duration::from_millis(1_500));
    let replicated = waiting.lock().await.unwrap();
    assert_eq!(replicated.replicas_acked(), Some(0), "no replica exists");
    assert!(
        !held.is_lost(),
        "a WAIT on the shared connection starved another lock's renewals"
    );
    replicated.unlock().await.unwrap();
    held.unlock().await.unwrap();
}

/// A script that fails on a wrong-type key fails before writing the lock: nothing is left
/// for a background release to clean.
#[tokio::test]
async fn a_wrong_type_queue_key_leaves_no_lock() {
    let node = node().await;
    let keys = LockKeys::new("wrongtype").unwrap();
    // The queue key: with no lock and no queue the acquire takes the fast path and reads
    // no queue key at all, so it is the queue whose type must be wrong.
    let _: () = query(&node, redis::cmd("SET").arg(&keys.queue).arg("x")).await;
    let raw = RedisBackend::connect(&node.url()).await.unwrap();
    let hold = Hold::new("a", "o");
    let (ttl, entry) = (Duration::from_secs(10), Duration::from_secs(1));
    let failed = common::scripts::acquire(&raw, &keys, &hold, ttl, entry).await;
    assert!(failed.is_err(), "{failed:?}");
    assert!(
        !exists(&node, &keys.lock).await,
        "a failed acquire left a lock"
    );
    // The same through the client: a waiting fair acquire touches the queue keys.
    let client = common::client(&node).await;
    let err = client
        .mutex("wrongtype")
        .wait(WaitStrategy::fair_queue())
        .lock_within(Duration::from_secs(1))
        .await;
    assert!(matches!(err, Err(Error::WrongType { .. })), "{err:?}");
    assert!(
        pttl(&node, &keys.lock).await < 0,
        "the client's attempt left a lock"
    );
}

/// Issue 34, defect 6: a release that hands the lock off reads every key that can fail
/// (WRONGTYPE) before its first write. A foreign value under the fence key, the queue or the
/// waiters hash used to fail it after it had deleted the lock and popped the head (or, for
/// the queue, deleted the lock): the error came with the lock gone and the line broken.
/// Now the holder still holds, the line is as it was, and once the foreign value is gone
/// the same release hands off as usual.
#[tokio::test]
async fn a_wrong_type_key_fails_a_hand_off_before_any_write() {
    let node = node().await;
    let raw = RedisBackend::connect(&node.url()).await.unwrap();
    let (ttl, entry) = (Duration::from_secs(20), Duration::from_secs(20));
    for foreign in ["fence", "queue", "waiters"] {
        let name = format!("wrongtype-{foreign}");
        let keys = LockKeys::new(&name).unwrap();
        let (holder, head) = (Hold::new("a", "holder"), Hold::new("b", "head"));
        common::scripts::acquire(&raw, &keys, &holder, ttl, entry)
            .await
            .unwrap();
        // The head queues behind the holder: the lock becomes a hash with its '~q' flag, so
        // the release hands off.
        common::scripts::acquire(&raw, &keys, &head, ttl, entry)
            .await
            .unwrap();
        let line = || async {
            let cmd = redis::cmd("LRANGE").arg(&keys.queue).arg(0).arg(-1).clone();
            query::<Vec<String>>(&node, &cmd).await
        };
        assert_eq!(line().await, [head.id.as_str()], "the head never queued");
        let key = match foreign {
            "fence" => &keys.fence,
            "queue" => &keys.queue,
            _ => &keys.waiters,
        };
        let dump: Vec<u8> = query(&node, redis::cmd("DUMP").arg(key)).await;
        let _: () = query(&node, redis::cmd("DEL").arg(key)).await;
        let _: () = query(&node, redis::cmd("SADD").arg(key).arg("foreign")).await;
        let failed = common::scripts::release(&raw, &keys, &holder).await;
        let err = failed.expect_err("a hand-off over a foreign key");
        assert_eq!(err.code(), Some("WRONGTYPE"), "{foreign}: {err}");
        assert_eq!(
            hold_count(&node, &keys, &holder.owner).await,
            Some(1),
            "{foreign}: the failed release took the lock from its holder"
        );
        if foreign != "queue" {
            assert_eq!(
                line().await,
                [head.id.as_str()],
                "{foreign}: the failed release moved the line"
            );
        }
        // The foreign value goes and the key comes back as it was.
        let _: () = query(&node, redis::cmd("DEL").arg(key)).await;
        let restore = redis::cmd("RESTORE").arg(key).arg(0).arg(dump).clone();
        let _: () = query(&node, &restore).await;
        let released = common::scripts::release(&raw, &keys, &holder)
            .await
            .unwrap();
        assert_eq!(released, redis::Value::Int(0), "{foreign}");
        assert_eq!(
            hold_count(&node, &keys, &head.owner).await,
            Some(1),
            "{foreign}: the release did not hand the lock to the head"
        );
    }
}

/// A guard dropped after its runtime shut down cannot release; as documented, the lock
/// then ends with its lease (no panic, no hang).
#[test]
fn a_guard_dropped_after_runtime_shutdown_expires_with_its_lease() {
    let setup = tokio::runtime::Runtime::new().unwrap();
    let node = setup.block_on(node());
    let keys = LockKeys::new("orphan").unwrap();
    let ttl = Duration::from_millis(800);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let guard = runtime.block_on(async {
        let client = client_with(&node, ttl, WaitStrategy::default()).await;
        client.mutex("orphan").lock().await.unwrap()
    });
    drop(runtime);
    drop(guard);
    setup.block_on(async move {
        assert!(exists(&node, &keys.lock).await, "nothing could release it");
        let gone = gone_within(&node, &keys.lock, ttl * 3).await;
        assert!(gone, "the lock outlived its lease");
        // The container goes away inside the runtime that started it.
        drop(node);
    });
}
