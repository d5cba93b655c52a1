//! The new user's path, as the README tells it: a `cargo new` project that depends on
//! `lock/` by path with `default-features = false, features = ["tls-rustls"]` and the
//! README's tokio line, whose `main.rs` is the README's Quick start as written (only its URL
//! literal is read from `LEASEHOLD_URL` instead), builds, connects over TLS (`rediss://`) to
//! a real server and holds a lock with `Mutex::run`.
//!
//! The project is generated from README.md at every run, so the test fails when the Quick
//! start or the Install block drifts from what compiles and runs. It builds into the
//! workspace's target directory (the dependencies the workspace already built are reused;
//! only those the feature set changes are compiled), which takes a minute or two: hence
//! `#[ignore]`, and `.ci/test` runs it on its own (`--run-ignored only`).
//!
//! The server's certificate comes from the fixture's throwaway authority, which no trust
//! store holds (`tls-rustls` trusts the Mozilla roots only): so the URL carries redis-rs'
//! `#insecure` (encrypted, certificate unchecked), and the project's one line beyond the
//! README turns on redis-rs' `tls-rustls-insecure`, which such a URL needs. Certificate
//! checks themselves are `lock/tests/tls.rs`'s.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use leasehold_harness::TlsNode;

/// What the generated program reads its URL from.
const URL_ENV: &str = "LEASEHOLD_URL";
/// The dependency line beyond the README: `#insecure` URLs (see the module docs).
const INSECURE_URLS: &str =
    "redis = { version = \"1\", default-features = false, features = [\"tls-rustls-insecure\"] }\n";
/// The Quick start's last line, up to the token it prints.
const DONE_LINE: &str = "done under token ";

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

/// The body of the first fenced block of `language` after the heading `heading`.
fn fenced_block(readme: &str, heading: &str, language: &str) -> String {
    let section = readme
        .split_once(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("README.md has no `{heading}` section"))
        .1;
    let body = section
        .split_once(&format!("```{language}\n"))
        .unwrap_or_else(|| panic!("`{heading}` has no ```{language} block"))
        .1;
    body.split_once("```")
        .unwrap_or_else(|| panic!("`{heading}`'s ```{language} block is not closed"))
        .0
        .to_owned()
}

/// The Quick start with its one `"redis://…"` or `"rediss://…"` literal read from
/// [`URL_ENV`] instead.
fn quick_start_reading_the_url(readme: &str) -> String {
    let code = fenced_block(readme, "## Quick start", "rust");
    let literals: Vec<usize> = code
        .match_indices("\"redis")
        .map(|(at, _)| at)
        .filter(|&at| {
            code[at + 1..].starts_with("redis://") || code[at + 1..].starts_with("rediss://")
        })
        .collect();
    let [at] = literals[..] else {
        panic!(
            "the Quick start should connect to one literal URL, found {}",
            literals.len()
        );
    };
    let end = at + 1 + code[at + 1..].find('"').unwrap();
    format!(
        "{}&std::env::var(\"{URL_ENV}\").expect(\"{URL_ENV} names the server\"){}",
        &code[..at],
        &code[end + 1..]
    )
}

/// The Install block's dependency lines other than `leasehold`'s (tokio's).
fn install_dependencies(readme: &str) -> Vec<String> {
    let block = fenced_block(readme, "## Install", "toml");
    let lines: Vec<String> = block
        .lines()
        .filter(|line| !line.starts_with('[') && !line.trim().is_empty())
        .filter(|line| !line.starts_with("leasehold"))
        .map(str::to_owned)
        .collect();
    assert!(
        lines.iter().any(|line| line.starts_with("tokio")),
        "the Install block should name tokio: {block}"
    );
    lines
}

/// The `[profile…]` sections of a manifest, headers included.
fn profiles(manifest: &str) -> String {
    let mut kept = String::new();
    let mut keep = false;
    for line in manifest.lines() {
        if line.starts_with('[') {
            keep = line.starts_with("[profile");
        }
        if keep {
            kept.push_str(line);
            kept.push('\n');
        }
    }
    assert!(!kept.is_empty(), "the workspace manifest has no profile");
    kept
}

