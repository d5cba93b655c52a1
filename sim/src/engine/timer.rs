//! Timers on virtual time: what a queued timer event shares with the task sleeping on it.
//!
//! The type sits below both the executor (which arms timers) and the event queue in
//! [`crate::world::net`] (which carries them), so neither module needs the other.
//!
//! Invariant: once fired a timer stays fired, so a sleeper polled after the fire (or
//! registering its waker concurrently with it) completes instead of waiting forever.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};

/// A timer's shared state: set when its deadline passes.
#[derive(Debug, Default)]
pub struct TimerState {
    fired: AtomicBool,
    waker: Mutex<Option<Waker>>,
}

impl TimerState {
    /// Marks the timer fired and wakes its task.
    pub fn fire(&self) {
        self.fired.store(true, Ordering::SeqCst);
        let waker = self
            .waker
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

/// A future that completes when its timer fires.
#[derive(Debug)]
pub struct Sleep(pub Arc<TimerState>);

impl Future for Sleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0.fired.load(Ordering::SeqCst) {
            return Poll::Ready(());
        }
        *self.0.waker.lock().unwrap_or_else(PoisonError::into_inner) = Some(cx.waker().clone());
        if self.0.fired.load(Ordering::SeqCst) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}
