//! The `leasehold` ops CLI against real Redis: locks are taken with the library, the built
//! binary (`CARGO_BIN_EXE_leasehold`, so the test exercises exactly what ships) is run as
//! a child process, and its output and exit code are checked against the server's state.
//! Needs the `cli` feature (see the `[[test]]` entry in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Stdio;
use std::time::Duration;

use leasehold::{Client, LockKeys, WaitStrategy};
use leasehold_harness::{ClusterTopology, Node, SentinelTopology, TlsNode};
use tokio::io::AsyncWriteExt;

/// Leases in these tests outlive every CLI run, so nothing expires under the assertions.
const TTL: Duration = Duration::from_secs(30);

/// Bound on one CLI run (a connection refused fails in milliseconds).
const RUN_LIMIT: Duration = Duration::from_secs(30);

/// The result of one CLI run.
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {}\n--- stdout\n{}--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// Runs the binary with `args`, feeding `stdin` (closed when empty).
async fn cli(args: &[&str], stdin: &str) -> Run {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_leasehold"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn the leasehold binary");
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.as_bytes()).await.unwrap();
    drop(input);
    let output = tokio::time::timeout(RUN_LIMIT, child.wait_with_output())
        .await
        .expect("the CLI finished in time")
        .unwrap();
    Run {
        code: output.status.code().expect("exited, not killed"),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Runs the binary against the single node at `url` and expects success.
async fn ok(url: &str, args: &[&str]) -> String {
    let mut all = vec!["--url", url];
    all.extend_from_slice(args);
    let run = cli(&all, "").await;
    assert_eq!(run.code, 0, "{run:?}");
    run.stdout
}

async fn client(url: &str) -> Client {
    Client::builder().ttl(TTL).connect(url).await.unwrap()
}

async fn queue_length(node: &Node, name: &str) -> usize {
    let key = LockKeys::new(name).unwrap().queue;
    node.query(redis::cmd("LLEN").arg(key)).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_shows_holder_token_and_fair_queue() {
    let node = common::node().await;
    let url = node.url();
    let name = "orders:42";
    let holder = client(&url).await;
    let guard = holder.mutex(name).lock().await.unwrap();

    // Two fair waiters, queued one after the other.
    let fair = WaitStrategy::FairQueue {
        entry_timeout: Duration::from_secs(10),
    };
    let mut waiters = Vec::new();
    for expected in 1..=2 {
        let mutex = client(&url).await.mutex(name).wait(fair);
        waiters.push(tokio::spawn(async move { mutex.lock().await }));
        assert!(
            common::eventually(Duration::from_secs(5), || async {
                queue_length(node.node(), name).await == expected
            })
            .await,
            "waiter {expected} queued"
        );
    }

    let out = ok(&url, &["inspect", name]).await;
    assert!(out.contains("mutex leasehold:{orders:42}\n"), "{out}");
    let owner = guard.owner().as_str();
    assert!(
        out.contains(&format!("holder: {owner} (1 hold(s), lease ")),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|line| line.starts_with("    hold ") && line.contains("  lease ends in ")),
        "each hold shows its own lease: {out}"
    );
    assert!(
        out.contains(&format!(
            "fencing token: {} (last issued)",
            guard.fencing_token()
        )),
        "{out}"
    );
    assert!(out.contains("fair queue: 2\n"), "{out}");
    assert_eq!(out.matches("entry ends in").count(), 2, "{out}");
    assert!(
        !out.contains("rwlock"),
        "no rwlock keys, no rwlock section: {out}"
    );

    // `watch` prints the same, round after round.
    let out = ok(
        &url,
        &["watch", name, "--interval", "100ms", "--times", "3"],
    )
    .await;
    assert_eq!(out.matches("--- watch round").count(), 3, "{out}");
    assert_eq!(out.matches("fair queue: 2").count(), 3, "{out}");

    guard.unlock().await.unwrap();
    for waiter in waiters {
        waiter.await.unwrap().unwrap().unlock().await.unwrap();
    }
}

/// Issue 34, defect 2: `inspect` shows the server's `maxmemory-policy`, and says when it
/// may evict live locks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_shows_the_eviction_policy() {
    let node = common::node().await;
    let url = node.url();
    let out = ok(&url, &["inspect", "policy-shown"]).await;
    assert!(out.contains("maxmemory-policy: noeviction"), "{out}");
    for (parameter, value) in [("maxmemory", "3mb"), ("maxmemory-policy", "volatile-ttl")] {
        let cmd = redis::cmd("CONFIG")
            .arg("SET")
            .arg(parameter)
            .arg(value)
            .clone();
        let _: () = node.node().query(&cmd).await.unwrap();
    }
    let out = ok(&url, &["inspect", "policy-shown"]).await;
    assert!(out.contains("maxmemory-policy: volatile-ttl"), "{out}");
    assert!(out.contains("may evict live locks"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_shows_readers_and_permits() {
    let node = common::node().await;
    let url = node.url();
    let client = client(&url).await;

    let name = "shared";
    let rw = client.rwlock(name);
    let readers = [rw.read().await.unwrap(), rw.read().await.unwrap()];
    let semaphore = client.semaphore(name, 3);
    let permits = [
        semaphore.acquire().await.unwrap(),
        semaphore.acquire().await.unwrap(),
    ];
    let out = ok(&url, &["inspect", name]).await;
    assert!(out.contains("rwlock leasehold:{shared}:rw\n"), "{out}");
    assert!(out.contains("  writer: none (free)"), "{out}");
    assert!(out.contains("  readers: 2\n"), "{out}");
    assert!(out.contains("  read owners:"), "{out}");
    assert!(out.contains("semaphore leasehold:{shared}:sem\n"), "{out}");
    assert!(out.contains("  permits in use: 2\n"), "{out}");
    assert_eq!(out.matches("lease ends in").count(), 4, "{out}");
    for reader in readers {
        reader.unlock().await.unwrap();
    }
    for permit in permits {
        permit.release().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_finds_names_with_scan() {
    let node = common::node().await;
    let url = node.url();
    let client = client(&url).await;
    let held = client.mutex("list:held").lock().await.unwrap();
    client
        .mutex("list:idle")
        .lock()
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();
    let reader = client.rwlock("list:rw").read().await.unwrap();
    let permit = client.semaphore("other:sem", 2).acquire().await.unwrap();
    // Unrelated keys, so that small SCAN pages must be walked to the end.
    for index in 0..50 {
        let _: () = node
            .node()
            .query(redis::cmd("SET").arg(format!("app:{index}")).arg(1))
            .await
            .unwrap();
    }

    let out = ok(&url, &["list", "--count", "5"]).await;
    assert_eq!(
        out,
        "list:held  mutex\n\
         list:idle  idle (only its fencing token is kept)\n\
         list:rw  rwlock\n\
         other:sem  semaphore\n"
    );
    let out = ok(&url, &["list", "list:*"]).await;
    assert!(
        out.contains("list:held") && !out.contains("other:sem"),
        "{out}"
    );

    // Evidence that it walked the keyspace with SCAN and never used KEYS.
    let stats: String = node
        .node()
        .query(redis::cmd("INFO").arg("commandstats"))
        .await
        .unwrap();
    assert!(stats.contains("cmdstat_scan:"), "{stats}");
    assert!(!stats.contains("cmdstat_keys:"), "{stats}");

    held.unlock().await.unwrap();
    reader.unlock().await.unwrap();
    permit.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_force_removes_the_lock_but_keeps_the_fence() {
    let node = common::node().await;
    let url = node.url();
    let name = "stuck";
    let keys = LockKeys::new(name).unwrap();
    let stuck = client(&url).await;
    let guard = stuck.mutex(name).lock().await.unwrap();

    // Asked and answered "n": nothing is removed.
    let run = cli(&["--url", &url, "release", "--force", name], "n\n").await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("will remove:"), "{run:?}");
    assert!(run.stdout.contains("[y/N]"), "{run:?}");
    assert!(run.stdout.contains("nothing removed"), "{run:?}");
    assert!(common::exists(&node, &keys.lock).await);
    guard
        .extend()
        .await
        .expect("the holder still holds the lock");

    // Asked and answered "y": removed.
    let run = cli(&["--url", &url, "release", "--force", name], "y\n").await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.contains(&format!("removed:\n  {}\n", keys.lock)),
        "{run:?}"
    );
    assert!(!common::exists(&node, &keys.lock).await);
    assert!(
        common::exists(&node, &keys.fence).await,
        "the fence key is kept"
    );

    // A new client locks at once, with a higher token than the evicted holder's.
    let next = client(&url).await.mutex(name).try_lock().await.unwrap();
    assert!(next.fencing_token() > guard.fencing_token());
    assert!(guard.extend().await.is_err(), "the evicted holder is told");

    // --yes skips the question.
    let run = cli(&["--url", &url, "release", "--force", "--yes", name], "").await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(!run.stdout.contains("[y/N]"), "{run:?}");
    assert!(run.stdout.contains("removed:"), "{run:?}");
    assert!(!common::exists(&node, &keys.lock).await);
    let again = client(&url).await.mutex(name).try_lock().await.unwrap();
    assert!(again.fencing_token() > next.fencing_token());
    again.unlock().await.unwrap();
}

#[tokio::test]
async fn bad_arguments_exit_2_with_a_message() {
    let url = "redis://127.0.0.1:1";
    for (args, message) in [
        (vec!["inspect", "a{b"], "invalid lock name \"a{b\""),
        (vec!["release", "x"], "--force"),
        (vec!["list", "{x}"], "cannot contain braces"),
        (vec!["watch", "x", "--interval", "soon"], "--interval"),
        (vec!["frobnicate"], "unrecognized subcommand"),
        (
            vec!["--url", "not a url", "inspect", "x"],
            "invalid Redis URL",
        ),
        (
            vec!["--url", url, "--cluster", url, "list"],
            "cannot be used with",
        ),
    ] {
        let run = cli(&args, "").await;
        assert_eq!(run.code, 2, "{args:?}: {run:?}");
        assert!(run.stderr.contains(message), "{args:?}: {run:?}");
    }
}

#[tokio::test]
async fn connection_refused_exits_1_naming_the_url() {
    // A port nobody listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("redis://127.0.0.1:{port}");
    for command in [
        &["inspect", "x"][..],
        &["list"],
        &["release", "--force", "-y", "x"],
    ] {
        let mut args = vec!["--url", url.as_str()];
        args.extend_from_slice(command);
        let run = cli(&args, "").await;
        assert_eq!(run.code, 1, "{run:?}");
        assert!(
            run.stderr.contains(&format!("cannot connect to {url}")),
            "{run:?}"
        );
    }
}

/// The binary as installed speaks TLS (`cli` turns on `tls-rustls`): a `rediss://` URL gets
/// as far as the handshake, and a server under an authority no trust store holds (the
/// harness's throwaway one) is refused naming the certificate, not a missing feature.
#[tokio::test]
async fn a_rediss_url_reaches_the_tls_handshake() {
    common::init_tracing();
    let node = TlsNode::start().await.expect("start a TLS Redis container");
    let url = node.url();
    let run = cli(&["--url", &url, "inspect", "x"], "").await;
    assert_eq!(run.code, 1, "{run:?}");
    let text = run.stderr.to_lowercase();
    assert!(
        text.contains("certificate"),
        "names the certificate: {run:?}"
    );
    assert!(!text.contains("not enabled"), "TLS is built in: {run:?}");
}

/// `inspect --output json` gives the same state as one JSON object: the holder's owner with
/// its hold, the last token, the server clock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_as_json_names_the_holder_and_token() {
    let node = common::node().await;
    let url = node.url();
    let guard = client(&url).await.mutex("json:1").lock().await.unwrap();
    let out = ok(&url, &["inspect", "json:1", "--output", "json"]).await;
    let report: serde_json::Value = serde_json::from_str(&out).expect("one JSON object");
    assert_eq!(report["name"], "json:1", "{out}");
    assert_eq!(report["server"], url.as_str(), "{out}");
    assert!(report["now_ms"].as_i64().unwrap() > 0, "{out}");
    let holders = report["mutex"]["holding"]["held"].as_array().expect("held");
    assert_eq!(holders.len(), 1, "{out}");
    assert_eq!(holders[0]["owner"], guard.owner().as_str(), "{out}");
    assert_eq!(holders[0]["holds"].as_array().unwrap().len(), 1, "{out}");
    assert_eq!(
        report["mutex"]["fence"],
        guard.fencing_token().get(),
        "{out}"
    );
    let left = report["mutex"]["lease_left_ms"]
        .as_u64()
        .expect("a lease left, in ms");
    assert!(left > 0 && u128::from(left) <= TTL.as_millis(), "{out}");
    guard.unlock().await.unwrap();
    let out = ok(&url, &["inspect", "json:1", "--output", "json"]).await;
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["mutex"]["holding"], "free", "{out}");
}

/// Without `--url` the CLI dials `LEASEHOLD_URL` (a password stays out of shell history):
/// a refused port named only there is the one the error names; `--url` wins over it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_url_comes_from_leasehold_url_unless_given() {
    let node = common::node().await;
    let refused = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!(
            "redis://127.0.0.1:{}",
            listener.local_addr().unwrap().port()
        )
    };
    let run = |args: &'static [&'static str], env_url: String| async move {
        let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_leasehold"))
            .args(args)
            .env("LEASEHOLD_URL", env_url)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output();
        let output = tokio::time::timeout(RUN_LIMIT, output)
            .await
            .unwrap()
            .unwrap();
        (
            output.status.code().expect("exited, not killed"),
            String::from_utf8_lossy(&output.stderr).into_owned()
                + &String::from_utf8_lossy(&output.stdout),
        )
    };
    let (code, said) = run(&["inspect", "env-url"], refused.clone()).await;
    assert_eq!(code, 1, "{said}");
    assert!(
        said.contains(&format!("cannot connect to {refused}")),
        "{said}"
    );
    let (code, said) = run(&["inspect", "env-url"], node.url()).await;
    assert_eq!(code, 0, "LEASEHOLD_URL names the live node: {said}");
    // A never-locked name has no fence key; the message names the margin, not a made-up age.
    assert!(
        said.contains("never locked, or idle longer than its fence margin, 60 s by default"),
        "{said}"
    );
    let url = node.url();
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_leasehold"))
        .args(["--url", url.as_str(), "inspect", "env-url"])
        .env("LEASEHOLD_URL", &refused)
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "--url wins over LEASEHOLD_URL"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_and_list_through_sentinel() {
    common::init_tracing();
    let topology = SentinelTopology::builder()
        .replicas(0)
        .start()
        .await
        .expect("start Sentinel");
    let client = Client::builder()
        .ttl(TTL)
        .sentinel(&topology.sentinel_urls(), topology.master_name())
        .await
        .unwrap();
    let guard = client.mutex("via-sentinel").lock().await.unwrap();

    let mut target = Vec::new();
    for url in topology.sentinel_urls() {
        target.extend(["--sentinel".to_owned(), url]);
    }
    target.extend(["--service".to_owned(), topology.master_name().to_owned()]);
    let args = |command: &[&str]| {
        let mut args: Vec<String> = target.clone();
        args.extend(command.iter().map(|s| (*s).to_owned()));
        args
    };
    let run_args = args(&["inspect", "via-sentinel"]);
    let run = cli(&run_args.iter().map(String::as_str).collect::<Vec<_>>(), "").await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.contains(&topology.master().url()),
        "inspect names the master: {run:?}"
    );
    assert!(
        run.stdout
            .contains(&format!("holder: {} (1 hold(s)", guard.owner())),
        "{run:?}"
    );
    let run_args = args(&["list"]);
    let run = cli(&run_args.iter().map(String::as_str).collect::<Vec<_>>(), "").await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.stdout, "via-sentinel  mutex\n", "{run:?}");
    guard.unlock().await.unwrap();
}

