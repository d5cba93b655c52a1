//! Idle Python workers kept for the next cell. Starting one costs about 0.35 s of CPU
//! (Python and redis-py's import), which a quick grid would otherwise pay for each of some
//! 150 clients per repetition and library; a worker taken from here keeps its process and
//! its Redis connection, as a long-lived service would.
//!
//! Invariant: a worker is in the pool only while no client has it, and only if it is
//! [`Worker::reusable`] (in step, holding no lock), so a client always starts with a worker
//! that owes nobody an answer. A worker the process never takes back dies with the process:
//! its stdin closes when the harness exits, however it exits.

use std::sync::Mutex;

use crate::bench::python_peer::library::PythonLib;
use crate::bench::python_peer::worker::Worker;
use crate::error::Result;

/// The idle workers, any library and server.
static IDLE: Mutex<Vec<Worker>> = Mutex::new(Vec::new());

/// An idle worker for `lib` on `url`, or a new one.
pub async fn take(lib: PythonLib, url: &str) -> Result<Worker> {
    let idle = {
        // A poisoned pool only means a panic elsewhere while it was locked; its workers are
        // whole either way.
        let mut idle = IDLE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        idle.iter()
            .position(|w| w.lib() == lib && w.url() == url)
            .map(|at| idle.swap_remove(at))
    };
    match idle {
        Some(worker) => Ok(worker),
        None => Worker::spawn(lib, url).await,
    }
}

/// Keeps `worker` for the next client if it is reusable; otherwise drops (kills) it.
pub fn give_back(worker: Worker) {
    if worker.reusable() {
        IDLE.lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(worker);
    }
}
