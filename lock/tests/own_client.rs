//! A client built over the caller's own `redis::Client` (`ClientBuilder::redis_client`,
//! `redis_client_with`) against a real Redis node: the caller's settings are the ones used
//! (its database), the locks work as over `Client::connect`, and connect
//! failures are the same typed errors.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use leasehold::{Client, Error, LockKeys};
use redis::aio::ConnectionManagerConfig;

use common::{exists, node};

/// A database other than 0, so a key found there was written through the caller's client.
const OWN_DB: i64 = 3;

/// The caller's client: the node's address, database [`OWN_DB`].
fn own_client(url: &str) -> redis::Client {
    let mut info = redis::IntoConnectionInfo::into_connection_info(url).unwrap();
    let settings = info.redis_settings().clone().set_db(OWN_DB);
    info = info.set_redis_settings(settings);
    redis::Client::open(info).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_taken_over_your_own_client_lives_in_its_database() {
    let node = node().await;
    let client = Client::builder()
        .redis_client(own_client(&node.url()))
        .await
        .unwrap();
    let keys = LockKeys::new("own-db").unwrap();
    let guard = client.mutex("own-db").lock().await.unwrap();
    assert!(!exists(&node, &keys.lock).await, "nothing in database 0");
    let mut db3 = own_client(&node.url())
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let held: i64 = redis::cmd("EXISTS")
        .arg(&keys.lock)
        .query_async(&mut db3)
        .await
        .unwrap();
    assert_eq!(held, 1, "the lock key is in the caller's database {OWN_DB}");
    guard.unlock().await.unwrap();
    let left: i64 = redis::cmd("EXISTS")
        .arg(&keys.lock)
        .query_async(&mut db3)
        .await
        .unwrap();
    assert_eq!(left, 0, "unlock removed it from the caller's database");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn your_connection_manager_settings_are_used_and_locks_contend_as_usual() {
    let node = node().await;
    let config = ConnectionManagerConfig::new()
        .set_response_timeout(Some(Duration::from_secs(2)))
        .set_number_of_retries(2);
    let a = Client::builder()
        .redis_client_with(own_client(&node.url()), config)
        .await
        .unwrap();
    let b = Client::builder()
        .redis_client(own_client(&node.url()))
        .await
        .unwrap();
    let held = a.mutex("own-contend").lock().await.unwrap();
    assert!(matches!(
        b.mutex("own-contend").try_lock().await,
        Err(Error::WouldBlock { .. })
    ));
    let token = held.fencing_token();
    held.unlock().await.unwrap();
    let next = b.mutex("own-contend").lock().await.unwrap();
    assert!(next.fencing_token() > token);
    next.unlock().await.unwrap();
}

#[tokio::test]
async fn your_client_to_a_refusing_server_fails_with_connect() {
    let refused = redis::Client::open("redis://127.0.0.1:1").unwrap();
    let err = Client::builder()
        .redis_client(refused)
        .await
        .expect_err("nothing listens on port 1");
    assert!(matches!(err, Error::Connect { .. }), "{err:?}");
    assert!(err.to_string().contains("127.0.0.1:1"), "{err}");
}
