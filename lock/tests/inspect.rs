//! Lock state from code (`Mutex::inspect`, `RwLock::inspect`, `Semaphore::inspect`) against a
//! real Redis node: an idle lock reads as free, a held one names its holder, token and lease
//! left, and a fair waiter shows in the queue.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use leasehold::inspect::Holding;

use common::{client, eventually, two_clients};

const TTL: Duration = Duration::from_secs(5);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_lock_reads_as_free_with_no_queue() {
    let node = common::node().await;
    let client = client(&node).await;
    let state = client.mutex("inspect-idle").inspect().await.unwrap();
    assert_eq!(state.holding, Holding::Free);
    assert_eq!(state.fencing_token(), None);
    assert_eq!(state.lease_left(), None);
    assert!(state.queue.is_empty());
    let sem = client.semaphore("inspect-idle", 2).inspect().await.unwrap();
    assert!(sem.permits.is_empty() && sem.queue.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_lock_names_holder_token_and_lease_left_and_its_queued_waiter() {
    let node = common::node().await;
    let (a, b) = two_clients(&node).await;
    let guard = a.mutex("inspect-held").ttl(TTL).lock().await.unwrap();
    let state = a.mutex("inspect-held").inspect().await.unwrap();
    let Holding::Held(holders) = &state.holding else {
        panic!("not held: {state:?}");
    };
    assert_eq!(holders.len(), 1, "{state:?}");
    assert_eq!(holders[0].owner, guard.owner().as_str());
    assert_eq!(holders[0].holds[0].hold, guard.hold_id().as_str());
    let left = holders[0].holds[0].left.unwrap();
    assert!(left <= TTL && left > Duration::ZERO, "{left:?}");
    assert!(state.lease_left().unwrap() <= TTL);
    assert_eq!(state.fencing_token(), Some(guard.fencing_token()));
    assert!(state.queue.is_empty());

    let waiter = tokio::spawn(async move { b.mutex("inspect-held").lock().await });
    let mutex = a.mutex("inspect-held");
    let queued = eventually(Duration::from_secs(5), || async {
        mutex.inspect().await.unwrap().queue.len() == 1
    })
    .await;
    assert!(queued, "the waiter never showed in the queue");
    let entry = &mutex.inspect().await.unwrap().queue[0];
    assert!(
        entry.left.is_some_and(|left| left > Duration::ZERO),
        "{entry:?}"
    );
    guard.unlock().await.unwrap();
    let next = waiter.await.unwrap().unwrap();
    let state = mutex.inspect().await.unwrap();
    assert!(state.queue.is_empty(), "{state:?}");
    assert_eq!(state.fencing_token(), Some(next.fencing_token()));
    next.unlock().await.unwrap();
}

/// The state is typed: the lease left is a `Duration` (no key or no expiry is `None`, not
/// Redis's −2/−1), the fence a `FencingToken`; a fence key holding something no script
/// wrote is a protocol error naming the lock, not a token dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_left_and_fence_are_typed_and_a_foreign_fence_is_refused() {
    let node = common::node().await;
    let client = client(&node).await;
    let guard = client.mutex("inspect-typed").ttl(TTL).lock().await.unwrap();
    let state = client.mutex("inspect-typed").inspect().await.unwrap();
    assert!(
        state
            .lease_left
            .is_some_and(|left| left > Duration::ZERO && left <= TTL),
        "{state:?}"
    );
    assert_eq!(state.fence, Some(guard.fencing_token()));
    guard.unlock().await.unwrap();

    let fence = leasehold::LockKeys::new("inspect-foreign").unwrap().fence;
    let _: () = common::query(&node, redis::cmd("SET").arg(&fence).arg("not-a-token")).await;
    let err = client.mutex("inspect-foreign").inspect().await.unwrap_err();
    assert!(matches!(err, leasehold::Error::Protocol { .. }), "{err:?}");
    assert!(err.to_string().contains("inspect-foreign"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_writers_and_permits_show_in_their_families() {
    let node = common::node().await;
    let client = client(&node).await;
    let rw = client.rwlock("inspect-rw");
    let write = rw.write().await.unwrap();
    let state = rw.inspect().await.unwrap();
    assert!(matches!(&state.writer, Holding::Held(h) if h[0].owner == write.owner().as_str()));
    assert_eq!(state.fencing_token(), Some(write.fencing_token()));
    let read = write.downgrade().await.unwrap();
    let state = rw.inspect().await.unwrap();
    assert_eq!(state.writer, Holding::Free);
    assert_eq!(state.readers.len(), 1);
    assert_eq!(state.readers[0].hold, read.hold_id().as_str());
    // A writer waiting in the fair line shows there, marked as a writer.
    let waiting = tokio::spawn({
        let rw = rw.clone();
        async move { rw.write().await.unwrap().unlock().await.unwrap() }
    });
    let queued = eventually(Duration::from_secs(3), || async {
        let line = rw.inspect().await.unwrap().queue;
        line.len() == 1 && line[0].wants_write
    })
    .await;
    assert!(queued, "the waiting writer never showed in the line");
    read.unlock().await.unwrap();
    waiting.await.unwrap();
    assert!(rw.inspect().await.unwrap().queue.is_empty());

    let semaphore = client.semaphore("inspect-sem", 2);
    let permit = semaphore.acquire().await.unwrap();
    let state = semaphore.inspect().await.unwrap();
    assert_eq!(state.permits.len(), 1);
    assert_eq!(state.permits[0].hold, permit.hold_id().as_str());
    permit.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_named_client_s_holders_and_waiters_carry_its_name() {
    let node = common::node().await;
    let named = leasehold::Client::builder()
        .name("billing@pod-7")
        .connect(&node.url())
        .await
        .unwrap();
    assert_eq!(named.name(), Some("billing@pod-7"));
    let guard = named.mutex("inspect-named").lock().await.unwrap();
    assert_eq!(guard.owner().client_name(), Some("billing@pod-7"));
    let other = named.mutex("inspect-named");
    let waiting = tokio::spawn(async move { other.lock().await });
    let mutex = named.mutex("inspect-named");
    let queued = eventually(Duration::from_secs(5), || async {
        mutex.inspect().await.unwrap().queue.len() == 1
    })
    .await;
    assert!(queued, "the waiter never showed in the queue");
    let state = mutex.inspect().await.unwrap();
    let Holding::Held(holders) = &state.holding else {
        panic!("not held: {state:?}");
    };
    assert_eq!(holders[0].client_name.as_deref(), Some("billing@pod-7"));
    assert_eq!(state.queue[0].client_name.as_deref(), Some("billing@pod-7"));
    let clients: String = common::query(&node, redis::cmd("CLIENT").arg("LIST")).await;
    assert!(clients.contains("name=billing@pod-7"), "{clients}");
    guard.unlock().await.unwrap();
    waiting.await.unwrap().unwrap().unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_client_name_is_a_typed_error_before_connecting() {
    for bad in [
        "",
        "two words",
        "a:b",
        &"n".repeat(leasehold::MAX_CLIENT_NAME_LEN + 1),
    ] {
        // Nothing listens on port 1: only the name check can answer first.
        let err = leasehold::Client::builder()
            .name(bad)
            .connect("redis://127.0.0.1:1")
            .await
            .unwrap_err();
        assert!(
            matches!(err, leasehold::Error::InvalidClientConfig { .. }),
            "{bad:?}: {err:?}"
        );
    }
}
