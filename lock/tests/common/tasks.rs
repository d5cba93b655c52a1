//! Spawned contenders: waiting for all of them, and what their holds collected.

use tokio::task::JoinHandle;

/// Awaits every task in order and returns their outputs; a task that panicked fails the test.
pub async fn join_all<T>(tasks: Vec<JoinHandle<T>>) -> Vec<T> {
    let mut outputs = Vec::with_capacity(tasks.len());
    for task in tasks {
        outputs.push(task.await.unwrap());
    }
    outputs
}

/// Awaits tasks that each return the fencing tokens of their holds, and counts the distinct
/// tokens among all of them: one per holding epoch when no epoch was shared.
pub async fn distinct_tokens<T: Ord>(tasks: Vec<JoinHandle<Vec<T>>>) -> usize {
    let mut tokens: Vec<T> = join_all(tasks).await.into_iter().flatten().collect();
    tokens.sort();
    tokens.dedup();
    tokens.len()
}
