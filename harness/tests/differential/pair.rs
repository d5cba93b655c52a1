//! Differential test on a master with one replica: the simulator's world (its own
//! replication, acknowledgements and per-connection `WAIT`, driven through
//! `World::call`) against a real master and replica in containers, over two client
//! connections to the master.
//!
//! Steps: the lock scripts and plain commands on either connection, `WAIT 1 <t>`,
//! `WAIT 1 0` and `WAIT 0 0` on either, freezes of the replica (`docker pause`) with steps
//! inside, and pauses. After every step, the reply must agree (a `WAIT`'s replica count
//! included); once the replica runs, every connection with an unacknowledged write is
//! settled with `WAIT 1` (which must answer 1 on both sides) and the replica's whole
//! keyspace must agree with the model replica's.
//!
//! What it pins: Redis's `WAIT` waits for the offset of the connection's own last write
//! (`client->woff`), so while the replica is frozen, a connection that wrote meanwhile
//! times out with 0 while the other one, acknowledged, answers 1 at once. A model that
//! waited for the master's global offset fails here (the "distinguishing" count).
//!
//! Redis before 7.2 (the default image's 7.0.15) sets `client->woff` to the master's offset
//! after every command, reads included, and that offset counts the `REPLCONF GETACK` a
//! blocked `WAIT` sent, which the replica acknowledges only with its next once-a-second
//! `ACK`: there, a `WAIT` that may time out (or `WAIT 0 0`) answers by the replica's clock,
//! not by the steps. On such a server ([`WoffRule::EveryCommand`]) only `WAIT 1 0` (and the
//! settling `WAIT`s) and, while the replica is frozen, the `WAIT`s of a connection that
//! wrote since the freeze are compared; the run says how many steps it skipped. The model
//! follows Redis 7.2+ and Valkey ([`WoffRule::OwnWrites`]).
//!
//! A named test pins `min-replicas-to-write 1`: with the replica frozen past
//! `min-replicas-max-lag`, both sides refuse a `SET` and a lock script with `NOREPLICAS`.
//!
//! The model's clocks start at the master's `TIME`; virtual time follows the host's before
//! every step and can run ahead of it (the model's replication lag, a `WAIT`'s timeout), by
//! as much as the tolerance then widens.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use leasehold_harness::ReplicaPair;
use leasehold_sim::engine::clock::ClockModel;
use leasehold_sim::model::Persistence;
use leasehold_sim::model::node::{MinReplicas, NODE_CLOCK_BASE, wall_us};
use leasehold_sim::world::net::{ConnId, NetConfig};
use leasehold_sim::world::{NodeSpec, World, WorldConfig};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use redis::Value;
use redis::aio::MultiplexedConnection;

use crate::calls::{Entry, ScriptCall};
use crate::canon::{Canon, Tolerance, canon_result};
use crate::pair_steps::{CONNS, PairStep, pair_case_strategy};
use crate::state::{model_state, real_state, states_agree};
use crate::timing::CaseClock;
use crate::{args_of, describe, runtime, server_of};

/// Cases per run.
const CASES: u32 = 200;
/// Seeds of failing cases, replayed before new ones.
const REGRESSIONS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/differential-pair.proptest-regressions"
);
/// The model's nodes: the master and its replica.
const MASTER: usize = 0;
const REPLICA: usize = 1;
/// A settling `WAIT 1`'s timeout, ms: far above a running replica's acknowledgement round
/// trip (about a millisecond on the local bridge), below the connection's 2 s response
/// timeout. Only reached if the replica fails to acknowledge, which fails the case.
const SETTLE_MS: u64 = 1_000;
/// The model's client response timeout: never reached before a `WAIT` answers.
const MODEL_RESPONSE_TIMEOUT: Duration = Duration::from_secs(60);
/// The master's clock is set from `TIME` in whole ms: the model may lag by one more.
const CLOCK_SET_MS: i64 = 1;

/// When the server moves a connection's `WAIT` offset (`client->woff`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WoffRule {
    /// After a command that propagated something (Redis 7.2+, Valkey): the model's rule.
    OwnWrites,
    /// After every command (Redis before 7.2).
    EveryCommand,
}

