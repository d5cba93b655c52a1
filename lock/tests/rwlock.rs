//! The read-write lock against a real Redis node: reader/writer exclusion under load, writer
//! preference under a reader flood, downgrade, re-entry, refused upgrade, and the expiry of
//! a crashed reader's share.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use leasehold::{Error, WaitStrategy};

use common::scripts::Hold;
use common::tasks::{distinct_tokens, join_all};
use common::{client, client_with, node, query, two_clients};

/// Concurrent readers and writers inside the lock, as this process sees them.
#[derive(Default)]
struct Occupancy {
    readers: AtomicUsize,
    writers: AtomicUsize,
    max_readers: AtomicUsize,
}

impl Occupancy {
    fn enter_read(&self) {
        let now = self.readers.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_readers.fetch_max(now, Ordering::SeqCst);
        assert_eq!(
            self.writers.load(Ordering::SeqCst),
            0,
            "reader beside a writer"
        );
    }

    fn leave_read(&self) {
        self.readers.fetch_sub(1, Ordering::SeqCst);
    }

    fn enter_write(&self) {
        assert_eq!(
            self.writers.fetch_add(1, Ordering::SeqCst),
            0,
            "two writers"
        );
        assert_eq!(
            self.readers.load(Ordering::SeqCst),
            0,
            "writer beside a reader"
        );
    }

