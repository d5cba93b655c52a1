//! `rwlock-access-changes` is judged by `scenarios.rs`; this file shows, from each run's
//! history, that its changes of access really happened: write holds were downgraded (the
//! write belief ended, a read hold was granted while the write was still held, the write
//! was released and only then was the read believed), and readers asked to write as their
//! owner and were refused.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use leasehold_sim::checker::Verdict;
use leasehold_sim::scenario::{self, run};
use leasehold_sim::workload::Strategy;
use leasehold_sim::world::calls::{Family, LockOp, LockReply, OpKind};
use leasehold_sim::world::history::{Access, HistEvent, HistKind};

/// Where a process is in a downgrade, as its history shows it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Not in one.
    None,
    /// It held a write hold and asked to turn it into a read hold: its write belief ended
    /// and it waits.
    Asked,
    /// A read hold of its was granted (the write still held).
    ReadGranted,
    /// Then its write hold's release was sent.
    WriteReleased,
}

/// How many downgrades and refused upgrades `history` shows.
fn access_changes(history: &[HistEvent]) -> (u64, u64) {
    let mut calls: BTreeMap<u64, (usize, LockOp, Option<Access>)> = BTreeMap::new();
    let mut believed: BTreeMap<usize, Option<Access>> = BTreeMap::new();
    let mut phase: BTreeMap<usize, Phase> = BTreeMap::new();
    let (mut downgrades, mut refused) = (0, 0);
    for ev in history {
        let at = phase.entry(ev.proc).or_insert(Phase::None);
        match &ev.kind {
            HistKind::Acquired { access, .. } => {
                let was = believed.insert(ev.proc, Some(*access)).flatten();
                if *at == Phase::WriteReleased && *access == Access::Shared && was.is_none() {
                    downgrades += 1;
                }
                *at = Phase::None;
            }
            HistKind::Released => {
                let was = believed.insert(ev.proc, None).flatten();
                *at = if was == Some(Access::Exclusive) {
                    Phase::Asked
                } else {
                    Phase::None
                };
            }
            HistKind::WaitStart if *at == Phase::Asked => {}
            HistKind::WaitStart | HistKind::Lost | HistKind::Crashed => {
                believed.insert(ev.proc, None);
                *at = Phase::None;
            }
            HistKind::Call { id, op, .. } => {
                let holds = believed.get(&ev.proc).copied().flatten();
                if *at == Phase::ReadGranted
                    && op.family == Family::Write
                    && op.kind == OpKind::Release
                {
                    *at = Phase::WriteReleased;
                }
                calls.insert(*id, (ev.proc, *op, holds));
            }
            HistKind::Return { id, reply } => {
                let Some(&(proc, op, holds)) = calls.get(id) else {
                    continue;
                };
                let granted = matches!(reply, LockReply::Granted { .. });
                let asked_write = op.family == Family::Write && op.kind == OpKind::Acquire;
                if asked_write && holds == Some(Access::Shared) {
                    assert!(!granted, "an upgrade was granted: {ev:?}");
                    refused += u64::from(*reply == LockReply::Denied);
                }
                let at = phase.entry(proc).or_insert(Phase::None);
                if *at == Phase::Asked && granted && op.family == Family::Read {
                    *at = Phase::ReadGranted;
                }
            }
            _ => {}
        }
    }
    (downgrades, refused)
}

#[test]
fn writers_downgrade_and_readers_upgrades_are_refused() {
    for strategy in [Strategy::Spin, Strategy::PubSub, Strategy::FairQueue] {
        let spec = scenario::find("rwlock-access-changes")
            .unwrap()
            .spec(strategy, 0);
        let result = run::run(&spec).unwrap();
        assert_eq!(result.verdict(), Verdict::Safe, "{strategy:?}");
        let (downgrades, refused) = access_changes(&result.history);
        assert!(downgrades > 0, "{strategy:?}: no downgrade landed");
        assert!(refused > 0, "{strategy:?}: no upgrade was refused");
    }
}
