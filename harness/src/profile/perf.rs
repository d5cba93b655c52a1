//! The client side of a CPU profile: `perf record` (software `cpu-clock` sampling with call
//! stacks) attached to this process while a cell runs, and the samples folded into the
//! categories the issue asks about (watchdog, timers, subscription dispatch, redis-rs, …).
//!
//! Each sample gets one *self* category, from the frame nearest the leaf that any category
//! claims, so self shares add up to 100 %; and an *inclusive* mark for every category with a
//! frame anywhere on its stack, so "everything under the watchdog" is visible even when the
//! leaf is the allocator. Frames are matched by the path they start with (generic arguments
//! are not searched), so tokio polling a leasehold future counts as tokio in self time.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::process::{Child, Command};

use crate::error::{Error, Result};

/// Sampling frequency, Hz: 999 rather than 1000 so sampling does not lock step with the
/// runtime's millisecond timers.
const SAMPLE_HZ: &str = "999";
/// Time `perf record` needs to attach to every thread before the cell starts.
const ATTACH_SETTLE: Duration = Duration::from_millis(300);

/// A category of client CPU and the frames that claim a sample for it.
struct Category {
    /// What the report prints.
    name: &'static str,
    /// Paths (after a leading `<`) a claimed frame starts with.
    prefixes: &'static [&'static str],
    /// Symbols a claimed frame equals: the C library's system call wrappers, whose short
    /// names would claim unrelated frames as prefixes.
    exact: &'static [&'static str],
}

const fn by_prefix(name: &'static str, prefixes: &'static [&'static str]) -> Category {
    Category {
        name,
        prefixes,
        exact: &[],
    }
}

const fn by_name(name: &'static str, exact: &'static [&'static str]) -> Category {
    Category {
        name,
        prefixes: &[],
        exact,
    }
}

/// The categories in the order a frame is tested. The system calls come first: kernel
/// frames are skipped (their CPU belongs to the user frame that entered the kernel), so a
/// syscall's time, the TCP stack's under it included, lands on its C library wrapper.
const CATEGORIES: [Category; 17] = [
    by_name(
        "kernel: socket writes (TCP stack, delivery to Redis)",
        &[
            "__GI___writev",
            "writev",
            "__libc_send",
            "__send",
            "send",
            "sendto",
            "sendmsg",
        ],
    ),
    by_name(
        "kernel: socket reads",
        &[
            "read",
            "__read",
            "__libc_read",
            "__GI___libc_read",
            "__libc_recv",
            "recv",
            "recvfrom",
        ],
    ),
    by_name(
        "kernel: epoll (runtime parking)",
        &["epoll_wait", "epoll_ctl"],
    ),
    by_name(
        "kernel: thread wake-ups (futex, eventfd)",
        &[
            "syscall",
            "__GI___libc_write",
            "__write",
            "write",
            "futex",
            "__futex",
        ],
    ),
    by_prefix(
        "allocation",
        &[
            "mi_",
            "_mi_",
            "__rust_alloc",
            "__rust_dealloc",
            "__rust_realloc",
            "malloc",
            "free",
            "realloc",
            "calloc",
            "cfree",
            "_int_malloc",
            "_int_free",
            "alloc::alloc",
            "__mmap",
            "__munmap",
            "__madvise",
            "mprotect",
        ],
    ),
    by_prefix(
        "tracing",
        &["tracing::", "tracing_core::", "tracing_subscriber::"],
    ),
    by_prefix("metrics", &["leasehold::metrics", "metrics::"]),
    by_prefix("watchdog (spawn, renewals)", &["leasehold::watchdog"]),
    by_prefix(
        "subscription / inbox dispatch",
        &[
            "leasehold::notify",
            "leasehold::waiters",
            "leasehold::wait::",
            "leasehold::pending",
            "redis::aio::pubsub",
            "redis::push_manager",
        ],
    ),
    by_prefix(
        "timers",
        &[
            "tokio::time::",
            "tokio::runtime::time::entry",
            "tokio::runtime::time::wheel",
            "tokio::runtime::time::handle",
            "tokio::runtime::time::source",
            "tokio::runtime::time::Driver::process",
        ],
    ),
    by_prefix(
        "redis-rs encode / decode",
        &[
            "redis::parser",
            "combine::",
            "redis::cmd",
            "redis::types",
            "redis::script",
            "itoa::",
            "redis::aio::ValueCodec",
            "redis::aio::multiplexed_connection::ValueCodec",
            "tokio_util::codec",
        ],
    ),
    by_prefix(
        "redis-rs connection (multiplexer, channels)",
        &["redis::", "futures_util::", "futures_channel::"],
    ),
    by_prefix("rslock client", &["rslock::"]),
    by_prefix("leasehold client (other)", &["leasehold::"]),
    by_prefix(
        "tokio scheduling and I/O",
        &[
            "tokio::",
            "mio::",
            "parking_lot",
            "std::sys",
            "std::thread",
            "std::sync",
        ],
    ),
    by_prefix(
        "bench harness (recording, monitor)",
        &["leasehold_harness::", "hdrhistogram::"],
    ),
    by_prefix("kernel: other (faults, interrupts)", &[KERNEL_ONLY]),
];

/// Stands for a sample with no user-space frame (an interrupt, a fault path perf could not
/// unwind out of).
const KERNEL_ONLY: &str = "[kernel only]";

/// The name of samples no category claims.
pub const OTHER: &str = "other (memcpy, std, unresolved)";

/// `perf record` attached to this process.
pub struct Recorder {
    child: Child,
    data: PathBuf,
}

/// Samples per category.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Folded {
    /// Samples in total.
    pub samples: u64,
    /// Samples whose nearest claimed frame is the category's (adds up to `samples`).
    pub self_samples: BTreeMap<String, u64>,
    /// Samples with a frame of the category anywhere on the stack.
    pub inclusive_samples: BTreeMap<String, u64>,
}

impl Folded {
    /// Adds `other`'s samples to these.
    pub fn add(&mut self, other: &Folded) {
        self.samples += other.samples;
        for (mine, theirs) in [
            (&mut self.self_samples, &other.self_samples),
            (&mut self.inclusive_samples, &other.inclusive_samples),
        ] {
            for (name, n) in theirs {
                *mine.entry(name.clone()).or_insert(0) += n;
            }
        }
    }
}

/// Whether `perf` can be run here.
pub async fn available() -> bool {
    Command::new("perf")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await
        .is_ok_and(|s| s.success())
}

impl Recorder {
    /// Starts sampling this process into `data`.
    pub async fn start(data: &Path) -> Result<Self> {
        let child = Command::new("perf")
            .args(["record", "-e", "cpu-clock", "-F", SAMPLE_HZ, "-g", "-p"])
            .arg(std::process::id().to_string())
            .arg("-o")
            .arg(data)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| Error::io("starting perf record", e))?;
        tokio::time::sleep(ATTACH_SETTLE).await;
        Ok(Self {
            child,
            data: data.to_owned(),
        })
    }

    /// Stops sampling (SIGINT, so perf writes its file) and folds the samples.
    pub async fn finish(mut self) -> Result<Folded> {
        if let Some(pid) = self.child.id() {
            Command::new("kill")
                .args(["-INT", &pid.to_string()])
                .status()
                .await
                .map_err(|e| Error::io("stopping perf record", e))?;
        }
        self.child
            .wait()
            .await
            .map_err(|e| Error::io("waiting for perf record", e))?;
        let script = Command::new("perf")
            .args(["script", "-F", "ip,sym", "-i"])
            .arg(&self.data)
            .stderr(Stdio::null())
            .output()
            .await
            .map_err(|e| Error::io("running perf script", e))?;
        Ok(fold(&String::from_utf8_lossy(&script.stdout)))
    }
}

