//! Each verdict-relevant state's predicate on a hand-built node situation: one where it
//! holds and a nearby one where it does not.

use std::collections::{BTreeSet, VecDeque};

use super::*;
use crate::model::keyspace::Entry;
use crate::model::verdict_states::VerdictState as S;

const NOW: i64 = 1_000_000;
const OWNER: &str = "owner-a";

fn hold(n: u8) -> String {
    format!("{:016x}:{OWNER}", n)
}

fn other_owner_hold() -> String {
    format!("{:016x}:owner-b", 9)
}

fn hash(fields: &[(&str, String)]) -> Entry {
    Entry {
        data: Data::Hash(
            fields
                .iter()
                .map(|(k, v)| (k.as_bytes().to_vec(), v.clone().into_bytes()))
                .collect(),
        ),
        expires_at: Some(NOW + 10_000),
    }
}

fn list(items: &[String]) -> Entry {
    Entry {
        data: Data::List(
            items
                .iter()
                .map(|i| i.clone().into_bytes())
                .collect::<VecDeque<_>>(),
        ),
        expires_at: None,
    }
}

fn zset(members: &[(i64, String)]) -> Entry {
    Entry {
        data: Data::ZSet(
            members
                .iter()
                .map(|(s, m)| (*s as f64, m.clone().into_bytes()))
                .collect(),
        ),
        expires_at: None,
    }
}

fn string(text: &str, expires_at: Option<i64>) -> Entry {
    Entry {
        data: Data::Str(text.as_bytes().to_vec()),
        expires_at,
    }
}

/// A situation: the script, its keys' entries (by KEYS index), ARGV, node facts.
struct Case {
    script: &'static str,
    keys: Vec<Option<Entry>>,
    argv: Vec<String>,
    facts: NodeFacts,
}

impl Case {
    fn new(script: &'static str, argv: &[String]) -> Self {
        Self {
            script,
            keys: vec![None; 5],
            argv: argv.to_vec(),
            facts: NodeFacts::default(),
        }
    }

    fn key(mut self, i: usize, entry: Entry) -> Self {
        self.keys[i] = Some(entry);
        self
    }

    fn facts(mut self, facts: NodeFacts) -> Self {
        self.facts = facts;
        self
    }

    fn found(&self) -> BTreeSet<VerdictState> {
        let names: Vec<Vec<u8>> = (0..self.keys.len())
            .map(|i| format!("k{i}").into_bytes())
            .collect();
        let mut ks = Keyspace::new();
        for (name, entry) in names.iter().zip(&self.keys) {
            if let Some(entry) = entry {
                ks.insert(name.clone(), entry.clone());
            }
        }
        let argv: Vec<Vec<u8>> = self.argv.iter().map(|a| a.clone().into_bytes()).collect();
        let call = Call {
            keys: &names,
            argv: &argv,
            now_ms: NOW,
        };
        found(self.script, &call, &ks, &self.facts)
            .into_iter()
            .collect()
    }
}

/// acquire's ARGV for hold `n`: hold, owner, ttl 1000 ms, entry timeout `entry_ms`.
fn acquire(n: u8, entry_ms: i64) -> Vec<String> {
    vec![
        hold(n),
        OWNER.to_owned(),
        "1000".to_owned(),
        entry_ms.to_string(),
        "100".to_owned(),
        "1".to_owned(),
        "0".to_owned(),
    ]
}

fn release(n: u8) -> Vec<String> {
    vec![
        hold(n),
        OWNER.to_owned(),
        "ch".to_owned(),
        "in".to_owned(),
        "100".to_owned(),
    ]
}

fn field(n: u8) -> String {
    format!("#{}", hold(n))
}

fn ms(at: i64) -> String {
    at.to_string()
}

