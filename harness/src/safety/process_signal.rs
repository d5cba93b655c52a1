//! Job-control signals for a worker process: the injector continues a frozen worker and
//! reads from the kernel whether it is stopped; the worker stops itself at the hold it was
//! told to freeze in.
//!
//! Invariant: a freeze is stopped from inside the worker, at a moment it holds. Signalled
//! from outside, a stop raced the worker's short holds: the parent learns of a hold through
//! the worker's pipe only after it began, and by the time `kill` ran the hold had often ended.

use std::process::ExitStatus;

use tokio::process::Command;

use crate::error::{Error, Result};

/// A worker process's failure, named for what failed.
pub(super) fn process_error(what: &str, err: impl std::fmt::Display) -> Error {
    Error::Lock {
        name: "(worker process)".to_owned(),
        reason: format!("{what}: {err}"),
    }
}

/// Sends `signal` (`STOP`, `CONT`) to process `pid` with the system's `kill`.
pub async fn signal(pid: u32, signal: &str) -> Result<()> {
    let status = Command::new("kill")
        .args(kill_args(pid, signal))
        .status()
        .await;
    checked(pid, signal, status)
}

/// Whether the kernel reports process `pid` stopped (state `T` in `/proc/<pid>/stat`): the
/// evidence that a freeze landed.
pub async fn is_stopped(pid: u32) -> bool {
    let Ok(stat) = tokio::fs::read_to_string(format!("/proc/{pid}/stat")).await else {
        return false;
    };
    // The state follows the command name, which is in parentheses and may hold spaces.
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .is_some_and(|state| state == "T")
}

/// Stops the calling process with SIGSTOP and returns once something continues it.
///
/// Blocking on purpose: every thread of the process, the calling one included, freezes
/// until SIGCONT, and the call returns when `kill`'s exit is reaped after it. Only a worker
/// process may call this; the harness's own process would stop with it.
pub fn stop_self() -> Result<()> {
    let pid = std::process::id();
    let status = std::process::Command::new("kill")
        .args(kill_args(pid, "STOP"))
        .status();
    checked(pid, "STOP", status)
}

fn kill_args(pid: u32, signal: &str) -> [String; 2] {
    [format!("-{signal}"), pid.to_string()]
}

/// `kill`'s outcome as the harness's error: it did not run, or it refused.
fn checked(pid: u32, signal: &str, status: std::io::Result<ExitStatus>) -> Result<()> {
    let status = status.map_err(|e| process_error("kill", e))?;
    if status.success() {
        Ok(())
    } else {
        Err(process_error("kill", format!("-{signal} {pid}: {status}")))
    }
}
