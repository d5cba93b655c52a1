//! Removes what killed harness runs left behind: containers and networks whose
//! [`RUN_LABEL`] names a run on this host whose process no longer exists (a run killed
//! before its `Drop`s could remove them).
//!
//! Invariant: only a dead run's resources are removed — a label naming another host, or a
//! process that is still alive (another run, a test in parallel), is left alone.

use crate::error::Result;
use crate::topology::docker::docker;
use crate::topology::network::{RUN_LABEL, host_name};

/// What [`remove_dead_runs`] removed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Removed {
    /// Containers removed.
    pub containers: usize,
    /// Networks removed.
    pub networks: usize,
}

/// Whether a [`RUN_LABEL`] value names a run on `host` whose process is gone.
fn is_dead_run(label: &str, host: &str) -> bool {
    let Some((run_host, pid)) = label.rsplit_once(':') else {
        return false;
    };
    run_host == host
        && pid.parse::<u32>().is_ok()
        && !std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// `(id, run label)` of every `kind` (`ps -a` or `network ls`) carrying [`RUN_LABEL`].
async fn labelled(list: &[&str]) -> Result<Vec<(String, String)>> {
    let filter = format!("label={RUN_LABEL}");
    let format = format!("{{{{.ID}}}}\t{{{{.Label \"{RUN_LABEL}\"}}}}");
    let mut args = list.to_vec();
    args.extend(["--filter", &filter, "--format", &format]);
    let out = docker(&args).await?;
    Ok(out
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(id, run)| (id.to_owned(), run.to_owned()))
        .collect())
}

/// Removes the containers, then the networks, of dead runs on this host.
pub async fn remove_dead_runs() -> Result<Removed> {
    let host = host_name();
    let mut removed = Removed::default();
    for (id, run) in labelled(&["ps", "-a"]).await? {
        if is_dead_run(&run, &host) {
            docker(&["rm", "--force", "--volumes", &id]).await?;
            tracing::info!(container = id, run, "removed a killed run's container");
            removed.containers += 1;
        }
    }
    for (id, run) in labelled(&["network", "ls"]).await? {
        if is_dead_run(&run, &host) {
            docker(&["network", "rm", &id]).await?;
            tracing::info!(network = id, run, "removed a killed run's network");
            removed.networks += 1;
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_gone_process_on_this_host_is_dead() {
        let me = std::process::id();
        assert!(!is_dead_run(&format!("h:{me}"), "h"));
        assert!(!is_dead_run(&format!("other:{me}"), "h"));
        // Past the kernel's pid_max (at most 2^22), so no process has it.
        assert!(is_dead_run("h:4194305", "h"));
        assert!(!is_dead_run("other:4194305", "h"));
        assert!(!is_dead_run("garbage", "h"));
    }
}
