//! Differential test: the simulator's Redis model (`leasehold_sim::model::Node`) against a
//! real server in a container (Redis 7.0.15; Valkey 9.1.2 when `LEASEHOLD_SERVER_BINARY`
//! names its `valkey-server`, as CI's second run does), on proptest-generated sequences of the lock scripts (with
//! plausible names, owners, hold ids, TTLs, permit counts and queue entry timeouts)
//! interleaved with plain commands and time steps. After every step, the reply (value or
//! error code), the messages delivered to a subscriber of every channel the scripts
//! publish on (channel and payload, in order) and the whole keyspace (TYPE, PTTL,
//! contents) must agree.
//!
//! Determinism, made explicit:
//! - The model's clock follows the server's, and time-derived values agree within what the
//!   case's own measured round trips allow (`timing.rs`), never a flat allowance.
//! - TTL arguments are minutes, far beyond a case's duration, so nothing expires by
//!   accident. Expiry is exercised on purpose by steps that set a short key TTL
//!   ([`steps::SHORT_TTL`]), a short hold TTL ([`calls::SHORT_HOLD`]) or a short queue entry
//!   timeout ([`calls::SHORT_ENTRY`]), all 20 ms. Such a step then waits until the deadline
//!   has passed on both sides, so no step runs near it by accident. On purpose, a
//!   deadline-adjacent chunk follows it with [`steps::Step::Approach`]: one step aimed
//!   within ±2 ms of the deadline, judged against the model at every millisecond the server
//!   may have run it at (`near.rs`). So per-hold lapses, entry expiry and key expiry are
//!   compared where they happen, to the millisecond. Redis before 7.2 reads a moving
//!   clock inside a script (`TIME`, `PTTL`, a new expiry's base) while its lookups keep
//!   the script's start, so on such a server a step no run agrees with is run again with
//!   its script reading the next millisecond from each of its calls on
//!   ([`leasehold_sim::model::LateClock`]); the summary counts the steps only such a run
//!   matched. Valkey and Redis 7.2+ freeze that clock, and get no such runs.
//! - One container serves every case; `FLUSHALL` and `SCRIPT FLUSH` reset it between cases
//!   and the model is built fresh.
//! - Failing cases persist: proptest records the seed of each failure in
//!   `differential.proptest-regressions` next to this directory and replays those seeds
//!   first; the named `regression_*` tests keep cases worth reading as step lists.
//!
//! A second test (`pair.rs`, steps in `pair_steps.rs`) compares the simulator's world with a
//! real master and replica over two connections: `WAIT` and replicated script effects.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod calls;
mod canon;
mod expiry;
mod near;
mod pair;
mod pair_steps;
mod pubsub;
mod state;
mod steps;
mod timing;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use leasehold_harness::SingleNode;
use leasehold_sim::model::Executed;
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, TestCaseError, TestRunner};
use redis::Value;
use redis::aio::MultiplexedConnection;

use calls::{Entry, ScriptCall};
use canon::{Canon, canon_result};
use near::Replay;
use pubsub::{Subscriber, deliveries_agree, model_delivered};
use state::{model_state, real_state, states_agree};
use steps::{SHORT_TTL, Step, case_strategy};
use timing::CaseClock;

// The hold, entry and key TTLs that lapse within a case are one duration, which
// `Step::Approach` aims at.
const _: () = assert!(SHORT_TTL.as_millis() == calls::SHORT_ENTRY.as_millis());

/// Cases per run (their length is `steps::case_strategy`'s): about 170 steps aimed at a
/// deadline among them.
const CASES: u32 = 200;
/// Seeds of failing cases, replayed before new ones.
const REGRESSIONS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/differential.proptest-regressions"
);

/// A proptest runner of `default_cases` cases (`PROPTEST_CASES` overrides it, for a longer
/// hunt) that replays the seeds in `regressions` first and records new failures there.
fn runner(default_cases: u32, regressions: &'static str) -> (u32, TestRunner) {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default_cases);
    let runner = TestRunner::new(Config {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(regressions))),
        ..Config::default()
    });
    (cases, runner)
}

