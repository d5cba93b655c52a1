//! The run trace: one line per observable step, stamped with virtual time.
//!
//! Invariant: the trace is a pure function of the seed and the scenario; two runs of the
//! same seed must produce identical bytes (the determinism test compares them). Lines are
//! only formatted when tracing is on, so exploration pays nothing for it.

use std::fmt::Write as _;

/// An append-only, optionally disabled trace.
#[derive(Debug, Clone, Default)]
pub struct Trace {
    enabled: bool,
    text: String,
    lines: u64,
}

impl Trace {
    /// A trace that records (`enabled`) or ignores everything.
    pub fn new(enabled: bool) -> Self {
        Self {
            enabled,
            text: String::new(),
            lines: 0,
        }
    }

    /// Whether lines are recorded.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Records the line produced by `line` at virtual time `now_ns`.
    pub fn record(&mut self, now_ns: u64, line: impl FnOnce() -> String) {
        if !self.enabled {
            return;
        }
        self.lines += 1;
        // Writing into a String cannot fail.
        let _ = writeln!(
            self.text,
            "{:>6}.{:06} {}",
            now_ns / 1_000_000_000,
            (now_ns / 1_000) % 1_000_000,
            line()
        );
    }

    /// The recorded text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Number of recorded lines.
    pub fn len(&self) -> u64 {
        self.lines
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.lines == 0
    }
}
