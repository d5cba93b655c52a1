//! RedLock's `try_lock` against three real, independent masters, two of them paused: the
//! lock is free, nobody says it is held, and too few masters answer for a quorum, so the
//! try fails with `NoQuorum`, never `WouldBlock` (which says a master answered "held");
//! once they answer again the same try is granted, and a lock another owner holds is
//! refused with `WouldBlock`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use leasehold::{Error, RedLock};

use common::masters::process;

const MASTERS: usize = 3;

#[tokio::test]
async fn a_try_that_reaches_too_few_masters_is_no_quorum_not_would_block() {
    let masters = common::masters::start(MASTERS).await;
    let name = "redlock-try-quorum";
    let clients = process(&masters).await;
    let lock = RedLock::new(clients, name);
    // Connections open and scripts loaded before the masters stop answering.
    lock.try_lock().await.unwrap().unlock().await.unwrap();
    for node in &masters.nodes()[1..] {
        node.pause().await.unwrap();
    }
    let paused = lock.try_lock().await;
    for node in &masters.nodes()[1..] {
        node.unpause().await.unwrap();
    }
    match paused {
        Err(Error::NoQuorum {
            granted, needed, ..
        }) => assert_eq!((granted, needed), (1, 2)),
        other => panic!("expected NoQuorum, got {other:?}"),
    }
    let guard = lock.try_lock().await.unwrap();
    let other = RedLock::new(process(&masters).await, name);
    assert!(
        matches!(other.try_lock().await, Err(Error::WouldBlock { .. })),
        "a held lock is refused as held"
    );
    guard.unlock().await.unwrap();
}
