//! The Python peers against a real container: each library, run in processes of its own from
//! its pinned PyPI release, takes the lock under its own key with its own token, and a short
//! contended cell of its clients acquires, keeps exclusion and waits the library's way
//! (redis-py retries `SET NX`, python-redis-lock blocks on BLPOP); the pipe to its workers is
//! measured.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use leasehold_harness::SingleNode;
use leasehold_harness::bench::access::Access;
use leasehold_harness::bench::contender::{Contender, ContenderClient, ContenderHeld, LEASE_TTL};
use leasehold_harness::bench::python_peer::library::PythonLib;
use leasehold_harness::bench::python_peer::pipe_overhead;
use leasehold_harness::bench::workload::{CellSpec, run_cell};
use leasehold_harness::report::results::RepMetrics;

/// Long enough for dozens of contended acquisitions (a waiting redis-py client sleeps 0.1 s
/// between tries), short enough for CI.
const CELL: Duration = Duration::from_secs(1);
/// The critical section of the cell, µs.
const CS_US: u64 = 1_000;

/// Takes and releases one lock through `lib` and checks on the server that the library
/// stored its own token under its own key with the lease's TTL, and removed it on release.
async fn the_library_holds_the_key(lib: PythonLib, url: &str) {
    let client = ContenderClient::connect(Contender::Python(lib), &[url.to_owned()])
        .await
        .unwrap();
    let ContenderHeld::Python(held) = client.acquire("probe", Access::Write).await.unwrap() else {
        panic!("{lib:?}: a Python client returned another contender's hold");
    };
    let mut conn = redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let key = lib.key("probe");
    let stored: Option<String> = redis::cmd("GET")
        .arg(&key)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(stored.as_deref(), Some(held.token()), "{lib:?}: {key}");
    let pttl: i64 = redis::cmd("PTTL")
        .arg(&key)
        .query_async(&mut conn)
        .await
        .unwrap();
    let ttl_ms = LEASE_TTL.as_millis() as i64;
    assert!(0 < pttl && pttl <= ttl_ms, "{lib:?}: PTTL {pttl} ms");
    client.release(ContenderHeld::Python(held)).await.unwrap();
    let exists: i64 = redis::cmd("EXISTS")
        .arg(&key)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(exists, 0, "{lib:?}: {key} outlived the release");
}

/// A 4-client, 1 s cell of `lib`: acquisitions, no overlap, no error, round trips counted.
async fn contended_cell(lib: PythonLib, url: &str) -> RepMetrics {
    let spec = CellSpec {
        contender: Contender::Python(lib),
        clients: 4,
        critical_section_us: CS_US,
        locks: 1,
        think_us: 0,
        offered_per_s: 0,
        read_percent: 0,
    };
    let m = run_cell(spec, &[url.to_owned()], CELL, &format!("{lib:?}"))
        .await
        .unwrap();
    let m = RepMetrics::from_measurement(&spec, &m);
    assert!(m.acquisitions > 10, "{lib:?}: {m:?}");
    assert_eq!(m.violations, 0, "{lib:?}");
    assert_eq!(m.errors, 0, "{lib:?}");
    assert!(m.mean_section_us >= CS_US as f64, "{lib:?}: {m:?}");
    let rt = m.client_round_trips_per_acq.unwrap();
    assert!(rt >= 2.0, "{lib:?}: {rt} client round trips/acq");
    m
}

/// The pipe to a worker answers, and its median is no more than its tail.
async fn the_pipe_is_measured(lib: PythonLib, url: &str) {
    let pipe = pipe_overhead::measure(lib, url).await.unwrap();
    assert!(pipe.samples >= 100, "{pipe:?}");
    assert!(
        0.0 < pipe.median_us && pipe.median_us <= pipe.p99_us,
        "{pipe:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_py_lock_takes_its_key_and_polls_with_set_nx() {
    let node = SingleNode::start().await.unwrap();
    let lib = PythonLib::RedisPy;
    the_library_holds_the_key(lib, &node.url()).await;
    let m = contended_cell(lib, &node.url()).await;
    // Waiters sleep and try again: more SETs than acquisitions, and no blocking pop.
    let calls = |name: &str| m.commands.by_command.get(name).copied().unwrap_or(0);
    assert!(calls("set") > m.acquisitions, "{:?}", m.commands);
    assert_eq!(calls("blpop"), 0, "{:?}", m.commands);
    the_pipe_is_measured(lib, &node.url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_redis_lock_takes_its_key_and_hands_off_through_blpop() {
    let node = SingleNode::start().await.unwrap();
    let lib = PythonLib::PythonRedisLock;
    the_library_holds_the_key(lib, &node.url()).await;
    let m = contended_cell(lib, &node.url()).await;
    // Waiters blocked on the signal list, and every release pushed to it.
    let calls = |name: &str| m.commands.by_command.get(name).copied().unwrap_or(0);
    assert!(calls("blpop") > 0, "{:?}", m.commands);
    assert_eq!(calls("lpush"), calls("evalsha"), "{:?}", m.commands);
    // The GET inside each release script is not the client's: one client GET per acquire.
    let scripted_gets = calls("evalsha");
    assert_eq!(
        calls("get"),
        m.acquisitions + scripted_gets,
        "{:?}",
        m.commands
    );
    the_pipe_is_measured(lib, &node.url()).await;
}
