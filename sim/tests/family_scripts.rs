//! Every script of the catalogue runs on the model through the production client: a mutex,
//! a read-write lock (readers, writer, writer preference, downgrade) and a semaphore, each
//! against the simulated node, with the replies Redis 7 would give.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasehold::{Client, Error};
use leasehold_sim::model::resp::Reply;
use leasehold_sim::world::net::{NetConfig, Target};
use leasehold_sim::world::process::ProcessCtx;
use leasehold_sim::world::{NodeSpec, ProcessMain, World, WorldConfig};

type Log = Arc<Mutex<Vec<String>>>;

fn note(log: &Log, what: &str, ok: bool) {
    log.lock().unwrap().push(format!("{what}: {ok}"));
}

async fn exercise(ctx: ProcessCtx, log: Log) {
    let client = Client::builder()
        .backend(ctx.backends[0].clone())
        .runtime(ctx.runtime.clone())
        .ttl(Duration::from_secs(1))
        .build()
        .unwrap();
    // Mutex: acquire, renew, release.
    let guard = client.mutex("m").lock().await.unwrap();
    note(&log, "mutex extend", guard.extend().await.is_ok());
    note(&log, "mutex unlock", guard.unlock().await.is_ok());

    // RwLock: two readers share, a writer is refused meanwhile, then takes it, downgrades.
    let rw = client.rwlock("rw");
    let r1 = rw.read().await.unwrap();
    let r2 = client.rwlock("rw").read().await.unwrap();
    note(&log, "read extend", r1.extend().await.is_ok());
    let other = Client::builder()
        .backend(ctx.backends[0].clone())
        .runtime(ctx.runtime.clone())
        .build()
        .unwrap();
    note(
        &log,
        "writer blocked by readers",
        matches!(
            other.rwlock("rw").try_write().await,
            Err(Error::WouldBlock { .. })
        ),
    );
    note(&log, "read unlock", r1.unlock().await.is_ok());
    note(&log, "read unlock", r2.unlock().await.is_ok());
    let w = other.rwlock("rw").write().await.unwrap();
    note(&log, "write token", w.fencing_token().get() > 0);
    note(&log, "write extend", w.extend().await.is_ok());
    note(
        &log,
        "reader blocked by writer",
        matches!(rw.try_read().await, Err(Error::WouldBlock { .. })),
    );
    let r = w.downgrade().await.unwrap();
    note(&log, "downgraded unlock", r.unlock().await.is_ok());

    // Semaphore: two permits, a third is refused, a release lets it in.
    let sem = client.semaphore("s", 2);
    let p1 = sem.acquire().await.unwrap();
    let p2 = sem.acquire().await.unwrap();
    note(
        &log,
        "third permit refused",
        matches!(sem.try_acquire().await, Err(Error::WouldBlock { .. })),
    );
    note(&log, "permit extend", p1.extend().await.is_ok());
    note(&log, "permit release", p1.release().await.is_ok());
    let p3 = sem.acquire().await.unwrap();
    note(&log, "permit release", p2.release().await.is_ok());
    note(&log, "permit release", p3.release().await.is_ok());
    note(&log, "done", true);
}

#[test]
fn every_lock_family_member_runs_on_the_model() {
    let mut world = World::new(WorldConfig {
        seed: 7,
        nodes: vec![NodeSpec::default()],
        targets: vec![Target::Node(0)],
        groups: Vec::new(),
        net: NetConfig::default(),
        faults: Vec::new(),
        trace: false,
        server_clock: Default::default(),
    })
    .unwrap();
    let log: Log = Arc::default();
    let for_main = Arc::clone(&log);
    let main: ProcessMain = Arc::new(move |ctx| Box::pin(exercise(ctx, Arc::clone(&for_main))));
    world.add_process(Duration::ZERO, main);
    world.run(Duration::from_secs(20));
    let log = log.lock().unwrap().clone();
    assert_eq!(
        log.last().map(String::as_str),
        Some("done: true"),
        "{log:?}"
    );
    assert!(log.iter().all(|l| l.ends_with("true")), "{log:?}");
    // The probes run only after an ambiguous reply; ask them about a hold that does not
    // exist (their KEYS per their headers) and expect a clean "no".
    let scripts = leasehold::script::scripts();
    for (script, keys) in [
        (&scripts.probe, &["{p}", "{p}:fence"][..]),
        (&scripts.rw_read_probe, &["{p}:readers", "{p}:fence"][..]),
        (&scripts.semaphore_probe, &["{p}:permits"][..]),
    ] {
        let numkeys = keys.len().to_string();
        let mut args = vec!["EVAL", script.source(), numkeys.as_str()];
        args.extend_from_slice(keys);
        args.push("no-such-hold");
        let reply = world.direct(0, &args).unwrap();
        assert!(
            matches!(&reply, Reply::Array(items) if items.first() == Some(&Reply::Int(0))),
            "{}: {reply:?}",
            script.name()
        );
    }
    // Every script of the catalogue ran (each is cached on the node after its first EVAL).
    for script in scripts.all() {
        assert_eq!(
            world.direct(0, &["SCRIPT", "EXISTS", script.sha()]),
            Some(Reply::Array(vec![Reply::Int(1)])),
            "{} never ran on the model",
            script.name()
        );
    }
}