/// Every state in the table has a positive case, and its negative case lacks it.
#[test]
fn each_state_fires_in_its_situation_and_not_in_a_nearby_one() {
    let sibling = |deadline: i64| hash(&[(OWNER, "1".to_owned()), (&field(1), ms(deadline))]);
    let two = hash(&[
        (OWNER, "2".to_owned()),
        (&field(1), ms(NOW + 500)),
        (&field(2), ms(NOW + 500)),
    ]);
    let own_and_sibling = |own: i64, other: i64| {
        hash(&[
            (OWNER, "2".to_owned()),
            (&field(3), ms(own)),
            (&field(1), ms(other)),
            ("~q", "1".to_owned()),
        ])
    };
    let own_queued = hash(&[
        (OWNER, "1".to_owned()),
        (&field(3), ms(NOW + 500)),
        ("~q", "1".to_owned()),
    ]);
    let head = other_owner_hold();
    let waiters = |deadline: i64, ttl: i64| hash(&[(head.as_str(), format!("{deadline} {ttl} 4"))]);
    let after = |ms: i64| Some(NOW - ms);
    let table: Vec<(VerdictState, Case, Case)> = vec![
        (
            S::GrantOverLapsedSibling,
            Case::new("acquire", &acquire(3, 0)).key(0, sibling(NOW)),
            Case::new("acquire", &acquire(3, 0)).key(0, sibling(NOW + 1)),
        ),
        (
            S::Reentry,
            Case::new("acquire", &acquire(3, 0)).key(0, string(&hold(1), Some(NOW + 5))),
            Case::new("acquire", &acquire(3, 0)).key(0, string(&other_owner_hold(), Some(NOW + 5))),
        ),
        (
            S::DeepReentry,
            Case::new("acquire", &acquire(3, 0)).key(0, two.clone()),
            Case::new("acquire", &acquire(3, 0)).key(0, sibling(NOW + 500)),
        ),
        (
            S::ClaimOfGrantedHold,
            Case::new("acquire", &acquire(1, 0)).key(0, sibling(NOW + 1)),
            Case::new("acquire", &acquire(1, 0)).key(0, sibling(NOW)),
        ),
        (
            S::FenceLostUnderHold,
            Case::new("acquire", &acquire(3, 0)).key(0, sibling(NOW + 9)),
            Case::new("acquire", &acquire(3, 0))
                .key(0, sibling(NOW + 9))
                .key(1, string("17", None)),
        ),
        (
            S::GrantBehindClockPeak,
            Case::new("semaphore_acquire", &acquire(3, 0)).facts(NodeFacts {
                behind_peak: true,
                ..NodeFacts::default()
            }),
            Case::new("semaphore_acquire", &acquire(3, 0)),
        ),
        (
            S::GrantAfterRestart,
            Case::new("rw_write_acquire", &acquire(3, 0)).facts(NodeFacts {
                restart_ms: after(1_000),
                ..NodeFacts::default()
            }),
            Case::new("rw_write_acquire", &acquire(3, 0)).facts(NodeFacts {
                restart_ms: after(1_001),
                ..NodeFacts::default()
            }),
        ),
        (
            S::GrantAfterEviction,
            Case::new("acquire", &acquire(3, 0)).facts(NodeFacts {
                eviction_ms: after(0),
                ..NodeFacts::default()
            }),
            Case::new("release", &release(3)).facts(NodeFacts {
                eviction_ms: after(0),
                ..NodeFacts::default()
            }),
        ),
        (
            S::FreeLockPastExpiredHead,
            Case::new("acquire", &acquire(3, 0))
                .key(2, list(std::slice::from_ref(&head)))
                .key(3, waiters(NOW, 1000)),
            Case::new("acquire", &acquire(3, 0))
                .key(2, list(std::slice::from_ref(&head)))
                .key(3, waiters(NOW + 1, 1000)),
        ),
        (
            S::WaiterEntryHalfGone,
            Case::new("acquire", &acquire(3, 500)).key(2, list(&[hold(3)])),
            Case::new("acquire", &acquire(3, 500))
                .key(2, list(&[hold(3)]))
                .key(3, hash(&[(&hold(3), format!("{} 1000 1", NOW + 9))])),
        ),
        (
            S::PlainAttemptMeetsQueue,
            Case::new("acquire", &acquire(3, 0)),
            Case::new("acquire", &acquire(3, 500)),
        ),
        (
            S::ReleaseOfLapsedHold,
            Case::new("release", &release(1)).key(0, two_with(NOW)),
            Case::new("release", &release(1)).key(0, two_with(NOW + 1)),
        ),
        (
            S::ReleaseWithDeadSibling,
            Case::new("release", &release(3)).key(0, own_and_sibling(NOW + 9, NOW)),
            Case::new("release", &release(3)).key(0, own_and_sibling(NOW + 9, NOW + 9)),
        ),
        (
            S::HandOffPastExpiredHead,
            Case::new("release", &release(3))
                .key(0, own_queued.clone())
                .key(1, list(std::slice::from_ref(&head)))
                .key(2, waiters(NOW, 1000)),
            Case::new("release", &release(3))
                .key(0, own_and_sibling(NOW + 9, NOW + 9))
                .key(1, list(std::slice::from_ref(&head)))
                .key(2, waiters(NOW, 1000)),
        ),
        (
            S::HandOffLeaseCut,
            Case::new("release", &release(3))
                .key(0, own_queued.clone())
                .key(1, list(std::slice::from_ref(&head)))
                .key(2, waiters(NOW + 999, 1000)),
            Case::new("release", &release(3))
                .key(0, own_queued.clone())
                .key(1, list(std::slice::from_ref(&head)))
                .key(2, waiters(NOW + 1000, 1000)),
        ),
        (
            S::RenewOfLapsedHold,
            Case::new("renew", &release(1)).key(0, two_with(NOW)),
            Case::new("renew", &release(2)).key(0, two_with(NOW)),
        ),
        (
            S::ReaderPastWriterIntent,
            Case::new("rw_read_acquire", &acquire(3, 0)).key(3, zset(&[(NOW + 1, head.clone())])),
            Case::new("rw_read_acquire", &acquire(3, 0)).key(3, zset(&[(NOW, head.clone())])),
        ),
        (
            S::WriterOverLapsedReaders,
            Case::new("rw_write_acquire", &acquire(3, 0)).key(1, zset(&[(NOW, head.clone())])),
            Case::new("rw_write_acquire", &acquire(3, 0)).key(1, zset(&[(NOW + 1, head.clone())])),
        ),
        (
            S::UpgradeRefused,
            Case::new("rw_write_acquire", &acquire(3, 0)),
            Case::new("rw_read_acquire", &acquire(3, 0)),
        ),
        (
            S::PermitFreeWithQueue,
            Case::new("semaphore_acquire", &semaphore(2))
                .key(0, zset(&[(NOW + 5, head.clone()), (NOW, hold(1))]))
                .key(1, list(&[hold(4)])),
            Case::new("semaphore_acquire", &semaphore(2))
                .key(0, zset(&[(NOW + 5, head.clone()), (NOW + 5, hold(1))]))
                .key(1, list(&[hold(4)])),
        ),
        (
            S::PermitOverLapsed,
            Case::new("semaphore_acquire", &semaphore(2)).key(0, zset(&[(NOW, hold(1))])),
            Case::new("semaphore_acquire", &semaphore(2)).key(0, zset(&[(NOW + 1, hold(1))])),
        ),
        (
            S::ReleaseOfLapsedPermit,
            Case::new("semaphore_release", &[hold(1)]).key(0, zset(&[(NOW, hold(1))])),
            Case::new("semaphore_release", &[hold(1)]).key(0, zset(&[(NOW + 1, hold(1))])),
        ),
        (
            S::GrantOverLapsedSibling,
            Case::new("rw_write_acquire", &acquire(3, 0)).key(0, sibling(NOW)),
            Case::new("rw_write_acquire", &acquire(3, 0)).key(0, sibling(NOW + 1)),
        ),
        (
            S::ReleaseWithDeadSibling,
            Case::new("rw_write_release", &release(3)).key(0, own_and_sibling(NOW + 9, NOW)),
            Case::new("rw_write_release", &release(1)).key(0, own_and_sibling(NOW + 9, NOW)),
        ),
    ];
    let covered: BTreeSet<VerdictState> = table.iter().map(|(state, _, _)| *state).collect();
    assert_eq!(
        covered.len(),
        VerdictState::ALL.len(),
        "every state has a row"
    );
    for (state, fires, not) in &table {
        assert!(
            fires.found().contains(state),
            "{} should fire",
            state.name()
        );
        assert!(
            !not.found().contains(state),
            "{} should not fire",
            state.name()
        );
    }
}

