//! Evidence that expired queue entries were really dropped by a script: a fair queue's
//! waiter whose entry deadline passed, still in the list when a script ran and gone after.
//!
//! The differential comparison alone cannot tell whether a case ever reached the
//! expired-head drop of `acquire.lua` or the expired-entry skip of `release.lua`; these
//! counts can, so a test can fail when its cases never did.

use std::collections::{BTreeMap, BTreeSet};

use leasehold_sim::model::{Data, Node};

/// Queue entries (queue key, hold id) whose entry deadline has passed at `now_ms`, in
/// queues that are themselves still live.
pub fn expired_entries(model: &Node, now_ms: i64) -> BTreeSet<(Vec<u8>, Vec<u8>)> {
    let data: BTreeMap<&Vec<u8>, _> = model.data().iter().collect();
    let live = |key: &[u8]| {
        data.get(&key.to_vec())
            .filter(|entry| entry.expires_at.is_none_or(|at| now_ms <= at))
            .map(|entry| &entry.data)
    };
    let mut expired = BTreeSet::new();
    for key in data.keys() {
        let Some(prefix) = key.strip_suffix(b":queue") else {
            continue;
        };
        let Some(Data::List(items)) = live(key) else {
            continue;
        };
        let deadlines = match live(&[prefix, b":waiters"].concat()) {
            Some(Data::Hash(fields)) => fields.clone(),
            _ => Vec::new(),
        };
        for item in items {
            let deadline = deadlines
                .iter()
                .find(|(field, _)| field == item)
                // A mutex entry is `<deadline> <TTL> <attempt>`, a permit's the deadline.
                .and_then(|(_, value)| {
                    let text = std::str::from_utf8(value).ok()?;
                    text.split(' ').next()?.parse::<i64>().ok()
                })
                .unwrap_or(0);
            // The scripts keep an entry while `deadline > now`.
            if deadline <= now_ms {
                expired.insert(((*key).clone(), item.clone()));
            }
        }
    }
    expired
}

/// How many of `before` (expired entries when a script started) the script dropped, not
/// counting the caller's own entry (it leaves the line by itself when granted).
pub fn dropped(
    before: &BTreeSet<(Vec<u8>, Vec<u8>)>,
    model: &Node,
    now_ms: i64,
    caller: &[u8],
) -> usize {
    let data: BTreeMap<&Vec<u8>, _> = model.data().iter().collect();
    before
        .iter()
        .filter(|(_, hold)| hold != caller)
        .filter(|(queue, hold)| match data.get(queue) {
            Some(entry) if entry.expires_at.is_none_or(|at| now_ms <= at) => {
                !matches!(&entry.data, Data::List(items) if items.contains(hold))
            }
            _ => true,
        })
        .count()
}
