//! A real-Redis backend with switches for the faults a test needs at an exact moment: every
//! command failing as a dropped connection, the acquire script's reply held back or its
//! call lost before it reaches the server, the release script's reply lost after it ran,
//! or no subscription to be had.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use leasehold::backend::{Backend, BoxFuture, ReplicaWait, Subscription};
use leasehold::script::{LuaScript, scripts};
use leasehold::{Client, RedisBackend};
use redis::{Cmd, RedisResult, Value};

/// Delegates to a real node unless a switch says otherwise.
pub struct Faulty {
    inner: RedisBackend,
    /// Every command fails, after a short delay, as a connection reset.
    pub down: AtomicBool,
    /// Holds back the reply of the next acquire script call this many milliseconds.
    pub slow_acquire_ms: AtomicU64,
    /// Subscribing fails as a refused connection (commands still work).
    pub no_subscribe: AtomicBool,
    /// The next acquire script call fails as a connection reset without reaching the
    /// server (read back as false once it happened).
    pub lose_acquire: AtomicBool,
    /// The next release script call runs, then its reply is lost as a connection reset
    /// (read back as false once it happened).
    pub lose_release_reply: AtomicBool,
}

impl Faulty {
    pub async fn connect(url: &str) -> Arc<Self> {
        Arc::new(Self {
            inner: RedisBackend::connect(url).await.expect("connect"),
            down: AtomicBool::new(false),
            slow_acquire_ms: AtomicU64::new(0),
            no_subscribe: AtomicBool::new(false),
            lose_acquire: AtomicBool::new(false),
            lose_release_reply: AtomicBool::new(false),
        })
    }

    /// A client over this backend.
    pub fn client(self: &Arc<Self>, ttl: Duration, watchdog: bool) -> Client {
        Client::builder()
            .backend(Arc::clone(self) as Arc<dyn Backend>)
            .ttl(ttl)
            .watchdog(watchdog)
            .build()
            .expect("client")
    }

    fn is_acquire(cmd: &Cmd) -> bool {
        Self::runs(cmd, &scripts().acquire)
    }

    /// Whether `cmd` calls `script` by its SHA (the scripts are loaded by an earlier call).
    fn runs(cmd: &Cmd, script: &LuaScript) -> bool {
        let sha = script.sha().as_bytes();
        cmd.args_iter()
            .any(|arg| matches!(arg, redis::Arg::Simple(bytes) if bytes == sha))
    }

    fn reset() -> redis::RedisError {
        std::io::Error::new(std::io::ErrorKind::ConnectionReset, "test: down").into()
    }
}

impl Backend for Faulty {
    fn query<'a>(&'a self, cmd: &'a Cmd) -> BoxFuture<'a, RedisResult<Value>> {
        Box::pin(async move {
            if self.down.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(20)).await;
                return Err(Self::reset());
            }
            if Self::is_acquire(cmd) && self.lose_acquire.swap(false, Ordering::SeqCst) {
                return Err(Self::reset());
            }
            let reply = self.inner.query(cmd).await;
            if Self::runs(cmd, &scripts().release)
                && self.lose_release_reply.swap(false, Ordering::SeqCst)
            {
                return Err(Self::reset());
            }
            if Self::is_acquire(cmd) {
                let ms = self.slow_acquire_ms.swap(0, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(ms)).await;
            }
            reply
        })
    }

    fn wait_replicas<'a>(&'a self, wait: &'a ReplicaWait) -> BoxFuture<'a, RedisResult<Value>> {
        self.inner.wait_replicas(wait)
    }

    fn subscribe(&self) -> BoxFuture<'_, RedisResult<Subscription>> {
        if self.no_subscribe.load(Ordering::SeqCst) {
            return Box::pin(async {
                let refused =
                    std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "test: refused");
                Err(refused.into())
            });
        }
        self.inner.subscribe()
    }
}