impl WoffRule {
    /// The rule of `server` (`server_of`'s `name version`).
    fn of(server: &str) -> Self {
        let mut words = server.split(' ');
        let (name, version) = (words.next(), words.next().unwrap_or(""));
        let mut numbers = version.split('.').map(|n| n.parse::<u32>().unwrap_or(0));
        let (major, minor) = (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0));
        if name == Some("redis") && (major, minor) < (7, 2) {
            WoffRule::EveryCommand
        } else {
            WoffRule::OwnWrites
        }
    }

    /// Whether `step` is decided by the steps alone on a server with this rule. `wrote`:
    /// while the replica is frozen, whether the step's connection wrote since the freeze
    /// (its `WAIT` then counts an unacknowledged write of its own, whatever else its offset
    /// counts, and answers 0).
    fn compares(self, step: &PairStep, wrote: Option<bool>) -> bool {
        match (self, step, wrote) {
            (WoffRule::OwnWrites, ..) => true,
            (WoffRule::EveryCommand, PairStep::Wait(..), Some(wrote)) => wrote,
            (WoffRule::EveryCommand, PairStep::Wait(_, numreplicas, timeout), None) => {
                *numreplicas == 1 && *timeout == 0
            }
            (WoffRule::EveryCommand, ..) => true,
        }
    }
}

/// What a run exercised, beyond agreeing.
#[derive(Debug, Default, Clone, Copy)]
struct PairReport {
    /// Cases run.
    cases: usize,
    /// `WAIT`s whose connection's write was not yet acknowledged when they arrived: they
    /// had to wait for the replica (or time out).
    waited: usize,
    /// `WAIT`s on a connection that had written nothing in the case.
    unwritten: usize,
    /// `WAIT`s whose connection's write was acknowledged while the master's latest was
    /// not: a model waiting for the global offset would have answered otherwise.
    distinguishing: usize,
    /// Freezes of the replica.
    freezes: usize,
    /// Replica keyspaces compared.
    replica_reads: usize,
    /// Steps not run: not decided by the steps alone on this server (see [`WoffRule`]).
    skipped: usize,
    /// The widest tolerance, ms.
    tolerance_ms: i64,
}

impl PairReport {
    fn add(&mut self, other: &PairReport) {
        self.cases += other.cases;
        self.waited += other.waited;
        self.unwritten += other.unwritten;
        self.distinguishing += other.distinguishing;
        self.freezes += other.freezes;
        self.replica_reads += other.replica_reads;
        self.skipped += other.skipped;
        self.tolerance_ms = self.tolerance_ms.max(other.tolerance_ms);
    }
}

/// The real side: the pair, two client connections to the master, one for resetting it
/// between cases and one to the replica for reading its keyspace.
struct Real {
    pair: ReplicaPair,
    clients: [MultiplexedConnection; CONNS],
    admin: MultiplexedConnection,
    replica: MultiplexedConnection,
}

impl Real {
    async fn start() -> Self {
        let pair = ReplicaPair::start().await.unwrap();
        let master = pair.master();
        // Each `connection()` is its own TCP connection, so its own `client->woff`.
        let clients = [
            master.connection().await.unwrap(),
            master.connection().await.unwrap(),
        ];
        let admin = master.connection().await.unwrap();
        let replica = pair.replica().connection().await.unwrap();
        Self {
            pair,
            clients,
            admin,
            replica,
        }
    }
}

/// The model side: a world of a master and its replica whose clocks read `server_us` at
/// virtual time 0, with two driven connections to the master.
fn model_pair(server_us: i64) -> (World, [ConnId; CONNS]) {
    let base_us = wall_us(&ClockModel::new(NODE_CLOCK_BASE, false), 0);
    let clock_offset_ms = (server_us - base_us).div_euclid(1_000);
    let master = NodeSpec {
        persistence: Persistence::None,
        replica_of: None,
        clock_offset_ms,
        min_replicas: None,
    };
    let replica = NodeSpec {
        replica_of: Some(MASTER),
        ..master
    };
    let mut world = World::new(WorldConfig {
        seed: 0,
        nodes: vec![master, replica],
        targets: Vec::new(),
        groups: Vec::new(),
        net: NetConfig {
            response_timeout: MODEL_RESPONSE_TIMEOUT,
            ..NetConfig::default()
        },
        faults: Vec::new(),
        trace: false,
        server_clock: Default::default(),
    })
    .unwrap();
    let driver = world.add_driver();
    let conns = [
        world.open_driven(driver, MASTER),
        world.open_driven(driver, MASTER),
    ];
    (world, conns)
}

