//! Spin: re-poll after a jittered exponential backoff capped by the holder's remaining lease.
//!
//! Invariant: the delay never exceeds the holder's reported PTTL (no sleeping past a
//! release-by-expiry) nor the acquire deadline; the deadline itself is never capped.

use std::time::Duration;

use super::{WaitContext, sleep_within};
use crate::backoff::{Backoff, Retry};
use crate::runtime::Runtime;

pub(crate) struct SpinWait {
    retry: Retry,
    runtime: Runtime,
}

impl SpinWait {
    pub(crate) fn new(backoff: Backoff, context: WaitContext) -> Self {
        Self {
            retry: Retry::new(backoff),
            runtime: context.runtime,
        }
    }

    pub(crate) async fn wait(&mut self, busy: Option<Duration>, budget: Option<Duration>) {
        let delay = self.retry.next_delay(&self.runtime, busy);
        sleep_within(&self.runtime, delay, budget).await;
    }
}
