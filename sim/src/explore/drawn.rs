//! What an exploration drew: how its runs spread over the lock's parameters and the fault
//! kinds, so a reader sees which parts of the space it reached and how often.
//!
//! Why it exists: a swarm that never draws a short lease, an even quorum or a clock step
//! back cannot find the bugs that live there, and nothing else in the report would say so.
//! Likewise for the public API: [`ApiDraws`] counts the plain runs that drew each API path,
//! and of them the runs whose scripts show it landed.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::explore::params::{
    DOWNGRADE, Drawn, ENTRY_TIMEOUT_RANGE_MS, FENCE_MARGIN_RANGE_MS, MASTERS_RANGE, MIN_REPLICAS,
    MIXED_PERMITS, PERMITS_RANGE, READ_PERCENT_RANGE, REDLOCK_DEADLINES, RESIZE, SCOPED, TRY,
    TTL_RANGE_MS, UPGRADE,
};
use crate::model::coverage::Coverage;

/// Upper edges (ms, exclusive) of the TTL buckets the report counts runs in; the last
/// bucket is open.
const TTL_EDGES_MS: [(u64, &str); 5] = [
    (100, "< 100 ms"),
    (1_000, "100 ms – 1 s"),
    (1_001, "1 s (the scenarios')"),
    (10_000, "1 – 10 s"),
    (u64::MAX, "≥ 10 s"),
];

/// The runs of an exploration, counted by what they drew. Its labels are owned, so that a
/// tally read back (`merge`) keeps them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrawnTally {
    /// Runs in all.
    pub runs: u64,
    /// Runs per TTL bucket, in [`TTL_EDGES_MS`] order.
    pub ttl: Vec<(String, u64)>,
    /// RedLock runs per master count.
    pub masters: BTreeMap<usize, u64>,
    /// FairQueue runs with a drawn entry timeout.
    pub entry_timeout: u64,
    /// Runs with a drawn fence margin, and those whose margin is shorter than 10 s.
    pub fence_margin: (u64, u64),
    /// Runs per persistence.
    pub persistence: BTreeMap<String, u64>,
    /// Runs per server clock.
    pub server_clock: BTreeMap<String, u64>,
    /// Runs per client count.
    pub clients: BTreeMap<usize, u64>,
    /// Runs per lock family member.
    pub kinds: BTreeMap<String, u64>,
    /// Read-write lock runs per tenth of reads (0 for 0–9 %, …, 9 for 90 %).
    pub read_tenths: BTreeMap<u8, u64>,
    /// Semaphore runs per permit count.
    pub permits: BTreeMap<u32, u64>,
    /// Runs per re-entry depth (0: no re-entry).
    pub reentry_depth: BTreeMap<u8, u64>,
    /// Runs per fault kind.
    pub faults: BTreeMap<String, u64>,
}

