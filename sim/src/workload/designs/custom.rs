//! The client of a design described by a file ([`super::file::DesignFile`]): it sends the
//! file's calls with their templates filled in, reads each reply by the file's rule,
//! renews as the file says, and waits as it says.
//!
//! Invariant: the client does only what the file describes; its beliefs follow the
//! design's rules as for the built-in designs (held from the granted acquire until the
//! release is sent, or until a refused renewal when the file says the holder watches its
//! renewals), and it claims for the oracle exactly the hold the file says the server
//! keeps.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::channel::oneshot;
use futures::future::{Either, select};
use leasehold::backend::Backend;
use leasehold::runtime::Runtime;
use redis::{Cmd, RedisResult, Value};

use super::file::{Believe, Call, DesignFile, Reply, Values, WaitStrategy, fill};
use super::wake::Wake;
use super::{
    Attempt, Grant, Lease, ONE_PERMIT, int, is_ok, lock_key, millis, owner, spawn_renewals, token,
};
use crate::world::truth::{Claim, Member};

/// A file design's client for one process incarnation.
pub(super) struct Custom {
    design: Arc<DesignFile>,
    backend: Arc<dyn Backend>,
    ttl: Duration,
    owner: String,
    pub(super) rt: Runtime,
    wake: Wake,
    /// The current hold's renewals: set to stop them.
    stop: Option<Arc<AtomicBool>>,
    /// Fires when a renewal of the current hold is refused and the design watches its
    /// renewals.
    lost: Option<oneshot::Receiver<()>>,
}

/// The command `call` makes with `values`.
fn command(call: &Call, values: &Values<'_>) -> Cmd {
    if let Some(words) = &call.command {
        let mut words = words.iter().map(|w| fill(w, values));
        let mut cmd = redis::cmd(&words.next().unwrap_or_default());
        for word in words {
            cmd.arg(word);
        }
        return cmd;
    }
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(call.source.as_deref().unwrap_or_default())
        .arg(call.keys.len());
    for word in call.keys.iter().chain(&call.args) {
        cmd.arg(fill(word, values));
    }
    cmd
}

/// Whether `reply` reads as `rule` says success does.
fn reads_as(rule: Reply, reply: &RedisResult<Value>) -> bool {
    match rule {
        Reply::Ok => is_ok(reply),
        Reply::Nil => matches!(reply, Ok(Value::Nil)),
        Reply::One => int(reply) == Some(1),
        Reply::Nonzero => int(reply).is_some_and(|n| n != 0),
    }
}

impl Custom {
    /// The client of `design` on `backend` (`None` never: the option is the builder's).
    pub(super) fn new(
        design: Arc<DesignFile>,
        lease: Lease,
        rt: &Runtime,
        backend: &Arc<dyn Backend>,
    ) -> Option<Self> {
        Some(Self {
            design,
            backend: Arc::clone(backend),
            ttl: lease.ttl,
            owner: owner(rt),
            rt: rt.clone(),
            wake: Wake::default(),
            stop: None,
            lost: None,
        })
    }

    fn values<'a>(&'a self, key: &'a str, name: &'a str, token: &'a str) -> Values<'a> {
        Values {
            key,
            name,
            token,
            owner: &self.owner,
            ttl_ms: millis(self.ttl),
            now_ms: millis(self.rt.clock.now()),
        }
    }

    pub(super) async fn attempt(&mut self, name: &str) -> Attempt {
        let key = lock_key(name);
        if let Some(channel) = self.wake_channel(name) {
            self.wake.listen(&self.backend, channel).await;
        }
        let token = String::from_utf8(token(&self.rt)).unwrap_or_default();
        let call = &self.design.acquire;
        let sent = self.rt.clock.now();
        let reply = self
            .backend
            .query(&command(call, &self.values(&key, name, &token)))
            .await;
        if !reads_as(call.granted, &reply) {
            let wait = int(&reply)
                .filter(|_| call.busy_reply_is_wait)
                .and_then(|ms| u64::try_from(ms).ok())
                .map(Duration::from_millis);
            return Attempt::Busy(wait);
        }
        let values = self.values(&key, name, &token);
        let member = match (&self.design.hold.value, &self.design.hold.field) {
            (Some(value), _) => Member::Value(fill(value, &values).into_bytes()),
            (None, Some(field)) => Member::Field(fill(field, &values).into_bytes()),
            (None, None) => Member::Value(token.clone().into_bytes()),
        };
        self.start_renewals(key.clone(), name, &token);
        Attempt::Granted(Grant {
            claim: Claim {
                key: key.into_bytes(),
                members: vec![(0, member)],
                quorum: 1,
            },
            access: ONE_PERMIT,
            valid_until: (self.design.hold.believe == Believe::WithinLease)
                .then(|| sent + self.ttl),
            value: token.into_bytes(),
        })
    }

