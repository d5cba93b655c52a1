//! The in-process mutual-exclusion check: every client marks entering and leaving its critical
//! section on a shared slot per lock, and an entry the lock should not have allowed is a
//! violation — the clients really were inside together on this machine. A writer (a mutex
//! holder, or a read-write lock's write hold) must find nobody inside; a reader must find no
//! writer, however many readers are there. Each overlap is counted once, by whoever entered
//! second.
//! The same slots tell hand-offs (an entry by a client other than the lock's previous holder)
//! from re-acquisitions by the holder itself, which a barging lock serves most of the time.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crate::bench::access::Access;

/// Slot value (and writer part) meaning "nobody inside".
const FREE: u64 = 0;
/// Last-holder value before the first entry.
const NOBODY: usize = 0;
/// A slot holds the writer (`client + 1`, [`FREE`] for none) above this bit and the number
/// of readers inside below it: one word, so an entry sees writer and readers at one instant.
const WRITER_SHIFT: u32 = 32;
/// The readers' part of a slot.
const READERS: u64 = (1 << WRITER_SHIFT) - 1;

/// The slot's writer part for `client`.
fn writer(client: usize) -> u64 {
    (client as u64 + 1) << WRITER_SHIFT
}

/// One occupancy slot per lock plus a violation counter shared by all clients of a cell.
#[derive(Debug)]
pub struct ExclusionMonitor {
    holders: Vec<AtomicU64>,
    /// Per lock, the last client that entered (`client + 1`), or [`NOBODY`] before the first.
    last_holder: Vec<AtomicUsize>,
    violations: AtomicU64,
    handoffs: AtomicU64,
}

impl ExclusionMonitor {
    /// A monitor for `locks` independent locks, all free.
    pub fn new(locks: usize) -> Self {
        Self {
            holders: (0..locks).map(|_| AtomicU64::new(FREE)).collect(),
            last_holder: (0..locks).map(|_| AtomicUsize::new(NOBODY)).collect(),
            violations: AtomicU64::new(0),
            handoffs: AtomicU64::new(0),
        }
    }