impl DrawnTally {
    /// Counts `runs`.
    pub fn of<'a>(runs: impl IntoIterator<Item = &'a Drawn>) -> Self {
        let mut tally = Self {
            ttl: TTL_EDGES_MS
                .iter()
                .map(|(_, label)| ((*label).to_owned(), 0))
                .collect(),
            ..Self::default()
        };
        for drawn in runs {
            tally.runs += 1;
            if let Some(bucket) = TTL_EDGES_MS.iter().position(|(e, _)| drawn.ttl_ms < *e) {
                tally.ttl[bucket].1 += 1;
            }
            if drawn.masters > 1 {
                *tally.masters.entry(drawn.masters).or_default() += 1;
            }
            tally.entry_timeout += u64::from(drawn.entry_timeout_ms.is_some());
            if let Some(margin) = drawn.fence_margin_ms {
                tally.fence_margin.0 += 1;
                tally.fence_margin.1 += u64::from(margin < 10_000);
            }
            *tally
                .persistence
                .entry(drawn.persistence.to_owned())
                .or_default() += 1;
            *tally
                .server_clock
                .entry(drawn.server_clock.to_owned())
                .or_default() += 1;
            *tally.clients.entry(drawn.clients).or_default() += 1;
            *tally.kinds.entry(drawn.kind.to_owned()).or_default() += 1;
            if let Some(percent) = drawn.read_percent {
                *tally.read_tenths.entry(percent / 10).or_default() += 1;
            }
            if let Some(permits) = drawn.permits {
                *tally.permits.entry(permits).or_default() += 1;
            }
            *tally.reentry_depth.entry(drawn.reentry_depth).or_default() += 1;
            for kind in &drawn.faults {
                *tally.faults.entry((*kind).to_owned()).or_default() += 1;
            }
        }
        tally
    }

    /// Adds the runs of `other`, an exploration of other seeds: what [`DrawnTally::of`]
    /// would count over both explorations' runs.
    pub fn add(&mut self, other: &Self) {
        fn sum<K: Ord + Clone>(mine: &mut BTreeMap<K, u64>, theirs: &BTreeMap<K, u64>) {
            for (key, n) in theirs {
                *mine.entry(key.clone()).or_default() += n;
            }
        }
        self.runs += other.runs;
        for (label, n) in &other.ttl {
            match self.ttl.iter_mut().find(|(mine, _)| mine == label) {
                Some((_, mine)) => *mine += n,
                None => self.ttl.push((label.clone(), *n)),
            }
        }
        sum(&mut self.masters, &other.masters);
        self.entry_timeout += other.entry_timeout;
        self.fence_margin.0 += other.fence_margin.0;
        self.fence_margin.1 += other.fence_margin.1;
        sum(&mut self.persistence, &other.persistence);
        sum(&mut self.server_clock, &other.server_clock);
        sum(&mut self.clients, &other.clients);
        sum(&mut self.kinds, &other.kinds);
        sum(&mut self.read_tenths, &other.read_tenths);
        sum(&mut self.permits, &other.permits);
        sum(&mut self.reentry_depth, &other.reentry_depth);
        sum(&mut self.faults, &other.faults);
    }

    /// The report's section.
    pub fn markdown(&self) -> String {
        let share = |n: u64| 100.0 * n as f64 / self.runs.max(1) as f64;
        let mut md = String::new();
        let _ = writeln!(
            md,
            "## What the runs drew\n\nTTL log-uniform over {}–{} ms in half the runs (1 s in the rest); RedLock masters {}–{}; FairQueue entry timeout log-uniform over {}–{} ms and fence margin over {}–{} ms, each in half the runs; times of holds and faults scaled to the TTL.\n",
            TTL_RANGE_MS.0,
            TTL_RANGE_MS.1,
            MASTERS_RANGE.0,
            MASTERS_RANGE.1,
            ENTRY_TIMEOUT_RANGE_MS.0,
            ENTRY_TIMEOUT_RANGE_MS.1,
            FENCE_MARGIN_RANGE_MS.0,
            FENCE_MARGIN_RANGE_MS.1
        );
        let _ = writeln!(md, "| TTL | runs | share |\n|---|---|---|");
        for (label, n) in &self.ttl {
            let _ = writeln!(md, "| {label} | {n} | {:.1} % |", share(*n));
        }
        let masters: Vec<String> = self
            .masters
            .iter()
            .map(|(m, n)| format!("{m}: {n}"))
            .collect();
        let persistence: Vec<String> = self
            .persistence
            .iter()
            .map(|(p, n)| format!("{p} {:.1} %", share(*n)))
            .collect();
        let server_clock: Vec<String> = self
            .server_clock
            .iter()
            .map(|(c, n)| format!("{c} {:.1} %", share(*n)))
            .collect();
        let _ = writeln!(
            md,
            "\nRedLock runs by masters: {}. FairQueue runs with a drawn entry timeout: {}. Runs with a drawn fence margin: {} ({} of them under 10 s, so fence keys expire mid-run). Persistence: {}. Server clock in a script (`moving`: Redis 7.0 and 7.1, each call reading the live clock; `frozen`: Redis 7.2 and later, Valkey): {}.\n",
            if masters.is_empty() {
                "none".to_owned()
            } else {
                masters.join(", ")
            },
            self.entry_timeout,
            self.fence_margin.0,
            self.fence_margin.1,
            persistence.join(", "),
            server_clock.join(", ")
        );
        let list = |counts: Vec<String>| {
            if counts.is_empty() {
                "none".to_owned()
            } else {
                counts.join(", ")
            }
        };
        let _ = writeln!(
            md,
            "Clients per run (log-uniform from 2): {}. Lock kinds: {}. Read-write lock runs by reads ({}–{} %, uniform; by tens of percent): {}. Semaphore runs by permits ({}–{}): {}. Runs by re-entry depth (0: none): {}.\n",
            list(
                self.clients
                    .iter()
                    .map(|(c, n)| format!("{c}: {n}"))
                    .collect()
            ),
            list(
                self.kinds
                    .iter()
                    .map(|(k, n)| format!("{k} {:.1} %", share(*n)))
                    .collect()
            ),
            READ_PERCENT_RANGE.0,
            READ_PERCENT_RANGE.1,
            list(
                self.read_tenths
                    .iter()
                    .map(|(t, n)| format!(
                        "{}–{} %: {n}",
                        u32::from(*t) * 10,
                        u32::from(*t) * 10 + 9
                    ))
                    .collect()
            ),
            PERMITS_RANGE.0,
            PERMITS_RANGE.1,
            list(
                self.permits
                    .iter()
                    .map(|(p, n)| format!("{p}: {n}"))
                    .collect()
            ),
            list(
                self.reentry_depth
                    .iter()
                    .map(|(d, n)| format!("{d}: {n}"))
                    .collect()
            ),
        );
        let _ = writeln!(md, "| fault kind | runs | share |\n|---|---|---|");
        for (kind, n) in &self.faults {
            let _ = writeln!(md, "| {kind} | {n} | {:.1} % |", share(*n));
        }
        md.push('\n');
        md
    }
}

