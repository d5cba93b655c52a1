//! The production [`Backend`] for a Sentinel-managed master: it asks where the master is,
//! talks to it over the connection that answer gave, and asks again after a failover.
//!
//! Why the policy is apart from the transport: following a master across failovers is
//! where Sentinel deployments lose locks (a client keeps talking to a master that was
//! demoted, or to a zombie that was cut off with it), so the simulator must run this very
//! code. Asking the Sentinels and connecting is a [`MasterSource`]: redis-rs' `Sentinel`
//! and connection manager in production ([`crate::sentinel_master`]), a simulated Sentinel
//! in `leasehold-sim`.
//!
//! Invariant: a failure that may mean "the master moved" (connection lost or refused,
//! timeout, `READONLY` from a demoted master) drops the cached master, so the next command
//! re-resolves it through the Sentinels; the failure itself is reported as a transport
//! error, which the lock code already treats as "may or may not have run" and resolves.
//! Until such a failure the cached master is used, whatever the Sentinels say meanwhile:
//! a client still reaching a cut-off old master keeps using it, as a real one does.
//! Subscriptions follow the master too: one made on a master ends when that master is
//! dropped, so the lock code's subscriber wakes its waiters to re-poll and subscribes again
//! on the master resolved next. Without that, a waiter's inbox stays on the old master:
//! a demoted one hears the new master's hand-offs only as late as replication brings them,
//! and a cut-off zombie never does, so every fair hand-off would wait for the waiter's
//! fallback poll.
//! Sentinel failover is asynchronous replication: a lock acknowledged by the old master can
//! be lost in the switch (docs/DESIGN.md §5, scenario 6). `WAIT` narrows that window;
//! nothing closes it.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use redis::{Cmd, Pipeline, RedisError, RedisResult, Value};
use tokio::sync::watch;

use crate::backend::{Backend, BoxFuture, ReplicaWait, Subscription};

/// Response timeout of the master connection: redis-rs' connection-manager default, a
/// backstop only (the lock code applies its own deadlines).
#[cfg_attr(docsrs, doc(cfg(feature = "sentinel")))]
pub const SENTINEL_RESPONSE_TIMEOUT: Duration = Duration::from_millis(500);

/// A master as the Sentinels named it, connected.
pub struct ResolvedMaster {
    /// Where it is, for logs (`host:port`).
    pub address: String,
    /// Its connections: commands, `WAIT` and subscriptions all go to this master.
    pub backend: Arc<dyn Backend>,
}

/// Asks the Sentinels which node is the master and connects to it: the transport half of
/// [`SentinelBackend`], which decides when to ask.
pub trait MasterSource: Send + Sync + 'static {
    /// The service as logs name it (the Sentinels' master name).
    fn service(&self) -> &str;

    /// One resolution: the Sentinels' current answer, connected. It must give up within a
    /// bounded time (Sentinel keeps naming a dead master until its `down-after-milliseconds`
    /// have passed, and every re-resolution meanwhile costs one attempt).
    fn resolve(&self) -> BoxFuture<'_, RedisResult<ResolvedMaster>>;
}

/// The master currently in use.
#[derive(Clone)]
struct Master {
    address: String,
    backend: Arc<dyn Backend>,
    /// Bumped on each resolution, so a stale failure cannot drop a newer master.
    epoch: u64,
    /// Set when this master is dropped: ends the subscriptions made on it.
    dropped: Arc<watch::Sender<bool>>,
}

/// A master found through Sentinels, followed across failovers: a command that fails on
/// the master (no answer, `READONLY` from a demoted one) drops it, and the next command
/// asks the Sentinels again for the master they name now.
///
/// Built by [`ClientBuilder::sentinel`](crate::ClientBuilder::sentinel):
///
/// ```no_run
/// # async fn demo() -> leasehold::Result<()> {
/// let client = leasehold::Client::builder()
///     .sentinel(&["redis://10.0.0.1:26379", "redis://10.0.0.2:26379"], "mymaster")
///     .await?;
/// let guard = client.mutex("orders:42").lock().await?;
/// guard.unlock().await?;
/// # Ok(())
/// # }
/// ```
#[cfg_attr(docsrs, doc(cfg(feature = "sentinel")))]
pub struct SentinelBackend {
    source: Box<dyn MasterSource>,
    current: Mutex<Option<Master>>,
    /// Serialises re-resolutions so a burst of failures asks the Sentinels once.
    resolving: tokio::sync::Mutex<u64>,
}

