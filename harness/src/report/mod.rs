//! Benchmark reports: the metric definitions (docs/DESIGN.md §3), the raw serialisable results,
//! the plots and `summary.md`, and [`write()`] which puts all of them into one directory.

pub mod metrics;
pub mod plots;
pub mod results;
pub mod summary;

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::report_file;
use results::BenchReport;

/// File name of the raw results.
pub const RAW_JSON: &str = "bench.json";
/// File name of the human summary.
pub const SUMMARY: &str = "summary.md";

/// Writes `bench.json`, every plot (SVG + PNG) and `summary.md` into `dir` (created if
/// missing) and returns the paths written, summary last.
pub fn write(report: &BenchReport, dir: &Path) -> Result<Vec<PathBuf>> {
    report_file::create_dir(dir)?;
    let mut written = Vec::new();
    let json_path = dir.join(RAW_JSON);
    report_file::write_json(&json_path, report)?;
    written.push(json_path);
    written.extend(plots::write_all(report, dir)?);
    let names: Vec<String> = written
        .iter()
        .filter_map(|p| p.file_name().map(|n| format!("`{}`", n.to_string_lossy())))
        .collect();
    let summary_path = dir.join(SUMMARY);
    report_file::write_text(&summary_path, summary::render(report, &names))?;
    written.push(summary_path);
    Ok(written)
}

/// Reads a `bench.json` written by [`write()`], e.g. to re-render or compare runs.
pub fn read(path: &Path) -> Result<BenchReport> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
    serde_json::from_str(&text).map_err(|e| Error::Report {
        what: path.display().to_string(),
        reason: e.to_string(),
    })
}
