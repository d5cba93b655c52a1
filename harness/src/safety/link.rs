//! A per-client TCP link to a Redis node that a scenario can cut and restore, so one
//! client (the holder) is partitioned while the others and the node carry on.
//!
//! Invariant: a cut link neither forwards nor drops bytes — they wait, as TCP segments
//! would during a partition — and new connections wait for the link to be restored before
//! reaching the node; dropping the [`Link`] closes its listener and every connection.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::error::{Error, Result};

/// Buffer of one forwarding direction; Redis replies in these runs are tiny.
const PUMP_BUFFER: usize = 16 * 1024;

/// A local listener forwarding to one upstream node.
#[derive(Debug)]
pub struct Link {
    local: SocketAddr,
    cut: watch::Sender<bool>,
    // Aborted on drop, which drops the JoinSet of connection tasks and aborts them too.
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Link {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Link {
    /// Listens on a loopback port and forwards every connection to `upstream`.
    pub async fn open(upstream: SocketAddr) -> Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|err| Error::io("binding a link listener", err))?;
        let local = listener
            .local_addr()
            .map_err(|err| Error::io("reading a link listener's address", err))?;
        let (cut, watcher) = watch::channel(false);
        let task = tokio::spawn(accept_loop(listener, upstream, watcher));
        Ok(Self { local, cut, task })
    }

    /// `redis://127.0.0.1:port` of the link.
    pub fn url(&self) -> String {
        format!("redis://{}", self.local)
    }

    /// Stops forwarding in both directions until [`Link::restore`].
    pub fn cut(&self) {
        self.cut.send_replace(true);
    }

    /// Resumes forwarding; bytes held during the cut are delivered.
    pub fn restore(&self) {
        self.cut.send_replace(false);
    }
}

async fn accept_loop(listener: TcpListener, upstream: SocketAddr, cut: watch::Receiver<bool>) {
    let mut connections = JoinSet::new();
    loop {
        let Ok((client, _)) = listener.accept().await else {
            continue;
        };
        let cut = cut.clone();
        connections.spawn(async move {
            if let Err(err) = forward(client, upstream, cut).await {
                tracing::trace!(%err, "link connection ended");
            }
        });
        // Reap finished connections so the set does not grow over a long run.
        while connections.try_join_next().is_some() {}
    }
}

async fn forward(
    client: TcpStream,
    upstream: SocketAddr,
    mut cut: watch::Receiver<bool>,
) -> std::io::Result<()> {
    open(&mut cut).await;
    let server = TcpStream::connect(upstream).await?;
    client.set_nodelay(true)?;
    server.set_nodelay(true)?;
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let up = pump(client_read, server_write, cut.clone());
    let down = pump(server_read, client_write, cut);
    // Either side closing ends the connection, as a proxy would.
    tokio::select! {
        result = up => result,
        result = down => result,
    }
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut cut: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let mut buffer = vec![0u8; PUMP_BUFFER];
    loop {
        let n = from.read(&mut buffer).await?;
        if n == 0 {
            return Ok(());
        }
        open(&mut cut).await;
        to.write_all(&buffer[..n]).await?;
    }
}

/// Waits until the link is not cut (returns at once if it is open).
async fn open(cut: &mut watch::Receiver<bool>) {
    // An error means the Link was dropped; the task is being aborted anyway.
    let _ = cut.wait_for(|is_cut| !is_cut).await;
}
