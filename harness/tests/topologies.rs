//! Each topology really works: reads and writes go through, faults do what they claim.
//! Every test prints its topology's start-up time (`--no-capture` to see it).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use leasehold_harness::topology::image;
use leasehold_harness::{
    ClusterTopology, IndependentMasters, Node, NodeOptions, Persistence, SentinelTopology,
    SingleNode,
};
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;

/// Timeout for probes that are expected to fail against a paused or cut node.
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);

/// Timeout of the connection opened before a fault: its first commands run on a node just
/// started, while other tests load the machine (500 ms was once too short for a SET), and
/// after the fault it must still time out rather than answer.
const HELD_TIMEOUT: Duration = Duration::from_secs(3);

fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

/// Awaits `start`, printing how long `topology` took to come up.
async fn timed_start<T>(
    topology: &str,
    start: impl Future<Output = leasehold_harness::Result<T>>,
) -> T {
    let started = Instant::now();
    let handle = start.await.unwrap();
    eprintln!("startup {topology}: {:?}", started.elapsed());
    handle
}

async fn probe_connection(node: &Node) -> redis::RedisResult<MultiplexedConnection> {
    connection_within(node, PROBE_TIMEOUT).await
}

/// A connection to `node` whose connect and every reply time out after `timeout`.
async fn connection_within(
    node: &Node,
    timeout: Duration,
) -> redis::RedisResult<MultiplexedConnection> {
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(timeout))
        .set_response_timeout(Some(timeout));
    node.client()
        .unwrap()
        .get_multiplexed_async_connection_with_config(&config)
        .await
}

/// A fresh harness connection to `node`, which must answer.
async fn connect(node: &Node) -> MultiplexedConnection {
    node.connection().await.unwrap()
}

/// PING on a fresh connection with [`PROBE_TIMEOUT`], bounded overall as well.
async fn answers(node: &Node) -> bool {
    let ping = async {
        let mut connection = probe_connection(node).await?;
        redis::cmd("PING")
            .query_async::<String>(&mut connection)
            .await
    };
    matches!(
        tokio::time::timeout(PROBE_TIMEOUT * 4, ping).await,
        Ok(Ok(pong)) if pong == "PONG"
    )
}

/// The server every node should run: the one `LEASEHOLD_SERVER_BINARY` names (the first
/// word of its `--version`, lower-cased: `valkey`), else Redis.
fn expected_server() -> String {
    let Some(binary) = std::env::var_os(image::SERVER_BINARY_ENV).filter(|v| !v.is_empty()) else {
        return "redis".to_owned();
    };
    let output = std::process::Command::new(binary)
        .arg("--version")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout).to_ascii_lowercase();
    text.split_whitespace().next().unwrap().to_owned()
}

/// Asserts that `node` (a data node or a Sentinel) runs [`expected_server`]: Valkey names
/// itself in INFO's `server_name`, Redis 7.0 has no such field.
async fn assert_runs_expected_server(node: &Node) {
    let info: String = node.query(redis::cmd("INFO").arg("server")).await.unwrap();
    let name = info
        .lines()
        .find_map(|line| line.strip_prefix("server_name:"))
        .map_or("redis", str::trim);
    assert_eq!(name, expected_server(), "{}", node.name());
}

// Default (current-thread) runtime on purpose: the way most callers will write their tests.
#[tokio::test]
async fn single_node_serves_reads_and_writes() {
    init_tracing();
    let single = timed_start("single node", SingleNode::start()).await;

    assert!(single.url().starts_with("redis://"));
    assert_runs_expected_server(single.node()).await;
    let mut connection = connect(single.node()).await;
    let _: () = connection.set("greeting", "hello").await.unwrap();
    let value: String = connection.get("greeting").await.unwrap();
    assert_eq!(value, "hello");
}

/// A node holding `k` = `v`, and a probe connection opened on it before any fault.
async fn node_with_open_connection() -> (SingleNode, MultiplexedConnection) {
    let single = SingleNode::start().await.unwrap();
    let mut held = connection_within(single.node(), HELD_TIMEOUT)
        .await
        .unwrap();
    let _: () = held.set("k", "v").await.unwrap();
    (single, held)
}

