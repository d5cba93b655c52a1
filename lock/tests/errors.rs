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
