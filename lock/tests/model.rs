//! Property test: random sequences of try_lock / re-enter / unlock / extend by a few owners
//! on two clients, checked step by step against a reference model of a reentrant mutex
//! and against the server's hold count.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use leasehold::{Client, Error, Guard, LockKeys};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

/// Owners: (client index, chosen owner id). Owners 0 and 2 share an id on different
/// clients, so they must not re-enter each other.
const OWNERS: [(usize, &str); 3] = [(0, "o0"), (0, "o1"), (1, "o0")];

#[derive(Debug, Clone)]
enum Op {
    TryLock(usize),
    Reenter(usize),
    Unlock(usize),
    Extend(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..OWNERS.len()).prop_map(Op::TryLock),
        any::<usize>().prop_map(Op::Reenter),
        any::<usize>().prop_map(Op::Unlock),
        any::<usize>().prop_map(Op::Extend),
    ]
}

/// The reference: who holds the lock and how many holds it has.
#[derive(Debug, Default)]
struct Model {
    holder: Option<(usize, u64)>,
}

async fn run_case(
    node: &leasehold_harness::SingleNode,
    clients: &[Client],
    name: &str,
    ops: Vec<Op>,
) -> Result<(), TestCaseError> {
    let keys = LockKeys::new(name).unwrap();
    let mutexes: Vec<_> = OWNERS
        .iter()
        .map(|(c, id)| {
            clients[*c]
                .mutex(name)
                .owner(*id)
                .ttl(Duration::from_secs(30))
                .watchdog(false)
        })
        .collect();
    let mut model = Model::default();
    let mut guards: Vec<(usize, Guard)> = Vec::new();
    for op in ops {
        match op {
            Op::TryLock(owner) => {
                let result = mutexes[owner].try_lock().await;
                match model.holder {
                    Some((h, n)) if h == owner => {
                        guards.push((owner, result.unwrap()));
                        model.holder = Some((h, n + 1));
                    }
                    Some(_) => prop_assert!(
                        matches!(result, Err(Error::WouldBlock { .. })),
                        "{:?}",
                        result
                    ),
                    None => {
                        guards.push((owner, result.unwrap()));
                        model.holder = Some((owner, 1));
                    }
                }
            }
            Op::Reenter(i) if !guards.is_empty() => {
                let (owner, guard) = &guards[i % guards.len()];
                let owner = *owner;
                let again = guard.reenter().await.unwrap();
                prop_assert_eq!(again.fencing_token(), guard.fencing_token());
                guards.push((owner, again));
                let (h, n) = model.holder.unwrap();
                prop_assert_eq!(h, owner);
                model.holder = Some((h, n + 1));
            }
            Op::Unlock(i) if !guards.is_empty() => {
                let (_, guard) = guards.remove(i % guards.len());
                guard.unlock().await.unwrap();
                let (h, n) = model.holder.unwrap();
                model.holder = (n > 1).then_some((h, n - 1));
            }
            Op::Extend(i) if !guards.is_empty() => {
                guards[i % guards.len()].1.extend().await.unwrap();
            }
            Op::Reenter(_) | Op::Unlock(_) | Op::Extend(_) => {}
        }
        // The server agrees with the model.
        let count: Option<u64> = match &model.holder {
            Some((h, _)) => {
                let owner = guards.iter().find(|(o, _)| o == h).unwrap().1.owner();
                common::hold_count(node, &keys, owner.as_str()).await
            }
            None => None,
        };
        prop_assert_eq!(count, model.holder.map(|(_, n)| n));
        prop_assert_eq!(
            common::exists(node, &keys.lock).await,
            model.holder.is_some()
        );
    }
    for (_, guard) in guards {
        guard.unlock().await.unwrap();
    }
    prop_assert!(!common::exists(node, &keys.lock).await);
    Ok(())
}

#[test]
fn random_operation_sequences_match_the_model() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (node, clients) = runtime.block_on(async {
        let node = common::node().await;
        let clients = vec![common::client(&node).await, common::client(&node).await];
        (node, clients)
    });
    let mut runner = TestRunner::new(Config {
        cases: 40,
        ..Config::default()
    });
    let case = AtomicU32::new(0);
    runner
        .run(&proptest::collection::vec(op(), 1..30), |ops| {
            let name = format!("model-{}", case.fetch_add(1, Ordering::Relaxed));
            runtime.block_on(run_case(&node, &clients, &name, ops))
        })
        .unwrap();
    // The container is removed on drop, which needs the runtime.
    runtime.block_on(async move { drop((clients, node)) });
}