    /// Holds for `hold` of the client's time; `false` when a refused renewal ended the
    /// belief first (a design that watches its renewals).
    pub(super) async fn hold(&mut self, hold: Duration) -> bool {
        let sleep = self.rt.clock.sleep(hold);
        match self.lost.take() {
            Some(lost) => match select(sleep, lost).await {
                Either::Left(_) => true,
                // A dropped sender (renewals stopped without a refusal) is no loss.
                Either::Right((fired, sleep)) => {
                    if fired.is_ok() {
                        return false;
                    }
                    sleep.await;
                    true
                }
            },
            None => {
                sleep.await;
                true
            }
        }
    }

    /// Renews the hold as the file says, until its release or a refused renewal (which
    /// ends the belief when the file says the holder watches its renewals).
    fn start_renewals(&mut self, key: String, name: &str, token: &str) {
        let Some(renew) = &self.design.renew else {
            return;
        };
        let (refused, lost) = oneshot::channel();
        let refused = renew.lost_when_refused.then(|| {
            self.lost = Some(lost);
            refused
        });
        let every = self.ttl / renew.divide_ttl_by.max(1);
        let (backend, clock) = (Arc::clone(&self.backend), Arc::clone(&self.rt.clock));
        let call = renew.call.clone();
        let (name, token, owner, ttl_ms) = (
            name.to_owned(),
            token.to_owned(),
            self.owner.clone(),
            millis(self.ttl),
        );
        let renew = move || {
            let values = Values {
                key: &key,
                name: &name,
                token: &token,
                owner: &owner,
                ttl_ms,
                now_ms: millis(clock.now()),
            };
            let (backend, cmd, granted) =
                (Arc::clone(&backend), command(&call, &values), call.granted);
            // Held on, unless the server answered and its answer is not the grant's: an
            // error or no answer says nothing, and the next renewal asks again.
            async move {
                let reply = backend.query(&cmd).await;
                reads_as(granted, &reply) || reply.is_err()
            }
        };
        let refused = move || {
            if let Some(refused) = refused {
                let _ = refused.send(());
            }
        };
        self.stop = Some(spawn_renewals(&self.rt, every, renew, refused));
    }

    /// The channel a pub/sub design's release publishes on for lock `name`.
    fn wake_channel(&self, name: &str) -> Option<String> {
        match (&self.design.wait.strategy, &self.design.wait.channel) {
            (WaitStrategy::Pubsub, Some(channel)) => {
                let key = lock_key(name);
                Some(fill(channel, &self.values(&key, name, "")))
            }
            _ => None,
        }
    }

    /// Waits as the design says: a jittered backoff, or a message on its channel.
    pub(super) async fn wait(&mut self, name: &str, hint: Option<Duration>, retry: u32) {
        let spin = self.rt.jitter(leasehold::Backoff::SPIN.ceiling(retry));
        let nap = hint.unwrap_or(spin);
        let Some(channel) = self.wake_channel(name) else {
            self.rt.clock.sleep(nap).await;
            return;
        };
        let nap = hint.unwrap_or(leasehold::Backoff::SPIN.max);
        self.wake
            .wait(&self.backend, &self.rt.clock, channel, nap)
            .await;
    }

    pub(super) async fn release(&mut self, name: &str, grant: Grant) {
        if let Some(stop) = self.stop.take() {
            stop.store(true, Ordering::SeqCst);
        }
        self.lost = None;
        let key = lock_key(name);
        let token = String::from_utf8(grant.value).unwrap_or_default();
        let _ = self
            .backend
            .query(&command(
                &self.design.release,
                &self.values(&key, name, &token),
            ))
            .await;
    }
}