/// What shows that a drawn API path landed in a run.
#[derive(Debug, Clone, Copy)]
enum Evidence {
    /// A script branch that only the drawn path takes: the script's file stem and a text
    /// its line starts with.
    Branch(&'static str, &'static str),
    /// A client mark ([`crate::workload::client_marks`]) that only the drawn path counts.
    Mark(&'static str),
}

/// Each API draw with the evidence that it landed in a run, and what that shows.
const API_EVIDENCE: [(&str, Evidence, &str); 8] = [
    (
        MIXED_PERMITS,
        Evidence::Branch("semaphore_acquire", "return {-1, stored}"),
        "an acquire refused as mismatched",
    ),
    (
        RESIZE,
        Evidence::Branch("semaphore_resize", "redis.call('PEXPIREAT', size, live)"),
        "a resize stored its size on a live semaphore",
    ),
    (
        UPGRADE,
        Evidence::Branch("rw_write_acquire", "return {2, 0}"),
        "a write refused as an upgrade",
    ),
    (
        DOWNGRADE,
        Evidence::Branch("rw_read_acquire", "return nil"),
        "a read admitted as its owner's own (a downgrade's, or a reader's re-entry)",
    ),
    (
        REDLOCK_DEADLINES,
        Evidence::Mark(leasehold::metrics::ACQUIRE_TIMEOUTS),
        "a wait ended by its deadline (`Error::Timeout`)",
    ),
    (
        SCOPED,
        Evidence::Mark("leasehold_leases_lost_total{reason=expired}"),
        "a lease lost by expiry (scoped work that outlived it, or any other hold)",
    ),
    (
        TRY,
        Evidence::Mark("leasehold_ambiguous_total{operation=acquire,outcome=probed_free}"),
        "an acquire's lost reply the probe found not granted (a try's, or a waiting one's)",
    ),
    (
        MIN_REPLICAS,
        Evidence::Mark("leasehold_refusals_total{reason=noreplicas}"),
        "an acquire attempt refused with `NOREPLICAS` (waited out by a waiting acquire)",
    ),
];

/// Evidence resolved against the scripts: a branch by its script's hash and line.
enum Found {
    Branch(String, u32),
    Mark(&'static str),
}

impl Found {
    fn of(evidence: Evidence) -> Option<Self> {
        match evidence {
            Evidence::Branch(script, text) => {
                branch_line(script, text).map(|(sha, line)| Self::Branch(sha, line))
            }
            Evidence::Mark(mark) => Some(Self::Mark(mark)),
        }
    }

