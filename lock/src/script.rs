//! Server-side scripts: one `.lua` file per operation under `lock/scripts/`, embedded here.
//!
//! Scripts run by SHA (`EVALSHA`) and fall back to `EVAL` when the server answers
//! `NOSCRIPT` (after `SCRIPT FLUSH`, a restart or a failover), so a flush costs one extra
//! round trip and never an error. The simulator runs these same sources.

use std::sync::LazyLock;

use redis::{Cmd, RedisResult, ToRedisArgs, Value};

use crate::backend::Backend;

/// Bytes reserved per argument of a script call beyond its verb and body: a lock key with
/// a name of ordinary length, or a hold id, fits, so building the call does not grow its
/// buffer (a longer argument only costs that regrowth).
const DATA_PER_ARG: usize = 96;

/// Every script the lock client runs, by operation. Each file's header lists its KEYS,
/// ARGV and replies; all KEYS of one call share the lock's `{name}` hash tag.
#[derive(Debug)]
pub struct Scripts {
    /// `acquire.lua`: take, re-enter, claim a hand-off, or join the fair queue.
    pub acquire: LuaScript,
    /// `release.lua`: drop one hold; hand the lock to the fair queue's head or announce it.
    pub release: LuaScript,
    /// `renew.lua`: extend a live hold's lease (watchdog, `Guard::extend`).
    pub renew: LuaScript,
    /// `probe.lua`: read-only "does this hold own the lock?" after an ambiguous reply.
    pub probe: LuaScript,
    /// `rw_read_acquire.lua`: a shared read hold in one round trip (writer preference).
    pub rw_read_acquire: LuaScript,
    /// `rw_read_release.lua`: drop one read hold; announce when the last reader left.
    pub rw_read_release: LuaScript,
    /// `rw_read_renew.lua`: extend a live read hold's lease.
    pub rw_read_renew: LuaScript,
    /// `rw_read_probe.lua`: read-only "is this read hold live?" after an ambiguous reply.
    pub rw_read_probe: LuaScript,
    /// `rw_write_acquire.lua`: take or re-enter the write hold, or record a waiting writer.
    /// (Write holds are renewed and probed by `renew.lua` and `probe.lua`.)
    pub rw_write_acquire: LuaScript,
    /// `rw_write_release.lua`: drop one write hold or withdraw a writer's intent.
    pub rw_write_release: LuaScript,
    /// `semaphore_acquire.lua`: take, claim a handed-over, or queue for a permit.
    pub semaphore_acquire: LuaScript,
    /// `semaphore_release.lua`: give a permit back; hand it to the queue head or announce it.
    pub semaphore_release: LuaScript,
    /// `semaphore_renew.lua`: extend a live permit's lease.
    pub semaphore_renew: LuaScript,
    /// `semaphore_probe.lua`: read-only "is this permit live?" after an ambiguous reply.
    pub semaphore_probe: LuaScript,
    /// `semaphore_resize.lua`: change a live semaphore's stored size on purpose. Not in
    /// [`all`](Self::all): no lock operation runs it, only an operator's call, so the
    /// differential test's calls leave it out; the simulator's branch table lists it, with
    /// every branch no run reached.
    pub semaphore_resize: LuaScript,
}

impl Scripts {
    /// The scripts lock operations run, in a fixed order (for the simulator and for
    /// preloading).
    pub fn all(&self) -> [&LuaScript; 14] {
        [
            &self.acquire,
            &self.release,
            &self.renew,
            &self.probe,
            &self.rw_read_acquire,
            &self.rw_read_release,
            &self.rw_read_renew,
            &self.rw_read_probe,
            &self.rw_write_acquire,
            &self.rw_write_release,
            &self.semaphore_acquire,
            &self.semaphore_release,
            &self.semaphore_renew,
            &self.semaphore_probe,
        ]
    }
}

