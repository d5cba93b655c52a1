//! How a Redis node persists writes, as server arguments: the crash-restart safety scenarios
//! kill a node and restart it, and whether a lock key survives depends only on this.

/// Durability of a node's dataset across a kill and restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Persistence {
    /// Nothing on disk: a restarted node comes back empty. The default.
    #[default]
    None,
    /// Append-only file, fsync once per second: a kill may lose up to ~1 s of writes.
    AppendOnlyEverySec,
    /// Append-only file, fsync before every reply: acknowledged writes survive a kill.
    AppendOnlyAlways,
}

impl Persistence {
    /// `redis-server` arguments selecting this mode (RDB snapshots are always off, so the
    /// outcome never depends on snapshot timing).
    pub fn server_args(self) -> Vec<String> {
        let args: &[&str] = match self {
            Persistence::None => &["--save", "", "--appendonly", "no"],
            Persistence::AppendOnlyEverySec => &[
                "--save",
                "",
                "--appendonly",
                "yes",
                "--appendfsync",
                "everysec",
            ],
            Persistence::AppendOnlyAlways => &[
                "--save",
                "",
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
            ],
        };
        args.iter().map(|arg| (*arg).to_owned()).collect()
    }
}
