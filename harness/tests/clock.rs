//! A node's clock control really moves its wall clock: `TIME` jumps, keys expire early, a
//! lease held by a client that trusts it is granted to a second client after a forward jump,
//! and a clock set to drift fast expires keys early in real time.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use leasehold::{Client, LockKeys};
use leasehold_harness::{Error, NodeOptions, SingleNode};

/// TTL of the probe key and of the lock lease.
const TTL_MS: i64 = 10_000;
/// First jump: half the TTL left.
const FIRST_JUMP_MS: i64 = 5_000;
/// Second jump: past the TTL in total.
const SECOND_JUMP_MS: i64 = 7_000;
/// How far a measurement may stray from the ideal: the commands between the measures take
/// milliseconds on the local bridge; a loaded CI box may add a few hundred.
const SLACK_MS: i64 = 500;

/// PX of the drift probes: long enough that both sides of [`CHECKPOINT`] have half a second.
const DRIFT_PX_MS: u64 = 5_000;
/// The drift of `node-clock-drift`: +30 %.
const FAST_PPM: i64 = 300_000;
/// When a drift probe is read, in real time after its SET returned: a key on a clock 30 %
/// fast is gone after PX/1.3 = 3.85 s, a key on a true clock lives the whole 5 s, so each
/// outcome has over 0.5 s of slack for a loaded box.
const CHECKPOINT: Duration = Duration::from_millis(4_400);

async fn clocked_node() -> SingleNode {
    SingleNode::builder()
        .node_options(NodeOptions::default().clock_control(true))
        .start()
        .await
        .unwrap()
}

/// `TIME` in milliseconds.
async fn server_ms(node: &SingleNode) -> i64 {
    let (secs, micros): (i64, i64) = node.node().query(&redis::cmd("TIME")).await.unwrap();
    secs * 1_000 + micros / 1_000
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clock_jump_moves_time_and_expires_keys_early() {
    let single = clocked_node().await;
    let node = single.node();
    let before = server_ms(&single).await;
    let _: () = node
        .query(
            redis::cmd("SET")
                .arg("probe")
                .arg("v")
                .arg("PX")
                .arg(TTL_MS),
        )
        .await
        .unwrap();

    node.jump_clock(FIRST_JUMP_MS).unwrap();
    let moved = server_ms(&single).await - before;
    assert!(
        (FIRST_JUMP_MS..FIRST_JUMP_MS + SLACK_MS).contains(&moved),
        "TIME moved {moved} ms after a {FIRST_JUMP_MS} ms jump"
    );
    let pttl: i64 = node.query(redis::cmd("PTTL").arg("probe")).await.unwrap();
    assert!(
        (TTL_MS - FIRST_JUMP_MS - SLACK_MS..=TTL_MS - FIRST_JUMP_MS).contains(&pttl),
        "PTTL {pttl} ms after the jump"
    );

    node.jump_clock(SECOND_JUMP_MS).unwrap();
    assert_eq!(node.clock_offset(), FIRST_JUMP_MS + SECOND_JUMP_MS);
    let gone: i64 = node.query(redis::cmd("PTTL").arg("probe")).await.unwrap();
    assert_eq!(gone, -2, "the key outlived a jump past its TTL");

    // Back to real time: the server's clock follows at once.
    node.set_clock_offset(0).unwrap();
    let now = server_ms(&single).await;
    let real = i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap();
    assert!((now - real).abs() < SLACK_MS, "server {now} vs host {real}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forward_jump_cuts_a_lease_short_and_grants_a_second_holder() {
    let single = clocked_node().await;
    let node = single.node();
    let client = |url: String| async move {
        Client::builder()
            .ttl(Duration::from_millis(TTL_MS as u64))
            .watchdog(false)
            .connect(&url)
            .await
            .unwrap()
    };
    let first = client(single.url()).await.mutex("clocked");
    let second = client(single.url()).await.mutex("clocked");
    let held = first.try_lock().await.unwrap();
    assert!(matches!(
        second.try_lock().await,
        Err(leasehold::Error::WouldBlock { .. })
    ));
    let key = LockKeys::new("clocked").unwrap().lock;
    let pttl: i64 = node.query(redis::cmd("PTTL").arg(&key)).await.unwrap();
    assert!(pttl > TTL_MS - SLACK_MS, "fresh lease PTTL {pttl}");

    node.jump_clock(FIRST_JUMP_MS).unwrap();
    let pttl: i64 = node.query(redis::cmd("PTTL").arg(&key)).await.unwrap();
    assert!(
        pttl <= TTL_MS - FIRST_JUMP_MS,
        "lease PTTL {pttl} after the jump"
    );
    node.jump_clock(SECOND_JUMP_MS).unwrap();
    let stolen = second.try_lock().await.unwrap();
    // The first holder's lease has 10 s of its own time left: it still believes.
    assert!(
        tokio::time::timeout(Duration::from_millis(100), held.lost())
            .await
            .is_err(),
        "the first holder noticed"
    );
    // Tokens are the server's microseconds: the jump shows in the second holder's token.
    let gap_ms = (stolen.fencing_token().get() - held.fencing_token().get()) / 1_000;
    assert!(
        gap_ms >= (FIRST_JUMP_MS + SECOND_JUMP_MS) as u64,
        "token gap {gap_ms} ms"
    );
}

/// Sets a probe key with [`DRIFT_PX_MS`] and reads its PTTL [`CHECKPOINT`] later.
async fn probe_pttl_at_checkpoint(node: &leasehold_harness::Node) -> i64 {
    let _: () = node
        .query(
            redis::cmd("SET")
                .arg("drift-probe")
                .arg("v")
                .arg("PX")
                .arg(DRIFT_PX_MS),
        )
        .await
        .unwrap();
    tokio::time::sleep(CHECKPOINT).await;
    node.query(redis::cmd("PTTL").arg("drift-probe"))
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clock_drifting_fast_expires_keys_early_in_real_time() {
    let single = clocked_node().await;
    let node = single.node();
    let on_time = probe_pttl_at_checkpoint(node).await;
    assert!(
        on_time > 0,
        "without drift a {DRIFT_PX_MS} ms key was gone {CHECKPOINT:?} later (PTTL {on_time})"
    );

    node.set_clock_drift(FAST_PPM).unwrap();
    assert_eq!(node.clock_drift_ppm(), FAST_PPM);
    let fast = probe_pttl_at_checkpoint(node).await;
    assert_eq!(
        fast, -2,
        "a {DRIFT_PX_MS} ms key on a clock {FAST_PPM} ppm fast outlived {CHECKPOINT:?} of real time"
    );

    // Stopping the drift keeps the lead it built up (no jump back), and a reset clears it.
    node.set_clock_drift(0).unwrap();
    let lead = node.clock_offset();
    let least = i64::try_from(CHECKPOINT.as_millis()).unwrap() * FAST_PPM / 1_000_000;
    assert!(lead >= least, "lead {lead} ms after the drift");
    node.reset_clock().unwrap();
    assert_eq!((node.clock_offset(), node.clock_drift_ppm()), (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_without_clock_control_refuses_a_jump() {
    let single = SingleNode::start().await.unwrap();
    assert!(matches!(
        single.node().jump_clock(FIRST_JUMP_MS),
        Err(Error::NoClockControl { .. })
    ));
}
