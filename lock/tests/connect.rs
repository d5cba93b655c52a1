//! Connect failures are fast and say what failed: a refused connection fails at once, a
//! silent server after the connect timeout, each with the (password-free) URL and the cause.
//! The time bounds asserted here are liveness bounds (generous); the measured times are
//! printed (`--nocapture`) for the reports.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use leasehold::{Client, DEFAULT_CONNECT_TIMEOUT, Error};

/// Nothing listens on port 1 of the loopback interface: the kernel refuses at once.
const REFUSED: &str = "redis://127.0.0.1:1";

/// Generous liveness bound on any failing connect in these tests.
const FAILS_WITHIN: Duration = Duration::from_secs(5);

/// Runs `connect`, prints how long it took, and returns its error (panics if it succeeded
/// or took longer than [`FAILS_WITHIN`]).
async fn failure<F>(label: &str, connect: F) -> (Error, Duration)
where
    F: std::future::Future<Output = leasehold::Result<Client>>,
{
    let start = Instant::now();
    let result = tokio::time::timeout(FAILS_WITHIN, connect)
        .await
        .unwrap_or_else(|_| panic!("{label}: still connecting after {FAILS_WITHIN:?}"));
    let elapsed = start.elapsed();
    let err = result.expect_err("connect should fail");
    println!("{label}: failed after {elapsed:?}: {err}");
    (err, elapsed)
}

fn connect_source(err: &Error) -> &redis::RedisError {
    match err {
        Error::Connect { source, .. } => source,
        other => panic!("expected Error::Connect, got {other:?}"),
    }
}

/// `err` is a connect failure whose message names every one of `targets`.
fn assert_names(err: &Error, targets: &[&str]) {
    connect_source(err);
    let message = err.to_string();
    assert!(targets.iter().all(|t| message.contains(t)), "{message}");
}

/// A TCP listener that never accepts: connects complete in the kernel, and then the Redis
/// handshake is never answered, like a server that hangs or a black-holing middlebox.
async fn silent_server() -> (tokio::net::TcpListener, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("redis://{}", listener.local_addr().unwrap());
    (listener, url)
}

#[tokio::test]
async fn refused_connection_fails_at_once_naming_the_url_and_cause() {
    let (err, _) = failure("refused (single node)", Client::connect(REFUSED)).await;
    let message = err.to_string();
    assert!(message.contains(REFUSED), "{message}");
    assert!(message.to_lowercase().contains("refused"), "{message}");
    assert!(connect_source(&err).is_connection_refusal(), "{err:?}");
}

#[tokio::test]
async fn refused_cluster_and_sentinel_fail_naming_their_urls() {
    let (err, _) = failure(
        "refused (cluster)",
        Client::builder().cluster(&[REFUSED, "redis://127.0.0.1:2"]),
    )
    .await;
    assert_names(&err, &[REFUSED, "redis://127.0.0.1:2"]);

    let (err, _) = failure(
        "refused (sentinel)",
        Client::builder().sentinel(&[REFUSED], "mymaster"),
    )
    .await;
    assert_names(&err, &[REFUSED, "mymaster"]);
}

#[tokio::test]
async fn silent_server_fails_after_the_default_connect_timeout() {
    let (_listener, url) = silent_server().await;
    let (err, elapsed) = failure("silent server, default timeout", Client::connect(&url)).await;
    assert!(connect_source(&err).is_timeout(), "{err:?}");
    let message = err.to_string();
    assert!(
        message.contains(&url) && message.contains(&format!("after {DEFAULT_CONNECT_TIMEOUT:?}")),
        "{message}"
    );
    assert!(elapsed >= DEFAULT_CONNECT_TIMEOUT, "{elapsed:?}");
}