/// What the case's measured windows allow between time-derived values of the two sides,
/// widened by how far the model's virtual time ran ahead of the host's.
fn tolerance(clock: &CaseClock, ahead_ns: u64) -> Tolerance {
    let ahead_ms = i64::try_from(ahead_ns.div_ceil(1_000_000)).unwrap();
    Tolerance(clock.tolerance().0 + ahead_ms + CLOCK_SET_MS)
}

/// Runs one case against both sides; the first disagreement fails it.
async fn run_case(
    real: &mut Real,
    rule: WoffRule,
    steps: &[PairStep],
) -> Result<PairReport, TestCaseError> {
    let admin = &mut real.admin;
    let _: () = redis::cmd("FLUSHALL").query_async(admin).await.unwrap();
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(admin)
        .await
        .unwrap();
    let settled: i64 = redis::cmd("WAIT")
        .arg(1)
        .arg(SETTLE_MS)
        .query_async(admin)
        .await
        .unwrap();
    assert_eq!(settled, 1, "the replica did not acknowledge the FLUSHALL");
    let (mut clock, server_us) = CaseClock::sync(admin).await;
    let (mut world, conns) = model_pair(server_us);
    let mut report = PairReport::default();
    // The master's offset when the replica was frozen, while it is.
    let mut frozen_at: Option<u64> = None;
    // Connections whose last write the replica may not have acknowledged yet.
    let mut unsettled = [false; CONNS];
    // How far the model's virtual time ran ahead of the host's.
    let mut ahead_ns = 0u64;
    for (i, step) in steps.iter().enumerate() {
        // While frozen: whether the step's connection wrote since the freeze.
        let wrote = frozen_at
            .zip(step.command())
            .map(|(at, (c, _))| world.write_offset(MASTER, conns[c]) > at);
        if !rule.compares(step, wrote) {
            report.skipped += 1;
            continue;
        }
        match step {
            PairStep::Sleep(ms) => {
                tokio::time::sleep(Duration::from_millis(*ms)).await;
                continue;
            }
            PairStep::Freeze => {
                real.pair.replica().pause().await.unwrap();
                world.advance_to(clock.model_time(Instant::now()));
                world.freeze(REPLICA);
                frozen_at = world.node(MASTER).map(|m| m.repl_offset);
                report.freezes += 1;
                continue;
            }
            PairStep::Thaw => {
                real.pair.replica().unpause().await.unwrap();
                world.advance_to(clock.model_time(Instant::now()));
                world.thaw(REPLICA);
                frozen_at = None;
            }
            _ => {}
        }
        if let Some((c, cmd)) = step.command() {
            let args = args_of(&cmd);
            let sent = Instant::now();
            world.advance_to(clock.model_time(sent));
            let written = world.write_offset(MASTER, conns[c]);
            if let PairStep::Wait(_, numreplicas, _) = step {
                let master = world.node(MASTER).unwrap();
                let needed = i64::from(*numreplicas);
                let acked = master.acked_replicas(written) >= needed;
                report.waited += usize::from(!acked);
                report.unwritten += usize::from(written == 0);
                let latest = master.acked_replicas(master.repl_offset) >= needed;
                report.distinguishing += usize::from(acked && !latest);
            }
            let reply = canon_result(cmd.query_async::<Value>(&mut real.clients[c]).await);
            let received = Instant::now();
            clock.observe(sent, received);
            let modelled = canon_result(world.call(conns[c], args));
            ahead_ns = ahead_ns.max(world.now().saturating_sub(clock.model_time(received)));
            let tolerance = tolerance(&clock, ahead_ns);
            prop_assert!(
                reply.agrees(&modelled, tolerance),
                "step {} on connection {} reply differs (real {:?}, model {:?}, tolerance {} ms, \
                 replica frozen: {}): {}",
                i,
                c,
                reply,
                modelled,
                tolerance.0,
                frozen_at.is_some(),
                describe(&cmd)
            );
            if world.write_offset(MASTER, conns[c]) != written {
                unsettled[c] = true;
            }
        }
        if frozen_at.is_some() {
            continue;
        }
        for c in 0..CONNS {
            if std::mem::take(&mut unsettled[c]) {
                let wait = redis::cmd("WAIT").arg(1).arg(SETTLE_MS).clone();
                let sent = Instant::now();
                world.advance_to(clock.model_time(sent));
                let reply = canon_result(wait.query_async::<Value>(&mut real.clients[c]).await);
                clock.observe(sent, Instant::now());
                let modelled = canon_result(world.call(conns[c], args_of(&wait)));
                prop_assert!(
                    matches!((&reply, &modelled), (Canon::Int(1), Canon::Int(1))),
                    "step {} on connection {}: settling WAIT 1 answered {:?} (model {:?})",
                    i,
                    c,
                    reply,
                    modelled
                );
            }
        }
        let read = Instant::now();
        let real_keys = real_state(&mut real.replica).await;
        clock.observe(read, Instant::now());
        world.advance_to(clock.model_time(read));
        ahead_ns = ahead_ns.max(world.now().saturating_sub(clock.model_time(read)));
        let tolerance = tolerance(&clock, ahead_ns);
        let model_keys = model_state(world.node(REPLICA).unwrap(), world.now());
        prop_assert!(
            states_agree(&real_keys, &model_keys, tolerance),
            "step {} replica keyspace differs (tolerance {} ms) after {:?}\nreal:  {:?}\nmodel: {:?}",
            i,
            tolerance.0,
            step,
            real_keys,
            model_keys
        );
        report.replica_reads += 1;
    }
    report.tolerance_ms = tolerance(&clock, ahead_ns).0;
    report.cases = 1;
    Ok(report)
}

