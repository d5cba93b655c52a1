//! A semaphore client's sizes: the number of permits it asks for on each lock, and the
//! resizes it makes while holding a permit.
//!
//! Invariant: sizes go to the server only through the library's public API
//! (`Client::semaphore(name, n)` and `Semaphore::resize`), and the client keeps, per lock,
//! the number its handle holds after a resize the server answered (the library's handle
//! takes the new number then), so its next acquire asks for what it set. A resize whose
//! answer never came leaves the client's number as it was, as the library does.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use leasehold::Client;

use crate::workload::{LockKind, SemaphoreSizes, Workload};
use crate::world::process::ProcessCtx;

/// One process's semaphore numbers, per lock name.
pub struct Sizing {
    /// The number this process asks for on a lock it has not resized.
    base: u32,
    /// The run's sizing draw (none: one shared count, never resized).
    sizes: Option<SemaphoreSizes>,
    /// The number each resized lock's handle now holds.
    resized: Mutex<BTreeMap<String, u32>>,
}

impl Sizing {
    /// `ctx`'s process's numbers under `work`: its workload's permits, plus its share of
    /// the run's spread.
    pub fn new(work: &Workload, ctx: &ProcessCtx) -> Self {
        let permits = match work.kind {
            LockKind::Semaphore { permits } => permits,
            LockKind::Mutex | LockKind::ReadWrite { .. } => 1,
        };
        let spread = work.sizes.map_or(1, |s| s.spread.max(1));
        let share = u32::try_from(ctx.id % spread as usize).unwrap_or(0);
        Self {
            base: permits.saturating_add(share),
            sizes: work.sizes,
            resized: Mutex::new(BTreeMap::new()),
        }
    }

    /// The number of permits this process asks for on `name`.
    pub fn count(&self, name: &str) -> u32 {
        self.numbers().get(name).copied().unwrap_or(self.base)
    }

    /// The size to resize to now, if this hold is one the run resizes during: uniform in
    /// `[1, permits + spread]`, drawn from the process's entropy (so a seed replays it).
    pub fn resize_to(&self, work: &Workload, ctx: &ProcessCtx) -> Option<u32> {
        let sizes = self.sizes?;
        let permits = match work.kind {
            LockKind::Semaphore { permits } => permits,
            LockKind::Mutex | LockKind::ReadWrite { .. } => return None,
        };
        if sizes.resize_percent == 0
            || ctx.runtime.entropy.next_u64() % 100 >= u64::from(sizes.resize_percent)
        {
            return None;
        }
        let most = u64::from(permits.saturating_add(sizes.spread.max(1)));
        u32::try_from(1 + ctx.runtime.entropy.next_u64() % most).ok()
    }

    /// Resizes `name` to `to` through `client`'s semaphore handle (built with this
    /// process's number, as its acquires are); on the server's answer, the number is
    /// the process's from then on. Whether the semaphore was live.
    pub async fn resize(&self, client: &Client, name: &str, to: u32) -> leasehold::Result<bool> {
        let mut semaphore = client.semaphore(name, self.count(name));
        let live = semaphore.resize(to).await?;
        self.numbers().insert(name.to_owned(), semaphore.permits());
        Ok(live)
    }

    fn numbers(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, u32>> {
        // A panic while the map is held leaves it whole (every update is one insert).
        self.resized.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
