//! The hand-off scenarios bite: their verdicts are judged by `scenarios.rs`; this file
//! shows, from the traces of the FairQueue runs, that the races each was built for really
//! happened: grants trusted on arrival and grants checked with the server first, grants
//! that reached waiters which had given up, grants read after a stop, grants published
//! to waiters that had died; and from the history of the read-write lock's, that a writer
//! died queued with readers behind it, who waited out its entry and then went on.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use leasehold_sim::checker::Verdict;
use leasehold_sim::scenario;
use leasehold_sim::scenario::run;
use leasehold_sim::workload::Strategy;
use leasehold_sim::world::calls::{Family, LockOp, LockReply, OpKind};
use leasehold_sim::world::history::{HistEvent, HistKind};

/// Seeds per scenario.
const SEEDS: u64 = 4;

/// What a process did next after a grant message reached it.
#[derive(Debug, Default)]
struct Grants {
    /// It held the lock without asking the server (the message was trusted).
    trusted: usize,
    /// It sent a command before holding (or never held): the message was not trusted.
    asked: usize,
    /// The message reached it when it was no longer waiting (gave up, cancelled, crashed).
    not_waiting: usize,
    /// The message reached it while it was stopped.
    while_paused: usize,
}

fn proc_of(word: &str) -> Option<&str> {
    let id = word.strip_prefix('c')?;
    Some(id.split('.').next().unwrap_or(id))
}

/// Reads the grant messages (`cN <= leasehold:inbox:… <token> <lease> <seq> <hold>`) of a
/// trace and what each receiver did next.
fn grants(trace: &str) -> Grants {
    let mut out = Grants::default();
    // proc -> waiting for a lock right now
    let mut waiting: BTreeMap<String, bool> = BTreeMap::new();
    // proc -> paused until (s)
    let mut paused_until: BTreeMap<String, f64> = BTreeMap::new();
    // proc -> a grant message it has not acted on yet
    let mut open: BTreeMap<String, ()> = BTreeMap::new();
    for line in trace.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some(at) = words.first().and_then(|w| w.parse::<f64>().ok()) else {
            continue;
        };
        match words.as_slice() {
            [_, "pause", who, "for", ms, "ms", ..] => {
                if let (Some(p), Ok(ms)) = (proc_of(who), ms.parse::<f64>()) {
                    paused_until.insert(p.to_owned(), at + ms / 1_000.0);
                }
            }
            [_, who, "<=", channel, _hold, _token, _lease, _seq]
                if channel.starts_with("leasehold:inbox:") =>
            {
                let p = proc_of(who).unwrap().to_owned();
                if !waiting.get(&p).copied().unwrap_or(false) {
                    out.not_waiting += 1;
                } else {
                    if paused_until.get(&p).is_some_and(|until| at < *until) {
                        out.while_paused += 1;
                    }
                    open.insert(p, ());
                }
            }
            [_, who, "->", ..] => {
                let p = proc_of(who).unwrap().to_owned();
                if open.remove(&p).is_some() {
                    out.asked += 1;
                }
            }
            [_, who, _lock, event, ..] if who.contains('.') => {
                let p = proc_of(who).unwrap().to_owned();
                match *event {
                    "WaitStart" => {
                        waiting.insert(p, true);
                    }
                    "Acquired" => {
                        waiting.insert(p.clone(), false);
                        if open.remove(&p).is_some() {
                            out.trusted += 1;
                        }
                    }
                    "AcquireFailed" | "Crashed" => {
                        waiting.insert(p.clone(), false);
                        open.remove(&p);
                    }
                    _ => {}
                }
            }
            [_, who, "crashes"] => {
                let p = proc_of(who).unwrap().to_owned();
                waiting.insert(p.clone(), false);
                open.remove(&p);
            }
            _ => {}
        }
    }
    out
}

/// The grants of `name`'s FairQueue runs over [`SEEDS`] seeds, and the worst verdict.
fn fair_runs(name: &str) -> (Grants, Verdict) {
    let mut total = Grants::default();
    let mut worst = Verdict::Safe;
    for seed in 0..SEEDS {
        let mut spec = scenario::find(name)
            .unwrap()
            .spec(Strategy::FairQueue, seed);
        spec.trace = true;
        let result = run::run(&spec).unwrap();
        worst = worst.max(result.verdict());
        let g = grants(&result.trace);
        total.trusted += g.trusted;
        total.asked += g.asked;
        total.not_waiting += g.not_waiting;
        total.while_paused += g.while_paused;
    }
    eprintln!("{name}: {total:?}, worst {worst:?}");
    (total, worst)
}

#[test]
fn grants_reach_waiters_that_gave_up_and_are_given_back() {
    let (g, worst) = fair_runs("handoff-give-up");
    assert!(g.trusted >= 20, "{g:?}");
    assert!(
        g.not_waiting >= 1,
        "no grant reached a waiter that gave up: {g:?}"
    );
    assert_eq!(worst, Verdict::Safe);
}

