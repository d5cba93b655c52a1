//! Faults aimed at one try's holder: a pause inside the worker (holder-pause), a SIGSTOP
//! of the worker's own process at a hold (holder-freeze), a cut of only the holder's connections
//! (holder-partition). Each acts on its try alone, so the tries of a cell are hit side by
//! side.
//!
//! Invariant: a hit lands only when the try's holder was seen holding (or paused while
//! holding) when the fault struck; only the holder is marked impaired.

use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::safety::fault_aim::{HOLDER_WAIT, impair, wait_for_holder};
use crate::safety::fault_target::{Hit, Injector, TryView};
use crate::safety::process_signal;

/// How long a worker that announced its freeze may take to stop: it spawns `kill`, which on
/// a loaded 2-core machine takes a few ms; far longer means the stop failed.
const STOP_WAIT: Duration = Duration::from_secs(1);

/// The pausing worker stops on its own at its first hold after the fault point; this
/// only waits (bounded) for that and for the pause to pass.
pub(super) async fn holder_pause(t: &TryView<'_>, pause: Duration) -> Hit {
    let start = t.history.now_ns();
    let deadline = Instant::now() + HOLDER_WAIT + pause;
    while !t.board.paused() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let landed = t.board.paused();
    if landed {
        tokio::time::sleep(pause).await;
    }
    Hit {
        start,
        note: format!("c0 stopped in process for {} ms", pause.as_millis()),
        landed,
        evidence: if landed {
            "c0 stopped while holding".to_owned()
        } else {
            "c0 never held after the fault point".to_owned()
        },
    }
}

/// Worker c0's process stops itself (SIGSTOP) at its first hold after the fault point and
/// says so on the board first (see [`process_signal`] for why from inside); this waits,
/// bounded, for that word, checks that the kernel reports the process stopped, and continues
/// it after `pause`.
pub(super) async fn holder_freeze(
    inj: &Injector<'_>,
    t: &TryView<'_>,
    pause: Duration,
) -> Result<Hit> {
    let Some(pid) = t.process else {
        return Err(Error::Lock {
            name: "(safety)".to_owned(),
            reason: "holder-freeze needs c0 in its own process".to_owned(),
        });
    };
    let deadline = Instant::now() + HOLDER_WAIT + pause;
    while !t.board.paused() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let start = t.history.now_ns();
    let announced = t.board.paused();
    let mut stopped = false;
    if announced {
        let stop_deadline = Instant::now() + STOP_WAIT;
        loop {
            stopped = process_signal::is_stopped(pid).await;
            if stopped || Instant::now() >= stop_deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    let held = t.board.holder() == Some(0);
    impair(
        t.history,
        [0],
        start + inj.ttl_ns() + pause.as_nanos() as u64,
    );
    if stopped {
        tokio::time::sleep(pause).await;
    }
    // Continued whatever was seen: a stop that lands after the bound must not outlive the try.
    process_signal::signal(pid, "CONT").await?;
    Ok(Hit {
        start,
        note: format!(
            "SIGSTOP of c0's process by itself for {} ms",
            pause.as_millis()
        ),
        landed: stopped && held,
        evidence: if announced {
            format!(
                "kernel state {}; c0 {} when stopped",
                if stopped {
                    "stopped (T)"
                } else {
                    "NOT stopped"
                },
                if held { "held" } else { "did NOT hold" }
            )
        } else {
            "c0 never held after the fault point".to_owned()
        },
    })
}

/// Cuts only the holder's link; only the holder is impaired.
pub(super) async fn holder_partition(inj: &Injector<'_>, t: &TryView<'_>, length: Duration) -> Hit {
    let holder = wait_for_holder(t.board).await;
    let start = t.history.now_ns();
    let target = holder.unwrap_or(0);
    impair(
        t.history,
        [target],
        start + inj.ttl_ns() + length.as_nanos() as u64,
    );
    let link = t.links.get(target);
    if let Some(link) = link {
        link.cut();
    }
    let held = t.board.holder() == Some(target) && holder.is_some();
    tokio::time::sleep(length).await;
    if let Some(link) = link {
        link.restore();
    }
    Hit {
        start,
        note: format!("c{target}'s links cut for {} ms", length.as_millis()),
        landed: held && link.is_some(),
        evidence: if held {
            format!("c{target} held when cut")
        } else {
            format!("c{target} did not hold when cut")
        },
    }
}
