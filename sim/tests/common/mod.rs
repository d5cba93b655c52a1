//! Helpers shared by the simulator's integration tests: finding a line of a lock script, so
//! tests name call sites by their code rather than by line numbers that move.
#![allow(clippy::unwrap_used, dead_code)]

use leasehold::script::scripts;

/// The 1-based line of the first line of `script` (a file stem) that contains `code`.
pub fn line_of(script: &str, code: &str) -> u32 {
    let script = scripts()
        .all()
        .into_iter()
        .find(|s| s.name() == script)
        .unwrap();
    let index = script
        .source()
        .lines()
        .position(|line| line.contains(code))
        .unwrap();
    u32::try_from(index + 1).unwrap()
}
