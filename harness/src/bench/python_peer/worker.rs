//! One Python lock worker: a `python3` process running harness/peers/lock_peer.py for one
//! library and one Redis URL, with its own Redis connection, and the line protocol that
//! drives it (`acquire NAME TTL_MS` → `ok TOKEN`, `release` → `ok`, `ping` → `pong`, any
//! failure `err MESSAGE`).
//!
//! Invariants: no call waits without a limit (a worker that does not answer in time is an
//! error, never a hang); a worker is [`Worker::reusable`] only between complete exchanges
//! and with no lock held, so one that was interrupted mid-request, answered out of protocol
//! or still holds a lock is never handed to another client; and the process dies with its
//! handle (`kill_on_drop`), or on its own when its stdin closes.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tracing::warn;

use crate::bench::process_cpu::cpu_of_process;
use crate::bench::python_peer::install::{self, PYTHON};
use crate::bench::python_peer::library::PythonLib;
use crate::error::{Error, Result};

/// The worker script, compiled in so the binary and its workers never disagree on the
/// protocol; run with `python3 -c` from the install directory, which puts the pinned packages
/// first on its path.
const SCRIPT: &str = include_str!("../../../peers/lock_peer.py");
/// Starting Python and importing redis-py take about 0.35 s of CPU; 32 workers starting at
/// once on 2 loaded cores take several seconds. A minute means something is wrong, and stays
/// within the bench's own setup limit.
const STARTUP_LIMIT: Duration = Duration::from_secs(45);
/// A release, a ping: one pipe round trip and at most one Redis round trip.
const SHORT_LIMIT: Duration = Duration::from_secs(10);
/// An acquire waits as long as the lock is held by others: a 128-client FIFO of 10 ms
/// sections drains in 1.3 s, a polling peer's unlucky client may wait several times that.
/// Longer than the bench's 30 s drain limit, so the bench's own limit fires first there.
const ACQUIRE_LIMIT: Duration = Duration::from_secs(60);

/// A running worker process.
#[derive(Debug)]
pub struct Worker {
    lib: PythonLib,
    url: String,
    pid: u32,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
    /// Killed when the worker is dropped.
    _child: Child,
    /// The last exchange completed with a reply in protocol.
    in_step: bool,
    /// The worker holds a lock (an acquire answered `ok`, no release since).
    holding: bool,
}

