//! The read-write lock's spec on hand-made histories: readers share, a writer excludes
//! readers and other writers, and the tokens readers see never go back.

use crate::model::node::EPOCH_US;
use crate::world::calls::{Family, LockReply, OpKind};
use crate::world::history::HistKind;

use super::super::fixtures::{Calls, ev, op};

/// The write hash, which the write scripts and the read acquire name first.
const WRITE: &str = "leasehold:{l}:rw";
/// The readers' zset, which the other read scripts name first.
const READERS: &str = "leasehold:{l}:rw:readers";
const TTL: u64 = 1_000;

/// Process `proc` (owner `proc`) takes hold `hold` of `family` at `sent` ms, answered
/// `reply` at `sent + 1` ms.
fn acquire(
    h: Calls,
    family: Family,
    (proc, hold): (usize, u64),
    sent: u64,
    reply: LockReply,
) -> Calls {
    let acquire = op(family, OpKind::Acquire, (hold, proc as u64), TTL, false);
    h.call((proc, WRITE), acquire, sent, Some((sent + 1, reply)))
}

fn release(h: Calls, family: Family, (proc, hold): (usize, u64), sent: u64, left: i64) -> Calls {
    let key = if family == Family::Read {
        READERS
    } else {
        WRITE
    };
    let release = op(family, OpKind::Release, (hold, proc as u64), 0, false);
    h.call(
        (proc, key),
        release,
        sent,
        Some((sent + 1, LockReply::Released(left))),
    )
}

fn granted(token: u64) -> LockReply {
    LockReply::Granted { token }
}

#[test]
fn readers_share_and_a_writer_follows_them() {
    let h = acquire(Calls::default(), Family::Read, (1, 1), 10, granted(0));
    let h = acquire(h, Family::Read, (2, 2), 20, granted(0));
    let h = acquire(h, Family::Write, (3, 3), 30, LockReply::Denied);
    let h = release(h, Family::Read, (1, 1), 40, 0);
    let h = release(h, Family::Read, (2, 2), 50, 0);
    let h = acquire(h, Family::Write, (3, 3), 60, granted(100));
    let h = release(h, Family::Write, (3, 3), 70, 0);
    // The fence key still shows the last write epoch's token, or has expired.
    let h = acquire(h, Family::Read, (4, 4), 80, granted(100));
    let h = acquire(h, Family::Read, (5, 5), 90, granted(0));
    assert_eq!(h.findings(), Vec::<String>::new());
    assert_eq!(h.reach().rwlock.keys, 1);
    assert_eq!(h.reach().mutex.keys, 0);
}

#[test]
fn a_writer_granted_while_a_reader_holds_is_a_finding() {
    let h = acquire(Calls::default(), Family::Read, (1, 1), 10, granted(0));
    let h = acquire(h, Family::Write, (2, 2), 30, granted(100));
    let found = h.findings();
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("while a read lease ran"), "{found:?}");
    // Once the read lease has ended, the writer may have it.
    let h = acquire(Calls::default(), Family::Read, (1, 1), 10, granted(0));
    let h = acquire(h, Family::Write, (2, 2), 1_100, granted(100));
    assert_eq!(h.findings(), Vec::<String>::new());
}

#[test]
fn a_reader_granted_while_another_owner_writes_is_a_finding() {
    let h = acquire(Calls::default(), Family::Write, (1, 1), 10, granted(100));
    let h = acquire(h, Family::Read, (2, 2), 30, granted(100));
    let found = h.findings();
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("while a writer's lease"), "{found:?}");
    // The writer's own owner may read (a downgrade).
    let h = acquire(Calls::default(), Family::Write, (1, 1), 10, granted(100));
    let h = acquire(h, Family::Read, (1, 2), 30, granted(100));
    assert_eq!(h.findings(), Vec::<String>::new());
}

#[test]
fn two_writers_granted_overlapping_is_a_finding() {
    let h = acquire(Calls::default(), Family::Write, (1, 1), 10, granted(100));
    let h = acquire(h, Family::Write, (2, 2), 30, granted(200));
    assert_eq!(h.findings().len(), 1);
}

#[test]
fn a_reader_seeing_an_older_write_token_is_a_finding() {
    let h = acquire(Calls::default(), Family::Write, (1, 1), 10, granted(100));
    let h = release(h, Family::Write, (1, 1), 20, 0);
    let h = acquire(h, Family::Read, (2, 2), 30, granted(50));
    let found = h.findings();
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].contains("below the highest write token 100"),
        "{found:?}"
    );
}

