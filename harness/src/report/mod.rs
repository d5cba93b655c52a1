//! Benchmark reports: the metric definitions (DESIGN section 3), the raw serialisable results,
//! the plots and `summary.md`, and [`write`] which puts all of them into one directory.

pub mod metrics;
pub mod plots;
pub mod results;
pub mod summary;

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use results::BenchReport;

/// File name of the raw results.
pub const RAW_JSON: &str = "bench.json";
/// File name of the human summary.
pub const SUMMARY: &str = "summary.md";

/// Writes `bench.json`, every plot (SVG + PNG) and `summary.md` into `dir` (created if
/// missing) and returns the paths written, summary last.
pub fn write(report: &BenchReport, dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
    let mut written = Vec::new();
    let json_path = dir.join(RAW_JSON);
    let json = serde_json::to_string_pretty(report).map_err(|e| Error::Report {
        what: json_path.display().to_string(),
        reason: e.to_string(),
    })?;
    std::fs::write(&json_path, json)
        .map_err(|e| Error::io(format!("writing {}", json_path.display()), e))?;
    written.push(json_path);
    written.extend(plots::write_all(report, dir)?);
    let names: Vec<String> = written
        .iter()
        .filter_map(|p| p.file_name().map(|n| format!("`{}`", n.to_string_lossy())))
        .collect();
    let summary_path = dir.join(SUMMARY);
    std::fs::write(&summary_path, summary::render(report, &names))
        .map_err(|e| Error::io(format!("writing {}", summary_path.display()), e))?;
    written.push(summary_path);
    Ok(written)
}

/// Reads a `bench.json` written by [`write`], e.g. to re-render or compare runs.
pub fn read(path: &Path) -> Result<BenchReport> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
    serde_json::from_str(&text).map_err(|e| Error::Report {
        what: path.display().to_string(),
        reason: e.to_string(),
    })
}
