//! Server-side scripts: one `.lua` file per operation under `lock/scripts/`, embedded here.
//!
//! Scripts run by SHA (`EVALSHA`) and fall back to `EVAL` when the server answers
//! `NOSCRIPT` (after `SCRIPT FLUSH`, a restart or a failover), so a flush costs one extra
//! round trip and never an error. The simulator runs these same sources.

use redis::{Cmd, RedisResult, ToRedisArgs, Value};

use crate::backend::Backend;

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
            Err(err) if err.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) => {
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
        let mut cmd = redis::cmd(verb);
        cmd.arg(body).arg(keys.len()).arg(keys).arg(args);
        cmd
    }
}