    /// Whether a run that took the branches `coverage` and the client paths `marks` shows
    /// it.
    fn in_run(&self, coverage: &Coverage, marks: &BTreeSet<String>) -> bool {
        match self {
            Self::Branch(sha, line) => coverage
                .branches(sha)
                .is_some_and(|lines| lines.contains(*line)),
            Self::Mark(mark) => marks.contains(*mark),
        }
    }
}

/// One API draw over an exploration's plain runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiDraw {
    /// The draw.
    pub draw: String,
    /// Plain runs that drew it.
    pub drawn: u64,
    /// Of them, the runs whose scripts took its evidence branch.
    pub landed: u64,
    /// What the evidence branch shows.
    pub evidence: String,
}

/// The API draws of an exploration's plain runs, with their shares. Its labels are owned,
/// so that a tally read back (`merge`) keeps them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiDraws {
    /// Plain runs in all.
    pub runs: u64,
    /// Each draw, in table order.
    pub draws: Vec<ApiDraw>,
}

impl ApiDraws {
    /// Counts the plain `runs`, each with what it drew, the script branches it took and
    /// the client paths it took.
    pub fn of<'a>(
        runs: impl IntoIterator<Item = (&'a Drawn, &'a Coverage, &'a BTreeSet<String>)>,
    ) -> Self {
        let evidence: Vec<Option<Found>> = API_EVIDENCE
            .iter()
            .map(|&(_, evidence, _)| Found::of(evidence))
            .collect();
        let mut tally = Self {
            runs: 0,
            draws: API_EVIDENCE
                .iter()
                .map(|&(draw, _, shows)| ApiDraw {
                    draw: draw.to_owned(),
                    drawn: 0,
                    landed: 0,
                    evidence: shows.to_owned(),
                })
                .collect(),
        };
        for (drawn, coverage, marks) in runs {
            tally.runs += 1;
            for (row, evidence) in tally.draws.iter_mut().zip(&evidence) {
                if !drawn.api.contains(&row.draw.as_str()) {
                    continue;
                }
                row.drawn += 1;
                let landed = evidence.as_ref().is_some_and(|e| e.in_run(coverage, marks));
                row.landed += u64::from(landed);
            }
        }
        tally
    }

    /// Adds the draws of `other`, an exploration of other plain seeds, row by row (a row
    /// only `other` has goes last).
    pub fn add(&mut self, other: &Self) {
        self.runs += other.runs;
        for theirs in &other.draws {
            match self.draws.iter_mut().find(|mine| mine.draw == theirs.draw) {
                Some(mine) => {
                    mine.drawn += theirs.drawn;
                    mine.landed += theirs.landed;
                }
                None => self.draws.push(theirs.clone()),
            }
        }
    }

    /// The report's section.
    pub fn markdown(&self) -> String {
        let share = |n: u64| 100.0 * n as f64 / self.runs.max(1) as f64;
        let mut md = format!(
            "## API draws

The public API paths the swarm draws beyond plain `lock()`, in {} plain runs: each draw's share, and the runs where it landed (its script branch ran). Guards dropped at runtime shutdown take the path of every client crash (the fault table's `crash`): the process's tasks are dropped with the guards they hold, and each guard's background release is refused by the dead spawner, as tokio refuses a spawn on a runtime shut down, so the lock ends with its lease (the real-Redis test `a_guard_dropped_after_runtime_shutdown_expires_with_its_lease` pins the same). A try right after a connection reset is judged by `FalseBusy` wherever a try's reply is lost.\n\n| draw | runs | share | landed | evidence |\n|---|---|---|---|---|\n",
            self.runs
        );
        for row in &self.draws {
            let _ = writeln!(
                md,
                "| {} | {} | {:.1} % | {} ({:.1} %) | {} |",
                row.draw,
                row.drawn,
                share(row.drawn),
                row.landed,
                share(row.landed),
                row.evidence
            );
        }
        md.push('\n');
        md
    }
}

