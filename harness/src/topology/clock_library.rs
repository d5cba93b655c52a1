//! The clock-control library of the locally built image: `harness/clock/clock_offset.c`,
//! an LD_PRELOAD library that shifts a node's wall clock by the offset (and drift rate) in a
//! file, compiled
//! with the host's gcc when the image is built.
//!
//! Invariant: the library is in every locally built image but loaded only by nodes started
//! with clock control ([`crate::NodeOptions::clock_control`]), so every other node runs the
//! unmodified server; the paths here are the ones the C source reads.

use std::path::Path;

use tokio::process::Command;

use crate::error::{Error, Result};

/// The library's C source (a file of the repository, embedded so the binary needs no
/// checkout at run time).
const SOURCE: &str = include_str!("../../clock/clock_offset.c");

/// Where the library lives in the image; a clock-controlled node preloads it from here.
pub const LIBRARY_PATH: &str = "/usr/local/lib/leasehold/libclock_offset.so";

/// Directory a clock-controlled node has bind-mounted from the host (`OFFSET_FILE` of the C
/// source is `<this>/offset_us`).
pub const CLOCK_DIR: &str = "/clock";

/// File name (inside [`CLOCK_DIR`]) of the signed offset in microseconds, optionally
/// followed by a drift rate in ppm and the real instant (µs) it runs from.
pub const OFFSET_FILE_NAME: &str = "offset_us";

/// Compiles the library into `output` with the host's gcc (the image holds the host's
/// libc, so a host-built library links against the same one).
pub(crate) async fn compile(output: &Path) -> Result<()> {
    let dir = output.parent().ok_or_else(|| {
        Error::io(
            format!("no parent directory for {}", output.display()),
            std::io::ErrorKind::InvalidInput.into(),
        )
    })?;
    let source = dir.join("clock_offset.c");
    std::fs::write(&source, SOURCE)
        .map_err(|err| Error::io(format!("writing {}", source.display()), err))?;
    let result = Command::new("gcc")
        .args(["-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-o"])
        .arg(output)
        .arg(&source)
        .output()
        .await
        .map_err(|err| Error::io("running gcc for the clock library", err))?;
    if !result.status.success() {
        return Err(Error::io(
            format!(
                "gcc failed on the clock library: {}",
                String::from_utf8_lossy(&result.stderr)
            ),
            std::io::ErrorKind::Other.into(),
        ));
    }
    Ok(())
}
