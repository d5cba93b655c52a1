//! The classic designs' section of `summary.md`: each mutex design of `reports/designs.md`
//! at the key point (N = [`KEY_CLIENTS`], one hot lock), each metric beside Leasehold's
//! FairQueue and PubSub and rslock's default profile from the same run, as ratios, the same
//! table as the Python peers' ([`python_peers::table`]).

use std::fmt::Write as _;

use crate::bench::contender::Contender;
use crate::report::key_ratios::KEY_CLIENTS;
use crate::report::python_peers;
use crate::report::results::BenchReport;

/// Writes the section, if any design ran.
pub fn write(out: &mut String, report: &BenchReport) {
    let designs: Vec<Contender> = Contender::DESIGNS
        .into_iter()
        .filter(|&c| report.find(|s| s.contender == c).is_some())
        .collect();
    if designs.is_empty() {
        return;
    }
    let names: Vec<&str> = designs.iter().map(|c| c.label()).collect();
    let _ = writeln!(
        out,
        "## Classic lock designs\n\n\
         The mutex designs of `designs.md` ({}), each benchmark client the simulator's own \
         design client (`leasehold_sim::workload::designs::DesignLock`) over connections of its \
         own, in the hot lock's cells at N = 1 and N = {KEY_CLIENTS} (cs 0 and 1 ms). Their \
         speed is not their safety: `designs.md` and the design rows of `safety.md` say which \
         faults break which.\n",
        names.join(", ")
    );
    python_peers::table(out, report, &designs, "the design");
}
