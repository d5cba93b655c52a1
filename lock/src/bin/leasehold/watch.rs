//! `leasehold watch NAME`: `inspect` again and again, to follow hand-offs and expiries live.
//!
//! One connection for the whole session (re-resolved only by restarting the command); each
//! round is one `MULTI` read, so watching a busy lock costs the server next to nothing.

use std::time::Duration;

use crate::error::CliResult;
use crate::inspect::render;
use crate::layout::Layout;
use crate::target::TargetArgs;

/// Runs `watch`: prints the lock's state every `interval`, `times` times or until Ctrl-C.
pub async fn run(
    target: &TargetArgs,
    name: &str,
    interval: Duration,
    times: Option<u64>,
) -> CliResult<()> {
    let layout = Layout::new(name)?;
    let mut server = target.server_for(&layout.mutex.lock).await?;
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    let mut round: u64 = 0;
    while times.is_none_or(|times| round < times) {
        tokio::select! {
            _ = ticker.tick() => {}
            interrupted = &mut ctrl_c => {
                interrupted?;
                break;
            }
        }
        round += 1;
        let snapshot = server.state(name).await?;
        println!("--- watch round {round}");
        print!("{}", render(&layout, &snapshot, &server.url));
    }
    Ok(())
}