/// Two holds of one owner, hold 1's deadline `own`, hold 2's live.
fn two_with(own: i64) -> Entry {
    hash(&[
        (OWNER, "2".to_owned()),
        (&field(1), ms(own)),
        (&field(2), ms(NOW + 500)),
    ])
}

/// semaphore_acquire's ARGV for hold 3 and `permits` permits.
fn semaphore(permits: i64) -> Vec<String> {
    vec![
        hold(3),
        permits.to_string(),
        "1000".to_owned(),
        "0".to_owned(),
        "in".to_owned(),
    ]
}

#[test]
fn a_state_about_a_grant_counts_only_when_the_reply_grants() {
    let found = vec![
        S::Reentry,
        S::ReleaseWithDeadSibling,
        S::PlainAttemptMeetsQueue,
        S::UpgradeRefused,
    ];
    let granted = Reply::Array(vec![Reply::Int(1), Reply::bulk("7")]);
    let busy = Reply::Array(vec![Reply::Int(0), Reply::Int(40)]);
    let flagged = Reply::Array(vec![Reply::Int(0), Reply::Int(40), Reply::Int(1)]);
    let upgrade = Reply::Array(vec![Reply::Int(2), Reply::Int(0)]);
    assert_eq!(
        settle(found.clone(), &granted),
        [S::Reentry, S::ReleaseWithDeadSibling]
    );
    assert_eq!(settle(found.clone(), &busy), [S::ReleaseWithDeadSibling]);
    assert_eq!(
        settle(found.clone(), &flagged),
        [S::ReleaseWithDeadSibling, S::PlainAttemptMeetsQueue]
    );
    assert_eq!(
        settle(found.clone(), &upgrade),
        [S::ReleaseWithDeadSibling, S::UpgradeRefused]
    );
    assert_eq!(
        settle(found, &Reply::error("ERR x")),
        [S::ReleaseWithDeadSibling]
    );
}

