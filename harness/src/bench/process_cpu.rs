//! The bench process's own CPU time, so a cell can charge the client side of an acquisition
//! as it charges the server side (`INFO cpu`): on a machine whose cores the clients and Redis
//! share, throughput is bounded by what both together spend per acquisition. A contender
//! whose clients are processes of their own (the Python peers) adds theirs, read the same way.
//!
//! Read from `/proc/self/stat` (utime + stime of every thread the process ever ran, in clock
//! ticks), because the workspace forbids the `unsafe` a `getrusage` call would need.

use std::time::Duration;

use crate::error::{Error, Result};

/// Clock ticks per second of `/proc/*/stat`: Linux's `USER_HZ`, fixed at 100 in its ABI
/// whatever the kernel's own tick rate.
const USER_HZ: u64 = 100;

/// CPU time (user + system) the bench process has used so far, at a 10 ms resolution.
pub fn process_cpu() -> Result<Duration> {
    cpu_of("/proc/self/stat")
}

/// CPU time (user + system) the process `pid` has used so far, at a 10 ms resolution.
pub fn cpu_of_process(pid: u32) -> Result<Duration> {
    cpu_of(&format!("/proc/{pid}/stat"))
}

fn cpu_of(path: &str) -> Result<Duration> {
    let stat = std::fs::read_to_string(path).map_err(|err| Error::Report {
        what: path.to_owned(),
        reason: err.to_string(),
    })?;
    cpu_of_stat(&stat).map_err(|reason| Error::Report {
        what: path.to_owned(),
        reason,
    })
}

/// utime + stime (fields 14 and 15) of a `/proc/<pid>/stat` line. The command name (field 2)
/// is in parentheses and may itself hold spaces or parentheses, so fields are counted from
/// the last `)`.
fn cpu_of_stat(stat: &str) -> std::result::Result<Duration, String> {
    let (_, rest) = stat
        .rsplit_once(')')
        .ok_or_else(|| format!("no `(comm)` field in {stat:?}"))?;
    // After the `)` the fields start at field 3 (state): utime is field 14, stime 15.
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |index: usize, name: &str| {
        fields
            .get(index)
            .ok_or_else(|| format!("{name} missing in {stat:?}"))?
            .parse::<u64>()
            .map_err(|err| format!("{name} in {stat:?}: {err}"))
    };
    let total = ticks(11, "utime")? + ticks(12, "stime")?;
    Ok(Duration::from_millis(total * 1000 / USER_HZ))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn reads_utime_and_stime_past_a_command_name_with_spaces_and_parentheses() {
        let stat = "4242 (bench (x) y) R 1 4242 4242 0 -1 4194560 1500 0 0 0 \
                    250 37 0 0 20 0 9 0 1234 567890 123 18446744073709551615";
        assert_eq!(cpu_of_stat(stat).unwrap(), Duration::from_millis(2870));
    }

    #[test]
    fn a_truncated_line_is_an_error_naming_the_field() {
        let err = cpu_of_stat("4242 (bench) R 1 4242").unwrap_err();
        assert!(err.contains("utime missing"), "{err}");
        assert!(cpu_of_stat("no parenthesis").is_err());
    }

    #[test]
    fn this_process_has_used_some_cpu_and_the_count_moves_with_work() {
        let before = process_cpu().unwrap();
        // Burn CPU until the counter moves (a tick is 10 ms of CPU); a counter stuck for
        // seconds of busy work is a failure, not a hang.
        let start = std::time::Instant::now();
        let mut x = 0u64;
        let mut after = before;
        while after == before && start.elapsed() < Duration::from_secs(5) {
            for _ in 0..100_000 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
            }
            after = process_cpu().unwrap();
        }
        assert!(after > before, "{before:?} → {after:?}");
        let by_pid = cpu_of_process(std::process::id()).unwrap();
        assert!(by_pid >= after, "{after:?} then {by_pid:?}");
        assert!(cpu_of_process(u32::MAX).is_err(), "no such process");
    }
}
