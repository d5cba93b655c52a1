//! Re-entry and fair hand-off against a real Redis node: no hold of an owner can shorten the
//! lease another of its holds trusts, each hold ends with its own lease (a sibling whose
//! release was lost keeps nothing alive), and a hand-off is a grant to the waiter's owner.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use leasehold::backend::Backend;
use leasehold::script::scripts;
use leasehold::{Client, Error, Guard, LockKeys, RedisBackend};
use leasehold_harness::SingleNode;
use redis::Value;

use common::scripts::Hold;
use common::{node, pttl};

const LONG: Duration = Duration::from_secs(30);
const SHORT: Duration = Duration::from_secs(1);

async fn client(node: &SingleNode) -> Client {
    Client::builder()
        .watchdog(false)
        .connect(&node.url())
        .await
        .unwrap()
}

/// Two holds of the owner `owner` on the mutex `name` (whose keys come first): the outer
/// one leasing [`LONG`], then a re-entry leasing [`SHORT`].
async fn long_then_short(client: &Client, name: &str, owner: &str) -> (LockKeys, Guard, Guard) {
    let mutex = client.mutex(name).owner(owner);
    let outer = mutex.clone().ttl(LONG).lock().await.unwrap();
    let inner = mutex.ttl(SHORT).lock().await.unwrap();
    (LockKeys::new(name).unwrap(), outer, inner)
}