#[test]
fn model_matches_real_master_and_replica() {
    let started = Instant::now();
    let rt = runtime();
    let real = rt.block_on(Real::start());
    let server = rt.block_on(server_of(&mut real.admin.clone()));
    let rule = WoffRule::of(&server);
    let real = std::cell::RefCell::new(real);
    let total = std::cell::RefCell::new(PairReport::default());
    let (cases, mut runner) = super::runner(CASES, REGRESSIONS);
    let result = runner.run(&pair_case_strategy(), |steps| {
        let mut real = real.borrow_mut();
        // A failed case may leave the replica frozen.
        let _ = rt.block_on(real.pair.replica().unpause());
        let report = rt.block_on(run_case(&mut real, rule, &steps))?;
        total.borrow_mut().add(&report);
        Ok(())
    });
    // The containers must be removed inside the runtime (testcontainers drops asynchronously).
    rt.block_on(async move { drop(real) });
    if let Err(err) = result {
        panic!("model and real {server} (master and replica) disagree: {err}");
    }
    let total = total.into_inner();
    // Evidence that the run reached what it compares.
    if cases >= CASES {
        assert!(
            total.unwritten > 0,
            "no connection WAITed without having written: {total:?}"
        );
        assert!(
            total.replica_reads > 0,
            "no replica keyspace read: {total:?}"
        );
        assert!(
            total.waited > 0,
            "no WAIT had to wait for the replica: {total:?}"
        );
        if rule == WoffRule::OwnWrites {
            assert!(
                total.distinguishing > 0,
                "no WAIT told the connection's own offset from the master's: {total:?}"
            );
        }
    }
    eprintln!(
        "{} cases against {server} master and replica, 0 mismatches, in {:.1} s: {} WAITs \
         waited for the replica, {} WAITed without having written, {} turned on the \
         connection's own offset; {} freezes of the replica; {} replica keyspaces compared; \
         widest tolerance {} ms; {} steps skipped ({:?})",
        total.cases,
        started.elapsed().as_secs_f64(),
        total.waited,
        total.unwritten,
        total.distinguishing,
        total.freezes,
        total.replica_reads,
        total.tolerance_ms,
        total.skipped,
        rule
    );
}

