//! Every example in `lock/examples/` runs against real Redis (a single node; five
//! independent masters for RedLock), exits 0 and prints its `NAME: OK` line.
//!
//! How the test finds the example binaries, robustly:
//! - Under cargo-nextest (the project's runner, `NEXTEST` is set) the build has finished
//!   before any test starts, so the test runs `cargo build --workspace --examples` itself
//!   (`env!("CARGO")`, same target dir through the inherited `CARGO_TARGET_DIR`, same
//!   features) and takes each binary's path from cargo's JSON messages. That build is a
//!   no-op when the examples are fresh, and it works with filters such as
//!   `--test examples`, which would otherwise leave the examples unbuilt or stale.
//! - Under plain `cargo test`, cargo holds the build directory's lock while tests run, so
//!   a nested build would wait forever. There the test uses the binaries `cargo test`
//!   built next to its own executable (`<target>/<profile>/examples/`, which it does by
//!   default) and fails with a hint if one is missing or older than its source.
//!
//! All examples run in one test so that the nested build happens once per run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use leasehold_harness::IndependentMasters;

/// Each example's name; all but the RedLock one take a single node's URL.
const SINGLE_NODE_EXAMPLES: [&str; 8] = [
    "quick_start",
    "own_connection",
    "fenced_resource",
    "fair_work_queue",
    "rw_cache_refresh",
    "semaphore_rate_limit",
    "scoped_long_job",
    "sql_fencing",
];
const REDLOCK_EXAMPLE: &str = "redlock_five_masters";
const REDLOCK_MASTERS: usize = 5;

/// Environment variables cargo sets for one crate's build or test run (prefixes).
const PER_CRATE_VARS: [&str; 9] = [
    "CARGO_MANIFEST_",
    "CARGO_PKG_",
    "CARGO_CRATE_NAME",
    "CARGO_BIN_",
    "CARGO_PRIMARY_PACKAGE",
    "CARGO_TARGET_TMPDIR",
    "CARGO_RUSTC_CURRENT_DIR",
    "OUT_DIR",
    "NEXTEST_",
];

/// An example should finish "within a few seconds"; this bound leaves room for a slow CI.
const EXAMPLE_LIMIT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_example_runs_against_real_redis() {
    let binaries = tokio::task::spawn_blocking(example_binaries).await.unwrap();
    let (node, masters) = tokio::join!(common::node(), IndependentMasters::start(REDLOCK_MASTERS));
    let masters = masters.expect("start five masters");

    for name in SINGLE_NODE_EXAMPLES {
        run(&binaries, name, &[node.url()]).await;
    }
    run(&binaries, REDLOCK_EXAMPLE, &masters.urls()).await;
}

/// Runs example `name` with `args` and checks its exit code and success line.
async fn run(binaries: &BTreeMap<String, PathBuf>, name: &str, args: &[String]) {
    let binary = binaries
        .get(name)
        .unwrap_or_else(|| panic!("no binary for example {name}"));
    let started = std::time::Instant::now();
    let output = tokio::time::timeout(
        EXAMPLE_LIMIT,
        tokio::process::Command::new(binary)
            .args(args)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .unwrap_or_else(|_| panic!("example {name} did not finish within {EXAMPLE_LIMIT:?}"))
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "example {name} failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    assert!(
        stdout.contains(&format!("{name}: OK")),
        "example {name} printed no success line:\n{stdout}"
    );
    eprintln!("example {name}: OK in {:?}", started.elapsed());
}

/// Example name -> binary, built or found as the module doc explains.
fn example_binaries() -> BTreeMap<String, PathBuf> {
    let names = SINGLE_NODE_EXAMPLES.into_iter().chain([REDLOCK_EXAMPLE]);
    if std::env::var_os("NEXTEST").is_some() {
        let built = build_examples();
        for name in names {
            assert!(built.contains_key(name), "cargo built no example {name}");
        }
        return built;
    }
    let dir = std::env::current_exe()
        .unwrap()
        .parent() // deps/
        .and_then(Path::parent) // the profile directory
        .expect("the test runs from <target>/<profile>/deps")
        .join("examples");
    names
        .map(|name| {
            let binary = dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
            let source = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("examples")
                .join(format!("{name}.rs"));
            let fresh = modified(&binary).is_some_and(|built| Some(built) >= modified(&source));
            assert!(
                fresh,
                "{} is missing or older than its source: run the tests with cargo nextest, \
                 or `cargo test` without target filters (it builds the examples), or \
                 `cargo build -p leasehold --examples` first",
                binary.display()
            );
            (name.to_owned(), binary)
        })
        .collect()
}

/// Builds the examples with this run's cargo, target dir and features.
fn build_examples() -> BTreeMap<String, PathBuf> {
    let mut cargo = Command::new(env!("CARGO"));
    cargo.args([
        "build",
        "--locked",
        "--workspace",
        "--examples",
        "--message-format=json-render-diagnostics",
    ]);
    // Cargo's per-crate variables, set for this test process, must not leak into the
    // nested build: build scripts that track them (ring's tracks CARGO_MANIFEST_DIR) would
    // rerun and rebuild half the dependency graph, twice per run.
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if PER_CRATE_VARS.iter().any(|prefix| name.starts_with(prefix)) {
            cargo.env_remove(name.as_ref());
        }
    }
    if cfg!(feature = "cli") {
        // `.ci/test` runs `--workspace --all-features`; the same selection here resolves
        // the same features, so the build reuses that run's artifacts instead of building
        // a second set (a narrower run pays for that second set once).
        cargo.arg("--all-features");
    }
    let output = cargo
        .stderr(Stdio::inherit())
        .output()
        .expect("run cargo build --examples");
    assert!(output.status.success(), "cargo build --examples failed");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|message| {
            message["reason"] == "compiler-artifact"
                && message["target"]["kind"]
                    .as_array()
                    .is_some_and(|kinds| kinds.iter().any(|kind| kind == "example"))
        })
        .filter_map(|message| {
            let name = message["target"]["name"].as_str()?.to_owned();
            let path = PathBuf::from(message["executable"].as_str()?);
            Some((name, path))
        })
        .collect()
}

fn modified(path: &Path) -> Option<std::time::SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}
