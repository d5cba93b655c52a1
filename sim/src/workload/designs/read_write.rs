//! The read-write designs: each acquisition reads or writes, and readers hold together.
//!
//! - `rw-two-keys`: a write key (string, the writer's token, `PX ttl`) and a read key (a
//!   hash of reader token -> count, its lease restarted by every reader's grant), both
//!   checked by one script on one node (`sim/designs/rw_two_keys_*.lua`). A reader is
//!   granted while no write key exists, a writer while neither exists; a writer releases
//!   by compare-and-delete, a reader by taking its count down (its field goes at zero, the
//!   key with its last field).
//! - `rw-hash`: one hash, a `mode` field and one count field per owner, with `PEXPIRE` on
//!   the whole hash, as written for a cluster (one key, one slot;
//!   `sim/designs/rw_hash_*.lua`): a read is granted when the hash is absent, in read mode
//!   or already the owner's, a write when it is absent or the owner's in write mode. The
//!   release takes the owner's count down and deletes the hash when no owner remains.
//!
//! The matrix's runs drive mutex workloads, so the design draws each acquisition's mode
//! itself ([`READ_PERCENT`]). A read hold is recorded as shared access, a write hold as
//! exclusive access, with token 0: neither design issues a fencing token (the run tells the
//! checker so). Each client believes from the grant until it sends its release, with no
//! renewal and no validity estimate, and waits by a jittered exponential backoff.

use std::sync::Arc;

use leasehold::backend::Backend;
use leasehold::runtime::Runtime;

use super::{Attempt, Grant, Lease, int, lock_key, owner, token};
use crate::world::history::Access;
use crate::world::truth::{Claim, Member};

const TWO_KEYS_ACQUIRE: &str = include_str!("../../../designs/rw_two_keys_acquire.lua");
const TWO_KEYS_RELEASE: &str = include_str!("../../../designs/rw_two_keys_release.lua");
const HASH_ACQUIRE: &str = include_str!("../../../designs/rw_hash_acquire.lua");
const HASH_RELEASE: &str = include_str!("../../../designs/rw_hash_release.lua");

/// Percent of acquisitions that read: an even mix, so that readers meet readers (shared
/// holds) as often as they meet writers (exclusion), with the matrix's three clients.
pub(super) const READ_PERCENT: u64 = 50;

/// Which read-write design.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// `rw-two-keys`.
    TwoKeys,
    /// `rw-hash`.
    OneHash,
}

/// A read-write design's client.
pub(super) struct ReadWrite {
    kind: Kind,
    backend: Arc<dyn Backend>,
    ttl_ms: u64,
    /// `rw-hash`'s owner id, this incarnation's for all its holds (re-entrant, as the
    /// design's owner is a client thread's).
    owner: String,
    pub(super) rt: Runtime,
    /// The running acquisition's mode: drawn at its first attempt, kept until it is granted
    /// or given up.
    asking: Option<Access>,
}

/// The script argument naming a mode.
fn mode(access: Access) -> &'static str {
    if access == Access::Shared {
        "read"
    } else {
        "write"
    }
}

/// `rw-two-keys`' read key of lock `name`: named as the read-write lock's readers key, so
/// the checker's key rules (an eviction of a hold key) read it as Leasehold's.
fn read_key(name: &str) -> String {
    format!("{}:rw:readers", lock_key(name))
}

impl ReadWrite {
    /// The client of design `kind` on `backend`.
    pub(super) fn new(kind: Kind, lease: Lease, rt: &Runtime, backend: Arc<dyn Backend>) -> Self {
        Self {
            kind,
            backend,
            ttl_ms: lease.ttl_ms(),
            owner: owner(rt),
            rt: rt.clone(),
            asking: None,
        }
    }

    /// The running acquisition's mode, drawn at its first attempt.
    fn asking(&mut self) -> Access {
        *self.asking.get_or_insert_with(|| {
            if self.rt.entropy.next_u64() % 100 < READ_PERCENT {
                Access::Shared
            } else {
                Access::Exclusive
            }
        })
    }

    pub(super) async fn attempt(&mut self, name: &str) -> Attempt {
        let access = self.asking();
        let lock = lock_key(name);
        let (cmd, claim, value) = match self.kind {
            Kind::TwoKeys => {
                let token = token(&self.rt);
                let mut cmd = redis::cmd("EVAL");
                cmd.arg(TWO_KEYS_ACQUIRE)
                    .arg(2)
                    .arg(&lock)
                    .arg(read_key(name))
                    .arg(self.ttl_ms)
                    .arg(&token)
                    .arg(mode(access));
                let (key, member) = match access {
                    Access::Shared => (read_key(name), Member::Field(token.clone())),
                    _ => (lock, Member::Value(token.clone())),
                };
                (cmd, (key, member), token)
            }
            Kind::OneHash => {
                let mut cmd = redis::cmd("EVAL");
                cmd.arg(HASH_ACQUIRE)
                    .arg(1)
                    .arg(&lock)
                    .arg(self.ttl_ms)
                    .arg(&self.owner)
                    .arg(mode(access));
                let owner = self.owner.clone().into_bytes();
                (cmd, (lock, Member::Field(owner.clone())), owner)
            }
        };
        if int(&self.backend.query(&cmd).await) != Some(1) {
            return Attempt::Busy(None);
        }
        self.asking = None;
        Attempt::Granted(Grant {
            claim: Claim {
                key: claim.0.into_bytes(),
                members: vec![(0, claim.1)],
                quorum: 1,
            },
            valid_until: None,
            value,
            access,
        })
    }

    /// Forgets the mode of an acquisition given up.
    pub(super) fn give_up(&mut self) {
        self.asking = None;
    }

    pub(super) async fn release(&mut self, name: &str, grant: Grant) {
        let lock = lock_key(name);
        let mut cmd = redis::cmd("EVAL");
        match self.kind {
            Kind::TwoKeys => cmd
                .arg(TWO_KEYS_RELEASE)
                .arg(2)
                .arg(&lock)
                .arg(read_key(name))
                .arg(&grant.value)
                .arg(mode(grant.access)),
            Kind::OneHash => cmd.arg(HASH_RELEASE).arg(1).arg(&lock).arg(&grant.value),
        };
        let _ = self.backend.query(&cmd).await;
    }
}