    fn leave_write(&self) {
        self.writers.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn exclusion(strategy: WaitStrategy, name: &str) {
    const CLIENTS: usize = 3;
    const READERS: usize = 4;
    const WRITERS: usize = 2;
    const ROUNDS: usize = 6;
    let node = node().await;
    let occupancy = Arc::new(Occupancy::default());
    let mut tasks = Vec::new();
    for _ in 0..CLIENTS {
        let client = client_with(&node, Duration::from_secs(5), strategy).await;
        for index in 0..READERS + WRITERS {
            let lock = client.rwlock(name);
            let occupancy = Arc::clone(&occupancy);
            tasks.push(tokio::spawn(async move {
                let mut tokens = Vec::new();
                for _ in 0..ROUNDS {
                    if index < READERS {
                        let guard = lock.read_within(Duration::from_secs(30)).await.unwrap();
                        occupancy.enter_read();
                        tokio::time::sleep(Duration::from_millis(3)).await;
                        occupancy.leave_read();
                        guard.unlock().await.unwrap();
                    } else {
                        let guard = lock.write_within(Duration::from_secs(30)).await.unwrap();
                        occupancy.enter_write();
                        tokio::time::sleep(Duration::from_millis(1)).await;
                        occupancy.leave_write();
                        tokens.push(guard.fencing_token());
                        guard.unlock().await.unwrap();
                    }
                }
                tokens
            }));
        }
    }
    let writes = CLIENTS * WRITERS * ROUNDS;
    assert_eq!(
        distinct_tokens(tasks).await,
        writes,
        "every write epoch has its own token"
    );
    assert!(
        occupancy.max_readers.load(Ordering::SeqCst) > 1,
        "readers never shared the lock"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_share_writers_exclude_pubsub() {
    exclusion(WaitStrategy::PubSub, "rw-excl-pubsub").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_share_writers_exclude_fair_queue() {
    let fair = WaitStrategy::FairQueue {
        entry_timeout: Duration::from_millis(600),
    };
    exclusion(fair, "rw-excl-fair").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_share_writers_exclude_spin() {
    exclusion(WaitStrategy::spin(), "rw-excl-spin").await;
}

/// Readers overlap continuously (there is always one inside); a writer must still get in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writer_is_not_starved_by_a_reader_flood() {
    const READERS: usize = 6;
    let node = node().await;
    let (readers_client, writer_client) = two_clients(&node).await;
    let stop = Arc::new(AtomicBool::new(false));
    let occupancy = Arc::new(Occupancy::default());
    let mut tasks = Vec::new();
    for index in 0..READERS {
        let lock = readers_client.rwlock("rw-flood");
        let (stop, occupancy) = (Arc::clone(&stop), Arc::clone(&occupancy));
        tasks.push(tokio::spawn(async move {
            // Stagger the readers so that their holds always overlap.
            tokio::time::sleep(Duration::from_millis(7 * index as u64)).await;
            let mut reads = 0_usize;
            while !stop.load(Ordering::SeqCst) {
                let guard = lock.read_within(Duration::from_secs(10)).await.unwrap();
                occupancy.enter_read();
                tokio::time::sleep(Duration::from_millis(40)).await;
                occupancy.leave_read();
                guard.unlock().await.unwrap();
                reads += 1;
            }
            reads
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = tokio::time::Instant::now();
    let guard = writer_client
        .rwlock("rw-flood")
        .write_within(Duration::from_secs(3))
        .await
        .expect("the writer got in despite the reader flood");
    let waited = started.elapsed();
    occupancy.enter_write();
    tokio::time::sleep(Duration::from_millis(20)).await;
    occupancy.leave_write();
    guard.unlock().await.unwrap();
    // Readers hold for 40 ms each; the writer waits for those inside, not for newcomers.
    assert!(waited < Duration::from_secs(1), "writer waited {waited:?}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.store(true, Ordering::SeqCst);
    let reads: usize = join_all(tasks).await.into_iter().sum();
    assert!(reads > READERS * 3, "readers kept coming ({reads} reads)");
    assert!(occupancy.max_readers.load(Ordering::SeqCst) > 1);
}

#[tokio::test]
async fn downgrade_keeps_writers_out_and_lets_readers_in() {
    let node = node().await;
    let (a, b) = two_clients(&node).await;
    let write = a.rwlock("rw-down").write().await.unwrap();
    assert!(matches!(
        b.rwlock("rw-down").try_read().await,
        Err(Error::WouldBlock { .. })
    ));
    let token = write.fencing_token();
    let read = write.downgrade().await.unwrap();
    assert_eq!(read.write_token(), token);
    assert!(matches!(
        b.rwlock("rw-down").try_write().await,
        Err(Error::WouldBlock { .. })
    ));
    let other = b.rwlock("rw-down").try_read().await.unwrap();
    other.unlock().await.unwrap();
    read.unlock().await.unwrap();
    let next = b.rwlock("rw-down").try_write().await.unwrap();
    assert!(next.fencing_token() > token);
    next.unlock().await.unwrap();
}

#[tokio::test]
async fn reentry_and_refused_upgrade() {
    let node = node().await;
    let (a, b) = two_clients(&node).await;
    // Write re-entry keeps the epoch's token; each hold is released separately.
    let write = a.rwlock("rw-reenter").write().await.unwrap();
    let again = write.reenter().await.unwrap();
    assert_eq!(again.fencing_token(), write.fencing_token());
    write.unlock().await.unwrap();
    assert!(b.rwlock("rw-reenter").try_read().await.is_err());
    again.unlock().await.unwrap();

    // A re-entering reader is admitted while a writer waits; a new reader is not.
    let read = a.rwlock("rw-reenter").read().await.unwrap();
    let writer = {
        let lock = b.rwlock("rw-reenter");
        tokio::spawn(async move { lock.write_within(Duration::from_secs(5)).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(matches!(
        a.rwlock("rw-reenter").try_read().await,
        Err(Error::WouldBlock { .. })
    ));
    let nested = read.reenter().await.unwrap();

    // The same owner cannot upgrade: its own reads would block it forever.
    let owned = a.rwlock("rw-reenter").owner("job-1");
    let r1 = owned.try_read().await;
    assert!(
        r1.is_err(),
        "a writer waits, so a fresh owner is not admitted"
    );
    nested.unlock().await.unwrap();
    read.unlock().await.unwrap();
    let w = writer.await.unwrap().unwrap();
    w.unlock().await.unwrap();

    let r1 = owned.read().await.unwrap();
    assert!(matches!(
        owned.try_write().await,
        Err(Error::UpgradeRefused { .. })
    ));
    r1.unlock().await.unwrap();
    owned.try_write().await.unwrap().unlock().await.unwrap();
}

#[tokio::test]
async fn crashed_reader_share_expires() {
    let node = node().await;
    let (a, b) = two_clients(&node).await;
    let ttl = Duration::from_millis(300);
    let read = a
        .rwlock("rw-crash")
        .ttl(ttl)
        .watchdog(false)
        .read()
        .await
        .unwrap();
    // A crashed reader: never released, never renewed.
    std::mem::forget(read);
    let started = tokio::time::Instant::now();
    let write = b
        .rwlock("rw-crash")
        .write_within(Duration::from_secs(3))
        .await
        .unwrap();
    let waited = started.elapsed();
    assert!(
        waited >= ttl / 2,
        "writer did not wait for the reader: {waited:?}"
    );
    assert!(
        waited < ttl * 3,
        "reader share outlived its lease: {waited:?}"
    );
    write.unlock().await.unwrap();
}

#[tokio::test]
async fn watchdog_keeps_readers_and_lost_fires_when_gone() {
    let node = node().await;
    let a = client(&node).await;
    let ttl = Duration::from_millis(300);
    let read = a.rwlock("rw-watch").ttl(ttl).read().await.unwrap();
    tokio::time::sleep(ttl * 3).await;
    assert!(!read.is_lost(), "the watchdog renews read leases");
    // Someone deletes the readers behind our back: the next renewal sees it.
    let _: () = common::query(
        &node,
        redis::cmd("DEL").arg("leasehold:{rw-watch}:rw:readers"),
    )
    .await;
    tokio::time::timeout(ttl * 2, read.lost())
        .await
        .expect("lost() fires once the watchdog finds the hold gone");
    assert!(matches!(
        read.unlock().await,
        Err(Error::LeaseLost { .. } | Error::NotHeld { .. })
    ));
}

/// A retried read acquire (its first reply lost) moves the reader's deadline to the retry's
/// send time + TTL, since that is where the client starts its lease.
#[tokio::test]
async fn a_retried_read_acquire_refreshes_the_deadline() {
    let node = node().await;
    let raw = leasehold::RedisBackend::connect(&node.url()).await.unwrap();
    let base = "leasehold:{retried}:rw";
    let readers = format!("{base}:readers");
    let keys = [
        base.to_owned(),
        readers.clone(),
        format!("{base}:owners"),
        format!("{base}:intents"),
        format!("{base}:fence"),
        format!("{base}:queue"),
        format!("{base}:waiters"),
    ];
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    let hold = Hold::new("b", "r");
    let (ttl, margin, no_line, seq) = ("1000", "60000", "0", "0");
    let args = [
        hold.id,
        hold.owner,
        ttl.into(),
        margin.into(),
        no_line.into(),
        seq.into(),
    ];
    let backend: &dyn leasehold::backend::Backend = &raw;
    let script = &leasehold::script::scripts().rw_read_acquire;
    script.run(backend, &keys, &args).await.unwrap();
    tokio::time::sleep(Duration::from_millis(600)).await;
    script.run(backend, &keys, &args).await.unwrap();
    let deadline: f64 = query(&node, redis::cmd("ZSCORE").arg(&readers).arg(&args[0])).await;
    let (secs, micros): (u64, u64) = query(&node, &redis::cmd("TIME")).await;
    let now_ms = (secs * 1000 + micros / 1000) as f64;
    assert!(
        deadline - now_ms > 800.0,
        "the retry left {} ms of the reader's lease on the server",
        deadline - now_ms
    );
}

/// A downgrade's read hold keeps the write epoch's token past a fence margin below the
/// renewal period: the write release that leaves the downgraded read hold behind keeps the
/// fence key the margin past the latest read lease, not just the margin, so the watchdog's
/// next read renewal still finds a fence to extend and later holds of the read epoch carry
/// the token.
#[tokio::test]
async fn a_downgrade_keeps_the_write_token_past_a_short_fence_margin() {
    let node = node().await;
    let a = client(&node).await;
    let ttl = Duration::from_millis(600);
    // Below TTL/3, the watchdog's renewal period: under the old write release the fence key
    // expired before the first read renewal could extend it.
    let margin = Duration::from_millis(50);
    let lock = a.rwlock("rw-downgrade-fence").ttl(ttl).fence_margin(margin);
    let write = lock.write().await.unwrap();
    let token = write.fencing_token();
    let read = write.downgrade().await.unwrap();
    assert_eq!(read.write_token(), token);
    tokio::time::sleep(ttl * 2).await;
    let nested = read.reenter().await.unwrap();
    assert_eq!(
        nested.write_token(),
        token,
        "a re-entry of the downgraded read epoch must carry the write epoch's token"
    );
    nested.unlock().await.unwrap();
    read.unlock().await.unwrap();
}

/// Every hold of a read epoch carries the last write epoch's token, however long the epoch
/// outlasts the fence margin: read acquires and renewals keep the fence key alive (and no
/// longer than the margin past the last read lease).
#[tokio::test]
async fn a_read_epoch_keeps_its_write_token_past_the_fence_margin() {
    let node = node().await;
    let a = client(&node).await;
    let ttl = Duration::from_millis(300);
    let margin = Duration::from_millis(50);
    let lock = a.rwlock("rw-fence").ttl(ttl).fence_margin(margin);
    let write = lock.write().await.unwrap();
    let token = write.fencing_token();
    write.unlock().await.unwrap();
    let read = lock.read().await.unwrap();
    assert_eq!(read.write_token(), token);
    // Past the margin (and past the first lease: the watchdog renews it).
    tokio::time::sleep(ttl * 2).await;
    let nested = read.reenter().await.unwrap();
    assert_eq!(
        nested.write_token(),
        token,
        "a re-entry of the read epoch must carry the epoch's token"
    );
    let fence = "leasehold:{rw-fence}:rw:fence";
    let exists = || async { query::<i64>(&node, redis::cmd("EXISTS").arg(fence)).await };
    assert_eq!(exists().await, 1, "the fence key lives while reads do");
    nested.unlock().await.unwrap();
    read.unlock().await.unwrap();
    tokio::time::sleep(ttl + margin + Duration::from_millis(200)).await;
    assert_eq!(
        exists().await,
        0,
        "the fence key outlived the last read lease by more than the margin"
    );
}
