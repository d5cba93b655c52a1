//! Why a branch of a lock script is not reached by plain exploration: the stated reasons
//! the branch table prints in place of a first plain seed.
//!
//! A branch no plain seed reaches is one the verdicts say nothing about, so each such branch
//! carries its reason here: what exploration does not draw (and where it is driven
//! instead), or why no correct client can reach it. A branch left unreached without a
//! reason is a gap of the workload, and the report says so.
//!
//! Invariant: each reason names exactly one branch of its script, by the branch's code and
//! the code of the line before it (so a reason moves with its branch when lines shift, and
//! fails its test when the branch changes or goes).

use crate::model::branches;

/// A branch plain exploration does not reach, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unreached {
    /// The script's file name, e.g. `acquire.lua`.
    pub script: &'static str,
    /// The branch's code line, trimmed.
    pub code: &'static str,
    /// The code line before it, trimmed (blank lines and comments skipped).
    pub after: &'static str,
    /// Why no plain seed reaches it.
    pub why: &'static str,
}

const RESIZE_IDLE: &str = "a resize of a semaphore nobody holds or waits on: exploration resizes only while holding (the resize draw); `lock/tests/semaphore_size.rs` resizes an idle one on a real server";

/// Every branch plain exploration is known not to reach.
pub const UNREACHED: &[Unreached] = &[
    Unreached {
        script: "acquire.lua",
        code: "return redis.error_reply('WRONGTYPE the lock key holds a string that is not a lease')",
        after: "if expires < 0 or not string.match(lone, '^' .. string.rep('%x', 16) .. ':.') then",
        why: "another program's string under the lock key: no simulated client writes one; `lock/tests/errors.rs` plants one on a real server",
    },
    Unreached {
        script: "release.lua",
        code: "redis.call('HSET', lock, owner_of, 1, '#' .. head, expiry, '~q', 1, '~p', 1)",
        after: "if found[4] then",
        why: "a hand-off while a PubSub waiter listens on the same lock: exploration runs one wait strategy per run; `lock/tests/mixed_strategy.rs` mixes them on a real server",
    },
    Unreached {
        script: "rw_read_acquire.lua",
        code: "return {0, math.max(wait, 1), 1}",
        after: "if by_intent and entry_timeout > 0 then",
        why: "a fair reader held back by a non-fair writer's intent, a mixed-strategy deployment exploration does not draw; `lock/tests/rwlock_mixed_strategy.rs` drives it on a real server",
    },
    Unreached {
        script: "rw_read_release.lua",
        code: "return answer",
        after: "if redis.call('EXISTS', write) == 1 then",
        why: "a read release while its owner holds the write lock, which only a downgrade leads to, and exploration does not draw a downgrade yet; `lock/tests/rwlock.rs` downgrades on a real server",
    },
    Unreached {
        script: "rw_write_acquire.lua",
        code: "mine[1] = false",
        after: "if fields[i] == hold_field then",
        why: "a retried write attempt whose own hold's deadline passed while a sibling write hold of its owner keeps the key: write re-entry, an unanswered attempt and its retry in that lease's last moments together; steered runs reach it",
    },
    Unreached {
        script: "rw_write_acquire.lua",
        code: "redis.call('DEL', write)",
        after: "if live == 0 then",
        why: "an owner's attempt in the one millisecond Redis still keeps the write key after its latest hold's deadline (a key lives through its expiry's millisecond, a hold while its deadline is later than now); steered runs reach it",
    },
    Unreached {
        script: "semaphore_acquire.lua",
        code: "return {0, -2}",
        after: "end",
        why: "unreachable by a correct client: free permits go to the line first, so a refusal finds ZCARD at or above a limit of at least 1, that is, some permit held; only a stored size of 0 gets here, and the client refuses a size of 0 before sending (`Error::InvalidConfig`)",
    },
    Unreached {
        script: "semaphore_resize.lua",
        code: "redis.call('DEL', size)",
        after: "if live <= now then",
        why: RESIZE_IDLE,
    },
    Unreached {
        script: "semaphore_resize.lua",
        code: "return 0",
        after: "redis.call('DEL', size)",
        why: RESIZE_IDLE,
    },
    Unreached {
        script: "semaphore_resize.lua",
        code: "redis.call('DEL', size)",
        after: "else",
        why: "a resize whose hand-offs leave nothing live: no permit held and a line of dead entries only, which the resize draw (while holding) never meets",
    },
];

impl Unreached {
    /// Whether this names the branch at 1-based `line` of its script's `source`.
    fn names(&self, source: &str, line: u32) -> bool {
        branches::code_line(source, line).as_deref() == Some(self.code)
            && previous_code(source, line).as_deref() == Some(self.after)
    }
}

/// The stated reason branch `line` of `script` (`acquire.lua`) is not reached, if any.
pub fn why(script: &str, source: &str, line: u32) -> Option<&'static str> {
    UNREACHED
        .iter()
        .find(|u| u.script == script && u.names(source, line))
        .map(|u| u.why)
}

/// The code line before 1-based `line` of `source`, trimmed, skipping blank lines and
/// comments.
fn previous_code(source: &str, line: u32) -> Option<String> {
    let index = usize::try_from(line).ok()?.checked_sub(1)?;
    source
        .lines()
        .take(index)
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("--"))
        .last()
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::coverage::lock_scripts;

    #[test]
    fn every_reason_names_exactly_one_branch_of_its_script() {
        let scripts = lock_scripts();
        for u in UNREACHED {
            let found = scripts
                .iter()
                .find(|s| format!("{}.lua", s.name()) == u.script)
                .and_then(|s| {
                    let all = branches::branches(s.source()).ok()?;
                    Some(all.iter().filter(|b| u.names(s.source(), b.line)).count())
                })
                .unwrap_or(0);
            assert_eq!(found, 1, "{}: `{}` after `{}`", u.script, u.code, u.after);
        }
    }
}
