//! Thin async wrapper over the `docker` CLI for what testcontainers does not expose:
//! network create/remove/connect/disconnect, SIGKILL, image inspect/pull/build.
//! Every call is bounded by a timeout so a wedged daemon fails a test instead of hanging it.

use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;

use crate::error::{Error, Result};

/// Upper bound for a quick docker call (inspect, connect, kill); the daemon answers these
/// in tens of milliseconds on an idle machine, seconds on a loaded 2-core CI box.
pub(crate) const DOCKER_CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs `docker <args>` and returns its trimmed stdout; a non-zero exit becomes
/// [`Error::Docker`] carrying stderr.
pub(crate) async fn docker(args: &[&str]) -> Result<String> {
    docker_with_timeout(args, DOCKER_CALL_TIMEOUT).await
}

/// Like [`docker`] but with a caller-chosen bound (pulls and builds).
pub(crate) async fn docker_with_timeout(args: &[&str], limit: Duration) -> Result<String> {
    let command = args.join(" ");
    let child = Command::new("docker")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output();
    let output = match tokio::time::timeout(limit, child).await {
        Ok(Ok(output)) => output,
        Ok(Err(err)) => {
            return Err(Error::Docker {
                command,
                reason: format!("cannot run the docker CLI: {err}"),
            });
        }
        Err(_) => {
            return Err(Error::Docker {
                command,
                reason: format!("no answer within {limit:?}"),
            });
        }
    };
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
    } else {
        Err(Error::Docker {
            command,
            reason: format!(
                "{}: {}",
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            ),
        })
    }
}

/// Blocking variant for `Drop` impls, where no async context can be relied on.
pub(crate) fn docker_blocking(args: &[&str]) -> Result<String> {
    let command = args.join(" ");
    let output = std::process::Command::new("docker")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|err| Error::Docker {
            command: command.clone(),
            reason: format!("cannot run the docker CLI: {err}"),
        })?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
    } else {
        Err(Error::Docker {
            command,
            reason: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        })
    }
}
