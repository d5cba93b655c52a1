//! Fencing a SQL table: every write carries the lock's fencing token and the row keeps the
//! highest token that wrote it, so `UPDATE … WHERE fence < $token` refuses a holder whose
//! lease ended while it was paused.
//!
//! No database is needed: [`Table`] is an in-memory stand-in that evaluates exactly the
//! statement printed before it, one row per account, atomically (as a single `UPDATE` is
//! in a real database). Holder A takes the lock with a short lease and no watchdog, then
//! "pauses" (GC, VM migration) past its lease. B does its write as scoped work
//! (`Mutex::run`) with a higher token. A wakes up and runs its `UPDATE` with its stale
//! token: zero rows change. The lock alone cannot stop A's late write; the `WHERE` clause
//! can.
//!
//! `cargo run -p leasehold --example sql_fencing [-- redis://127.0.0.1:6379]`

#[path = "support/mod.rs"]
mod support;

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::Mutex;
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

/// The statement each writer runs: the fence column holds the highest token that wrote
/// the row, and only a higher token may write it.
const UPDATE: &str = "UPDATE accounts SET balance = $1, fence = $2 WHERE id = $3 AND fence < $2";

fn main() -> ExitCode {
    support::run("sql_fencing", &[DEFAULT_URL], sql_fencing)
}

/// `accounts(id, balance, fence)`, in memory.
#[derive(Default)]
struct Table {
    rows: Mutex<BTreeMap<u32, (i64, u64)>>,
}

impl Table {
    /// Runs [`UPDATE`] with `balance`, `token` and `id`; returns the rows it changed.
    fn update(&self, balance: i64, token: FencingToken, id: u32) -> Result<u64> {
        println!("  {UPDATE}  -- $1 = {balance}, $2 = {token}, $3 = {id}");
        let mut rows = self.rows.lock().map_err(|_| "table poisoned")?;
        let changed = match rows.get_mut(&id) {
            Some((old_balance, fence)) if *fence < token.get() => {
                (*old_balance, *fence) = (balance, token.get());
                1
            }
            _ => 0,
        };
        println!("  -> {changed} row(s) updated");
        Ok(changed)
    }

    fn balance(&self, id: u32) -> Result<Option<i64>> {
        let rows = self.rows.lock().map_err(|_| "table poisoned")?;
        Ok(rows.get(&id).map(|(balance, _)| *balance))
    }
}

async fn sql_fencing(urls: Vec<String>) -> Result<()> {
    let url = &urls[0];
    let name = "leasehold-example:sql-account-7";
    let table = Table::default();
    table
        .rows
        .lock()
        .map_err(|_| "table poisoned")?
        .insert(7, (100, 0));

    let a = Client::connect(url).await?;
    let b = Client::connect(url).await?;

    let guard_a = a.mutex(name).ttl(SHORT_TTL).watchdog(false).lock().await?;
    let token_a = guard_a.fencing_token();
    println!("A holds {name:?} with token {token_a} and a {SHORT_TTL:?} lease, then pauses");
    tokio::time::sleep(PAUSE).await;

    let changed = b
        .mutex(name)
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .run(async |guard| {
            println!(
                "B runs its write as scoped work with token {}",
                guard.fencing_token()
            );
            table.update(150, guard.fencing_token(), 7)
        })
        .await?;
    // B's write was made (or refused) before the unlock: keep its result whatever the
    // unlock found, and say so when the lease did not last to the unlock.
    if let Err(err) = changed.lease.unlock() {
        println!("B's lease was gone at unlock ({err}); its write stands");
    }
    let changed = changed.value?;
    if changed != 1 {
        return Err("B's current token was refused".into());
    }

    println!("A wakes up, still believing it holds the lock, and writes with token {token_a}");
    if table.update(50, token_a, 7)? != 0 {
        return Err("the stale token updated the row".into());
    }
    if table.balance(7)? != Some(150) {
        return Err("the row does not hold B's write".into());
    }
    println!("the row keeps B's balance 150: A's stale write changed nothing");

    match guard_a.unlock().await {
        Ok(()) => return Err("A's unlock succeeded although its lease had ended".into()),
        Err(err) => println!("A's unlock reports the lost lease: {err}"),
    }
    Ok(())
}
