//! Connecting to a deployment: the connect timeout every backend honours, and how a
//! connection target is shown in errors.
//!
//! Invariants: a connect gives up within its timeout and fails at once, with the cause,
//! when the server refuses (redis-rs' connection manager would retry its first connect with
//! backoff for about 9 s and report nothing meanwhile); a URL that cannot be dialled as
//! written (it does not parse, or names a scheme redis-rs does not speak) is refused before
//! dialling as a configuration error, never as a failed connection (a service retrying on
//! `Connect` would retry a typo for ever); a URL shown in an error has its password
//! replaced by `***`.

use std::future::Future;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{AsyncConnectionConfig, IntoConnectionInfo, RedisError, RedisResult};

use crate::error::{Error, Result};

/// Default bound on connecting to a deployment (TCP connect plus handshake, and for
/// Sentinel the master lookup too). A healthy connect within a LAN or a cloud region takes
/// milliseconds; a second is far above that yet fails a misconfigured service's startup
/// promptly. It equals redis-rs' own default per-attempt connection timeout.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// What replaces a password in a shown URL.
const REDACTED: &str = "***";

/// Query parameters that carry a password (redis-rs reads `pass` in `redis+unix://` URLs).
const PASSWORD_PARAMS: [&str; 2] = ["pass", "password"];

/// The URL schemes redis-rs dials (`redis::parse_redis_url`, redis 1.8).
const SCHEMES: [&str; 7] = [
    "redis",
    "rediss",
    "valkey",
    "valkeys",
    "redis+unix",
    "valkey+unix",
    "unix",
];

/// The schemes of TLS connections: redis-rs refuses to parse them when it was built without
/// TLS, which the crate features `tls-rustls` and `tls-native-tls` turn on.
const TLS_SCHEMES: [&str; 2] = ["rediss", "valkeys"];

/// What a TLS URL's parse failure means once nothing else is wrong with it.
const NO_TLS: &str = "TLS URLs need the TLS support this build lacks: enable leasehold's \
                      `tls-rustls` or `tls-native-tls` feature";

/// Checks, without dialling, that every one of `urls` is a URL redis-rs can dial; the first
/// that is not fails with [`Error::InvalidClientConfig`], naming it (password hidden) and
/// what is wrong with it.
pub(crate) fn check_urls<S: AsRef<str>>(urls: &[S]) -> Result<()> {
    for url in urls {
        let url = url.as_ref();
        if let Err(err) = url.into_connection_info() {
            // redis-rs' own reason ("Redis URL did not parse") names no part: say which.
            let problem = diagnose(url).unwrap_or_else(|| err.to_string());
            return Err(Error::InvalidClientConfig {
                reason: format!("URL {}: {problem}", redact(url)),
            });
        }
    }
    Ok(())
}

/// The part of `url` that keeps it from parsing, when it is one of the usual slips: no
/// scheme, an unsupported scheme, a port that is not a number, a TLS scheme without TLS
/// support (the only other reason redis-rs refuses a well-formed `rediss://` URL). Never
/// shows the userinfo.
fn diagnose(url: &str) -> Option<String> {
    let scheme_shape = |scheme: &str| {
        !scheme.is_empty()
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
    };
    let Some((scheme, rest)) = url.split_once("://").filter(|(s, _)| scheme_shape(s)) else {
        return Some("no scheme (expected one like redis://host:port)".to_owned());
    };
    if !SCHEMES.contains(&scheme) {
        return Some(format!(
            "unsupported scheme {scheme:?} (supported: {})",
            SCHEMES.join(", ")
        ));
    }
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    let host_port = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    let port = match host_port.rsplit_once(']') {
        Some((_, after)) => after.strip_prefix(':'),
        None => host_port.rsplit_once(':').map(|(_, port)| port),
    };
    if let Some(port) = port.filter(|port| port.parse::<u16>().is_err()) {
        return Some(format!("port {port:?} is not a number in 0..=65535"));
    }
    TLS_SCHEMES
        .contains(&scheme)
        .then(|| format!("{scheme}:// {NO_TLS}"))
}

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

/// Several URLs as errors show them: redacted, comma-separated (a Cluster's seeds, a
/// deployment's Sentinels).
#[cfg(any(feature = "cluster", feature = "sentinel"))]
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
        #[cfg(any(feature = "cluster", feature = "sentinel"))]
        assert_eq!(
            redact_all(&["redis://a:b@h1", "redis://h2"]),
            "redis://a:***@h1, redis://h2"
        );
    }

    #[test]
    fn malformed_urls_are_named_by_their_offending_part() {
        let cases = [
            ("this is not a url", "no scheme"),
            ("http://127.0.0.1:80", "unsupported scheme \"http\""),
            ("redis://u:pw@[::1]:x1", "port \"x1\""),
            ("redis://h:99999", "port \"99999\""),
        ];
        for (url, problem) in cases {
            let Err(err) = check_urls(&[url]) else {
                panic!("{url} was accepted");
            };
            let message = err.to_string();
            assert!(message.contains(problem), "{url}: {message}");
            assert!(!message.contains("pw@"), "{message}");
        }
        assert!(check_urls(&["redis://h:6379/0", "unix:///tmp/r.sock"]).is_ok());
    }

    /// redis-rs refuses a well-formed `rediss://` URL only when it was built without TLS;
    /// the message then names the features that add it.
    #[test]
    fn a_tls_url_that_does_not_parse_names_the_tls_features() {
        let Some(hint) = diagnose("rediss://u:pw@cache.example:6380") else {
            panic!("a well-formed rediss:// URL that fails to parse gets a reason");
        };
        assert!(hint.starts_with("rediss:// TLS URLs need"), "{hint}");
        assert!(
            hint.contains("`tls-rustls`") && hint.contains("`tls-native-tls`"),
            "{hint}"
        );
        assert!(!hint.contains("pw"), "{hint}");
        let Some(port) = diagnose("valkeys://h:x1") else {
            panic!("a bad port gets a reason");
        };
        assert!(
            port.contains("port \"x1\""),
            "a bad port is named first: {port}"
        );
        assert_eq!(diagnose("redis://h:6379"), None);
        #[cfg(any(feature = "tls-rustls", feature = "tls-native-tls"))]
        assert!(check_urls(&["rediss://cache.example:6380"]).is_ok());
    }
}
