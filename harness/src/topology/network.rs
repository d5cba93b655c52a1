//! One private Docker bridge network per topology, with its own /24 subnet so that a node can
//! be re-attached at the same address after a kill or a network cut (Docker only honours a
//! fixed `--ip` on networks with a user-chosen subnet). Removed when the last node drops.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};
use crate::topology::docker::{docker, docker_blocking};

/// Label put on every network and container the harness creates, to find leftovers.
pub const HARNESS_LABEL: &str = "leasehold.harness";

/// Label naming the run that created a network or container: `<host>:<pid>` of the
/// harness process, so a later run can tell a killed run's leftovers (its process is gone)
/// from a live run's (see [`crate::topology::leftovers`]).
pub const RUN_LABEL: &str = "leasehold.harness.run";

/// This process's [`RUN_LABEL`] value.
pub fn run_id() -> String {
    format!("{}:{}", host_name(), std::process::id())
}

/// The host's name (the kernel's), so runs on other hosts sharing a Docker daemon are told
/// apart; "unknown" if it cannot be read.
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "unknown".to_owned())
}

/// Subnets are drawn from 172.16.0.0/16: private, outside Docker's default address pools
/// (172.17–31/16, 192.168/16), so harness networks never starve Docker's own allocation.
const SUBNET_PREFIX: &str = "172.16";
/// A random /24 collides with a live network ("Pool overlaps") with probability
/// (live networks)/256; a few draws make failure negligible for tens of parallel tests.
const SUBNET_ATTEMPTS: usize = 16;

/// A Docker network owned by one topology.
#[derive(Debug)]
pub struct Network {
    name: String,
}

impl Network {
    /// Creates a fresh network whose name starts with `leasehold-<kind>-` and is unique
    /// across processes (pid, per-process counter, random suffix).
    pub(crate) async fn create(kind: &str) -> Result<Self> {
        let mut last_error = None;
        let run = format!("{RUN_LABEL}={}", run_id());
        for _ in 0..SUBNET_ATTEMPTS {
            let name = unique_name(kind);
            let subnet = format!("{SUBNET_PREFIX}.{}.0/24", random_u64() % 256);
            let result = docker(&[
                "network",
                "create",
                "--driver",
                "bridge",
                "--subnet",
                &subnet,
                "--label",
                HARNESS_LABEL,
                "--label",
                &run,
                &name,
            ])
            .await;
            match result {
                Ok(_) => {
                    tracing::debug!(network = %name, %subnet, "created network");
                    return Ok(Network { name });
                }
                Err(Error::Docker { ref reason, .. })
                    if reason.contains("overlaps") || reason.contains("already exists") =>
                {
                    last_error = result.err();
                }
                Err(err) => return Err(err),
            }
        }
        Err(last_error.unwrap_or_else(|| Error::Docker {
            command: "network create".to_owned(),
            reason: "no free subnet".to_owned(),
        }))
    }

    /// The Docker network name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Attaches `container` at exactly `ip`.
    pub(crate) async fn connect(&self, container: &str, ip: IpAddr) -> Result<()> {
        let ip = ip.to_string();
        docker(&["network", "connect", "--ip", &ip, &self.name, container])
            .await
            .map(drop)
    }

    /// Detaches `container`; detaching a container that is not attached is not an error.
    pub(crate) async fn disconnect(&self, container: &str) -> Result<()> {
        match docker(&["network", "disconnect", "--force", &self.name, container]).await {
            Ok(_) => Ok(()),
            Err(Error::Docker { reason, .. }) if reason.contains("is not connected") => Ok(()),
            Err(err) => Err(err),
        }
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        // Containers are removed before this runs (nodes own the only references), so the
        // network is empty; if removal fails we leave a labelled leftover, never a panic.
        match docker_blocking(&["network", "rm", &self.name]) {
            Ok(_) => tracing::debug!(network = %self.name, "removed network"),
            Err(err) => tracing::warn!(network = %self.name, %err, "could not remove network"),
        }
    }
}

fn unique_name(kind: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    format!(
        "leasehold-{kind}-{}-{}-{:04x}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed),
        random_u64() & 0xffff
    )
}

/// Randomness good enough for names and subnets, without a dependency: `RandomState` is
/// seeded per process from the OS, and each call mixes in a fresh hasher.
fn random_u64() -> u64 {
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default(),
    );
    hasher.finish()
}