impl std::fmt::Debug for SentinelBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let master = lock(&self.current).as_ref().map(|m| m.address.clone());
        f.debug_struct("SentinelBackend")
            .field("service", &self.source.service())
            .field("master", &master)
            .finish_non_exhaustive()
    }
}

/// Locks the cache, recovering it from a poisoned lock: it is only ever replaced whole.
fn lock(current: &Mutex<Option<Master>>) -> MutexGuard<'_, Option<Master>> {
    current.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Whether `err` says the master refused a write because it is a replica now.
fn demoted(err: &RedisError) -> bool {
    err.code() == Some("READONLY") || err.to_string().contains("READONLY")
}

impl SentinelBackend {
    /// Follows the master `source` names, resolving it first (the first resolution's
    /// failure is the caller's: a misconfigured service fails at start-up).
    pub async fn with_source(source: impl MasterSource) -> RedisResult<Self> {
        let backend = Self::lazy(source);
        backend.master().await?;
        Ok(backend)
    }

    /// Follows the master `source` names, resolving it at the first command: a failed
    /// resolution fails that command, and the next one asks again.
    pub fn lazy(source: impl MasterSource) -> Self {
        Self {
            source: Box::new(source),
            current: Mutex::new(None),
            resolving: tokio::sync::Mutex::new(0),
        }
    }

    /// The cached master, or a fresh one from the source.
    async fn master(&self) -> RedisResult<Master> {
        if let Some(master) = lock(&self.current).clone() {
            return Ok(master);
        }
        let mut epoch = self.resolving.lock().await;
        if let Some(master) = lock(&self.current).clone() {
            return Ok(master);
        }
        let resolved = self.source.resolve().await?;
        *epoch += 1;
        tracing::info!(
            service = %self.source.service(),
            master = %resolved.address,
            "resolved the master through Sentinel"
        );
        let master = Master {
            address: resolved.address,
            backend: resolved.backend,
            epoch: *epoch,
            dropped: Arc::new(watch::Sender::new(false)),
        };
        *lock(&self.current) = Some(master.clone());
        Ok(master)
    }

    /// Drops the cached master after a failure that may mean it moved; returns the error
    /// as the lock code should see it.
    fn failed(&self, epoch: u64, err: RedisError) -> RedisError {
        let demoted = demoted(&err);
        if !(demoted || err.is_io_error() || err.is_timeout() || err.is_connection_dropped()) {
            return err;
        }
        let mut current = lock(&self.current);
        if let Some(master) = current.take_if(|m| m.epoch == epoch) {
            tracing::warn!(error = %err, "master unreachable or demoted; re-resolving");
            master.dropped.send_replace(true);
        }
        if demoted {
            // The command did not run, but the lock code only needs to know it must
            // retry against the new master: a transport error says exactly that.
            RedisError::from(std::io::Error::new(
                std::io::ErrorKind::ConnectionReset,
                format!("master demoted by a failover: {err}"),
            ))
        } else {
            err
        }
    }
}

impl Backend for SentinelBackend {
    fn query<'a>(&'a self, cmd: &'a Cmd) -> BoxFuture<'a, RedisResult<Value>> {
        Box::pin(async move {
            let master = self.master().await?;
            master
                .backend
                .query(cmd)
                .await
                .map_err(|err| self.failed(master.epoch, err))
        })
    }

