//! The search's frontier: its configurations (a spec state with the calls invoked but not
//! yet linearized), how two with the same state merge, and how a wide frontier is widened.
//!
//! Invariant: merging and widening only ever admit more: a merged configuration's interval
//! is the hull of its sources', its ambiguous calls their union, and a widened one's state
//! absorbs its sources' ([`SeqSpec::absorb`]), so no history a source explained becomes a
//! finding.

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;

use super::super::lease_spec::Timing;
use super::super::seq_spec::SeqSpec;

/// Configurations by (spec state, definite calls pending) -> (timing, ambiguous calls
/// pending).
pub(super) type Frontier<S> = BTreeMap<(S, Vec<usize>), (Timing, Vec<usize>)>;

/// Configurations being widened, by (state's group, definite calls pending) -> (the
/// state they absorbed, timing, ambiguous calls pending).
type Groups<S> = BTreeMap<(<S as SeqSpec>::Group, Vec<usize>), (S, Timing, Vec<usize>)>;

/// The frontier with the configurations that agree on their state's group
/// ([`SeqSpec::group`]: for the mutex, the epoch's owner and token and the highest token)
/// and the definite calls pending merged into one that admits all they did: their states
/// absorbed, the timing's hull and the ambiguous calls' union.
pub(super) fn widen<S: SeqSpec>(frontier: Frontier<S>) -> Frontier<S> {
    let mut groups: Groups<S> = BTreeMap::new();
    for ((spec, pending), (timing, ambiguous)) in frontier {
        match groups.entry((spec.group(), pending)) {
            Entry::Vacant(slot) => {
                slot.insert((spec, timing, ambiguous));
            }
            Entry::Occupied(mut slot) => {
                let (into, have, calls) = slot.get_mut();
                into.absorb(spec);
                *have = have.hull(timing);
                calls.extend(ambiguous);
                calls.sort_unstable();
                calls.dedup();
            }
        }
    }
    groups
        .into_iter()
        .map(|((_, pending), (spec, timing, ambiguous))| ((spec, pending), (timing, ambiguous)))
        .collect()
}

/// Merges a configuration into `map`; whether it admitted anything new.
pub(super) fn merge<S: SeqSpec>(
    map: &mut Frontier<S>,
    key: (S, Vec<usize>),
    (timing, ambiguous): (Timing, Vec<usize>),
) -> bool {
    match map.entry(key) {
        Entry::Vacant(slot) => {
            slot.insert((timing, ambiguous));
            true
        }
        Entry::Occupied(mut slot) => {
            let (have, calls) = slot.get_mut();
            let mut changed = false;
            if !timing.within(*have) {
                *have = have.hull(timing);
                changed = true;
            }
            for call in ambiguous {
                if let Err(at) = calls.binary_search(&call) {
                    calls.insert(at, call);
                    changed = true;
                }
            }
            changed
        }
    }
}
