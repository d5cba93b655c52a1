//! Faults aimed at one try's holder: a pause inside the worker (holder-pause), a SIGSTOP
//! of the worker's own process (holder-freeze), a cut of only the holder's connections
//! (holder-partition). Each acts on its try alone, so the tries of a cell are hit side by
//! side.
//!
//! Invariant: a hit lands only when the try's holder was seen holding (or paused while
//! holding) when the fault struck; only the holder is marked impaired.

use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::safety::fault_aim::{HOLDER_WAIT, impair, wait_for_holder};
use crate::safety::fault_target::{Hit, Injector, TryView};
use crate::safety::worker_process;

/// How long a line already in a frozen worker's pipe may take to reach the board.
const PIPE_DRAIN: Duration = Duration::from_millis(20);

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

/// SIGSTOPs worker c0's process while it holds, checks the kernel reports it stopped,
/// and continues it after `pause`. The board learns of holds through the worker's pipe, so
/// c0 may have released just before the signal: then it is continued at once and stopped
/// again at its next hold (until [`HOLDER_WAIT`] runs out), and the note counts the stops.
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
    let deadline = Instant::now() + HOLDER_WAIT;
    let mut stops = 0u32;
    let (start, stopped, held) = loop {
        while t.board.holder() != Some(0) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let start = t.history.now_ns();
        worker_process::signal(pid, "STOP").await?;
        stops += 1;
        tokio::time::sleep(PIPE_DRAIN).await;
        let stopped = worker_process::is_stopped(pid).await;
        let held = t.board.holder() == Some(0);
        if (stopped && held) || Instant::now() >= deadline {
            break (start, stopped, held);
        }
        worker_process::signal(pid, "CONT").await?;
    };
    impair(
        t.history,
        [0],
        start + inj.ttl_ns() + pause.as_nanos() as u64,
    );
    tokio::time::sleep(pause.saturating_sub(PIPE_DRAIN)).await;
    worker_process::signal(pid, "CONT").await?;
    Ok(Hit {
        start,
        note: match stops {
            1 => format!("SIGSTOP of c0's process for {} ms", pause.as_millis()),
            n => format!(
                "SIGSTOP of c0's process for {} ms ({} earlier stops found c0 between holds and were continued at once)",
                pause.as_millis(),
                n - 1
            ),
        },
        landed: stopped && held,
        evidence: format!(
            "kernel state {}; c0 {} when stopped",
            if stopped {
                "stopped (T)"
            } else {
                "NOT stopped"
            },
            if held { "held" } else { "did NOT hold" }
        ),
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
