//! Connecting to a deployment: the connect timeout every backend honours, and how a
//! connection target is shown in errors.
//!
//! Invariants: a connect gives up within its timeout and fails at once, with the cause,
//! when the server refuses (redis-rs' connection manager would retry its first connect with
//! backoff for about 9 s and report nothing meanwhile); a URL shown in an error has its
//! password replaced by `***`.

use std::future::Future;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{AsyncConnectionConfig, RedisError, RedisResult};

/// Default bound on connecting to a deployment (TCP connect plus handshake, and for
/// Sentinel the master lookup too). A healthy connect within a LAN or a cloud region takes
/// milliseconds; a second is far above that yet fails a misconfigured service's startup
/// promptly. It equals redis-rs' own default per-attempt connection timeout.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// What replaces a password in a shown URL.
const REDACTED: &str = "***";

/// Query parameters that carry a password (redis-rs reads `pass` in `redis+unix://` URLs).
const PASSWORD_PARAMS: [&str; 2] = ["pass", "password"];

/// Runs `connect`, failing with a timeout error that names `timeout` once it has passed.
pub(crate) async fn within<T>(
    timeout: Duration,
    connect: impl Future<Output = RedisResult<T>>,
) -> RedisResult<T> {
    tokio::time::timeout(timeout, connect)
        .await
        .unwrap_or_else(|_| Err(timed_out(timeout)))
}

/// The error of a connect that did not finish within `timeout` (`is_timeout()` is true).
fn timed_out(timeout: Duration) -> RedisError {
    RedisError::from(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        format!("timed out after {timeout:?}"),
    ))
}

/// A connection manager for `client`, connected within `timeout`. One plain connection
/// attempt goes first, so that a refused or unreachable server fails at once with its
/// cause; the manager is built only after it succeeded, and keeps redis-rs' reconnect with
/// backoff (each attempt bounded by `timeout`) for later connection losses.
pub(crate) async fn connection_manager(
    client: &redis::Client,
    config: ConnectionManagerConfig,
    timeout: Duration,
) -> RedisResult<ConnectionManager> {
    let config = config.set_connection_timeout(Some(timeout));
    within(timeout, async {
        // No timeouts of its own: `within` bounds it and names the bound in its error.
        let probe = AsyncConnectionConfig::new()
            .set_connection_timeout(None)
            .set_response_timeout(None);
        drop(
            client
                .get_multiplexed_async_connection_with_config(&probe)
                .await?,
        );
        ConnectionManager::new_with_config(client.clone(), config).await
    })
    .await
}

/// `url` as errors show it: the password of `scheme://user:password@host` and the value
/// of a `pass`/`password` query parameter replaced by `***`; everything else unchanged.
pub(crate) fn redact(url: &str) -> String {
    let (scheme, rest) = match url.find("://") {
        Some(at) => url.split_at(at + "://".len()),
        None => ("", url),
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _password)) => format!("{user}:{REDACTED}@{host}"),
            None => authority.to_owned(),
        },
        None => authority.to_owned(),
    };
    format!("{scheme}{authority}{}", redact_query(tail))
}

/// `tail` (path, query, fragment) with password query values replaced.
fn redact_query(tail: &str) -> String {
    let Some((path, query)) = tail.split_once('?') else {
        return tail.to_owned();
    };
    let (query, fragment) = match query.split_once('#') {
        Some((query, fragment)) => (query, Some(fragment)),
        None => (query, None),
    };
    let pairs: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((key, _)) if PASSWORD_PARAMS.contains(&key) => format!("{key}={REDACTED}"),
            _ => pair.to_owned(),
        })
        .collect();
    let fragment = fragment.map(|f| format!("#{f}")).unwrap_or_default();
    format!("{path}?{}{fragment}", pairs.join("&"))
}

/// Several URLs as errors show them: redacted, comma-separated.
pub(crate) fn redact_all<S: AsRef<str>>(urls: &[S]) -> String {
    let shown: Vec<String> = urls.iter().map(|url| redact(url.as_ref())).collect();
    shown.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_redacted() {
        let cases = [
            ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
            (
                "redis://user:secret@host:6379",
                "redis://user:***@host:6379",
            ),
            ("rediss://:secret@host/2", "rediss://:***@host/2"),
            ("redis://user@host", "redis://user@host"),
            ("redis://u:p@ss@host", "redis://u:***@host"),
            (
                "redis+unix:///tmp/r.sock?db=1&pass=secret#x",
                "redis+unix:///tmp/r.sock?db=1&pass=***#x",
            ),
            ("user:secret@host", "user:***@host"),
        ];
        for (url, shown) in cases {
            assert_eq!(redact(url), shown, "{url}");
        }
        assert_eq!(
            redact_all(&["redis://a:b@h1", "redis://h2"]),
            "redis://a:***@h1, redis://h2"
        );
    }
}