/// A write epoch granted while its node's clock ran far ahead (token at 5 s) is followed,
/// once that clock reads true time again, by one whose token is below it (admitted behind the
/// clock: the token rule judges that); a reader granted once that node's clock has passed
/// 5 s is told the latest epoch's token, which the fence key names. A reader told the
/// first epoch's older token after both is still a finding.
#[test]
fn a_reader_may_see_the_latest_write_epoch_s_token_below_the_highest() {
    let at = |ms: u64| EPOCH_US.unsigned_abs() + ms * 1_000;
    let history = |read_token: u64| {
        let h = acquire(
            Calls::default(),
            Family::Write,
            (1, 1),
            10,
            granted(at(5_000)),
        );
        let h = release(h.ran_on(0, 5_000), Family::Write, (1, 1), 20, 0).ran_on(0, 5_010);
        let h = acquire(h, Family::Write, (2, 2), 1_000, granted(at(1_000))).ran_on(0, 1_000);
        let h = release(h, Family::Write, (2, 2), 1_100, 0).ran_on(0, 1_100);
        acquire(h, Family::Read, (3, 3), 6_000, granted(read_token)).ran_on(0, 6_000)
    };
    let stale = |found: &[String]| {
        found.len() == 1
            && found[0].contains(&format!("below the highest write token {}", at(5_000)))
    };
    assert_eq!(history(at(1_000)).findings(), Vec::<String>::new());
    let found = history(at(500)).findings();
    assert!(stale(&found), "{found:?}");
}

#[test]
fn live_answers_about_read_and_write_holds_whose_lease_ended_are_findings() {
    let renew = op(Family::Read, OpKind::Renew, (1, 0), TTL, false);
    let h = acquire(Calls::default(), Family::Read, (1, 1), 10, granted(0));
    let h = h.call(
        (1, READERS),
        renew,
        500,
        Some((501, LockReply::Renewed(true))),
    );
    assert_eq!(h.findings(), Vec::<String>::new());
    let h = h.call(
        (1, READERS),
        renew,
        3_000,
        Some((3_001, LockReply::Renewed(true))),
    );
    assert_eq!(h.findings().len(), 1);
    // The writer renews with the mutex's script on the write hash: judged here too.
    let renew = op(Family::Mutex, OpKind::Renew, (1, 0), TTL, false);
    let h = acquire(Calls::default(), Family::Write, (1, 1), 10, granted(100));
    let h = h.call(
        (1, WRITE),
        renew,
        3_000,
        Some((3_001, LockReply::Renewed(true))),
    );
    assert_eq!(h.findings().len(), 1);
    assert_eq!(h.reach().rwlock.keys, 1);
}

#[test]
fn a_writer_refused_while_readers_hold_is_legal_and_the_key_stays_checked() {
    let h = acquire(Calls::default(), Family::Read, (1, 1), 10, granted(0));
    let h = acquire(h, Family::Write, (2, 2), 30, LockReply::Denied);
    assert_eq!(h.findings(), Vec::<String>::new());
    assert_eq!(h.reach().rwlock.unchecked, 0);
}

#[test]
fn a_write_join_of_an_epoch_a_reset_hid_is_told_by_its_token() {
    // Owner 1 writes on node 0 at 10 ms; from 100 ms node 1 runs the lock's calls (a
    // promoted replica: the search starts afresh) and grants owner 1 a read hold. Its
    // write re-entry there at 200 ms, granted the epoch's token (issued at 10 ms, below
    // the node's clock), joins the epoch the replica kept, which live readers do not
    // block. A token issued from the clock at 200 ms is a new epoch, which its own live
    // read hold forbids.
    let issued_at = |ms: u64| EPOCH_US.unsigned_abs() + ms * 1_000;
    let history = |token| {
        let h = acquire(
            Calls::default(),
            Family::Write,
            (1, 1),
            10,
            granted(issued_at(10)),
        );
        let h = acquire(h.ran_on(0, 10), Family::Read, (1, 2), 100, granted(0));
        acquire(h.ran_on(1, 100), Family::Write, (1, 3), 200, granted(token)).ran_on(1, 200)
    };
    assert_eq!(history(issued_at(10)).findings(), Vec::<String>::new());
    let found = history(issued_at(200)).findings();
    assert!(
        found.len() == 1 && found[0].contains("while a read lease ran"),
        "{found:?}"
    );
}