#[tokio::test]
async fn a_custom_connect_timeout_is_honoured_by_every_deployment_kind() {
    let (_listener, url) = silent_server().await;
    let timeout = Duration::from_millis(300);
    let builder = || Client::builder().connect_timeout(timeout);
    let urls = [url.as_str()];
    let failures = [
        failure(
            "silent server, 300 ms (single node)",
            builder().connect(&url),
        )
        .await,
        failure("silent server, 300 ms (cluster)", builder().cluster(&urls)).await,
        failure(
            "silent server, 300 ms (sentinel)",
            builder().sentinel(&urls, "mymaster"),
        )
        .await,
    ];
    for (err, elapsed) in failures {
        assert!(connect_source(&err).is_timeout(), "{err:?}");
        assert!(err.to_string().contains("timed out after 300ms"), "{err}");
        assert!(elapsed >= timeout, "{elapsed:?}");
    }
}

#[tokio::test]
async fn non_routable_address_fails_within_the_connect_timeout() {
    // 10.255.255.1 is usually black-holed (a timeout); some networks refuse or intercept it
    // instead, so only the bound and the message are asserted, and the cause is printed.
    let url = "redis://10.255.255.1:6379";
    let timeout = Duration::from_millis(500);
    let (err, elapsed) = failure(
        "non-routable address, 500 ms",
        Client::builder().connect_timeout(timeout).connect(url),
    )
    .await;
    assert!(err.to_string().contains(url), "{err}");
    assert!(elapsed < timeout + Duration::from_secs(1), "{elapsed:?}");
}

#[tokio::test]
async fn passwords_never_reach_the_message() {
    let (err, _) = failure(
        "refused, with credentials",
        Client::connect("redis://app:hunter2@127.0.0.1:1/0"),
    )
    .await;
    let message = err.to_string();
    assert!(!message.contains("hunter2"), "{message}");
    assert!(
        message.contains("redis://app:***@127.0.0.1:1/0"),
        "{message}"
    );
    assert!(!format!("{err:?}").contains("hunter2"), "{err:?}");
}

#[tokio::test]
async fn zero_connect_timeout_is_refused_before_dialling() {
    let result = Client::builder()
        .connect_timeout(Duration::ZERO)
        .connect(REFUSED)
        .await;
    assert!(
        matches!(result, Err(Error::InvalidClientConfig { .. })),
        "{result:?}"
    );
    let built = Client::builder().build();
    let err = built.expect_err("no backend");
    assert!(matches!(err, Error::InvalidClientConfig { .. }), "{err:?}");
    assert!(!err.to_string().contains("lock"), "{err}");
}

/// Issue 34, defect 7: a URL that does not parse, or names a scheme the client does not
/// speak, is a configuration error at every entry point, never `Error::Connect` (a service
/// that retries on `Connect` would retry a typo for ever). The message names the offending
/// part and hides the password.
#[tokio::test]
async fn malformed_urls_are_invalid_client_config_naming_the_offending_part() {
    // (URL, the part the message must name)
    let cases = [
        ("this is not a url", "no scheme"),
        ("redis://127.0.0.1:notaport", "\"notaport\""),
        ("http://127.0.0.1:80", "\"http\""),
        ("redis://app:hunter2@127.0.0.1:notaport", "\"notaport\""),
    ];
    for (url, offending) in cases {
        let results = [
            ("single node", Client::connect(url).await),
            ("builder", Client::builder().connect(url).await),
            ("cluster", Client::builder().cluster(&[REFUSED, url]).await),
            (
                "sentinel",
                Client::builder()
                    .sentinel(&[url, REFUSED], "mymaster")
                    .await,
            ),
        ];
        for (entry, result) in results {
            let err = result.expect_err("a malformed URL must not connect");
            let message = err.to_string();
            println!("{entry}, {url:?}: {message}");
            assert!(
                matches!(err, Error::InvalidClientConfig { .. }),
                "{entry}, {url:?}: expected InvalidClientConfig, got {err:?}"
            );
            assert!(message.contains(offending), "{entry}: {message}");
            assert!(!message.contains("hunter2"), "{entry}: {message}");
            assert!(!format!("{err:?}").contains("hunter2"), "{entry}: {err:?}");
        }
    }
}
