//! The real Lua scripts driven by hand, for interleavings and faults a client cannot be made
//! to produce: holds named as the scripts see them, and the mutex acquire and release
//! scripts' calls.

use std::time::Duration;

use leasehold::backend::Backend;
use leasehold::script::scripts;
use leasehold::{DEFAULT_FENCE_MARGIN, KEY_PREFIX, LockKeys};
use redis::{RedisResult, Value};

/// A hold as the scripts see it: `<16 hex>:<32 hex client>:u:<owner>`.
pub struct Hold {
    pub id: String,
    pub owner: String,
}

impl Hold {
    /// The hold whose id repeats `hex` of an owner chosen as `owner` on an all-zero client.
    pub fn new(hex: &str, owner: &str) -> Self {
        let owner = format!("{}:u:{owner}", "0".repeat(32));
        Self {
            id: format!("{}:{owner}", hex.repeat(16)),
            owner,
        }
    }
}

/// One attempt of `hold` at the mutex `keys` through the acquire script: a lease of `ttl`,
/// waiting in the fair queue with entries of `entry` (as attempt 0, not listening for the
/// release). The raw reply, or the script's error.
pub async fn acquire(
    backend: &dyn Backend,
    keys: &LockKeys,
    hold: &Hold,
    ttl: Duration,
    entry: Duration,
) -> RedisResult<Value> {
    let args = [
        hold.id.clone(),
        hold.owner.clone(),
        ttl.as_millis().to_string(),
        entry.as_millis().to_string(),
        DEFAULT_FENCE_MARGIN.as_millis().to_string(),
        "0".to_owned(),
        "0".to_owned(),
    ];
    scripts()
        .acquire
        .run(
            backend,
            &[&keys.lock, &keys.fence, &keys.queue, &keys.waiters],
            &args,
        )
        .await
}

/// The release of `hold` at the mutex `keys` through the release script, with the client's
/// inbox prefix and the default fence margin. The raw reply, or the script's error.
pub async fn release(backend: &dyn Backend, keys: &LockKeys, hold: &Hold) -> RedisResult<Value> {
    let args = [
        hold.id.clone(),
        hold.owner.clone(),
        keys.released.clone(),
        format!("{KEY_PREFIX}:inbox:"),
        DEFAULT_FENCE_MARGIN.as_millis().to_string(),
    ];
    scripts()
        .release
        .run(
            backend,
            &[&keys.lock, &keys.queue, &keys.waiters, &keys.fence],
            &args,
        )
        .await
}