/// The SHA and line of the branch of lock script `script` (file stem) whose line starts
/// with `text`, once trimmed; `None` if no branch line does (the table then shows none
/// landed, which a test catches).
fn branch_line(script: &str, text: &str) -> Option<(String, u32)> {
    let script = crate::model::coverage::lock_scripts()
        .into_iter()
        .find(|s| s.name() == script)?;
    let line = crate::model::branches::branches(script.source())
        .ok()?
        .into_iter()
        .map(|b| b.line)
        .find(|&line| {
            crate::model::branches::code_line(script.source(), line)
                .is_some_and(|code| code.trim().starts_with(text))
        })?;
    Some((script.sha().to_owned(), line))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn drawn(ttl_ms: u64, masters: usize, faults: Vec<&'static str>) -> Drawn {
        Drawn {
            ttl_ms,
            masters,
            entry_timeout_ms: None,
            fence_margin_ms: Some(500),
            persistence: "none",
            server_clock: "frozen",
            clients: if masters > 1 { 2 } else { 5 },
            kind: if masters > 1 { "mutex" } else { "rwlock" },
            read_percent: (masters == 1).then_some(75),
            permits: None,
            reentry_depth: 0,
            faults,
            api: Vec::new(),
        }
    }

    #[test]
    fn runs_are_counted_by_ttl_bucket_masters_and_fault_kind() {
        let runs = [
            drawn(20, 1, vec!["pause"]),
            drawn(1_000, 4, vec!["pause", "node-jump (back)"]),
            drawn(30_000, 7, vec![]),
        ];
        let t = DrawnTally::of(&runs);
        assert_eq!(t.runs, 3);
        let counts: Vec<u64> = t.ttl.iter().map(|(_, n)| *n).collect();
        assert_eq!(counts, vec![1, 0, 1, 0, 1]);
        assert_eq!(t.masters.get(&4), Some(&1));
        assert_eq!(t.masters.get(&7), Some(&1));
        assert_eq!(t.faults.get("pause"), Some(&2));
        assert_eq!(t.fence_margin, (3, 3));
        let md = t.markdown();
        assert!(md.contains("| pause | 2 | 66.7 % |"), "{md}");
        assert_eq!(t.clients.get(&2), Some(&2));
        assert_eq!(t.read_tenths.get(&7), Some(&1));
        assert!(
            md.contains("Clients per run (log-uniform from 2): 2: 2, 5: 1."),
            "{md}"
        );
        assert!(md.contains("mutex 66.7 %, rwlock 33.3 %"), "{md}");
        assert!(md.contains("70–79 %: 1"), "{md}");
    }

    #[test]
    fn an_api_draw_counts_the_plain_runs_that_drew_it_and_those_where_it_landed() {
        use crate::model::coverage::LineSet;
        let Evidence::Branch(script, text) = API_EVIDENCE[1].1 else {
            panic!("a resize lands on a script branch");
        };
        let evidence = [branch_line(script, text).unwrap()];
        let with = |api: Vec<&'static str>| Drawn {
            api,
            ..drawn(1_000, 1, vec![])
        };
        let resized = with(vec![RESIZE]);
        let both = with(vec![MIXED_PERMITS, RESIZE]);
        let plain = with(vec![]);
        let mut landed = Coverage::default();
        let mut lines = LineSet::default();
        lines.insert(evidence[0].1);
        landed.add_branches(&evidence[0].0, &lines);
        let none = Coverage::default();
        let no_marks = BTreeSet::new();
        let timed_out = BTreeSet::from([leasehold::metrics::ACQUIRE_TIMEOUTS.to_owned()]);
        let deadlines = with(vec![REDLOCK_DEADLINES]);
        let t = ApiDraws::of([
            (&resized, &landed, &no_marks),
            (&both, &none, &no_marks),
            (&plain, &landed, &timed_out),
            (&deadlines, &none, &timed_out),
        ]);
        assert_eq!(t.runs, 4);
        let rows: Vec<(&str, u64, u64)> = t
            .draws
            .iter()
            .map(|r| (r.draw.as_str(), r.drawn, r.landed))
            .collect();
        assert_eq!(
            rows,
            [
                (MIXED_PERMITS, 1, 0),
                (RESIZE, 2, 1),
                (UPGRADE, 0, 0),
                (DOWNGRADE, 0, 0),
                (REDLOCK_DEADLINES, 1, 1),
                (SCOPED, 0, 0),
                (TRY, 0, 0),
                (MIN_REPLICAS, 0, 0)
            ]
        );
        let md = t.markdown();
        assert!(
            md.contains("| semaphore: resize while held | 2 | 50.0 % | 1 (25.0 %) |"),
            "{md}"
        );
    }
}