impl Worker {
    /// Starts a worker for `lib` against `url` and waits for its `ready` line (the packages
    /// imported, the server answered PING).
    pub async fn spawn(lib: PythonLib, url: &str) -> Result<Self> {
        let packages = install::packages_dir().await?;
        let mut child = Command::new(PYTHON)
            .args(["-c", SCRIPT, "--lib", lib.worker_arg(), "--url", url])
            .current_dir(packages)
            .env("PYTHONPATH", packages)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|err| Error::NoPython {
                reason: format!("starting a {} worker: {err}", lib.worker_arg()),
            })?;
        let (Some(pid), Some(stdin), Some(stdout), Some(stderr)) = (
            child.id(),
            child.stdin.take(),
            child.stdout.take(),
            child.stderr.take(),
        ) else {
            return Err(fault(lib, "(start)", "no pid or pipes for the new process"));
        };
        // Python's own complaints (a traceback the script could not catch) go to the log.
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                warn!(lib = lib.worker_arg(), pid, "{line}");
            }
        });
        let mut worker = Self {
            lib,
            url: url.to_owned(),
            pid,
            stdin,
            stdout: BufReader::new(stdout).lines(),
            _child: child,
            in_step: false,
            holding: false,
        };
        let ready = worker
            .read_reply("(start)", "(start)", STARTUP_LIMIT)
            .await?;
        if !ready.starts_with(&format!("ready {} ", lib.worker_arg())) {
            let why = ready.strip_prefix("err ").unwrap_or(&ready);
            return Err(fault(lib, "(start)", why));
        }
        worker.in_step = true;
        Ok(worker)
    }

    /// The library it runs.
    pub fn lib(&self) -> PythonLib {
        self.lib
    }

    /// The server it is connected to.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Whether another client may take it over: idle, in step, holding nothing.
    pub fn reusable(&self) -> bool {
        self.in_step && !self.holding
    }

    /// Acquires `name` with a `ttl` lease through the library; returns the token the library
    /// stored under its key.
    pub async fn acquire(&mut self, name: &str, ttl: Duration) -> Result<String> {
        if name.is_empty() || name.contains(char::is_whitespace) {
            return Err(fault(self.lib, name, "a lock name must be one word"));
        }
        let request = format!("acquire {name} {}", ttl.as_millis());
        let reply = self.call(name, &request, ACQUIRE_LIMIT).await?;
        match reply.strip_prefix("ok ") {
            Some(token) if !token.is_empty() => {
                self.holding = true;
                Ok(token.to_owned())
            }
            _ => Err(self.refused(name, "acquire", &reply)),
        }
    }

    /// Releases the lock it holds (`name` names it in errors).
    pub async fn release(&mut self, name: &str) -> Result<()> {
        let reply = self.call(name, "release", SHORT_LIMIT).await?;
        // Whatever the answer, the script no longer holds its lock object.
        self.holding = false;
        if reply == "ok" {
            Ok(())
        } else {
            Err(self.refused(name, "release", &reply))
        }
    }

    /// One round trip over the pipe that touches no Redis.
    pub async fn ping(&mut self) -> Result<()> {
        let reply = self.call("(ping)", "ping", SHORT_LIMIT).await?;
        if reply == "pong" {
            Ok(())
        } else {
            Err(self.refused("(ping)", "ping", &reply))
        }
    }

    /// CPU time the process has used so far.
    pub fn cpu(&self) -> Result<Duration> {
        cpu_of_process(self.pid)
    }

    /// Sends one request line and reads its reply line within `limit`.
    async fn call(&mut self, name: &str, request: &str, limit: Duration) -> Result<String> {
        if !self.in_step {
            return Err(fault(
                self.lib,
                name,
                "out of step since an earlier request",
            ));
        }
        self.in_step = false;
        let line = format!("{request}\n");
        let sent = async {
            self.stdin.write_all(line.as_bytes()).await?;
            self.stdin.flush().await
        };
        match tokio::time::timeout(limit, sent).await {
            Ok(Ok(())) => {}
            Ok(Err(err)) => return Err(fault(self.lib, name, &format!("writing: {err}"))),
            Err(_) => return Err(self.timeout(request, limit)),
        }
        let reply = self.read_reply(name, request, limit).await?;
        self.in_step = true;
        Ok(reply)
    }

    /// The next line the worker writes, within `limit`.
    async fn read_reply(&mut self, name: &str, request: &str, limit: Duration) -> Result<String> {
        match tokio::time::timeout(limit, self.stdout.next_line()).await {
            Ok(Ok(Some(line))) => Ok(line),
            Ok(Ok(None)) => Err(fault(self.lib, name, "the worker exited")),
            Ok(Err(err)) => Err(fault(self.lib, name, &format!("reading: {err}"))),
            Err(_) => Err(self.timeout(request, limit)),
        }
    }

    /// The error for a reply other than the expected one. An `err` reply is the library's
    /// refusal, in protocol; anything else means the worker is out of step.
    fn refused(&mut self, name: &str, what: &str, reply: &str) -> Error {
        match reply.strip_prefix("err ") {
            Some(why) => fault(self.lib, name, &format!("{what}: {why}")),
            None => {
                self.in_step = false;
                fault(
                    self.lib,
                    name,
                    &format!("{what}: out of protocol: {reply:?}"),
                )
            }
        }
    }

    fn timeout(&self, request: &str, after: Duration) -> Error {
        Error::Timeout {
            what: format!(
                "the {} worker (pid {}) to answer `{request}`",
                self.lib.worker_arg(),
                self.pid
            ),
            after,
        }
    }
}

fn fault(lib: PythonLib, name: &str, reason: &str) -> Error {
    Error::Lock {
        name: name.to_owned(),
        reason: format!("{} worker: {reason}", lib.worker_arg()),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_worker_that_cannot_reach_redis_says_so_at_start() {
        // Port 1 refuses at once: the script reports its startup failure as a reply.
        let err = Worker::spawn(PythonLib::RedisPy, "redis://127.0.0.1:1")
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Lock { .. }), "{err}");
        assert!(err.to_string().contains("startup"), "{err}");
    }

    #[tokio::test]
    async fn names_that_would_break_the_line_protocol_are_refused_before_sending() {
        // The check runs before any I/O, so a worker that never started is enough: build
        // one around a process that would fail every exchange.
        let mut child = Command::new("cat")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut worker = Worker {
            lib: PythonLib::PythonRedisLock,
            url: String::new(),
            pid: child.id().unwrap(),
            stdin: child.stdin.take().unwrap(),
            stdout: BufReader::new(child.stdout.take().unwrap()).lines(),
            _child: child,
            in_step: true,
            holding: false,
        };
        let err = worker
            .acquire("two words", Duration::from_secs(1))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("one word"), "{err}");
        assert!(worker.reusable(), "refused before anything was sent");
        // `cat` echoes the request: out of protocol, so the worker is out of step for good.
        let err = worker.ping().await.unwrap_err();
        assert!(err.to_string().contains("out of protocol"), "{err}");
        assert!(!worker.reusable());
        let err = worker.ping().await.unwrap_err();
        assert!(err.to_string().contains("out of step"), "{err}");
    }
}
