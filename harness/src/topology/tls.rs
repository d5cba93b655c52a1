//! A single Redis node that also speaks TLS, under a throwaway certificate authority: the
//! fixture of the library's `rediss://` tests.
//!
//! The server's certificate names the container's IP address (what a `rediss://ip:port`
//! client verifies), which is known only once the container runs: so the node starts plain,
//! the certificates are made with the `openssl` CLI for that address, copied in, and the
//! TLS port is opened with `CONFIG SET` (Redis 7 and Valkey load TLS settings at runtime).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::process::Command;

use crate::error::{Error, Result};
use crate::topology::docker::docker;
use crate::topology::image::{redis_image, speaks_tls};
use crate::topology::single::SingleNode;

/// The node's TLS port (beside the plain port, which the harness's own probes keep using).
pub const TLS_PORT: u16 = 6380;
/// Where the certificates live inside the container.
const CERT_DIR: &str = "/tls";
/// Certificates outlive any test by far, and expire before they could matter to anyone.
const VALID_DAYS: &str = "2";

/// One TLS-speaking node and the certificate authority that signed its certificate.
#[derive(Debug)]
pub struct TlsNode {
    single: SingleNode,
    ca_pem: Vec<u8>,
    other_ca_pem: Vec<u8>,
}

impl TlsNode {
    /// Starts the node and returns once its TLS port accepts connections.
    /// Fails with [`Error::NoTls`] when the image's server has no TLS built in.
    pub async fn start() -> Result<TlsNode> {
        if !speaks_tls().await? {
            let image = redis_image().await?.descriptor();
            return Err(Error::NoTls { image });
        }
        let single = SingleNode::start().await?;
        let node = single.node();
        let dir = staging_dir();
        std::fs::create_dir_all(&dir)
            .map_err(|err| Error::io(format!("creating {}", dir.display()), err))?;
        let made = make_certificates(&dir, &node.ip().to_string()).await;
        let copied = match &made {
            Ok(()) => {
                let target = format!("{}:{CERT_DIR}", node.container_id());
                docker(&["cp", &dir.join("node").to_string_lossy(), &target]).await
            }
            Err(_) => Ok(String::new()),
        };
        let read = |name: &str| {
            std::fs::read(dir.join(name))
                .map_err(|err| Error::io(format!("reading {name} in {}", dir.display()), err))
        };
        let pems = made
            .and(copied)
            .and_then(|_| Ok((read("node/ca.crt")?, read("other-ca.crt")?)));
        if let Err(err) = std::fs::remove_dir_all(&dir) {
            tracing::debug!(dir = %dir.display(), %err, "could not remove the certificate directory");
        }
        let (ca_pem, other_ca_pem) = pems?;
        node.query::<()>(
            redis::cmd("CONFIG")
                .arg("SET")
                .arg("tls-cert-file")
                .arg(format!("{CERT_DIR}/server.crt"))
                .arg("tls-key-file")
                .arg(format!("{CERT_DIR}/server.key"))
                .arg("tls-ca-cert-file")
                .arg(format!("{CERT_DIR}/ca.crt"))
                .arg("tls-auth-clients")
                .arg("no")
                .arg("tls-port")
                .arg(TLS_PORT),
        )
        .await?;
        Ok(TlsNode {
            single,
            ca_pem,
            other_ca_pem,
        })
    }

    /// `rediss://ip:6380`.
    pub fn url(&self) -> String {
        format!("rediss://{}:{TLS_PORT}", self.single.node().ip())
    }

    /// The PEM certificate of the authority that signed the server's certificate.
    pub fn ca_pem(&self) -> &[u8] {
        &self.ca_pem
    }

    /// The PEM certificate of another authority, which signed nothing the server shows.
    pub fn other_ca_pem(&self) -> &[u8] {
        &self.other_ca_pem
    }

    /// The node, for plain connections (`redis://ip:6379`) and fault injection.
    pub fn single(&self) -> &SingleNode {
        &self.single
    }
}

/// A fresh directory of this process for one node's certificates.
fn staging_dir() -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    std::env::temp_dir().join(format!(
        "leasehold-tls-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ))
}

/// Writes into `dir`: `node/` (the CA certificate, and a server key and certificate for
/// `ip` signed by it) and `other-ca.crt` (an unrelated authority's certificate).
async fn make_certificates(dir: &Path, ip: &str) -> Result<()> {
    let node = dir.join("node");
    std::fs::create_dir_all(&node)
        .map_err(|err| Error::io(format!("creating {}", node.display()), err))?;
    let path = |name: &str| dir.join(name).to_string_lossy().into_owned();
    let extensions = path("server.ext");
    std::fs::write(&extensions, format!("subjectAltName=IP:{ip}\n"))
        .map_err(|err| Error::io(format!("writing {extensions}"), err))?;
    for (key, cert, name) in [
        ("ca.key", "node/ca.crt", "leasehold test CA"),
        ("other-ca.key", "other-ca.crt", "leasehold other CA"),
    ] {
        openssl(&[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            VALID_DAYS,
            "-subj",
            &format!("/CN={name}"),
            "-keyout",
            &path(key),
            "-out",
            &path(cert),
        ])
        .await?;
    }
    openssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=leasehold test node",
        "-keyout",
        &path("node/server.key"),
        "-out",
        &path("server.csr"),
    ])
    .await?;
    openssl(&[
        "x509",
        "-req",
        "-days",
        VALID_DAYS,
        "-in",
        &path("server.csr"),
        "-CA",
        &path("node/ca.crt"),
        "-CAkey",
        &path("ca.key"),
        "-CAcreateserial",
        "-extfile",
        &extensions,
        "-out",
        &path("node/server.crt"),
    ])
    .await
}

/// Runs the `openssl` CLI with `args`, failing with its stderr.
async fn openssl(args: &[&str]) -> Result<()> {
    let output = Command::new("openssl")
        .args(args)
        .output()
        .await
        .map_err(|err| Error::io("running openssl (is the openssl CLI installed?)", err))?;
    if output.status.success() {
        return Ok(());
    }
    Err(Error::io(
        format!(
            "openssl {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr)
        ),
        std::io::ErrorKind::Other.into(),
    ))
}