#[test]
fn the_watch_dates_a_restart_by_the_next_script_and_ignores_other_scripts() {
    let mut watch = StateWatch::default();
    let acquire = &leasehold::script::scripts().acquire;
    let names: Vec<Vec<u8>> = (0..4).map(|i| format!("k{i}").into_bytes()).collect();
    let argv: Vec<Vec<u8>> = acquire_argv();
    let call = |now_ms| Call {
        keys: &names,
        argv: &argv,
        now_ms,
    };
    let ks = Keyspace::new();
    assert!(
        !watch
            .before(acquire.sha(), &call(NOW), &ks, false)
            .contains(&S::GrantAfterRestart)
    );
    watch.restarted();
    assert!(
        watch
            .before(acquire.sha(), &call(NOW), &ks, false)
            .contains(&S::GrantAfterRestart)
    );
    // Dated by the first script after it: one TTL (1000 ms) later it no longer counts.
    assert!(
        !watch
            .before(acquire.sha(), &call(NOW + 1_001), &ks, false)
            .contains(&S::GrantAfterRestart)
    );
    assert!(
        watch.before("0123", &call(NOW), &ks, true).is_empty(),
        "not a lock script"
    );
}

fn acquire_argv() -> Vec<Vec<u8>> {
    acquire(3, 0).into_iter().map(String::into_bytes).collect()
}