    fn query_pipeline<'a>(
        &'a self,
        pipeline: &'a Pipeline,
    ) -> BoxFuture<'a, RedisResult<Vec<Value>>> {
        Box::pin(async move {
            let master = self.master().await?;
            master
                .backend
                .query_pipeline(pipeline)
                .await
                .map_err(|err| self.failed(master.epoch, err))
        })
    }

    fn wait_replicas<'a>(&'a self, wait: &'a ReplicaWait) -> BoxFuture<'a, RedisResult<Value>> {
        Box::pin(async move {
            let master = self.master().await?;
            master
                .backend
                .wait_replicas(wait)
                .await
                .map_err(|err| self.failed(master.epoch, err))
        })
    }

    fn subscribe(&self) -> BoxFuture<'_, RedisResult<Subscription>> {
        Box::pin(async move {
            let master = self.master().await?;
            let subscription = master
                .backend
                .subscribe()
                .await
                .map_err(|err| self.failed(master.epoch, err))?;
            // Ends once this master is dropped (or the backend with it); a master dropped
            // already ends it at once.
            let mut dropped = master.dropped.subscribe();
            let ended = async move {
                // An error means the sender is gone, the master with it: end as well.
                let _ = dropped.wait_for(|dropped| *dropped).await;
            };
            Ok(Subscription {
                control: subscription.control,
                messages: subscription.messages.take_until(ended).boxed(),
            })
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::sync::atomic::{AtomicU64, Ordering};

    use futures::stream;

    use super::*;
    use crate::backend::SubscriptionControl;

    /// A master whose subscriptions never deliver nor end, and whose commands fail with
    /// `failure` (a transport error or an error reply).
    struct FakeMaster {
        failure: fn() -> RedisError,
    }

    struct NoControl;

    impl SubscriptionControl for NoControl {
        fn subscribe<'a>(&'a self, _: &'a str) -> BoxFuture<'a, RedisResult<()>> {
            Box::pin(async { Ok(()) })
        }
        fn unsubscribe<'a>(&'a self, _: &'a str) -> BoxFuture<'a, RedisResult<()>> {
            Box::pin(async { Ok(()) })
        }
    }

    impl Backend for FakeMaster {
        fn query<'a>(&'a self, _: &'a Cmd) -> BoxFuture<'a, RedisResult<Value>> {
            Box::pin(async { Err((self.failure)()) })
        }
        fn query_pipeline<'a>(&'a self, _: &'a Pipeline) -> BoxFuture<'a, RedisResult<Vec<Value>>> {
            Box::pin(async { Err((self.failure)()) })
        }
        fn wait_replicas<'a>(&'a self, _: &'a ReplicaWait) -> BoxFuture<'a, RedisResult<Value>> {
            Box::pin(async { Err((self.failure)()) })
        }
        fn subscribe(&self) -> BoxFuture<'_, RedisResult<Subscription>> {
            Box::pin(async {
                Ok(Subscription {
                    control: Box::new(NoControl),
                    messages: stream::pending().boxed(),
                })
            })
        }
    }

    /// Names a new fake master at each resolution, counting them.
    struct FakeSource {
        failure: fn() -> RedisError,
        resolutions: Arc<AtomicU64>,
    }

    impl MasterSource for FakeSource {
        fn service(&self) -> &str {
            "fake"
        }
        fn resolve(&self) -> BoxFuture<'_, RedisResult<ResolvedMaster>> {
            Box::pin(async {
                let n = self.resolutions.fetch_add(1, Ordering::SeqCst);
                Ok(ResolvedMaster {
                    address: format!("master-{n}"),
                    backend: Arc::new(FakeMaster {
                        failure: self.failure,
                    }),
                })
            })
        }
    }

    fn backend(failure: fn() -> RedisError) -> (SentinelBackend, Arc<AtomicU64>) {
        let resolutions = Arc::new(AtomicU64::new(0));
        let source = FakeSource {
            failure,
            resolutions: Arc::clone(&resolutions),
        };
        (SentinelBackend::lazy(source), resolutions)
    }

    fn connection_lost() -> RedisError {
        std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset").into()
    }

    fn readonly() -> RedisError {
        redis::RedisError::from((
            redis::ErrorKind::Server(redis::ServerErrorKind::ReadOnly),
            "READONLY You can't write against a read only replica.",
        ))
    }

    fn script_error() -> RedisError {
        redis::RedisError::from((redis::ErrorKind::Client, "ERR bad script argument"))
    }

    #[tokio::test(start_paused = true)]
    async fn a_subscription_ends_when_its_master_is_dropped() {
        for failure in [connection_lost as fn() -> RedisError, readonly] {
            let (backend, resolutions) = backend(failure);
            let mut subscription = backend.subscribe().await.unwrap();
            assert!(
                futures::poll!(subscription.messages.next()).is_pending(),
                "a subscription on the master in use lives"
            );
            backend.query(&redis::cmd("PING")).await.unwrap_err();
            // Paused time: the bound passes at once if the stream never ends.
            let next = tokio::time::timeout(Duration::from_secs(60), subscription.messages.next());
            assert!(
                matches!(next.await, Ok(None)),
                "the master was dropped, so its subscription ended"
            );
            // The next subscription goes to the master resolved next.
            let mut again = backend.subscribe().await.unwrap();
            assert_eq!(resolutions.load(Ordering::SeqCst), 2);
            assert!(futures::poll!(again.messages.next()).is_pending());
        }
    }

    #[tokio::test]
    async fn an_error_reply_keeps_the_master_and_its_subscription() {
        let (backend, resolutions) = backend(script_error);
        let mut subscription = backend.subscribe().await.unwrap();
        backend.query(&redis::cmd("PING")).await.unwrap_err();
        assert!(
            futures::poll!(subscription.messages.next()).is_pending(),
            "an error reply says nothing of where the master is"
        );
        assert_eq!(resolutions.load(Ordering::SeqCst), 1);
    }
}
