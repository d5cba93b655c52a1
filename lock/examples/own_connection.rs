//! Your own connection: a `redis::Client` configured by the application (here: database 2
//! and a 2 s response timeout; with TLS, `redis::Client::build_with_tls` and your CA) under
//! the lock client, instead of a URL.
//!
//! Run against a local redis-server (7.0+):
//! `cargo run -p leasehold --example own_connection [-- redis://127.0.0.1:6379]`
//! (or set `LEASEHOLD_URL`).

#[path = "support/mod.rs"]
mod support;

use std::process::ExitCode;
use std::time::Duration;

use leasehold::Client;
use redis::IntoConnectionInfo;
use redis::aio::ConnectionManagerConfig;

use support::Result;

/// Where Redis is when neither an argument nor `LEASEHOLD_URL` says otherwise.
const DEFAULT_URL: &str = "redis://127.0.0.1:6379";

/// The application's database: the lock's keys live beside its data.
const APP_DB: i64 = 2;

/// The application's own bound on a reply (redis-rs' default is 500 ms).
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);

/// How long to wait for the lock before giving up (nobody else should hold it).
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(2);

fn main() -> ExitCode {
    support::run("own_connection", &[DEFAULT_URL], own_connection)
}

async fn own_connection(urls: Vec<String>) -> Result<()> {
    let info = urls[0].as_str().into_connection_info()?;
    let settings = info.redis_settings().clone().set_db(APP_DB);
    let redis_client = redis::Client::open(info.set_redis_settings(settings))?;
    let config = ConnectionManagerConfig::new().set_response_timeout(Some(RESPONSE_TIMEOUT));

    let client = Client::builder()
        .redis_client_with(redis_client.clone(), config)
        .await?;
    let name = "leasehold-example:own-connection";
    let guard = client.mutex(name).lock_within(ACQUIRE_TIMEOUT).await?;

    // The lock's key is in the application's database, where its own connection sees it.
    let mut connection = redis_client.get_multiplexed_async_connection().await?;
    let key = format!("leasehold:{{{name}}}");
    let present: bool = redis::cmd("EXISTS")
        .arg(&key)
        .query_async(&mut connection)
        .await?;
    if !present {
        return Err(format!("no {key} in database {APP_DB}").into());
    }
    println!(
        "locked {name:?} in database {APP_DB}; fencing token {}",
        guard.fencing_token()
    );
    guard.unlock().await?;
    Ok(())
}
