//! `rediss://` against a real Redis node that speaks TLS under a throwaway certificate
//! authority (the harness's `TlsNode`): a client that trusts that authority locks and
//! unlocks over TLS; a client that does not (the platform's and the Mozilla roots, or
//! another authority) fails with a typed `Error::Connect` that says the certificate is why.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use leasehold::{Client, Error};
use leasehold_harness::TlsNode;

async fn tls_node() -> TlsNode {
    common::init_tracing();
    TlsNode::start().await.expect("start a TLS Redis container")
}

/// A redis-rs client for `node`'s `rediss://` URL that trusts only `ca_pem`.
fn trusting(node: &TlsNode, ca_pem: &[u8]) -> redis::Client {
    let certificates = redis::TlsCertificates {
        client_tls: None,
        root_cert: Some(ca_pem.to_vec()),
    };
    redis::Client::build_with_tls(node.url(), certificates).unwrap()
}

/// The connect error's text, which must name the certificate as the cause.
fn assert_certificate_refused(err: &Error) {
    assert!(matches!(err, Error::Connect { .. }), "{err:?}");
    let text = format!("{err}").to_lowercase();
    assert!(
        text.contains("certificate"),
        "the message names the certificate: {err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_over_tls_with_the_servers_authority() {
    let node = tls_node().await;
    let client = Client::builder()
        .redis_client(trusting(&node, node.ca_pem()))
        .await
        .unwrap();
    let guard = client.mutex("tls-orders").lock().await.unwrap();
    let plain = node.single().node();
    let held: i64 = plain
        .query(redis::cmd("EXISTS").arg("leasehold:{tls-orders}"))
        .await
        .unwrap();
    assert_eq!(held, 1, "the lock key was written over the TLS connection");
    let token = guard.fencing_token();
    guard.unlock().await.unwrap();
    let again = client.mutex("tls-orders").lock().await.unwrap();
    assert!(again.fencing_token() > token);
    again.unlock().await.unwrap();
}

#[tokio::test]
async fn a_rediss_url_the_default_roots_do_not_trust_fails_naming_the_certificate() {
    let node = tls_node().await;
    let err = Client::connect(&node.url())
        .await
        .expect_err("a throwaway authority is in no trust store");
    println!("untrusted: {err}");
    assert_certificate_refused(&err);
}

#[tokio::test]
async fn another_authority_fails_naming_the_certificate() {
    let node = tls_node().await;
    let err = Client::builder()
        .redis_client(trusting(&node, node.other_ca_pem()))
        .await
        .expect_err("the server's certificate was not signed by that authority");
    println!("wrong CA: {err}");
    assert_certificate_refused(&err);
}
