//! A resource that rejects stale fencing tokens, surviving a holder that pauses past its
//! lease (GC pause, VM migration, SIGSTOP).
//!
//! Holder A takes the lock with a short TTL and no watchdog, then "pauses" longer than the
//! lease. B acquires (a strictly higher token) and writes. A wakes up and writes too,
//! believing it still holds the lock: the resource refuses, because A's token is lower than
//! one it has already seen. The lock alone cannot prevent A's late write; the token check
//! at the resource does. The pattern to copy is [`FENCED_WRITE`]: compare-and-set the
//! highest token seen together with the write, atomically, where the data lives.
//!
//! `cargo run -p leasehold --example fenced_resource [-- redis://127.0.0.1:6379]`

#[path = "support/mod.rs"]
mod support;

use std::process::ExitCode;
use std::time::Duration;

use leasehold::{Client, FencingToken};

use support::Result;

/// Where Redis is when neither an argument nor `LEASEHOLD_URL` says otherwise.
const DEFAULT_URL: &str = "redis://127.0.0.1:6379";

/// A's lease: short so that the demo's pause outlives it quickly.
const SHORT_TTL: Duration = Duration::from_millis(300);

/// A's pause: twice its lease, so the lease has certainly ended by server time.
const PAUSE: Duration = Duration::from_millis(600);

/// How long B waits for the lock (A's lease ends within `SHORT_TTL`).
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(3);

/// The resource's write: accept `value` only with a token above every token seen so far.
/// KEYS[1] value, KEYS[2] highest token seen; ARGV[1] token, ARGV[2] value.
/// Returns 1 if written, 0 if the token was stale. Tokens stay below 2^53, so Lua's
/// numbers compare them exactly.
const FENCED_WRITE: &str = r"
local seen = tonumber(redis.call('GET', KEYS[2]) or '0')
if tonumber(ARGV[1]) <= seen then
  return 0
end
redis.call('SET', KEYS[2], ARGV[1])
redis.call('SET', KEYS[1], ARGV[2])
return 1
";

fn main() -> ExitCode {
    support::run("fenced_resource", &[DEFAULT_URL], fenced_resource)
}

/// The protected resource: a value in Redis guarded by the highest token it has seen.
struct FencedResource {
    connection: redis::aio::MultiplexedConnection,
    script: redis::Script,
    value_key: String,
    token_key: String,
}

impl FencedResource {
    async fn open(url: &str, name: &str) -> Result<Self> {
        let client = redis::Client::open(url)?;
        Ok(Self {
            connection: client.get_multiplexed_async_connection().await?,
            script: redis::Script::new(FENCED_WRITE),
            value_key: format!("{name}:value"),
            token_key: format!("{name}:highest-token"),
        })
    }

    /// Writes `value` if `token` is the newest seen; `false` if it was stale.
    async fn write(&mut self, token: FencingToken, value: &str) -> Result<bool> {
        let written: i64 = self
            .script
            .key(&self.value_key)
            .key(&self.token_key)
            .arg(token.get().to_string())
            .arg(value)
            .invoke_async(&mut self.connection)
            .await?;
        Ok(written == 1)
    }

    async fn read(&mut self) -> Result<Option<String>> {
        Ok(redis::cmd("GET")
            .arg(&self.value_key)
            .query_async(&mut self.connection)
            .await?)
    }
}

async fn fenced_resource(urls: Vec<String>) -> Result<()> {
    let url = urls[0].clone();
    let name = "leasehold-example:fenced";
    let mut resource = FencedResource::open(&url, "leasehold-example:fenced-resource").await?;

    let a = Client::connect(&url).await?;
    let b = Client::connect(&url).await?;

    let guard_a = a.mutex(name).ttl(SHORT_TTL).watchdog(false).lock().await?;
    let token_a = guard_a.fencing_token();
    println!("A holds {name:?} with token {token_a} and a {SHORT_TTL:?} lease, then pauses");
    tokio::time::sleep(PAUSE).await;

    let guard_b = b.mutex(name).lock_within(ACQUIRE_TIMEOUT).await?;
    let token_b = guard_b.fencing_token();
    println!("B acquired after A's lease ended, token {token_b}");
    if token_b <= token_a {
        return Err(format!("token {token_b} is not above the earlier {token_a}").into());
    }
    if !resource.write(token_b, "written by B").await? {
        return Err("the resource refused B's current token".into());
    }
    println!("B wrote with token {token_b}: accepted");

    // A wakes up. A careful holder would check `guard.is_lost()` first, but a pause can
    // fall between that check and the write: only the resource can be the last word.
    if resource.write(token_a, "written by A").await? {
        return Err("the resource accepted A's stale token".into());
    }
    println!("A woke up and wrote with stale token {token_a}: rejected");

    let value = resource.read().await?;
    if value.as_deref() != Some("written by B") {
        return Err(format!("resource holds {value:?}, expected B's write").into());
    }
    println!("the resource holds B's write");

    match guard_a.unlock().await {
        Ok(()) => return Err("A's unlock succeeded although its lease had ended".into()),
        Err(err) => println!("A's unlock reports the lost lease: {err}"),
    }
    guard_b.unlock().await?;
    Ok(())
}
