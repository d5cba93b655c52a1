//! Writing report files: the directory, a text file, a JSON file — each failure an
//! [`Error`] naming the path, so every report (bench, safety, index) fails the same way.

use std::path::Path;

use serde::Serialize;

use crate::error::{Error, Result};

/// Creates `dir` and its parents if missing.
pub(crate) fn create_dir(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir)
        .map_err(|err| Error::io(format!("creating {}", dir.display()), err))
}

/// Writes `contents` to `path`, replacing it.
pub(crate) fn write_text(path: &Path, contents: impl AsRef<[u8]>) -> Result<()> {
    std::fs::write(path, contents)
        .map_err(|err| Error::io(format!("writing {}", path.display()), err))
}

/// Writes `value` to `path` as pretty-printed JSON.
pub(crate) fn write_json(path: &Path, value: &impl Serialize) -> Result<()> {
    let json = serde_json::to_string_pretty(value).map_err(|err| Error::Report {
        what: path.display().to_string(),
        reason: err.to_string(),
    })?;
    write_text(path, json)
}