static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| Scripts {
    acquire: LuaScript::new("acquire", include_str!("../scripts/acquire.lua")),
    release: LuaScript::new("release", include_str!("../scripts/release.lua")),
    renew: LuaScript::new("renew", include_str!("../scripts/renew.lua")),
    probe: LuaScript::new("probe", include_str!("../scripts/probe.lua")),
    rw_read_acquire: LuaScript::new(
        "rw_read_acquire",
        include_str!("../scripts/rw_read_acquire.lua"),
    ),
    rw_read_release: LuaScript::new(
        "rw_read_release",
        include_str!("../scripts/rw_read_release.lua"),
    ),
    rw_read_renew: LuaScript::new(
        "rw_read_renew",
        include_str!("../scripts/rw_read_renew.lua"),
    ),
    rw_read_probe: LuaScript::new(
        "rw_read_probe",
        include_str!("../scripts/rw_read_probe.lua"),
    ),
    rw_write_acquire: LuaScript::new(
        "rw_write_acquire",
        include_str!("../scripts/rw_write_acquire.lua"),
    ),
    rw_write_release: LuaScript::new(
        "rw_write_release",
        include_str!("../scripts/rw_write_release.lua"),
    ),
    semaphore_acquire: LuaScript::new(
        "semaphore_acquire",
        include_str!("../scripts/semaphore_acquire.lua"),
    ),
    semaphore_release: LuaScript::new(
        "semaphore_release",
        include_str!("../scripts/semaphore_release.lua"),
    ),
    semaphore_renew: LuaScript::new(
        "semaphore_renew",
        include_str!("../scripts/semaphore_renew.lua"),
    ),
    semaphore_probe: LuaScript::new(
        "semaphore_probe",
        include_str!("../scripts/semaphore_probe.lua"),
    ),
    semaphore_resize: LuaScript::new(
        "semaphore_resize",
        include_str!("../scripts/semaphore_resize.lua"),
    ),
});

/// The catalogue of embedded scripts.
pub fn scripts() -> &'static Scripts {
    &SCRIPTS
}

/// One embedded Lua script and its SHA1.
#[derive(Debug)]
pub struct LuaScript {
    name: &'static str,
    source: &'static str,
    sha: String,
}

impl LuaScript {
    /// Wraps a script source (normally from `include_str!`).
    pub fn new(name: &'static str, source: &'static str) -> Self {
        Self {
            name,
            source,
            sha: redis::Script::new(source).get_hash().to_owned(),
        }
    }

    /// The file stem, e.g. `"acquire"`.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The Lua source as shipped.
    pub fn source(&self) -> &'static str {
        self.source
    }

    /// Lowercase hex SHA1 of the source, as `SCRIPT LOAD` reports it.
    pub fn sha(&self) -> &str {
        &self.sha
    }

    /// Runs the script with `keys` and `args`: `EVALSHA`, then `EVAL` on `NOSCRIPT`.
    pub async fn run<K: ToRedisArgs, A: ToRedisArgs>(
        &self,
        backend: &dyn Backend,
        keys: &[K],
        args: &[A],
    ) -> RedisResult<Value> {
        let by_sha = self.command("EVALSHA", self.sha.as_str(), keys, args);
        match backend.query(&by_sha).await {
            Err(err)
                if err.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) =>
            {
                tracing::debug!(script = self.name, "NOSCRIPT: falling back to EVAL");
                let by_source = self.command("EVAL", self.source, keys, args);
                backend.query(&by_source).await
            }
            other => other,
        }
    }

    fn command<K: ToRedisArgs, A: ToRedisArgs>(
        &self,
        verb: &str,
        body: &str,
        keys: &[K],
        args: &[A],
    ) -> Cmd {
        let arg_count = 3 + keys.len() + args.len();
        let mut cmd = Cmd::with_capacity(
            arg_count,
            verb.len() + body.len() + DATA_PER_ARG * arg_count,
        );
        cmd.arg(verb).arg(body).arg(keys.len()).arg(keys).arg(args);
        cmd
    }
}