/// Neither the connection opened before the fault nor a new one gets an answer.
async fn assert_unreachable(node: &Node, held: &mut MultiplexedConnection, state: &str) {
    let reply: redis::RedisResult<String> = held.get("k").await;
    assert!(reply.is_err(), "a {state} node answered: {reply:?}");
    assert!(
        !answers(node).await,
        "a {state} node answered a new connection"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_node_stops_answering_until_unpaused() {
    init_tracing();
    let (single, mut held) = node_with_open_connection().await;
    let node = single.node();

    node.pause().await.unwrap();
    assert_unreachable(node, &mut held, "paused").await;

    node.unpause().await.unwrap();
    assert!(answers(node).await);
    let mut fresh = connect(node).await;
    let value: String = fresh.get("k").await.unwrap();
    assert_eq!(value, "v");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cut_node_is_unreachable_until_restored() {
    init_tracing();
    let (single, mut held) = node_with_open_connection().await;
    let node = single.node();
    let ip = node.ip();

    node.cut().await.unwrap();
    assert_unreachable(node, &mut held, "cut").await;

    node.restore().await.unwrap();
    assert_eq!(
        docker_ip(node).await,
        ip.to_string(),
        "restored at another address"
    );
    // ARP/neighbour state can lag the reconnect by a moment.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !answers(node).await {
        assert!(Instant::now() < deadline, "restored node never answered");
    }
    let value: String = connect(node).await.get("k").await.unwrap();
    assert_eq!(value, "v", "the process kept running while cut");
}

async fn key_survives_kill(persistence: Persistence) -> bool {
    let single = SingleNode::builder()
        .node_options(NodeOptions::default().persistence(persistence))
        .start()
        .await
        .unwrap();
    let node = single.node();
    let ip = node.ip();
    let _: () = connect(node)
        .await
        .set("lock:resource", "owner-1")
        .await
        .unwrap();

    let started = Instant::now();
    node.restart().await.unwrap();
    eprintln!("kill+restart ({persistence:?}): {:?}", started.elapsed());
    assert_eq!(node.ip(), ip);
    let inspected = docker_ip(node).await;
    assert_eq!(
        inspected,
        ip.to_string(),
        "Docker gave the node a new address"
    );

    let value: Option<String> = connect(node).await.get("lock:resource").await.unwrap();
    value.is_some()
}

async fn docker_ip(node: &Node) -> String {
    let output = tokio::process::Command::new("docker")
        .args([
            "inspect",
            "--format",
            "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
            node.container_id(),
        ])
        .output()
        .await
        .unwrap();
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_restart_with_appendonly_always_keeps_the_key() {
    init_tracing();
    assert!(key_survives_kill(Persistence::AppendOnlyAlways).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_restart_without_persistence_loses_the_key() {
    init_tracing();
    assert!(!key_survives_kill(Persistence::None).await);
}

/// Whether a key survives an in-place crash of the server with `persistence`; also checks
/// that a new process answered and that the outage lasted at least the asked downtime.
async fn key_survives_crash(persistence: Persistence) -> bool {
    let single = SingleNode::builder()
        .node_options(NodeOptions::default().persistence(persistence))
        .start()
        .await
        .unwrap();
    let node = single.node();
    let _: () = connect(node)
        .await
        .set("lock:resource", "owner-1")
        .await
        .unwrap();

    let down = Duration::from_millis(300);
    let started = Instant::now();
    let (before, after) = node.crash_and_recover(down).await.unwrap();
    let took = started.elapsed();
    eprintln!("crash and recover ({persistence:?}): {took:?}");
    assert_ne!(
        before, after,
        "the same server process answered after the crash"
    );
    assert!(
        took >= down,
        "back after {took:?}, before the {down:?} downtime"
    );

    let value: Option<String> = connect(node).await.get("lock:resource").await.unwrap();
    value.is_some()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_and_recover_with_appendonly_always_keeps_the_key() {
    init_tracing();
    assert!(key_survives_crash(Persistence::AppendOnlyAlways).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_and_recover_without_persistence_loses_the_key() {
    init_tracing();
    assert!(!key_survives_crash(Persistence::None).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn independent_masters_share_nothing() {
    init_tracing();
    let masters = timed_start("5 independent masters", IndependentMasters::start(5)).await;

    let urls = masters.urls();
    assert_eq!(urls.len(), 5);
    let mut distinct = urls.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 5);

    let nodes = masters.nodes();
    let _: () = connect(&nodes[0]).await.set("only-on-0", 1).await.unwrap();
    for (index, node) in nodes.iter().enumerate() {
        let exists: bool = connect(node).await.exists("only-on-0").await.unwrap();
        assert_eq!(exists, index == 0, "master {index}");
        let role: Vec<redis::Value> = node.query(&redis::cmd("ROLE")).await.unwrap();
        assert_eq!(role[0], redis::Value::BulkString(b"master".to_vec()));
        assert_runs_expected_server(node).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_fails_over_to_the_replica_when_the_master_dies() {
    init_tracing();
    let topology = timed_start(
        "sentinel (1 master, 1 replica, 3 sentinels)",
        SentinelTopology::start(),
    )
    .await;

    let old = topology.master_addr().await.unwrap();
    assert_eq!(old, topology.master().addr());
    for node in topology.data_nodes().chain(topology.sentinels()) {
        assert_runs_expected_server(node).await;
    }
    let _: () = connect(topology.master())
        .await
        .set("before", "failover")
        .await
        .unwrap();
    // The write reaches the replica before we kill the master (asynchronous replication).
    let _: redis::Value = topology
        .master()
        .query(redis::cmd("WAIT").arg(1).arg(2000))
        .await
        .unwrap();

    let killed = Instant::now();
    topology.master().kill().await.unwrap();
    let new = topology
        .wait_for_new_master(old, Duration::from_secs(60))
        .await
        .unwrap();
    eprintln!("sentinel failover after kill: {:?}", killed.elapsed());
    assert_eq!(new, topology.replicas()[0].addr());

    // redis-rs' Sentinel client agrees, and the promoted replica takes writes.
    let mut sentinel = topology.sentinel_client().unwrap();
    let client = sentinel
        .async_master_for(topology.master_name(), None)
        .await
        .unwrap();
    let mut connection = client.get_multiplexed_async_connection().await.unwrap();
    let kept: String = connection.get("before").await.unwrap();
    assert_eq!(kept, "failover");
    let _: () = connection.set("after", "failover").await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_routes_each_key_to_the_master_owning_its_slot() {
    init_tracing();
    let cluster = timed_start("cluster (3 masters, 3 replicas)", ClusterTopology::start()).await;

    let client = cluster.client().unwrap();
    let mut connection = client.get_async_connection().await.unwrap();
    // Keys chosen to spread over the three shards; {tag} keys share a slot.
    let keys = ["alpha", "beta", "gamma", "delta", "{lock}.a", "{lock}.b"];
    for key in keys {
        let _: () = connection.set(key, key).await.unwrap();
    }

    for node in cluster.nodes() {
        assert_runs_expected_server(node).await;
    }
    let masters = cluster.masters();
    let mut shards_hit = [false; 3];
    for key in keys {
        let value: String = connection.get(key).await.unwrap();
        assert_eq!(value, key);
        let slot: u16 = masters[0]
            .query(redis::cmd("CLUSTER").arg("KEYSLOT").arg(key))
            .await
            .unwrap();
        for (index, master) in masters.iter().enumerate() {
            let (low, high) = cluster.slot_range(index);
            let owns = (low..=high).contains(&slot);
            let count: u64 = master
                .query(redis::cmd("CLUSTER").arg("COUNTKEYSINSLOT").arg(slot))
                .await
                .unwrap();
            assert_eq!(count > 0, owns, "key {key} slot {slot} on master {index}");
            shards_hit[index] |= owns;
        }
    }
    assert_eq!(shards_hit, [true; 3], "test keys should cover every shard");

    let mut total = 0;
    for master in masters {
        let size: u64 = master.query(&redis::cmd("DBSIZE")).await.unwrap();
        total += size;
    }
    assert_eq!(total, keys.len() as u64);
}