/// Folds `perf script -F ip,sym` output (frames one per line, leaf first, samples separated by
/// blank lines) into categories.
pub fn fold(script: &str) -> Folded {
    let mut folded = Folded::default();
    for sample in script.split("\n\n") {
        let all: Vec<(bool, &str)> = sample.lines().filter_map(symbol).collect();
        if all.is_empty() {
            continue;
        }
        let mut frames: Vec<&str> = all.iter().filter(|f| !f.0).map(|f| f.1).collect();
        if frames.is_empty() {
            frames.push(KERNEL_ONLY);
        }
        folded.samples += 1;
        let own = frames.iter().find_map(|f| category(f)).unwrap_or(OTHER);
        *folded.self_samples.entry(own.to_owned()).or_insert(0) += 1;
        let mut seen: Vec<&str> = frames.iter().filter_map(|f| category(f)).collect();
        seen.sort_unstable();
        seen.dedup();
        for name in seen {
            *folded.inclusive_samples.entry(name.to_owned()).or_insert(0) += 1;
        }
    }
    folded
}

/// Whether one frame line (`  55d0c0ffee sym+0x12`) is in the kernel (x86-64 kernel
/// addresses start with `ffffffff`), and its symbol, offset stripped; `[unknown]` frames are
/// dropped.
fn symbol(line: &str) -> Option<(bool, &str)> {
    let (address, rest) = line.trim().split_once(char::is_whitespace)?;
    let sym = rest.trim();
    let sym = sym.rsplit_once("+0x").map_or(sym, |(s, _)| s);
    (!sym.is_empty() && sym != "[unknown]").then_some((address.starts_with("ffffffff"), sym))
}

/// The first category whose prefix starts the frame's path.
fn category(frame: &str) -> Option<&'static str> {
    let path = frame.trim_start_matches('<').trim_start_matches('&');
    CATEGORIES
        .iter()
        .find(|c| c.exact.contains(&frame) || c.prefixes.iter().any(|p| path.starts_with(p)))
        .map(|c| c.name)
}

/// Every category name in report order, [`OTHER`] last.
pub fn category_names() -> impl Iterator<Item = &'static str> {
    CATEGORIES
        .iter()
        .map(|c| c.name)
        .chain(std::iter::once(OTHER))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    const SCRIPT: &str = "\
\tffffffff81000130 entry_SYSCALL_64_after_hwframe
\t    7f00 mi_malloc_aligned+0x10
\t    5500 tokio::runtime::task::raw::poll+0x20
\t    5501 leasehold::watchdog::arm::{{closure}}+0x40

\t    5600 redis::parser::parse+0x1
\t    5601 <tokio::runtime::task::harness::Harness<leasehold::watchdog::Run>>::poll+0x9

\t    5700 [unknown]

\tffffffff81feffa1 ipv4_mtu
\t   fde9d __GI___writev+0x1d
\t  1397ea3 tokio_util::util::poll_buf::poll_write_buf+0x3

\tffffffff81feffa1 ipv4_mtu
";

    #[test]
    fn self_time_goes_to_the_nearest_claimed_frame() {
        let folded = fold(SCRIPT);
        assert_eq!(folded.samples, 4);
        assert_eq!(folded.self_samples[CATEGORIES[0].name], 1);
        assert_eq!(folded.self_samples["kernel: other (faults, interrupts)"], 1);
        assert_eq!(folded.self_samples["allocation"], 1);
        assert_eq!(folded.self_samples["redis-rs encode / decode"], 1);
        assert_eq!(folded.inclusive_samples["watchdog (spawn, renewals)"], 1);
        assert_eq!(folded.inclusive_samples["tokio scheduling and I/O"], 2);
    }
}
