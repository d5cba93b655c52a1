//! A semaphore's size over time, derived from the requests: the number each granted hold
//! asked for, and each `semaphore_resize` call with the server's answer, never the size
//! key the scripts keep nor what a script says about it.
//!
//! Invariant: the size admitted for a grant is never below a size the server can have
//! held while the grant was made (so the capacity rule raises no false alarm), and a
//! resize stops counting once a later one is known to have replaced it (so a shrink is
//! judged). The server stores a size in three ways (`semaphore_acquire.lua`,
//! `semaphore_resize.lua`): the first acquire of an idle semaphore stores its own number,
//! an acquire whose number differs from a stored one is refused, and a resize answered 1
//! stores its number (one answered 0 found the semaphore idle and stored nothing). So a
//! grant was made at its own number, or at a size some resize stored: one sent before the
//! grant was believed and not replaced before its wait began (a resize whose answer never
//! came may land at any point after it was sent, and is never known replaced).

use std::collections::BTreeMap;

use crate::world::calls;
use crate::world::history::{Access, HistEvent, HistKind};

use super::timeline::Hold;

/// One resize call: the size asked for, when it left the client, and when its answer
/// came with what it said (live: the size was stored).
#[derive(Debug, Clone, Copy)]
struct Resize {
    permits: u32,
    sent: u64,
    answered: Option<(u64, bool)>,
}

impl Resize {
    /// Whether the server can have held this resize's size at some point of `[from, to]`,
    /// given the lock's other resizes.
    fn may_hold(&self, others: &[Resize], (from, to): (u64, u64)) -> bool {
        if self.sent >= to {
            return false;
        }
        match self.answered {
            None => true,
            Some((_, false)) => false,
            // Replaced for sure: a later resize, sent after this one's answer, was
            // answered live before the window opened.
            Some((answered, true)) => !others.iter().any(|later| {
                later.sent > answered && matches!(later.answered, Some((at, true)) if at < from)
            }),
        }
    }
}

/// Each semaphore's resizes, by lock name, in the order they were sent.
#[derive(Debug, Default)]
pub(super) struct Sizes {
    by_lock: BTreeMap<String, Vec<Resize>>,
}

impl Sizes {
    /// The resizes `history` records.
    pub(super) fn read(history: &[HistEvent]) -> Self {
        let mut sizes = Self::default();
        let mut calls: BTreeMap<u64, (String, usize)> = BTreeMap::new();
        for ev in history {
            match ev.kind {
                HistKind::Resize { id, permits } => {
                    let lock = calls::lock_name(&ev.lock).to_owned();
                    let list = sizes.by_lock.entry(lock.clone()).or_default();
                    list.push(Resize {
                        permits,
                        sent: ev.at,
                        answered: None,
                    });
                    calls.insert(id, (lock, list.len() - 1));
                }
                HistKind::Resized { id, live } => {
                    let resize = calls
                        .get(&id)
                        .and_then(|(lock, i)| sizes.by_lock.get_mut(lock)?.get_mut(*i));
                    if let Some(resize) = resize {
                        resize.answered = Some((ev.at, live));
                    }
                }
                _ => {}
            }
        }
        sizes
    }

    /// The most permits `lock` can have stored while a grant asking for `asked` was made,
    /// between its wait's start `from` and its belief's start `to`.
    pub(super) fn most(&self, lock: &str, asked: u32, window: (u64, u64)) -> u32 {
        let Some(list) = self.by_lock.get(lock) else {
            return asked;
        };
        list.iter()
            .filter(|r| r.may_hold(list, window))
            .map(|r| r.permits)
            .fold(asked, u32::max)
    }

    /// Sets each permit of `holds` (per lock) to the most permits its semaphore can have
    /// stored when it was granted, which the capacity rule counts against.
    pub(super) fn bound(&self, holds: &mut BTreeMap<String, Vec<Hold>>) {
        for (lock, list) in holds {
            for hold in list {
                if let Access::Permit { permits } = hold.access {
                    hold.access = Access::Permit {
                        permits: self.most(lock, permits, (hold.requested, hold.start)),
                    };
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "leasehold:{res0}:sem";

    fn ev(at_ms: u64, kind: HistKind) -> HistEvent {
        HistEvent {
            at: at_ms * 1_000_000,
            proc: 1,
            incarnation: 0,
            lock: KEY.to_owned(),
            kind,
        }
    }

    fn ms(at: u64) -> u64 {
        at * 1_000_000
    }

    #[test]
    fn an_answered_grow_counts_from_its_send_until_a_later_shrink_is_answered() {
        let history = [
            ev(100, HistKind::Resize { id: 0, permits: 5 }),
            ev(110, HistKind::Resized { id: 0, live: true }),
            ev(200, HistKind::Resize { id: 2, permits: 1 }),
            ev(210, HistKind::Resized { id: 2, live: true }),
        ];
        let sizes = Sizes::read(&history);
        // Before any resize was sent: the grant's own number.
        assert_eq!(sizes.most("res0", 2, (ms(10), ms(90))), 2);
        // The grow may have landed: five.
        assert_eq!(sizes.most("res0", 2, (ms(90), ms(105))), 5);
        assert_eq!(sizes.most("res0", 2, (ms(150), ms(205))), 5);
        // A wait that began after the shrink was answered: the grow no longer counts, and
        // the shrink's one is below the grant's own number.
        assert_eq!(sizes.most("res0", 2, (ms(220), ms(300))), 2);
        // Another lock is not resized.
        assert_eq!(sizes.most("res1", 3, (ms(150), ms(205))), 3);
    }

    #[test]
    fn an_idle_answer_stores_nothing_and_an_unanswered_resize_may_land_any_time() {
        let history = [
            ev(100, HistKind::Resize { id: 0, permits: 4 }),
            ev(110, HistKind::Resized { id: 0, live: false }),
            ev(200, HistKind::Resize { id: 2, permits: 6 }),
            ev(300, HistKind::Resize { id: 3, permits: 1 }),
            ev(310, HistKind::Resized { id: 3, live: true }),
        ];
        let sizes = Sizes::read(&history);
        assert_eq!(sizes.most("res0", 2, (ms(120), ms(150))), 2);
        assert_eq!(sizes.most("res0", 2, (ms(400), ms(500))), 6);
    }

    #[test]
    fn a_permit_is_bounded_by_its_semaphores_size_from_its_wait_to_its_grant() {
        let history = [
            ev(100, HistKind::Resize { id: 0, permits: 5 }),
            ev(110, HistKind::Resized { id: 0, live: true }),
        ];
        let hold = |requested: u64, start: u64| Hold {
            proc: 1,
            incarnation: 0,
            token: 0,
            access: Access::Permit { permits: 2 },
            requested: ms(requested),
            sent: ms(requested),
            granted_at: None,
            nodes: Vec::new(),
            start: ms(start),
            end: ms(start + 10),
            by_lost: false,
            ids: Vec::new(),
        };
        let mut holds = BTreeMap::from([("res0".to_owned(), vec![hold(10, 50), hold(60, 120)])]);
        Sizes::read(&history).bound(&mut holds);
        let sizes: Vec<Access> = holds["res0"].iter().map(|h| h.access).collect();
        assert_eq!(
            sizes,
            [Access::Permit { permits: 2 }, Access::Permit { permits: 5 }]
        );
    }
}