#[test]
fn a_slow_waiter_trusts_some_grants_and_checks_others() {
    let (g, worst) = fair_runs("handoff-slow-waiter");
    assert!(g.trusted >= 5, "{g:?}");
    assert!(g.asked >= 1, "no grant arrived too late to trust: {g:?}");
    assert!(worst <= Verdict::SafeWithFencing, "{worst:?}");
}

#[test]
fn grants_reach_stopped_waiters() {
    let (g, worst) = fair_runs("handoff-waiter-pause");
    assert!(
        g.while_paused >= 1,
        "no grant reached a stopped waiter: {g:?}"
    );
    assert!(worst <= Verdict::ExclusionBroken, "{worst:?}");
}

#[test]
fn grants_are_published_to_dead_waiters() {
    let (g, worst) = fair_runs("handoff-dead-waiters");
    assert!(g.not_waiting >= 1, "no grant went to a dead waiter: {g:?}");
    assert_eq!(worst, Verdict::Safe);
}

/// A writer that died waiting in a read-write lock's fair line: when it joined (its first
/// queued attempt's answer) and the send of its last answered queued attempt (its entry
/// lives an entry timeout from that attempt's run, no sooner).
struct DeadWriter {
    joined: u64,
    last_sent: u64,
}

/// In `rwlock-dead-queued-writer`'s FairQueue runs: the writers that died queued, the read
/// grants to readers that came after one of them (first attempt sent after it joined)
/// while its entry could still live, and those after its entry had surely ended.
#[derive(Debug, Default)]
struct Behind {
    dead_writers: usize,
    early: usize,
    proceeded: usize,
}

fn behind_dead_writers(history: &[HistEvent], entry: u64) -> Behind {
    // Call id -> (proc, op, sent); hold -> (first attempt sent, reads).
    let mut calls: BTreeMap<u64, (usize, LockOp, u64)> = BTreeMap::new();
    let mut first: BTreeMap<u64, (u64, bool)> = BTreeMap::new();
    // Proc -> the write hold it waits in line with, as a dead writer if it died so.
    let mut waiting: BTreeMap<usize, DeadWriter> = BTreeMap::new();
    let mut dead: Vec<DeadWriter> = Vec::new();
    let mut grants: Vec<(u64, u64)> = Vec::new();
    for ev in history {
        match &ev.kind {
            HistKind::Call { id, op, .. } if op.kind == OpKind::Acquire => {
                calls.insert(*id, (ev.proc, *op, ev.at));
                first
                    .entry(op.hold)
                    .or_insert((ev.at, op.family == Family::Read));
            }
            HistKind::Return { id, reply } => {
                let Some((proc, op, sent)) = calls.remove(id) else {
                    continue;
                };
                match reply {
                    LockReply::Denied if op.family == Family::Write && op.queued => {
                        let w = waiting.entry(proc).or_insert(DeadWriter {
                            joined: ev.at,
                            last_sent: sent,
                        });
                        w.last_sent = w.last_sent.max(sent);
                    }
                    LockReply::Granted { .. } if op.family == Family::Read => {
                        grants.push((op.hold, ev.at));
                    }
                    _ => {}
                }
            }
            HistKind::HandedOff { hold, .. } if first.get(hold).is_some_and(|f| f.1) => {
                grants.push((*hold, ev.at));
            }
            HistKind::Acquired { .. } | HistKind::AcquireFailed { .. } => {
                waiting.remove(&ev.proc);
            }
            HistKind::Crashed => dead.extend(waiting.remove(&ev.proc)),
            _ => {}
        }
    }
    let mut out = Behind {
        dead_writers: dead.len(),
        ..Behind::default()
    };
    // The scripts read the clock in whole milliseconds.
    let tolerance = 2_000_000;
    for w in &dead {
        let lapsed = w.last_sent + entry - tolerance;
        for (hold, at) in &grants {
            if first.get(hold).is_some_and(|f| f.0 > w.joined) && *at > w.joined {
                if *at < lapsed {
                    out.early += 1;
                } else {
                    out.proceeded += 1;
                }
            }
        }
    }
    out
}

#[test]
fn readers_wait_behind_a_dead_queued_writer_until_its_entry_ends_then_proceed() {
    let sc = scenario::find("rwlock-dead-queued-writer").unwrap();
    let mut total = Behind::default();
    for seed in 0..SEEDS {
        let spec = sc.spec(Strategy::FairQueue, seed);
        let entry = spec.workload.entry_timeout.unwrap().as_nanos() as u64;
        let result = run::run(&spec).unwrap();
        assert_eq!(result.verdict(), Verdict::Safe, "seed {seed}");
        let b = behind_dead_writers(&result.history, entry);
        total.dead_writers += b.dead_writers;
        total.early += b.early;
        total.proceeded += b.proceeded;
    }
    eprintln!("rwlock-dead-queued-writer: {total:?}");
    assert!(total.dead_writers >= 1, "no writer died queued: {total:?}");
    assert_eq!(
        total.early, 0,
        "a reader passed a live dead writer: {total:?}"
    );
    assert!(
        total.proceeded >= 1,
        "no reader behind a dead writer proceeded: {total:?}"
    );
}
