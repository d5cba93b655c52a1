//! Re-entry and fair hand-off against a real Redis node: no hold of an owner can shorten the
//! lease another of its holds trusts, and re-entry joins only an epoch the owner holds.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use leasehold::backend::Backend;
use leasehold::script::scripts;
use leasehold::{Client, Error, LockKeys, RedisBackend};
use redis::Value;

use common::{node, pttl};

const LONG: Duration = Duration::from_secs(30);
const SHORT: Duration = Duration::from_secs(1);

async fn client(node: &leasehold_harness::SingleNode) -> Client {
    Client::builder()
        .watchdog(false)
        .connect(&node.url())
        .await
        .unwrap()
}

/// A second handle of the same owner with a 1 s TTL re-enters a 30 s hold, then unlocks:
/// the key must still live ~30 s, and a foreign owner must not get the lock meanwhile.
#[tokio::test]
async fn a_shorter_ttl_reentry_never_shortens_the_lease() {
    let node = node().await;
    let keys = LockKeys::new("job").unwrap();
    let a = client(&node).await;
    let outer = a.mutex("job").owner("job").ttl(LONG).lock().await.unwrap();
    let inner = a.mutex("job").owner("job").ttl(SHORT).lock().await.unwrap();
    assert_eq!(inner.fencing_token(), outer.fencing_token(), "same epoch");
    inner.unlock().await.unwrap();
    let left = pttl(&node, &keys.lock).await;
    assert!(left > 25_000, "the re-entry cut the lease to {left} ms");
    tokio::time::sleep(SHORT + Duration::from_millis(200)).await;
    let foreign = client(&node).await.mutex("job").try_lock().await;
    assert!(
        matches!(foreign, Err(Error::WouldBlock { .. })),
        "a foreign owner got the lock while the outer guard trusts its lease: {foreign:?}"
    );
    assert!(!outer.is_lost());
    outer.unlock().await.unwrap();
}

/// Renewing the short hold (watchdog or `extend`) must not shorten the long one either.
#[tokio::test]
async fn a_shorter_ttl_renewal_never_shortens_the_lease() {
    let node = node().await;
    let keys = LockKeys::new("renewed").unwrap();
    let a = client(&node).await;
    let outer = a
        .mutex("renewed")
        .owner("o")
        .ttl(LONG)
        .lock()
        .await
        .unwrap();
    let inner = a
        .mutex("renewed")
        .owner("o")
        .ttl(SHORT)
        .lock()
        .await
        .unwrap();
    inner.extend().await.unwrap();
    let left = pttl(&node, &keys.lock).await;
    assert!(left > 25_000, "the renewal cut the lease to {left} ms");
    inner.unlock().await.unwrap();
    outer.unlock().await.unwrap();
}

/// The same for the read-write lock's write hold.
#[tokio::test]
async fn a_shorter_ttl_write_reentry_never_shortens_the_lease() {
    let node = node().await;
    let a = client(&node).await;
    let outer = a.rwlock("doc").owner("w").ttl(LONG).write().await.unwrap();
    let inner = a.rwlock("doc").owner("w").ttl(SHORT).write().await.unwrap();
    inner.unlock().await.unwrap();
    tokio::time::sleep(SHORT + Duration::from_millis(200)).await;
    let foreign = client(&node).await.rwlock("doc").try_write().await;
    assert!(
        matches!(foreign, Err(Error::WouldBlock { .. })),
        "a foreign writer got in: {foreign:?}"
    );
    outer.unlock().await.unwrap();
}