/// What a case exercised, beyond agreeing.
#[derive(Debug, Default, Clone)]
struct CaseReport {
    /// The widest tolerance the case allowed, in ms.
    tolerance_ms: i64,
    /// Messages delivered (and compared).
    messages: usize,
    /// Expired queue entries dropped, per script.
    dropped: BTreeMap<&'static str, usize>,
    /// Steps aimed at a deadline.
    aimed: usize,
    /// Aimed steps whose window spanned more than one server millisecond.
    straddled: usize,
    /// Aimed steps whose outcome depends on the deadline (`near::sensitive`).
    sensitive: usize,
    /// Aimed steps only a script reading a later millisecond from some call on matched
    /// (`near::late_runs`, on a server whose clock moves on during a script).
    late: usize,
}

impl CaseReport {
    fn add(&mut self, other: &CaseReport) {
        self.tolerance_ms = self.tolerance_ms.max(other.tolerance_ms);
        self.messages += other.messages;
        self.aimed += other.aimed;
        self.straddled += other.straddled;
        self.sensitive += other.sensitive;
        self.late += other.late;
        for (script, n) in &other.dropped {
            *self.dropped.entry(script).or_default() += n;
        }
    }
}

fn args_of(cmd: &redis::Cmd) -> Vec<Vec<u8>> {
    cmd.args_iter()
        .map(|a| match a {
            redis::Arg::Simple(b) => b.to_vec(),
            _ => b"0".to_vec(),
        })
        .collect()
}

