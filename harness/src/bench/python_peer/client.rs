//! A benchmark client backed by a Python peer: one [`Worker`] process of its own, taken from
//! the [`pool`] when the client connects and given back when it is dropped.

use std::time::Duration;

use tokio::sync::Mutex;

use crate::bench::python_peer::library::PythonLib;
use crate::bench::python_peer::pool;
use crate::bench::python_peer::worker::Worker;
use crate::error::{Error, Result};

/// One benchmark client of a Python lock library.
#[derive(Debug)]
pub struct PythonClient {
    /// Always `Some` until dropped; an `Option` so drop can hand the worker back.
    worker: Mutex<Option<Worker>>,
}

/// A lock held through a Python worker.
#[derive(Debug)]
pub struct PythonHeld {
    name: String,
    token: String,
}

impl PythonHeld {
    /// The value the library stored under its key for this hold (a random id per hold):
    /// evidence on the server that the library took the lock.
    pub fn token(&self) -> &str {
        &self.token
    }
}

impl PythonClient {
    /// A client of `lib` on the server at `urls[0]`.
    pub async fn connect(lib: PythonLib, urls: &[String]) -> Result<Self> {
        let url = urls.first().ok_or_else(|| Error::Lock {
            name: "(bench)".to_owned(),
            reason: "no Redis URL to connect to".to_owned(),
        })?;
        Ok(Self {
            worker: Mutex::new(Some(pool::take(lib, url).await?)),
        })
    }

    /// Waits until `name` is held with a `ttl` lease (both libraries block without a limit
    /// of their own).
    pub async fn acquire(&self, name: &str, ttl: Duration) -> Result<PythonHeld> {
        let mut worker = self.worker.lock().await;
        let token = worker_of(&mut worker)?.acquire(name, ttl).await?;
        Ok(PythonHeld {
            name: name.to_owned(),
            token,
        })
    }

    /// Releases a lock this client holds.
    pub async fn release(&self, held: PythonHeld) -> Result<()> {
        let mut worker = self.worker.lock().await;
        worker_of(&mut worker)?.release(&held.name).await
    }

    /// CPU time the client's worker process has used so far.
    pub async fn cpu(&self) -> Result<Duration> {
        let mut worker = self.worker.lock().await;
        worker_of(&mut worker)?.cpu()
    }
}

impl Drop for PythonClient {
    fn drop(&mut self) {
        if let Some(worker) = self.worker.get_mut().take() {
            pool::give_back(worker);
        }
    }
}

fn worker_of(worker: &mut Option<Worker>) -> Result<&mut Worker> {
    worker.as_mut().ok_or_else(|| Error::Lock {
        name: "(bench)".to_owned(),
        reason: "a Python client used after it was dropped".to_owned(),
    })
}
