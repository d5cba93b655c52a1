//! A worker in its own OS process, so that a fault can stop the holder's whole process for
//! real (SIGSTOP: its watchdog, timers and connections freeze together) and continue it
//! (SIGCONT). The child is the harness binary's hidden `safety-worker` subcommand; it
//! reports each observation as one JSON line on stdout, and stops when its stdin closes.
//!
//! Invariant: the child stamps its observations with the host's wall clock, which the
//! parent's history maps onto its own run time (both processes read the same kernel clock,
//! and the host's clock is never faulted), so a frozen child's belief spans the freeze in
//! the history exactly as long as it did in reality; its writes reach the fenced resource
//! when the parent reads them, as writes reach a remote resource.

use std::path::Path;
use std::process::Stdio;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use leasehold_sim::world::history::{Access, HistKind};
use leasehold_sim::world::net::ProcId;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::error::Result;
use crate::safety::behaviour::{Behaviour, RedisTarget};
use crate::safety::process_signal::process_error;
use crate::safety::worker::{RunContext, Sink, Worker};

/// The hidden subcommand that runs a worker process.
pub const SUBCOMMAND: &str = "safety-worker";

/// Bound for a stopped worker process to exit after its stdin closed (its last unlock may
/// wait out an ambiguous reply for up to a TTL).
const EXIT_GRACE: Duration = Duration::from_secs(5);

/// What a worker process runs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerSpec {
    /// Its client number in the try.
    pub proc: ProcId,
    /// Where Redis is.
    pub target: RedisTarget,
    /// The lock name.
    pub name: String,
    /// How it uses the lock.
    pub behaviour: Behaviour,
}

/// Whom a hold excludes, on the wire (the simulator's [`Access`] is not deserializable).
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
enum WireAccess {
    Exclusive,
    Shared,
    Permit(u32),
}

/// One line from a worker process.
#[derive(Debug, Clone, Serialize, Deserialize)]
enum Wire {
    WaitStart(u64),
    Acquired(u64, u64, WireAccess),
    AcquireFailed(u64, String),
    Released(u64),
    Lost(u64),
    Paused,
    Write(u64),
    Granted(Option<u32>),
    Ended,
}

fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// The child's sink: one JSON line per observation on stdout.
struct PipeSink {
    out: Mutex<std::io::Stdout>,
    start: std::time::Instant,
}

impl PipeSink {
    fn send(&self, line: &Wire) {
        use std::io::Write as _;
        let mut out = self.out.lock().unwrap_or_else(PoisonError::into_inner);
        // A closed pipe means the parent is gone; the run is over either way.
        if let Ok(text) = serde_json::to_string(line) {
            let _ = writeln!(out, "{text}").and_then(|()| out.flush());
        }
    }
}

impl Sink for PipeSink {
    fn record(&self, _proc: ProcId, _lock: &str, kind: HistKind) {
        let at = unix_ns();
        let line = match kind {
            HistKind::WaitStart => Wire::WaitStart(at),
            HistKind::Acquired { token, access } => Wire::Acquired(
                at,
                token,
                match access {
                    Access::Exclusive => WireAccess::Exclusive,
                    Access::Shared => WireAccess::Shared,
                    Access::Permit { permits } => WireAccess::Permit(permits),
                },
            ),
            HistKind::AcquireFailed { error } => Wire::AcquireFailed(at, error),
            HistKind::Released => Wire::Released(at),
            HistKind::Lost => Wire::Lost(at),
            // A worker records nothing else.
            _ => return,
        };
        self.send(&line);
    }
    fn write(&self, _proc: ProcId, _lock: &str, token: u64) {
        self.send(&Wire::Write(token));
    }
    fn granted(&self, _proc: ProcId, acked: Option<u32>) {
        self.send(&Wire::Granted(acked));
    }
    fn ended(&self, _proc: ProcId) {
        self.send(&Wire::Ended);
    }
    fn paused(&self, _proc: ProcId) {
        self.send(&Wire::Paused);
    }
    fn now_ns(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

/// The child's side: connects and runs the lock loop until stdin closes.
pub async fn serve(spec: WorkerSpec) -> Result<()> {
    let worker = Worker::connect(spec.proc, &spec.target, &spec.name, spec.behaviour).await?;
    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::task::spawn_blocking(move || {
        use std::io::Read as _;
        // Anything read, or EOF: the parent's only message is closing the pipe.
        let mut sink = Vec::new();
        let _ = std::io::stdin().read_to_end(&mut sink);
        stop_tx.send_replace(true);
    });
    let sink = PipeSink {
        out: Mutex::new(std::io::stdout()),
        start: std::time::Instant::now(),
    };
    worker.run(&sink, stop_rx).await;
    Ok(())
}

/// The parent's handle on a worker process.
pub struct RemoteWorker {
    child: Child,
    stdin: Option<ChildStdin>,
    reader: JoinHandle<()>,
    pid: u32,
}

impl RemoteWorker {
    /// Starts `exe safety-worker` for `spec`, feeding its observations into `context`.
    pub async fn spawn(exe: &Path, spec: &WorkerSpec, context: RunContext) -> Result<Self> {
        let json = serde_json::to_string(spec).map_err(|e| process_error("encode", e))?;
        let mut child = Command::new(exe)
            .arg(SUBCOMMAND)
            .arg(json)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| process_error("spawn", e))?;
        let pid = child
            .id()
            .ok_or_else(|| process_error("spawn", "exited at once"))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| process_error("spawn", "no stdout"))?;
        let stdin = child.stdin.take();
        let (proc, name) = (spec.proc, spec.name.clone());
        let reader = tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                match serde_json::from_str::<Wire>(&line) {
                    Ok(wire) => deliver(&context, proc, &name, wire),
                    Err(err) => tracing::warn!(proc, %err, line, "worker process line"),
                }
            }
        });
        Ok(Self {
            child,
            stdin,
            reader,
            pid,
        })
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Closes the child's stdin (its stop signal) and waits, bounded, for it to exit and
    /// for its last observations; a child that does not exit in time is killed.
    pub async fn stop(mut self) {
        drop(self.stdin.take());
        if tokio::time::timeout(EXIT_GRACE, self.child.wait())
            .await
            .is_err()
        {
            tracing::warn!(pid = self.pid, "worker process did not exit; killing it");
            let _ = self.child.kill().await;
        }
        let _ = self.reader.await;
    }
}

/// Feeds one line of worker `proc` into the try's history, resource and board.
fn deliver(context: &RunContext, proc: ProcId, name: &str, wire: Wire) {
    let history = &context.history;
    let at = |unix: u64, kind: HistKind| {
        history.record_at(proc, name, kind, history.run_ns_of_unix(unix));
    };
    match wire {
        Wire::WaitStart(t) => at(t, HistKind::WaitStart),
        Wire::Acquired(t, token, access) => {
            let access = match access {
                WireAccess::Exclusive => Access::Exclusive,
                WireAccess::Shared => Access::Shared,
                WireAccess::Permit(permits) => Access::Permit { permits },
            };
            at(t, HistKind::Acquired { token, access });
        }
        Wire::AcquireFailed(t, error) => at(t, HistKind::AcquireFailed { error }),
        Wire::Released(t) => at(t, HistKind::Released),
        Wire::Lost(t) => at(t, HistKind::Lost),
        Wire::Paused => context.board.mark_paused(),
        Wire::Write(token) => {
            context.resource.write(proc, name, token);
        }
        Wire::Granted(acked) => context.board.granted(proc, acked),
        Wire::Ended => context.board.ended(proc),
    }
}
