//! `leasehold list [PATTERN]`: the lock names that have keys, found with `SCAN`.
//!
//! Never `KEYS`: that blocks the server for the whole keyspace. `SCAN` walks it in pages
//! (`--count` is the page-size hint) so production traffic interleaves; on a Cluster each
//! master is scanned with its own cursor. The pattern is a glob on the lock name, matched by
//! the server against `leasehold:{PATTERN}*`: names cannot contain braces, so the pattern's
//! braces line up with the key's hash tag and the match is exact.

use std::collections::{BTreeMap, BTreeSet};

use indicatif::{ProgressBar, ProgressStyle};

use crate::error::{CliError, CliResult};
use crate::layout::{FENCE, kind_of, name_of};
use crate::target::TargetArgs;

/// Default `SCAN` page-size hint: a hundred times Redis' default of 10, so that a large
/// keyspace takes few round trips while each page stays a sub-millisecond command.
pub const DEFAULT_SCAN_COUNT: u32 = 1000;

/// Runs `list`: prints `name  kinds` per lock name, sorted (kinds: mutex, rwlock,
/// semaphore, or "idle" when only a fence key is left).
pub async fn run(target: &TargetArgs, pattern: &str, count: u32) -> CliResult<()> {
    if pattern.contains(['{', '}']) {
        return Err(CliError::InvalidArgument(format!(
            "pattern {pattern:?}: lock names cannot contain braces"
        )));
    }
    let key_pattern = format!("{}:{{{pattern}}}*", leasehold::KEY_PREFIX);
    let servers = target.masters().await?;
    let progress = ProgressBar::new_spinner();
    progress.set_style(
        ProgressStyle::with_template("{spinner} {msg} ({pos} keys)")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    let mut names: BTreeMap<String, BTreeSet<&'static str>> = BTreeMap::new();
    for mut server in servers.into_iter() {
        progress.set_message(format!("scanning {}", server.url));
        let mut cursor: u64 = 0;
        loop {
            let (next, keys): (u64, Vec<String>) = server
                .query(
                    redis::cmd("SCAN")
                        .arg(cursor)
                        .arg("MATCH")
                        .arg(&key_pattern)
                        .arg("COUNT")
                        .arg(count),
                    "SCAN",
                )
                .await?;
            progress.inc(keys.len() as u64);
            for key in &keys {
                if let (Some(name), Some(kind)) = (name_of(key), kind_of(key)) {
                    names.entry(name.to_owned()).or_default().insert(kind);
                }
            }
            if next == 0 {
                break;
            }
            cursor = next;
        }
    }
    progress.finish_and_clear();
    for (name, kinds) in &names {
        let kinds: Vec<&str> = kinds.iter().copied().filter(|k| *k != FENCE).collect();
        if kinds.is_empty() {
            println!("{name}  idle (only its fencing token is kept)");
        } else {
            println!("{name}  {}", kinds.join(","));
        }
    }
    eprintln!("{} lock name(s)", names.len());
    Ok(())
}
