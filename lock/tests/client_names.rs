//! A named client's name in `CLIENT LIST` on a real Redis node: on the connection it opens,
//! and again on the one redis-rs' connection manager opens after the server closed it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::{eventually, lock_and_unlock, node, query};

const NAME: &str = "billing@pod-7";

/// The ids of the node's connections named [`NAME`].
async fn named_ids(node: &leasehold_harness::SingleNode) -> BTreeSet<String> {
    let clients: String = query(node, redis::cmd("CLIENT").arg("LIST")).await;
    clients
        .lines()
        .filter(|line| line.split(' ').any(|field| field == format!("name={NAME}")))
        .filter_map(|line| line.split(' ').find_map(|f| f.strip_prefix("id=")))
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_name_comes_back_after_a_reconnect() {
    let node = node().await;
    let client = leasehold::Client::builder()
        .name(NAME)
        .connect(&node.url())
        .await
        .unwrap();
    let mutex = client.mutex("names-reconnect");
    lock_and_unlock(&mutex).await;
    let before = named_ids(&node).await;
    assert_eq!(before.len(), 1, "one named command connection: {before:?}");

    for id in &before {
        let killed: i64 = query(&node, redis::cmd("CLIENT").arg("KILL").arg("ID").arg(id)).await;
        assert_eq!(killed, 1, "connection {id} was not there to kill");
    }
    // The first command after the kill may fail (its connection is gone) and set off the
    // reconnect; the lock retries it.
    let relocked = eventually(Duration::from_secs(10), || async {
        match mutex.try_lock().await {
            Ok(guard) => guard.unlock().await.is_ok(),
            Err(_) => false,
        }
    })
    .await;
    assert!(relocked, "the client never got its connection back");
    let after = named_ids(&node).await;
    assert_eq!(after.len(), 1, "{after:?}");
    assert!(
        after.is_disjoint(&before),
        "the named connection is still the killed one: {after:?}"
    );
}