/// Drives the real scripts by hand so the interleaving is exact: P holds; W and H3, two
/// holds of one owner, queue; P's release hands the lock to W. H3's next attempt must not
/// re-enter the epoch W has not claimed (it would get P's token), and once W claims, its
/// token is new and H3 re-enters with it.
#[tokio::test]
async fn a_reentry_never_joins_a_pending_hand_off() {
    let node = node().await;
    let keys = LockKeys::new("handoff").unwrap();
    let raw = RedisBackend::connect(&node.url()).await.unwrap();
    let script = Scripts {
        raw: &raw,
        keys: &keys,
    };
    let p = Hold::new("1", "p");
    let w = Hold::new("2", "job");
    let h3 = Hold::new("3", "job");
    let p_token = script.acquire(&p).await.expect("P holds");
    assert_eq!(script.acquire(&w).await, None, "W queues");
    assert_eq!(script.acquire(&h3).await, None, "H3 queues");
    assert_eq!(script.release(&p).await, 0, "P released and handed over");

    let early = script.acquire(&h3).await;
    assert_eq!(
        early, None,
        "H3 re-entered an epoch its owner does not hold (P's token is {p_token})"
    );
    let w_token = script.acquire(&w).await.expect("W claims");
    assert!(w_token > p_token, "a claim starts a new epoch");
    assert_eq!(
        script.acquire(&h3).await,
        Some(w_token),
        "H3 re-enters W's epoch"
    );
    script.release(&h3).await;
    script.release(&w).await;
}

/// If the head never claims, the line stalls for at most the entry timeout, whatever
/// another hold of its owner does meanwhile.
#[tokio::test]
async fn an_unclaimed_hand_off_stalls_at_most_the_entry_timeout() {
    let node = node().await;
    let keys = LockKeys::new("stall").unwrap();
    let raw = RedisBackend::connect(&node.url()).await.unwrap();
    let script = Scripts {
        raw: &raw,
        keys: &keys,
    };
    let p = Hold::new("1", "p");
    let w = Hold::new("2", "job");
    let h3 = Hold::new("3", "job");
    script.acquire(&p).await.expect("P holds");
    script.acquire(&w).await;
    script.acquire(&h3).await;
    script.release(&p).await;
    script.acquire(&h3).await;
    assert_eq!(script.release(&h3).await, -1, "H3 never held");
    let left = pttl(&node, &keys.lock).await;
    assert!(
        (1..=ENTRY_MS).contains(&left),
        "an unclaimed hand-off lives {left} ms, beyond the {ENTRY_MS} ms entry timeout"
    );
}

const ENTRY_MS: i64 = 2_000;

/// The fence margin the scripts get (the default, 60 s).
const MARGIN_MS: &str = "60000";

/// A hold as the scripts see it: `<16 hex>:<32 hex client>:<owner>`.
struct Hold {
    id: String,
    owner: String,
}

impl Hold {
    fn new(hex: &str, owner: &str) -> Self {
        let owner = format!("{}:u:{owner}", "0".repeat(32));
        Self {
            id: format!("{}:{owner}", hex.repeat(16)),
            owner,
        }
    }
}

struct Scripts<'a> {
    raw: &'a RedisBackend,
    keys: &'a LockKeys,
}

impl Scripts<'_> {
    /// A fair-mode attempt: `Some(token)` when granted, `None` when it waits in line.
    async fn acquire(&self, hold: &Hold) -> Option<u64> {
        let k = self.keys;
        let args = [
            hold.id.clone(),
            hold.owner.clone(),
            LONG.as_millis().to_string(),
            ENTRY_MS.to_string(),
            MARGIN_MS.to_owned(),
        ];
        let backend: &dyn Backend = self.raw;
        let reply = scripts()
            .acquire
            .run(backend, &[&k.lock, &k.fence, &k.queue, &k.waiters], &args)
            .await
            .unwrap();
        match reply {
            Value::Array(items) => match items.as_slice() {
                [Value::Int(1), token] => Some(redis::from_redis_value(token.clone()).unwrap()),
                [Value::Int(0), _] => None,
                other => panic!("unexpected acquire reply {other:?}"),
            },
            other => panic!("unexpected acquire reply {other:?}"),
        }
    }

    async fn release(&self, hold: &Hold) -> i64 {
        let k = self.keys;
        let args = [
            hold.id.clone(),
            hold.owner.clone(),
            k.released.clone(),
            leasehold::KEY_PREFIX.to_owned() + ":inbox:",
            MARGIN_MS.to_owned(),
        ];
        let backend: &dyn Backend = self.raw;
        let reply = scripts()
            .release
            .run(backend, &[&k.lock, &k.queue, &k.waiters, &k.fence], &args)
            .await
            .unwrap();
        redis::from_redis_value(reply).unwrap()
    }
}