/// A lock name whose keys hash into master `index`'s slot range.
async fn name_on_master(cluster: &ClusterTopology, index: usize) -> String {
    let (low, high) = cluster.slot_range(index);
    for candidate in 0.. {
        let name = format!("shard-{index}-{candidate}");
        let key = LockKeys::new(&name).unwrap().lock;
        let slot: u16 = cluster.masters()[0]
            .query(redis::cmd("CLUSTER").arg("KEYSLOT").arg(key))
            .await
            .unwrap();
        if (low..=high).contains(&slot) {
            return name;
        }
    }
    unreachable!("some name hashes into every range")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_and_list_on_a_cluster() {
    common::init_tracing();
    let cluster = ClusterTopology::builder()
        .replicas_per_master(0)
        .start()
        .await
        .expect("start a cluster");
    let client = Client::builder()
        .ttl(TTL)
        .cluster(&cluster.urls())
        .await
        .unwrap();
    // One lock on every master: `list` must scan each of them, `inspect` find each.
    let mut names = Vec::new();
    let mut guards = Vec::new();
    for index in 0..cluster.masters().len() {
        let name = name_on_master(&cluster, index).await;
        guards.push(client.mutex(name.as_str()).lock().await.unwrap());
        names.push(name);
    }
    let seed = cluster.urls()[0].clone();

    let run = cli(&["--cluster", &seed, "list"], "").await;
    assert_eq!(run.code, 0, "{run:?}");
    let mut expected: Vec<String> = names.iter().map(|n| format!("{n}  mutex\n")).collect();
    expected.sort();
    assert_eq!(run.stdout, expected.concat(), "{run:?}");

    for ((name, guard), master) in names.iter().zip(&guards).zip(cluster.masters()) {
        let run = cli(&["--cluster", &seed, "inspect", name], "").await;
        assert_eq!(run.code, 0, "{run:?}");
        assert!(run.stdout.contains(&master.url()), "{run:?}");
        assert!(
            run.stdout
                .contains(&format!("holder: {} (1 hold(s)", guard.owner())),
            "{run:?}"
        );
    }
    for guard in guards {
        guard.unlock().await.unwrap();
    }
}

/// A named client's holds show its name (`ClientBuilder::name`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_shows_the_holder_s_client_name() {
    let node = common::node().await;
    let url = node.url();
    let named = Client::builder()
        .name("billing@pod-7")
        .connect(&url)
        .await
        .unwrap();
    let guard = named.mutex("named:1").lock().await.unwrap();
    let out = ok(&url, &["inspect", "named:1"]).await;
    assert!(out.contains("[client billing@pod-7]"), "{out}");
    guard.unlock().await.unwrap();
}
