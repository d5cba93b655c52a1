//! A team's own lock design in a design file: a bad file is a clear error naming the
//! file, line and field; the worked example (`sim/designs/compare-and-delete.toml`)
//! survives everything it lists; the same file with its release script's comparison
//! removed is caught as exclusion broken by plain exploration alone, fails the check and
//! its JUnit case, and four shards of that check merge into the same report.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use leasehold_sim::explore::Failure;
use leasehold_sim::report::design_check::run_check;
use leasehold_sim::report::design_shard::{self, run_shard};
use leasehold_sim::report::designs::FAULT_CLASSES;
use leasehold_sim::workload::designs::file::{DesignFile, DesignFileError};

const EXAMPLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/designs/compare-and-delete.toml"
);
const SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/designs/compare_and_delete.lua"
);

fn classes() -> Vec<&'static str> {
    FAULT_CLASSES.iter().map(|c| c.name).collect()
}

/// A directory of its own for one test, with `files` written into it.
fn dir_with(test: &str, files: &[(&str, &str)]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "leasehold-design-files-{test}-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    for (name, text) in files {
        std::fs::write(dir.join(name), text).unwrap();
    }
    dir
}

fn load_error(test: &str, toml: &str) -> DesignFileError {
    let dir = dir_with(test, &[("lock.toml", toml), ("release.lua", "return 1")]);
    let err = DesignFile::load(&dir.join("lock.toml"), &classes()).unwrap_err();
    std::fs::remove_dir_all(&dir).unwrap();
    err
}

const GOOD: &str = r#"name = "t"

[acquire]
command = ["SET", "{key}", "{token}", "NX", "PX", "{ttl_ms}"]

[release]
script = "release.lua"
keys = ["{key}"]
args = ["{token}"]

[hold]
value = "{token}"
"#;

#[test]
fn a_bad_design_file_names_its_file_line_and_field() {
    let unknown = load_error("unknown", &GOOD.replace("[hold]", "[hold]\nvalu = \"x\""));
    assert_eq!((unknown.line, unknown.field.as_str()), (12, "valu"));
    assert!(
        unknown.to_string().contains("lock.toml:12: valu:"),
        "{unknown}"
    );

    let template = load_error("template", &GOOD.replace("{ttl_ms}\"]", "{ttl}\"]"));
    assert_eq!(
        (template.line, template.field.as_str()),
        (4, "acquire.command")
    );
    assert!(template.message.contains("{ttl}"), "{template}");

    let script = load_error("script", &GOOD.replace("release.lua", "missing.lua"));
    assert_eq!((script.line, script.field.as_str()), (7, "release.script"));

    let survive = load_error("survive", &format!("must_survive = [\"tornado\"]\n{GOOD}"));
    assert_eq!((survive.line, survive.field.as_str()), (1, "must_survive"));
    assert!(survive.message.contains("tornado"), "{survive}");

    let both = load_error(
        "both",
        &GOOD.replace(
            "value = \"{token}\"",
            "value = \"{token}\"\nfield = \"{owner}\"",
        ),
    );
    assert_eq!(both.field, "hold");

    let missing = DesignFile::load(Path::new("/nonexistent/lock.toml"), &classes()).unwrap_err();
    assert_eq!((missing.line, missing.field.as_str()), (1, "file"));

    let broken = load_error("syntax", "name = \"t\"\n[acquire\n");
    assert_eq!(broken.line, 2, "{broken}");
}

/// The worked example survives what it lists; its script, with the comparison removed,
/// frees other clients' locks, and plain exploration alone shows it.
#[test]
fn a_planted_bug_in_a_design_file_fails_the_check_by_exploration() {
    let example = DesignFile::load(Path::new(EXAMPLE), &classes()).unwrap();
    assert!(example.must_survive.iter().any(|m| m == "exploration"));
    let good = run_check(&example, Path::new(EXAMPLE), 2, 100, 2, || {}).unwrap();
    assert!(good.passed(), "{}", good.markdown());
    assert_eq!(good.exploration.failing, 0);

    let script = std::fs::read_to_string(SCRIPT).unwrap();
    let planted = script.replace(
        "if redis.call('get', KEYS[1]) == ARGV[1] then",
        "if true then",
    );
    assert_ne!(
        planted, script,
        "the comparison is where the test expects it"
    );
    let toml = std::fs::read_to_string(EXAMPLE).unwrap();
    let dir = dir_with(
        "planted",
        &[
            ("compare-and-delete.toml", &toml),
            ("compare_and_delete.lua", &planted),
        ],
    );
    let file = dir.join("compare-and-delete.toml");
    let bad = DesignFile::load(&file, &classes()).unwrap();
    let check = run_check(&bad, &file, 2, 100, 2, || {}).unwrap();
    assert!(!check.passed());
    assert!(check.exploration.failing > 0);
    assert_eq!(
        check.exploration.first.as_ref().map(|f| f.1),
        Some(Failure::ExclusionBroken)
    );
    let exploration = check
        .verdicts
        .iter()
        .find(|v| v.name == "exploration")
        .unwrap();
    assert!(exploration.must_survive && exploration.failure.is_some());
    let junit = check.junit();
    assert!(
        junit.contains("name=\"exploration\">\n      <failure message=\"ExclusionBroken"),
        "{junit}"
    );
    // Four shards of the same exploration, merged, are the unsharded check.
    let shard_dirs: Vec<PathBuf> = (1..=4)
        .map(|index| {
            let shard = format!("{index}/4").parse().unwrap();
            let run = run_shard(&bad, &file, 2, 100, shard, 2, || {}).unwrap();
            let out = dir.join(format!("shard-{index}"));
            run.write(&out).unwrap();
            out
        })
        .rev()
        .collect();
    let mut merged = design_shard::merge(&shard_dirs, 2).unwrap();
    merged.wall_s = check.wall_s;
    assert_eq!(merged.markdown(), check.markdown());
    assert_eq!(merged.junit(), check.junit());
    assert_eq!(
        serde_json::to_string(&merged.exploration.shrunk).unwrap(),
        serde_json::to_string(&check.exploration.shrunk).unwrap()
    );
    assert!(
        design_shard::merge(&shard_dirs[1..], 2).is_err(),
        "a shard is missing"
    );
    // What it writes: the shrunk failure's spec replays the planted design.
    let mut check = check;
    let written = check.write(&dir.join("out")).unwrap();
    let spec = written
        .iter()
        .find(|p| {
            p.to_string_lossy().contains("exploration-shrunk")
                && p.extension().is_some_and(|e| e == "json")
        })
        .unwrap();
    let spec: leasehold_sim::scenario::run::RunSpec =
        serde_json::from_str(&std::fs::read_to_string(spec).unwrap()).unwrap();
    assert!(
        spec.design_file
            .as_ref()
            .is_some_and(|d| d.release.source.as_deref() == Some(planted.as_str()))
    );
    let (_, findings) = leasehold_sim::explore::run_and_classify(&spec).unwrap();
    assert!(
        findings
            .iter()
            .any(|f| f.failure == Failure::ExclusionBroken && f.known_limitation.is_none())
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