/// `min-replicas-max-lag` set on both sides, in seconds.
const MAX_LAG: Duration = Duration::from_secs(1);
/// How long the replica stays frozen, and then thawed, before writes are judged: the lag,
/// plus the up to two seconds Redis takes to notice (its replica acknowledges, and it counts
/// good replicas, once a second).
const LAG_NOTICED: Duration = Duration::from_secs(3);

/// Runs `cmd` on connection `c` of both sides and returns both replies.
async fn both(
    real: &mut Real,
    world: &mut World,
    conns: &[ConnId; CONNS],
    clock: &CaseClock,
    c: usize,
    cmd: &redis::Cmd,
) -> (Canon, Canon) {
    world.advance_to(clock.model_time(Instant::now()));
    let reply = canon_result(cmd.query_async::<Value>(&mut real.clients[c]).await);
    (reply, canon_result(world.call(conns[c], args_of(cmd))))
}

/// A master with `min-replicas-to-write 1` refuses writes with `NOREPLICAS` (a plain
/// `SET`, and a lock script at its first write) once its frozen replica lags beyond
/// `min-replicas-max-lag`, still serves reads, and writes again once the replica is back:
/// the model agrees with the real server at each step, and the refusals happened.
#[test]
fn min_replicas_to_write_refuses_writes_while_the_replica_lags() {
    let rt = runtime();
    rt.block_on(async {
        let mut real = Real::start().await;
        let server = server_of(&mut real.admin).await;
        for (name, value) in [
            ("min-replicas-to-write", "1".to_owned()),
            ("min-replicas-max-lag", MAX_LAG.as_secs().to_string()),
        ] {
            let set = redis::cmd("CONFIG").arg("SET").arg(name).arg(value).clone();
            let _: () = set.query_async(&mut real.admin).await.unwrap();
        }
        let (clock, server_us) = CaseClock::sync(&mut real.admin).await;
        let (mut world, conns) = model_pair(server_us);
        let min = MinReplicas {
            to_write: 1,
            max_lag: MAX_LAG,
        };
        world.set_min_replicas(MASTER, Some(min));
        let set = |value: &str| redis::cmd("SET").arg("plain").arg(value).clone();
        let acquire = |owner| ScriptCall::new("acquire", 0, owner, Entry::Never).command();
        let probe = ScriptCall::new("probe", 0, 0, Entry::Never).command();
        let mut refused = 0;
        let phases: [(&str, Vec<redis::Cmd>); 3] = [
            ("replica running", vec![set("1"), acquire(0)]),
            ("replica lagging", vec![set("2"), acquire(1), probe.clone()]),
            ("replica back", vec![set("3"), acquire(2), probe]),
        ];
        for (phase, (what, cmds)) in phases.into_iter().enumerate() {
            if phase == 1 {
                real.pair.replica().pause().await.unwrap();
                world.advance_to(clock.model_time(Instant::now()));
                world.freeze(REPLICA);
            }
            if phase == 2 {
                real.pair.replica().unpause().await.unwrap();
                world.advance_to(clock.model_time(Instant::now()));
                world.thaw(REPLICA);
            }
            if phase > 0 {
                tokio::time::sleep(LAG_NOTICED).await;
            }
            for (i, cmd) in cmds.iter().enumerate() {
                let (reply, modelled) = both(&mut real, &mut world, &conns, &clock, i % 2, cmd).await;
                let tolerance = tolerance(&clock, 0);
                assert!(
                    reply.agrees(&modelled, tolerance),
                    "{what}: {server} answered {reply:?}, the model {modelled:?}: {}",
                    describe(cmd)
                );
                let noreplicas = matches!(&reply, Canon::Error(code) if code == "NOREPLICAS");
                assert_eq!(noreplicas, phase == 1 && i < 2, "{what}: {reply:?}: {}", describe(cmd));
                refused += usize::from(noreplicas);
            }
        }
        assert_eq!(refused, 2, "the SET and the acquire were refused");
        eprintln!("{server} with min-replicas-to-write 1: {refused} writes refused with NOREPLICAS while the replica lagged, as the model refused them");
        drop(real);
    });
}