    /// Client `client` enters the critical section of lock `lock` (it believes it holds it
    /// with `access`). Returns `false` and counts a violation if the lock should not have let
    /// it in: anybody inside for a writer, a writer inside for a reader. An entry by a client
    /// other than the previous holder counts as a hand-off.
    pub fn enter(&self, lock: usize, client: usize, access: Access) -> bool {
        let (Some(slot), Some(last)) = (self.holders.get(lock), self.last_holder.get(lock)) else {
            return self.violation();
        };
        let previous = last.swap(client + 1, Ordering::SeqCst);
        if previous != NOBODY && previous != client + 1 {
            self.handoffs.fetch_add(1, Ordering::SeqCst);
        }
        // SeqCst: the check is only meaningful if every client sees one order of enter/exit.
        let clash = match access {
            Access::Write => {
                // Take the writer part even over an intruder, so a later exit is judged
                // against the newest writer and the overlap is counted once, here.
                let before = slot
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |s| {
                        Some((s & READERS) | writer(client))
                    })
                    .unwrap_or_else(|s| s);
                before != FREE
            }
            Access::Read => slot.fetch_add(1, Ordering::SeqCst) >> WRITER_SHIFT != FREE,
        };
        if clash { self.violation() } else { true }
    }

    /// Client `client` leaves the critical section of lock `lock`, before releasing it.
    /// Returns `false` if a writer took the slot meanwhile (a writer's intrusion was already
    /// counted on its `enter`).
    pub fn exit(&self, lock: usize, client: usize, access: Access) -> bool {
        let Some(slot) = self.holders.get(lock) else {
            return self.violation();
        };
        match access {
            Access::Write => slot
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |s| {
                    (s & !READERS == writer(client)).then_some(s & READERS)
                })
                .is_ok(),
            Access::Read => {
                let before = slot.fetch_sub(1, Ordering::SeqCst);
                before >> WRITER_SHIFT == FREE
            }
        }
    }

    /// Overlaps seen so far.
    pub fn violations(&self) -> u64 {
        self.violations.load(Ordering::SeqCst)
    }

    /// Holder changes seen so far: entries by a client other than the lock's previous holder
    /// (the first entry on a lock is nobody's hand-off).
    pub fn handoffs(&self) -> u64 {
        self.handoffs.load(Ordering::SeqCst)
    }

    fn violation(&self) -> bool {
        self.violations.fetch_add(1, Ordering::SeqCst);
        false
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn sequential_holders_are_fine() {
        let m = ExclusionMonitor::new(1);
        for client in 0..4 {
            assert!(m.enter(0, client, Access::Write));
            assert!(m.exit(0, client, Access::Write));
        }
        assert_eq!(m.violations(), 0);
    }

    #[test]
    fn overlapping_holders_are_a_violation() {
        let m = ExclusionMonitor::new(1);
        assert!(m.enter(0, 1, Access::Write));
        assert!(!m.enter(0, 2, Access::Write));
        assert!(!m.exit(0, 1, Access::Write));
        assert!(m.exit(0, 2, Access::Write));
        assert_eq!(m.violations(), 1);
    }

    #[test]
    fn readers_share_and_a_writer_overlapping_anyone_is_a_violation() {
        let m = ExclusionMonitor::new(1);
        assert!(m.enter(0, 1, Access::Read));
        assert!(m.enter(0, 2, Access::Read));
        assert!(m.exit(0, 1, Access::Read));
        assert_eq!(m.violations(), 0, "readers together are fine");
        // A writer beside a reader: one overlap, counted once on the writer's entry.
        assert!(!m.enter(0, 3, Access::Write));
        assert!(!m.exit(0, 2, Access::Read));
        assert!(m.exit(0, 3, Access::Write));
        assert_eq!(m.violations(), 1);
        // A reader beside a writer.
        assert!(m.enter(0, 4, Access::Write));
        assert!(!m.enter(0, 5, Access::Read));
        assert!(m.exit(0, 4, Access::Write));
        assert!(m.exit(0, 5, Access::Read));
        assert_eq!(m.violations(), 2);
        // Empty again: a writer alone is fine.
        assert!(m.enter(0, 6, Access::Write));
        assert!(m.exit(0, 6, Access::Write));
        assert_eq!(m.violations(), 2);
    }

    #[test]
    fn threads_hammering_a_correct_rwlock_see_no_violation() {
        let m = std::sync::Arc::new(ExclusionMonitor::new(1));
        let real = std::sync::Arc::new(std::sync::RwLock::new(()));
        let threads: Vec<_> = (0..4)
            .map(|client| {
                let (m, real) = (m.clone(), real.clone());
                std::thread::spawn(move || {
                    for round in 0..1_000 {
                        if (client + round) % 3 == 0 {
                            let _held = real.write().unwrap();
                            m.enter(0, client, Access::Write);
                            m.exit(0, client, Access::Write);
                        } else {
                            let _held = real.read().unwrap();
                            m.enter(0, client, Access::Read);
                            m.exit(0, client, Access::Read);
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(m.violations(), 0);
    }

    #[test]
    fn counts_holder_changes_but_not_re_acquisitions() {
        let m = ExclusionMonitor::new(2);
        for client in [0, 0, 0, 1, 1, 0, 2] {
            assert!(m.enter(0, client, Access::Write));
            assert!(m.exit(0, client, Access::Write));
        }
        // 0→1, 1→0, 0→2; the first entry and the repeats by the same client are no hand-off.
        assert_eq!(m.handoffs(), 3);
        assert!(m.enter(1, 2, Access::Write));
        assert!(m.exit(1, 2, Access::Write));
        assert_eq!(m.handoffs(), 3, "first entry on another lock");
    }

    #[test]
    fn different_locks_do_not_interfere() {
        let m = ExclusionMonitor::new(2);
        assert!(m.enter(0, 1, Access::Write));
        assert!(m.enter(1, 2, Access::Write));
        assert!(m.exit(0, 1, Access::Write));
        assert!(m.exit(1, 2, Access::Write));
        assert_eq!(m.violations(), 0);
    }

    #[test]
    fn threads_hammering_a_correct_mutex_see_no_violation() {
        let m = std::sync::Arc::new(ExclusionMonitor::new(1));
        let real = std::sync::Arc::new(std::sync::Mutex::new(()));
        let threads: Vec<_> = (0..4)
            .map(|client| {
                let (m, real) = (m.clone(), real.clone());
                std::thread::spawn(move || {
                    for _ in 0..1_000 {
                        let _held = real.lock().unwrap();
                        m.enter(0, client, Access::Write);
                        m.exit(0, client, Access::Write);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(m.violations(), 0);
    }
}