/// Runs `command`, failing the test with its output unless it succeeds; returns stdout.
fn run(command: &mut Command, what: &str) -> String {
    let output = command
        .output()
        .unwrap_or_else(|err| panic!("{what}: {err}"));
    assert!(
        output.status.success(),
        "{what}: {}\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Generates the project in `dir` and builds it into `target`; returns its binary.
fn build_project(dir: &Path, target: &Path) -> PathBuf {
    let workspace = workspace();
    let readme = std::fs::read_to_string(workspace.join("README.md")).unwrap();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let project = dir.join("new-user");
    run(
        Command::new(&cargo)
            .args([
                "new", "--quiet", "--bin", "--vcs", "none", "--name", "new-user",
            ])
            .arg(&project),
        "cargo new",
    );
    let mut manifest = std::fs::read_to_string(project.join("Cargo.toml")).unwrap();
    manifest.push_str(&format!(
        "leasehold = {{ path = {:?}, default-features = false, features = [\"tls-rustls\"] }}\n",
        workspace.join("lock").display().to_string()
    ));
    manifest.push_str(INSECURE_URLS);
    for line in install_dependencies(&readme) {
        manifest.push_str(&line);
        manifest.push('\n');
    }
    // The workspace's profiles too, or nothing in the shared target directory would fit.
    let workspace_manifest = std::fs::read_to_string(workspace.join("Cargo.toml")).unwrap();
    manifest.push_str(&profiles(&workspace_manifest));
    std::fs::write(project.join("Cargo.toml"), manifest).unwrap();
    std::fs::write(
        project.join("src/main.rs"),
        quick_start_reading_the_url(&readme),
    )
    .unwrap();
    // The workspace's resolved versions, for the same reason.
    std::fs::copy(workspace.join("Cargo.lock"), project.join("Cargo.lock")).unwrap();
    let mut build = Command::new(&cargo);
    // Cargo set `CARGO_MANIFEST_DIR`, `CARGO_PKG_NAME`, … for this test; build scripts that
    // rerun when those change (ring's) would otherwise rebuild, and the workspace's next
    // build after them.
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("CARGO_") && name != "CARGO_HOME" {
            build.env_remove(name);
        }
    }
    build
        .args(["build", "--quiet", "--manifest-path"])
        .arg(project.join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", target);
    let started = Instant::now();
    run(&mut build, "building the new user's project");
    eprintln!("built the new user's project in {:?}", started.elapsed());
    target.join("debug").join("new-user")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "builds a project with cargo for a minute or two: .ci/test runs it on its own"]
async fn readme_quick_start_holds_a_lock_over_tls() {
    let dir = std::env::temp_dir().join(format!("leasehold-new-user-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target"));
    let binary = build_project(&dir, &target);

    let node = TlsNode::start().await.unwrap();
    let url = format!("{}/#insecure", node.url());
    assert!(url.starts_with("rediss://"), "{url}");
    let stdout = run(Command::new(&binary).env(URL_ENV, &url), "the Quick start");
    let token: u64 = stdout
        .lines()
        .find_map(|line| line.strip_prefix(DONE_LINE))
        .unwrap_or_else(|| panic!("no `{DONE_LINE}…` line in: {stdout}"))
        .trim()
        .parse()
        .unwrap();
    assert!(token > 0, "{stdout}");
    // The lock was taken on this server (its fence key outlives the hold) and released (a
    // lock's own key is `leasehold:{name}`, nothing after the brace).
    let keys: Vec<String> = node
        .single()
        .node()
        .query(redis::cmd("KEYS").arg("leasehold:*"))
        .await
        .unwrap();
    assert!(
        !keys.is_empty(),
        "the Quick start left no trace on the server"
    );
    assert!(
        !keys.iter().any(|key| key.ends_with('}')),
        "the Quick start's lock is still held: {keys:?}"
    );
    eprintln!("the Quick start held its lock over {url} (token {token}); keys left: {keys:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The README as it stands yields the project: one URL in the Quick start, read from the
/// environment instead, and tokio among the Install block's dependencies (this runs in the
/// main test run, so a README edit that breaks extraction fails fast).
#[test]
fn the_readme_yields_the_project() {
    let readme = std::fs::read_to_string(workspace().join("README.md")).unwrap();
    let main = quick_start_reading_the_url(&readme);
    assert!(
        main.contains(&format!("std::env::var(\"{URL_ENV}\")")),
        "{main}"
    );
    assert!(!main.contains("redis://"), "{main}");
    assert!(
        main.contains(".run("),
        "the Quick start no longer uses run(): {main}"
    );
    assert!(
        main.contains(DONE_LINE),
        "the Quick start no longer prints its token: {main}"
    );
    assert!(install_dependencies(&readme)[0].starts_with("tokio"));
}

#[test]
#[should_panic(expected = "one literal URL, found 2")]
fn a_quick_start_with_two_urls_is_refused() {
    quick_start_reading_the_url(
        "\n## Quick start\n```rust\nconnect(\"redis://a\"); connect(\"rediss://b\");\n```\n",
    );
}