/// Node 0's release at `at_ms` handed hold `hold` the lock for a 1 s lease with `token`
/// (the node's witness of a fair hand-off).
fn handed(h: Calls, at_ms: u64, hold: u64, token: u64) -> Calls {
    h.event(ev(
        at_ms,
        0,
        WRITE,
        HistKind::HandedOff {
            hold,
            lease_ms: TTL,
            node: 0,
            token,
            clock_ms: at_ms,
        },
    ))
}

#[test]
fn a_write_join_of_an_epoch_a_hand_off_began_is_a_re_entry_by_its_token() {
    // Owner 0 writes from 10 ms; owner 1 queues to write at 20 ms; owner 0's release at
    // 50 ms hands the lock to owner 1's hold 2 (no call of owner 1's is granted it: the
    // node witnesses the hand-off). Owner 1 reads at 100 ms (admitted as the writer's own)
    // and asks to write at 200 ms: granted the handed epoch's token, that is the epoch's
    // re-entry, which its own live read does not block.
    let issued_at = |ms: u64| EPOCH_US.unsigned_abs() + ms * 1_000;
    let history = |witnessed: bool, token: u64| {
        let h = acquire(
            Calls::default(),
            Family::Write,
            (0, 1),
            10,
            granted(issued_at(10)),
        )
        .ran_on(0, 10);
        let queued = op(Family::Write, OpKind::Acquire, (2, 1), TTL, true);
        let h = h
            .call((1, WRITE), queued, 20, Some((21, LockReply::Denied)))
            .ran_on(0, 20);
        let h = release(h, Family::Write, (0, 1), 50, 0).ran_on(0, 50);
        let h = if witnessed {
            handed(h, 50, 2, issued_at(50))
        } else {
            h
        };
        let h = acquire(h, Family::Read, (1, 3), 100, granted(issued_at(50))).ran_on(0, 100);
        acquire(h, Family::Write, (1, 4), 200, granted(token)).ran_on(0, 200)
    };
    assert_eq!(
        history(true, issued_at(50)).findings(),
        Vec::<String>::new()
    );
    // Without the node's word the spec sees no epoch of owner 1's: a write grant while
    // its read runs. With it, a token from the clock at 200 ms is a new epoch while the
    // owner's handed one still runs: a re-entry told another token.
    for (witnessed, token, shown) in [
        (false, issued_at(50), "while a read lease ran"),
        (true, issued_at(200), "not its epoch's"),
    ] {
        let found = history(witnessed, token).findings();
        assert!(
            found.len() == 1 && found[0].contains(shown),
            "witnessed {witnessed}: {found:?}"
        );
    }
}

#[test]
fn a_read_or_write_a_hand_off_grants_is_a_step_where_the_release_ran() {
    // Owner 0 writes from 10 ms; owner 1 queues (hold 2) to read or to write at 20 ms;
    // owner 0's release runs at 50 ms and, as the node witnesses, hands hold 2 the lock
    // for a 1 s lease. Owner 2 is granted a write at 200 ms: while the handed hold is
    // certainly live, so a finding; without the node's word of the hand-off, nothing the
    // spec saw holds the lock then.
    let issued_at = |ms: u64| EPOCH_US.unsigned_abs() + ms * 1_000;
    let history = |family: Family, witnessed: bool| {
        let h = acquire(
            Calls::default(),
            Family::Write,
            (0, 1),
            10,
            granted(issued_at(10)),
        )
        .ran_on(0, 10);
        let queued = op(family, OpKind::Acquire, (2, 1), TTL, true);
        let h = h
            .call((1, WRITE), queued, 20, Some((21, LockReply::Denied)))
            .ran_on(0, 20);
        let h = release(h, Family::Write, (0, 1), 50, 0).ran_on(0, 50);
        let token = if family == Family::Read {
            issued_at(10)
        } else {
            issued_at(50)
        };
        let h = if witnessed {
            handed(h, 50, 2, token)
        } else {
            h
        };
        acquire(h, Family::Write, (2, 3), 200, granted(issued_at(200))).ran_on(0, 200)
    };
    for (family, shown) in [
        (Family::Read, "while a read lease ran".to_owned()),
        (
            Family::Write,
            format!("another epoch (token {})", issued_at(50)),
        ),
    ] {
        let found = history(family, true).findings();
        assert!(
            found.len() == 1 && found[0].contains(&shown),
            "{family:?}: {found:?}"
        );
        assert_eq!(history(family, false).findings(), Vec::<String>::new());
    }
}
