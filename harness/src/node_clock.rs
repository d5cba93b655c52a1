//! A node's controllable wall clock: a host directory bind-mounted at the node's
//! [`CLOCK_DIR`](crate::clock_library::CLOCK_DIR), holding the offset file the preloaded clock library reads.
//!
//! Invariant: the file always holds the whole current offset, replaced atomically (write a
//! temporary file, rename), so the server never reads a half-written number; the library
//! re-reads it whenever it changes, so a jump takes effect on the server's next clock read.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use crate::clock_library::OFFSET_FILE_NAME;
use crate::error::{Error, Result};

/// The host side of one node's clock (the directory is removed on drop).
#[derive(Debug)]
pub(crate) struct NodeClock {
    dir: PathBuf,
    /// Current offset in microseconds (what the file says).
    offset_us: Mutex<i64>,
}

impl NodeClock {
    /// A fresh directory for the node `name`, offset 0 (no file: the library reads 0).
    pub(crate) fn create(name: &str) -> Result<Self> {
        let dir = std::env::temp_dir().join(format!("leasehold-clock-{name}"));
        std::fs::create_dir_all(&dir)
            .map_err(|err| Error::io(format!("creating {}", dir.display()), err))?;
        let clock = NodeClock {
            dir,
            offset_us: Mutex::new(0),
        };
        clock.write(0)?;
        Ok(clock)
    }

    /// Host directory to bind-mount at [`CLOCK_DIR`](crate::clock_library::CLOCK_DIR).
    pub(crate) fn host_dir(&self) -> &Path {
        &self.dir
    }

    /// The current offset.
    pub(crate) fn offset_ms(&self) -> i64 {
        *self
            .offset_us
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            / 1_000
    }

    /// Sets the offset to `ms` (negative: behind real time).
    pub(crate) fn set_ms(&self, ms: i64) -> Result<()> {
        let mut offset = self
            .offset_us
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        self.write(ms.saturating_mul(1_000))?;
        *offset = ms.saturating_mul(1_000);
        Ok(())
    }

    /// Moves the clock by `ms` from where it is now.
    pub(crate) fn jump_ms(&self, ms: i64) -> Result<()> {
        let mut offset = self
            .offset_us
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let next = offset.saturating_add(ms.saturating_mul(1_000));
        self.write(next)?;
        *offset = next;
        Ok(())
    }

    fn write(&self, offset_us: i64) -> Result<()> {
        let file = self.dir.join(OFFSET_FILE_NAME);
        let staging = self.dir.join(format!(".{OFFSET_FILE_NAME}.new"));
        std::fs::write(&staging, offset_us.to_string())
            .and_then(|()| std::fs::rename(&staging, &file))
            .map_err(|err| Error::io(format!("writing {}", file.display()), err))
    }
}

impl Drop for NodeClock {
    fn drop(&mut self) {
        if let Err(err) = std::fs::remove_dir_all(&self.dir) {
            tracing::debug!(dir = %self.dir.display(), %err, "could not remove a node clock directory");
        }
    }
}