fn describe(cmd: &redis::Cmd) -> String {
    args_of(cmd)
        .iter()
        .map(|a| {
            let s = String::from_utf8_lossy(a);
            if s.len() > 40 {
                format!("<{} bytes>", s.len())
            } else {
                s.into_owned()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The server behind `conn` as `name version` (`INFO server`: Valkey names itself in
/// `server_name`; Redis 7.0 has no such field).
async fn server_of(conn: &mut MultiplexedConnection) -> String {
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(conn)
        .await
        .unwrap();
    let field = |name: &str| {
        info.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
            .map(str::trim)
    };
    let name = field("server_name").unwrap_or("redis");
    let version = field(&format!("{name}_version")).unwrap_or("?");
    format!("{name} {version}")
}

/// Whether `server` (as [`server_of`] names it) reads a clock that moves on while a script
/// runs: Redis before 7.2 (see [`leasehold_sim::model::LateClock`]).
fn clock_moves_in_scripts(server: &str) -> bool {
    let Some(version) = server.strip_prefix("redis ") else {
        return false;
    };
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (major, minor) < (7, 2)
}

/// Runs one case against both sides; the first disagreement fails it. `moving_clock`:
/// the server's clock moves on while a script runs ([`clock_moves_in_scripts`]).
async fn run_case(
    conn: &mut MultiplexedConnection,
    subscriber: &mut Subscriber,
    steps: &[Step],
    moving_clock: bool,
) -> Result<CaseReport, TestCaseError> {
    let _: () = redis::cmd("FLUSHALL").query_async(conn).await.unwrap();
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(conn)
        .await
        .unwrap();
    // Nothing published before this case is compared.
    subscriber.delivered().await;
    let (mut clock, server_us) = CaseClock::sync(conn).await;
    let mut replay = Replay::new(server_us);
    let mut model = replay.model(None);
    let mut report = CaseReport::default();
    // The middle of the window of the last step that set a 20 ms deadline, while a step
    // is yet to be aimed at that deadline.
    let mut anchor: Option<Instant> = None;
    let mut aimed = false;
    // The aimed step's model runs that agreed with the server so far, until the keyspace
    // read picks the one the case goes on from.
    let mut settling: Option<(Vec<Vec<u8>>, Vec<near::Run>)> = None;
    for (i, step) in steps.iter().enumerate() {
        match step {
            Step::Sleep(ms) => {
                tokio::time::sleep(Duration::from_millis(*ms)).await;
                continue;
            }
            Step::Approach(offset) => {
                if let Some(mid) = anchor {
                    let to = Duration::from_millis(offset.unsigned_abs().into());
                    let deadline = mid + SHORT_TTL;
                    let target = if *offset < 0 {
                        deadline - to
                    } else {
                        deadline + to
                    };
                    // A thread sleep: the runtime's timer rounds up to whole milliseconds.
                    std::thread::sleep(target.saturating_duration_since(Instant::now()));
                    aimed = true;
                }
                continue;
            }
            _ => {}
        }
        let Some(cmd) = step.command() else { continue };
        let args = args_of(&cmd);
        let sent = Instant::now();
        let t = clock.model_time(sent);
        let now_ms = model.wall_us(t).div_euclid(1_000);
        let expired_before = expiry::expired_entries(&model, now_ms);
        let real = canon_result(cmd.query_async::<Value>(conn).await);
        let received = Instant::now();
        clock.observe(sent, received);
        let tolerance = clock.tolerance();
        let real_messages = subscriber.delivered().await;
        if std::mem::take(&mut aimed) {
            let window = clock.server_window(sent, received);
            let runs = near::runs_in(&replay, &args, window);
            report.aimed += 1;
            report.straddled += usize::from(runs.len() > 1);
            report.sensitive += usize::from(near::sensitive(&replay, &args, window, tolerance));
            let candidates: Vec<Canon> = runs.iter().map(|run| run.reply.clone()).collect();
            let agrees = |run: &near::Run| {
                real.agrees(&run.reply, tolerance)
                    && deliveries_agree(&real_messages, &run.messages, tolerance)
            };
            let mut agreeing: Vec<near::Run> = runs.into_iter().filter(agrees).collect();
            if agreeing.is_empty() && moving_clock {
                agreeing = near::late_runs(&replay, &args, window)
                    .into_iter()
                    .filter(agrees)
                    .collect();
                report.late += usize::from(!agreeing.is_empty());
            }
            if agreeing.is_empty() {
                return Err(TestCaseError::fail(format!(
                    "step {i}, aimed at a deadline: real {real:?} with messages {real_messages:?} \
                     agrees with no model run in its window (replies {candidates:?}, tolerance \
                     {} ms): {}",
                    tolerance.0,
                    describe(&cmd)
                )));
            }
            // Runs alike in reply can differ in what they left (a key deleted at its last
            // millisecond or expired just after): the keyspace read decides.
            settling = Some((args, agreeing));
            report.messages += real_messages.len();
            // Nothing else runs near the deadline: the state is read past it.
            if let Some(mid) = anchor.take() {
                let past = mid + clock.past_deadline(SHORT_TTL);
                tokio::time::sleep_until(past.into()).await;
            }
        } else {
            let outcome = model.execute(&args, t);
            if step.expires_soon() && matches!(steps.get(i + 1), Some(Step::Approach(_))) {
                replay.record_anchor(args, clock.server_window(sent, received));
            } else {
                replay.record(args, t);
            }
            let modelled = match outcome.executed {
                Executed::Reply(reply) => canon_result(reply.into_result()),
                Executed::Wait { .. } => Canon::Other("WAIT".into()),
            };
            prop_assert!(
                real.agrees(&modelled, tolerance),
                "step {} reply differs (real {:?}, model {:?}, tolerance {} ms): {}",
                i,
                real,
                modelled,
                tolerance.0,
                describe(&cmd)
            );
            let model_messages = model_delivered(&model, &outcome.effects.published);
            prop_assert!(
                deliveries_agree(&real_messages, &model_messages, tolerance),
                "step {} messages differ (real {:?}, model {:?}, tolerance {} ms): {}",
                i,
                real_messages,
                model_messages,
                tolerance.0,
                describe(&cmd)
            );
            report.messages += real_messages.len();
            if let Step::Script(call) = step {
                let n = expiry::dropped(&expired_before, &model, now_ms, call.hold_id().as_bytes());
                *report.dropped.entry(call.script_name()).or_default() += n;
            }
        }
        if step.expires_soon() {
            if matches!(steps.get(i + 1), Some(Step::Approach(_))) {
                anchor = Some(sent + (received - sent) / 2);
                // The keyspace is read key by key, so a read now could straddle the
                // deadline; it is read after the aimed step, once the deadline has passed.
                continue;
            } else {
                tokio::time::sleep(clock.past_deadline(SHORT_TTL)).await;
            }
        }
        let read = Instant::now();
        let real_keys = real_state(conn).await;
        clock.observe(read, Instant::now());
        let tolerance = clock.tolerance();
        let at = clock.model_time(read);
        if let Some((args, runs)) = settling.take() {
            let states: Vec<_> = runs.iter().map(|run| model_state(&run.model, at)).collect();
            let Some(chosen) = states
                .iter()
                .position(|state| states_agree(&real_keys, state, tolerance))
            else {
                return Err(TestCaseError::fail(format!(
                    "step {i}, aimed at a deadline: keyspace after it agrees with no model run \
                     that agreed in reply (tolerance {} ms): {}\nreal:  {real_keys:?}\nmodels: \
                     {states:?}",
                    tolerance.0,
                    describe(&cmd)
                )));
            };
            let run = runs.into_iter().nth(chosen).unwrap();
            replay.settle(args, &run);
            model = run.model;
        }
        let model_keys = model_state(&model, at);
        prop_assert!(
            states_agree(&real_keys, &model_keys, tolerance),
            "step {} keyspace differs (tolerance {} ms) after: {}\nreal:  {:?}\nmodel: {:?}",
            i,
            tolerance.0,
            describe(&cmd),
            real_keys,
            model_keys
        );
    }
    report.tolerance_ms = clock.tolerance().0;
    Ok(report)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Runs `steps` as one case on a fresh container (for the named regressions).
fn check_steps(steps: Vec<Step>) -> CaseReport {
    let rt = runtime();
    rt.block_on(async {
        let node = SingleNode::start().await.unwrap();
        let mut conn = node.node().connection().await.unwrap();
        let moving_clock = clock_moves_in_scripts(&server_of(&mut conn).await);
        let mut subscriber = Subscriber::subscribe(&node.url()).await;
        run_case(&mut conn, &mut subscriber, &steps, moving_clock)
            .await
            .unwrap()
    })
}

#[test]
fn model_matches_real_redis() {
    let rt = runtime();
    let node = rt.block_on(SingleNode::start()).unwrap();
    let mut conn = rt.block_on(node.node().connection()).unwrap();
    let server = rt.block_on(server_of(&mut conn));
    let moving_clock = clock_moves_in_scripts(&server);
    let subscriber = rt.block_on(Subscriber::subscribe(&node.url()));
    let subscriber = std::cell::RefCell::new(subscriber);
    let total = std::cell::RefCell::new(CaseReport::default());
    let tolerances = std::cell::RefCell::new(Vec::new());
    let (cases, mut runner) = runner(CASES, REGRESSIONS);
    let result = runner.run(&case_strategy(), |steps| {
        // A multiplexed connection is a cheap handle on one shared connection.
        let mut conn = conn.clone();
        let mut subscriber = subscriber.borrow_mut();
        let report = rt.block_on(run_case(&mut conn, &mut subscriber, &steps, moving_clock))?;
        tolerances.borrow_mut().push(report.tolerance_ms);
        total.borrow_mut().add(&report);
        Ok(())
    });
    // The container must be removed inside the runtime (testcontainers drops asynchronously).
    rt.block_on(async move { drop(node) });
    if let Err(err) = result {
        panic!("model and real {server} disagree: {err}");
    }
    let total = total.into_inner();
    // Evidence that the run reached what it compares: a full run that never delivered a
    // message or never dropped an expired queue entry has not tested those paths.
    if cases >= CASES {
        assert!(total.messages > 0, "no message was published: {total:?}");
        let dropped: usize = total.dropped.values().sum();
        assert!(dropped > 0, "no expired queue entry was dropped: {total:?}");
        // A deadline is compared only where a step's outcome depended on it.
        assert!(
            total.sensitive > 0,
            "no step aimed at a deadline depended on it: {total:?}"
        );
    }
    let mut tolerances = tolerances.into_inner();
    tolerances.sort_unstable();
    // Any disagreement fails the case above: a finished run has no mismatch to count.
    eprintln!(
        "{} cases against {server}, 0 mismatches; tolerance per case (ms): min {}, median {}, max {}; {} messages compared; \
         expired queue entries dropped per script: {:?}; {} steps aimed at a deadline, {} of \
         them turning on it, {} with a window of more than one server ms, {} matched only by a \
         script whose clock moved on (the server's does: {moving_clock})",
        tolerances.len(),
        tolerances[0],
        tolerances[tolerances.len() / 2],
        tolerances[tolerances.len() - 1],
        total.messages,
        total.dropped,
        total.aimed,
        total.sensitive,
        total.straddled,
        total.late
    );
}

fn call(script: &str, owner: u8, entry: Entry) -> Step {
    Step::Script(ScriptCall::new(script, 0, owner, entry))
}

/// How many expired entries `script` dropped in the case.
fn dropped_by(report: &CaseReport, script: &str) -> usize {
    report.dropped.get(script).copied().unwrap_or(0)
}

/// A contended mutex round (acquire, busy, queue, release with hand-off, claim) agrees
/// step by step, the hand-off message included.
#[test]
fn regression_mutex_handoff_round() {
    let report = check_steps(vec![
        call("acquire", 0, Entry::Never),
        call("acquire", 1, Entry::Long),
        call("release", 0, Entry::Never),
        call("acquire", 1, Entry::Long),
        call("probe", 1, Entry::Never),
        call("renew", 1, Entry::Never),
        call("release", 1, Entry::Never),
    ]);
    assert!(report.messages >= 2, "hand-off and release: {report:?}");
}

/// A free lock whose queue head expired: acquire drops the head and grants.
#[test]
fn regression_expired_head_dropped_by_acquire() {
    let report = check_steps(vec![
        call("acquire", 0, Entry::Never),
        // Queued for long (the queue key lives a minute), then refreshed with a short
        // entry: the head's entry expires while its queue stays.
        call("acquire", 1, Entry::Long),
        call("acquire", 1, Entry::Short),
        // The holder's lease ends without a release.
        Step::ExpireSoon(0, false),
        call("acquire", 2, Entry::Never),
    ]);
    assert_eq!(dropped_by(&report, "acquire"), 1, "{report:?}");
}

/// A release skips an expired entry and hands the lock to the live waiter behind it.
#[test]
fn regression_expired_entry_skipped_by_release() {
    let report = check_steps(vec![
        call("acquire", 0, Entry::Never),
        call("acquire", 1, Entry::Long),
        call("acquire", 2, Entry::Long),
        call("acquire", 1, Entry::Short),
        call("release", 0, Entry::Never),
        call("acquire", 2, Entry::Long),
    ]);
    assert_eq!(dropped_by(&report, "release"), 1, "{report:?}");
    assert_eq!(
        report.messages, 1,
        "the hand-off to the live waiter: {report:?}"
    );
}

/// The semaphore's release skips an expired entry the same way.
#[test]
fn regression_expired_entry_skipped_by_semaphore_release() {
    let report = check_steps(vec![
        call("semaphore_acquire", 0, Entry::Never),
        call("semaphore_acquire", 1, Entry::Long),
        call("semaphore_acquire", 2, Entry::Long),
        call("semaphore_acquire", 1, Entry::Short),
        call("semaphore_release", 0, Entry::Never),
        call("semaphore_acquire", 2, Entry::Long),
    ]);
    assert_eq!(dropped_by(&report, "semaphore_release"), 1, "{report:?}");
    assert_eq!(
        report.messages, 1,
        "the hand-off to the live waiter: {report:?}"
    );
}

/// A per-hold deadline passing while the key lives on (a re-entrant hold of the same owner
/// keeps it): the probe aimed at it agrees with the model on one side of the deadline or
/// the other, as the server ran it.
#[test]
fn regression_per_hold_lapse_under_a_live_key() {
    let mut long = ScriptCall::new("acquire", 0, 0, Entry::Never);
    long.hold = 1;
    let mut short = ScriptCall::new("acquire", 0, 0, Entry::Never);
    short.ttl = calls::SHORT_HOLD;
    let report = check_steps(vec![
        Step::Script(long),
        Step::Script(short),
        Step::Approach(1),
        call("probe", 0, Entry::Never),
        call("acquire", 1, Entry::Never),
    ]);
    assert_eq!(report.aimed, 1, "{report:?}");
}
