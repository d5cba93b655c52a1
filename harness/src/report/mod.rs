//! Benchmark reports: the metric definitions (docs/DESIGN.md §3), the raw serialisable results,
//! the plots and `summary.md`, and [`write()`] which puts all of them into one directory. The
//! full grid writes beside the quick one under its own names ([`FileNames`]), so neither
//! overwrites the other.

pub mod design_peers;
pub mod format;
pub mod key_ratios;
pub mod metrics;
pub mod plot_render;
pub mod plots;
pub mod python_peers;
pub mod results;
pub mod rwlock;
pub mod server_cost;
pub mod summary;
pub mod uncontended;

use std::path::{Path, PathBuf};

use crate::bench::grid::GridSize;
use crate::error::{Error, Result};
use crate::report_file;
use results::BenchReport;

/// File name of the quick grid's raw results.
pub const RAW_JSON: &str = "bench.json";
/// File name of the quick grid's human summary.
pub const SUMMARY: &str = "summary.md";

/// The files one grid's report is written to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileNames {
    /// Raw results.
    pub json: &'static str,
    /// Human summary.
    pub summary: &'static str,
    /// Prefix of every plot's file name.
    pub plot_prefix: &'static str,
}

impl FileNames {
    /// The names for a grid: the quick grid keeps the historical names.
    pub fn of(size: GridSize) -> Self {
        match size {
            GridSize::Quick => Self {
                json: RAW_JSON,
                summary: SUMMARY,
                plot_prefix: "",
            },
            GridSize::Full => Self {
                json: "bench-full.json",
                summary: "bench-full.md",
                plot_prefix: "full_",
            },
        }
    }
}

/// Writes the raw results, every plot (SVG + PNG) and the summary into `dir` (created if
/// missing) under the names of the report's grid ([`FileNames`]) and returns the paths
/// written, summary last.
pub fn write(report: &BenchReport, dir: &Path) -> Result<Vec<PathBuf>> {
    report_file::create_dir(dir)?;
    let names = FileNames::of(report.meta.plan.size);
    let mut written = Vec::new();
    let json_path = dir.join(names.json);
    report_file::write_json(&json_path, report)?;
    written.push(json_path);
    written.extend(plots::write_all(report, dir, names.plot_prefix)?);
    let files: Vec<String> = written
        .iter()
        .filter_map(|p| p.file_name().map(|n| format!("`{}`", n.to_string_lossy())))
        .collect();
    let summary_path = dir.join(names.summary);
    report_file::write_text(&summary_path, summary::render(report, &files))?;
    written.push(summary_path);
    Ok(written)
}

/// Reads a `bench.json` (or `bench-full.json`) written by [`write()`], e.g. to re-render or compare runs.
pub fn read(path: &Path) -> Result<BenchReport> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
    serde_json::from_str(&text).map_err(|e| Error::Report {
        what: path.display().to_string(),
        reason: e.to_string(),
    })
}
