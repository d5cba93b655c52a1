//! Error messages stay short and name their lock, whatever the name: a megabyte-long name
//! (a payload passed as a name by mistake) is rejected by every lock kind with a message
//! of a few dozen bytes that gives the name's length.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use leasehold::{Error, MAX_NAME_LEN, RedLock};

/// A message longer than this would not fit a log line comfortably.
const SHORT_MESSAGE: usize = 300;

#[tokio::test]
async fn a_megabyte_name_gives_a_short_message_with_its_length() {
    let node = common::node().await;
    let client = common::client(&node).await;
    let name = format!("order:{}", "a".repeat(1 << 20));
    assert!(name.len() > MAX_NAME_LEN);
    let failures = [
        ("mutex", client.mutex(&name).try_lock().await.err()),
        ("read", client.rwlock(&name).try_read().await.err()),
        ("write", client.rwlock(&name).try_write().await.err()),
        (
            "semaphore",
            client.semaphore(&name, 2).try_acquire().await.err(),
        ),
        (
            "redlock",
            RedLock::new([client.clone()], &name).try_lock().await.err(),
        ),
    ];
    for (kind, err) in failures {
        let err = err.unwrap_or_else(|| panic!("{kind}: a 1 MB name was accepted"));
        let message = err.to_string();
        println!("{kind}: {message}");
        assert!(
            matches!(&err, Error::InvalidName { name: n, .. } if *n == name),
            "{kind}"
        );
        assert!(
            message.len() < SHORT_MESSAGE,
            "{kind}: {} bytes",
            message.len()
        );
        assert!(
            message.contains(&format!("({} bytes)", name.len())),
            "{kind}: {message}"
        );
        assert!(message.contains("\"order:aaa"), "{kind}: {message}");
    }
}

/// Another program's string under a mutex's key (not a hold id with an expiry) is someone
/// else's data: every acquire path refuses it as WRONGTYPE, naming the lock, and leaves the
/// value as it was (`acquire.lua`'s lone hold form; exploration never plants one).
#[tokio::test]
async fn a_foreign_string_under_the_lock_key_is_wrongtype_and_kept() {
    let node = common::node().await;
    let client = common::client(&node).await;
    for (i, ttl) in [None, Some(60_000)].into_iter().enumerate() {
        let name = format!("foreign-string-{i}");
        let key = leasehold::LockKeys::new(&name).unwrap().lock;
        let mut set = redis::cmd("SET");
        set.arg(&key).arg("not a lease");
        if let Some(ms) = ttl {
            set.arg("PX").arg(ms);
        }
        let _: () = common::query(&node, &set).await;
        let mutex = client.mutex(&name);
        for (path, err) in [
            ("try_lock", mutex.try_lock().await.err()),
            (
                "lock_within",
                mutex
                    .lock_within(std::time::Duration::from_millis(200))
                    .await
                    .err(),
            ),
        ] {
            let err = err.unwrap_or_else(|| panic!("{path}: a foreign string was taken as free"));
            let message = err.to_string();
            assert!(message.contains("WRONGTYPE"), "{path}: {message}");
            assert!(message.len() < SHORT_MESSAGE, "{path}: {message}");
        }
        let kept: String = common::query(&node, redis::cmd("GET").arg(&key)).await;
        assert_eq!(kept, "not a lease", "the foreign value was touched");
    }
}
