//! `leasehold release --force NAME`: delete a stuck lock's state, for when its holder is
//! known dead and waiting out the lease is not an option.
//!
//! Invariant: the fence key is never deleted. The next holder's token is
//! `max(last + 1, server time in µs)`, so keeping the last token guarantees that the new
//! holder's token is higher than the forcibly evicted holder's, and a resource that rejects
//! stale tokens still refuses that holder's late writes should it turn out to be alive.
//!
//! The delete runs under `WATCH` and only if the lock still has the holders and waiters the
//! operator confirmed (lease renewals alone do not count as a change); otherwise nothing is
//! removed. After the delete, `released` is published so waiting clients retry at once.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};

use leasehold::inspect::{Holding, LockState as Snapshot, Waiter};

use crate::error::{CliError, CliResult};
use crate::inspect::render;
use crate::layout::{Family, Layout};
use crate::target::{Server, TargetArgs};

/// Attempts at the `WATCH`ed delete before giving up: each is lost only to a concurrent
/// write on the lock (typically a lease renewal), so a few suffice even on a busy lock.
const DELETE_ATTEMPTS: u32 = 5;

/// Message that wakes waiters subscribed to a lock's `released` channel.
const RELEASED_MESSAGE: &str = "released";

/// Runs `release --force`: shows, confirms (unless `yes`), deletes, reports.
pub async fn run(target: &TargetArgs, name: &str, kind: Family, yes: bool) -> CliResult<()> {
    let layout = Layout::new(name)?;
    let mut server = target.server_for(&layout.mutex.lock).await?;
    let shown = server.state(&layout.name).await?;
    let keys = layout.state_keys(kind);
    let present = existing(&mut server, &keys).await?;
    print!("{}", render(&layout, &shown, &server.url));
    if present.is_empty() {
        println!("nothing to remove: the {kind:?} of {name:?} has no keys");
        return Ok(());
    }
    println!("will remove:");
    for key in &present {
        println!("  {key}");
    }
    println!("will keep: the fence key (fencing tokens keep growing)");
    let confirmed = if yes {
        None
    } else {
        if !confirm(&format!("remove {} key(s) of {name:?}?", present.len())).await? {
            println!("nothing removed");
            return Ok(());
        }
        Some(identity(kind, &shown))
    };

    for _ in 0..DELETE_ATTEMPTS {
        if let Some(removed) = try_delete(&mut server, &layout, kind, confirmed.as_ref()).await? {
            if removed.is_empty() {
                println!("nothing removed: the lock was released meanwhile");
            } else {
                println!("removed:");
                for key in &removed {
                    println!("  {key}");
                }
            }
            return Ok(());
        }
    }
    Err(CliError::Changed {
        name: name.to_owned(),
    })
}

/// One `WATCH`/`MULTI` attempt: `None` if a concurrent write aborted it, else the removed
/// keys. Fails with [`CliError::Changed`] if the holders or waiters are not the confirmed.
async fn try_delete(
    server: &mut Server,
    layout: &Layout,
    kind: Family,
    confirmed: Option<&Vec<String>>,
) -> CliResult<Option<Vec<String>>> {
    let keys = layout.state_keys(kind);
    server
        .query::<()>(redis::cmd("WATCH").arg(&keys), "WATCH")
        .await?;
    let now = server.state_watched(&layout.name).await?;
    if confirmed.is_some_and(|confirmed| *confirmed != identity(kind, &now)) {
        server
            .query::<()>(&redis::cmd("UNWATCH"), "UNWATCH")
            .await?;
        return Err(CliError::Changed {
            name: layout.name.clone(),
        });
    }
    let present = existing(server, &keys).await?;
    if present.is_empty() {
        server
            .query::<()>(&redis::cmd("UNWATCH"), "UNWATCH")
            .await?;
        return Ok(Some(present));
    }
    let mut pipe = redis::pipe();
    pipe.atomic()
        .del(&present)
        .ignore()
        .publish(layout.released(kind), RELEASED_MESSAGE)
        .ignore();
    let applied: Option<()> = pipe
        .query_async(&mut server.connection)
        .await
        .map_err(|err| server.failed("deleting the lock's keys", err))?;
    Ok(applied.map(|()| present))
}

/// Which of `keys` exist.
async fn existing(server: &mut Server, keys: &[String]) -> CliResult<Vec<String>> {
    let mut pipe = redis::pipe();
    for key in keys {
        pipe.exists(key);
    }
    let found: Vec<bool> = pipe
        .query_async(&mut server.connection)
        .await
        .map_err(|err| server.failed("EXISTS", err))?;
    Ok(keys
        .iter()
        .zip(found)
        .filter(|(_, found)| *found)
        .map(|(key, _)| key.clone())
        .collect())
}

/// Who holds and who waits in `kind`, ignoring lease and entry deadlines (renewals move
/// those without changing who is there).
fn identity(kind: Family, snapshot: &Snapshot) -> Vec<String> {
    fn ids<'a>(entries: impl IntoIterator<Item = &'a Waiter>) -> Vec<String> {
        let mut ids: Vec<String> = entries.into_iter().map(|e| e.hold.clone()).collect();
        ids.sort();
        ids
    }
    fn map(owners: &BTreeMap<String, String>) -> String {
        format!("{owners:?}")
    }
    fn holders(holding: &Holding) -> String {
        match holding {
            Holding::Held(holders) => {
                let holders: Vec<_> = holders
                    .iter()
                    .map(|h| (&h.owner, h.count, ids(&h.holds)))
                    .collect();
                format!("{holders:?}")
            }
            other => format!("{other:?}"),
        }
    }
    match kind {
        Family::Mutex => {
            let mut facts = vec![holders(&snapshot.mutex.holding)];
            facts.extend(snapshot.mutex.queue.iter().map(|w| w.hold.clone()));
            facts
        }
        Family::Rwlock => {
            let rw = &snapshot.rw;
            let mut facts = vec![holders(&rw.writer), map(&rw.owners)];
            facts.extend(ids(&rw.readers));
            facts.push(String::new());
            facts.extend(ids(&rw.intents));
            facts.push(String::new());
            facts.extend(ids(&rw.queue));
            facts
        }
        Family::Semaphore => {
            let sem = &snapshot.sem;
            let mut facts = ids(&sem.permits);
            facts.push(String::new());
            facts.extend(sem.queue.iter().map(|w| w.hold.clone()));
            facts
        }
    }
}

/// Asks `question` on stdout and reads y/N from stdin (anything but y/yes is no).
async fn confirm(question: &str) -> CliResult<bool> {
    print!("{question} [y/N] ");
    std::io::stdout().flush()?;
    // Blocking stdin read off the runtime, so the connection's driver keeps running.
    let answer = tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line).map(|_| line)
    })
    .await
    .map_err(|err| CliError::Io(std::io::Error::other(err)))??;
    let answer = answer.trim().to_ascii_lowercase();
    Ok(answer == "y" || answer == "yes")
}
