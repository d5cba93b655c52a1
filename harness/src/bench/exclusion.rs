//! The in-process mutual-exclusion check: every client marks entering and leaving its critical
//! section on a shared slot per lock, and a slot already occupied on entry (or taken over before
//! exit) is a violation — two clients really were inside at the same time on this machine.
//! The same slots tell hand-offs (an entry by a client other than the lock's previous holder)
//! from re-acquisitions by the holder itself, which a barging lock serves most of the time.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Slot value meaning "nobody inside".
const FREE: usize = 0;

/// One occupancy slot per lock plus a violation counter shared by all clients of a cell.
#[derive(Debug)]
pub struct ExclusionMonitor {
    holders: Vec<AtomicUsize>,
    /// Per lock, the last client that entered (`client + 1`), or [`FREE`] before the first.
    last_holder: Vec<AtomicUsize>,
    violations: AtomicU64,
    handoffs: AtomicU64,
}

impl ExclusionMonitor {
    /// A monitor for `locks` independent locks, all free.
    pub fn new(locks: usize) -> Self {
        Self {
            holders: (0..locks).map(|_| AtomicUsize::new(FREE)).collect(),
            last_holder: (0..locks).map(|_| AtomicUsize::new(FREE)).collect(),
            violations: AtomicU64::new(0),
            handoffs: AtomicU64::new(0),
        }
    }

    /// Client `client` enters the critical section of lock `lock` (it believes it holds it).
    /// Returns `false` and counts a violation if somebody else is still inside. An entry by a
    /// client other than the previous holder counts as a hand-off.
    pub fn enter(&self, lock: usize, client: usize) -> bool {
        let (Some(slot), Some(last)) = (self.holders.get(lock), self.last_holder.get(lock)) else {
            return self.violation();
        };
        let previous = last.swap(client + 1, Ordering::SeqCst);
        if previous != FREE && previous != client + 1 {
            self.handoffs.fetch_add(1, Ordering::SeqCst);
        }
        // SeqCst: the check is only meaningful if every client sees one order of enter/exit.
        match slot.compare_exchange(FREE, client + 1, Ordering::SeqCst, Ordering::SeqCst) {
            Ok(_) => true,
            Err(_) => {
                // Overwrite so the intruder's own exit is not counted a second time.
                slot.store(client + 1, Ordering::SeqCst);
                self.violation()
            }
        }
    }

    /// Client `client` leaves the critical section of lock `lock`, before releasing it.
    /// Returns `false` and counts a violation if another client took the slot meanwhile.
    pub fn exit(&self, lock: usize, client: usize) -> bool {
        let Some(slot) = self.holders.get(lock) else {
            return self.violation();
        };
        // On failure whoever is inside now is the intruder, already counted on its `enter`.
        slot.compare_exchange(client + 1, FREE, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
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
            assert!(m.enter(0, client));
            assert!(m.exit(0, client));
        }
        assert_eq!(m.violations(), 0);
    }

    #[test]
    fn overlapping_holders_are_a_violation() {
        let m = ExclusionMonitor::new(1);
        assert!(m.enter(0, 1));
        assert!(!m.enter(0, 2));
        assert!(!m.exit(0, 1));
        assert!(m.exit(0, 2));
        assert_eq!(m.violations(), 1);
    }

    #[test]
    fn counts_holder_changes_but_not_re_acquisitions() {
        let m = ExclusionMonitor::new(2);
        for client in [0, 0, 0, 1, 1, 0, 2] {
            assert!(m.enter(0, client));
            assert!(m.exit(0, client));
        }
        // 0→1, 1→0, 0→2; the first entry and the repeats by the same client are no hand-off.
        assert_eq!(m.handoffs(), 3);
        assert!(m.enter(1, 2));
        assert!(m.exit(1, 2));
        assert_eq!(m.handoffs(), 3, "first entry on another lock");
    }

    #[test]
    fn different_locks_do_not_interfere() {
        let m = ExclusionMonitor::new(2);
        assert!(m.enter(0, 1));
        assert!(m.enter(1, 2));
        assert!(m.exit(0, 1));
        assert!(m.exit(1, 2));
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
                        m.enter(0, client);
                        m.exit(0, client);
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