/// A second handle of the same owner with a 1 s TTL re-enters a 30 s hold, then unlocks:
/// the key must still live ~30 s, and a foreign owner must not get the lock meanwhile.
#[tokio::test]
async fn a_shorter_ttl_reentry_never_shortens_the_lease() {
    let node = node().await;
    let a = client(&node).await;
    let (keys, outer, inner) = long_then_short(&a, "job", "job").await;
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
    let a = client(&node).await;
    let (keys, outer, inner) = long_then_short(&a, "renewed", "o").await;
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
/// holds of one owner, queue; P's release grants the lock to W outright, in a new epoch
/// with a new token. From then on W's owner holds it: H3 re-enters W's epoch with W's
/// token (never P's), and W's own attempt (a lost message) finds the grant already its.
#[tokio::test]
async fn a_hand_off_grants_a_new_epoch_that_the_owner_re_enters() {
    let node = node().await;
    let script = Scripts::connect(&node, "handoff").await;
    let [p, w, h3] = contenders();
    let p_token = script.acquire(&p).await.expect("P holds");
    assert_eq!(script.acquire(&w).await, None, "W queues");
    assert_eq!(script.acquire(&h3).await, None, "H3 queues");
    assert_eq!(script.release(&p).await, 0, "P released and handed over");
    let fence: String = common::query(&node, redis::cmd("GET").arg(&script.keys.fence)).await;
    let w_token: u64 = fence.parse().unwrap();
    assert!(w_token > p_token, "a hand-off starts a new epoch");

    assert_eq!(
        script.acquire(&h3).await,
        Some(w_token),
        "H3 re-enters W's epoch"
    );
    assert_eq!(script.acquire(&w).await, Some(w_token), "W's grant stands");
    assert_eq!(script.release(&h3).await, 1, "W's hold remains");
    assert_eq!(script.release(&w).await, 0);
    assert_eq!(pttl(&node, &script.keys.lock).await, -2, "free");
}

/// A waiter that dies right after its hand-off blocks the line for at most its entry
/// timeout (the grant's lease is cut to the entry's deadline), not for its 30 s lease,
/// whatever another hold of its owner does meanwhile.
#[tokio::test]
async fn a_hand_off_to_a_dead_waiter_lives_at_most_its_entry() {
    let node = node().await;
    let script = Scripts::connect(&node, "stall").await;
    let [p, w, h3] = contenders();
    script.acquire(&p).await.expect("P holds");
    script.acquire(&w).await;
    script.acquire(&h3).await;
    script.release(&p).await;
    let left = pttl(&node, &script.keys.lock).await;
    let entry_ms = ENTRY.as_millis() as i64;
    assert!(
        (1..=entry_ms).contains(&left),
        "the handed lock lives {left} ms, beyond W's {entry_ms} ms entry timeout"
    );
    assert!(script.acquire(&h3).await.is_some(), "H3 re-enters");
    assert_eq!(script.release(&h3).await, 1, "W's hold remains");
    let left = pttl(&node, &script.keys.lock).await;
    assert!(
        (1..=entry_ms).contains(&left),
        "after H3's 30 s hold left, the lock lives {left} ms, past W's own lease"
    );
}

/// Loses the release of `inner`, a hold leasing [`SHORT`] (`mem::forget` skips it: a
/// release lost on the way, with no retry left), and waits until its lease has ended.
async fn lose_and_outlive<G>(inner: G) {
    std::mem::forget(inner);
    tokio::time::sleep(SHORT + Duration::from_millis(200)).await;
}

/// The owner `job` holds the lock twice, for 30 s and for 1 s, and the 1 s hold's release
/// is lost. Once that hold's own lease has ended, it must not keep the owner's epoch alive:
/// releasing the 30 s hold frees the lock, and the next holder gets a new token.
#[tokio::test]
async fn a_sibling_whose_release_was_lost_ends_with_its_own_lease() {
    let node = node().await;
    let a = client(&node).await;
    let (keys, outer, inner) = long_then_short(&a, "lost", "job").await;
    lose_and_outlive(inner).await;
    let token = outer.fencing_token();
    outer.unlock().await.unwrap();
    assert_eq!(
        pttl(&node, &keys.lock).await,
        -2,
        "the lost sibling's hold outlived its lease and kept the lock"
    );
    let next = a.mutex("lost").owner("job").try_lock().await.unwrap();
    assert!(
        next.fencing_token() > token,
        "the owner's next hold re-entered the ended epoch"
    );
    next.unlock().await.unwrap();
}

/// As above, but the owner re-enters while its 30 s hold is still live: the re-entry joins
/// that epoch (same token) and drops the ended sibling, so once the two live holds are
/// released the lock is free.
#[tokio::test]
async fn a_re_entry_drops_a_sibling_whose_lease_ended() {
    let node = node().await;
    let a = client(&node).await;
    let (keys, outer, inner) = long_then_short(&a, "dropped", "job").await;
    lose_and_outlive(inner).await;
    let again = a.mutex("dropped").owner("job").lock().await.unwrap();
    assert_eq!(again.fencing_token(), outer.fencing_token(), "same epoch");
    let count = common::hold_count(&node, &keys, outer.owner().as_str()).await;
    assert_eq!(count, Some(2), "the ended sibling still counts");
    again.unlock().await.unwrap();
    outer.unlock().await.unwrap();
    assert_eq!(pttl(&node, &keys.lock).await, -2, "the lock is free");
}

/// The same for the read-write lock's write holds.
#[tokio::test]
async fn a_write_sibling_whose_release_was_lost_ends_with_its_own_lease() {
    let node = node().await;
    let a = client(&node).await;
    let outer = a
        .rwlock("draft")
        .owner("w")
        .ttl(LONG)
        .write()
        .await
        .unwrap();
    let inner = a
        .rwlock("draft")
        .owner("w")
        .ttl(SHORT)
        .write()
        .await
        .unwrap();
    lose_and_outlive(inner).await;
    let token = outer.fencing_token();
    outer.unlock().await.unwrap();
    let next = client(&node).await.rwlock("draft").try_write().await;
    assert!(
        next.as_ref().is_ok_and(|next| next.fencing_token() > token),
        "the lost write sibling kept the write lock: {next:?}"
    );
}

/// A hold whose own lease ended cannot be renewed, and its release says it was not held,
/// even while a sibling of its owner keeps the lock key alive: its client stopped trusting
/// it, and the scripts drop it.
#[tokio::test]
async fn a_hold_past_its_lease_cannot_be_renewed() {
    let node = node().await;
    let script = Scripts::connect(&node, "renew").await;
    let [_, w, h3] = contenders();
    script.acquire(&w).await.expect("W holds");
    script
        .acquire_for(&h3, Duration::from_millis(300))
        .await
        .expect("H3 re-enters");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(pttl(&node, &script.keys.lock).await > 25_000, "W keeps it");
    assert!(!script.renew(&h3).await, "H3 renewed past its lease");
    assert!(script.renew(&w).await, "W's hold is live");
    assert_eq!(
        script.release(&h3).await,
        -1,
        "H3's release: its lease had ended"
    );
    assert_eq!(script.release(&w).await, 0, "W was the last live hold");
}

/// The fair-queue entry timeout of the hand-driven attempts.
const ENTRY: Duration = Duration::from_secs(2);

/// P, of its own owner, then W and H3: two holds of the owner `job`.
fn contenders() -> [Hold; 3] {
    [
        Hold::new("1", "p"),
        Hold::new("2", "job"),
        Hold::new("3", "job"),
    ]
}

/// The mutex scripts on one lock, called directly.
struct Scripts {
    raw: RedisBackend,
    keys: LockKeys,
}

impl Scripts {
    async fn connect(node: &SingleNode, name: &str) -> Self {
        Self {
            raw: RedisBackend::connect(&node.url()).await.unwrap(),
            keys: LockKeys::new(name).unwrap(),
        }
    }

    /// A fair-mode attempt leasing [`LONG`]: `Some(token)` when granted, `None` when it
    /// waits in line.
    async fn acquire(&self, hold: &Hold) -> Option<u64> {
        self.acquire_for(hold, LONG).await
    }

    /// As [`Scripts::acquire`], leasing `ttl`.
    async fn acquire_for(&self, hold: &Hold, ttl: Duration) -> Option<u64> {
        let reply = common::scripts::acquire(&self.raw, &self.keys, hold, ttl, ENTRY)
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

    /// Renews `hold` for [`LONG`]: whether the server still had it.
    async fn renew(&self, hold: &Hold) -> bool {
        let k = &self.keys;
        let args = [
            hold.id.clone(),
            LONG.as_millis().to_string(),
            leasehold::DEFAULT_FENCE_MARGIN.as_millis().to_string(),
        ];
        let backend: &dyn Backend = &self.raw;
        let reply = scripts()
            .renew
            .run(backend, &[&k.lock, &k.fence], &args)
            .await
            .unwrap();
        redis::from_redis_value::<i64>(reply).unwrap() == 1
    }

    async fn release(&self, hold: &Hold) -> i64 {
        let k = &self.keys;
        let args = [
            hold.id.clone(),
            hold.owner.clone(),
            k.released.clone(),
            leasehold::KEY_PREFIX.to_owned() + ":inbox:",
            leasehold::DEFAULT_FENCE_MARGIN.as_millis().to_string(),
        ];
        let backend: &dyn Backend = &self.raw;
        let reply = scripts()
            .release
            .run(backend, &[&k.lock, &k.queue, &k.waiters, &k.fence], &args)
            .await
            .unwrap();
        redis::from_redis_value(reply).unwrap()
    }
}
