//! Every named docs/DESIGN.md §5 scenario reaches its expected verdict for every
//! strategy, RedLock included (pending cells, if any, are skipped).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use leasehold_sim::scenario::{self, DEFAULT_SEEDS, Expect};
use leasehold_sim::workload::Strategy;

/// RedLock runs five masters, so its cells cost more in a debug build; the first half of
/// the default seeds already reach every RedLock expectation.
const REDLOCK_SEEDS: u64 = DEFAULT_SEEDS / 2;

fn check(name: &str) {
    let sc = scenario::find(name).unwrap();
    for strategy in Strategy::ALL {
        let seeds = match strategy {
            Strategy::RedLock => REDLOCK_SEEDS,
            _ => DEFAULT_SEEDS,
        };
        let cell = scenario::run_cell(sc, strategy, seeds).unwrap();
        if matches!(cell.expected, Expect::Pending(_)) {
            continue;
        }
        assert!(
            cell.met,
            "{name} × {}: expected {}, got {:?} (per seed {:?}, worst on seed {:?})",
            strategy.name(),
            cell.expected,
            cell.worst,
            cell.verdicts,
            cell.worst_seed
        );
    }
}

macro_rules! scenario_tests {
    ($($test:ident => $name:literal),* $(,)?) => {
        $(#[test] fn $test() { check($name); })*

        #[test]
        fn every_scenario_has_a_test() {
            let tested = [$($name),*];
            for sc in scenario::scenarios() {
                assert!(tested.contains(&sc.name), "no test for scenario {}", sc.name);
            }
        }
    };
}

scenario_tests! {
    holder_pause => "holder-pause",
    network_delay => "network-delay",
    slow_link_lease => "slow-link-lease",
    slow_link_partition => "slow-link-partition",
    slow_link_extend => "slow-link-extend",
    node_clock_jump => "node-clock-jump",
    client_clock_drift => "client-clock-drift",
    client_clock_drift_within_margin => "client-clock-drift-within-margin",
    client_clock_drift_watchdog => "client-clock-drift-watchdog",
    crash_restart_no_persistence => "crash-restart-no-persistence",
    crash_restart_delayed => "crash-restart-delayed",
    failover_async_replication => "failover-async-replication",
    failover_replica_clock_behind => "failover-replica-clock-behind",
    failover_replica_clock_drift => "failover-replica-clock-drift",
    failover_reentry_stale_epoch => "failover-reentry-stale-epoch",
    node_clock_drift => "node-clock-drift",
    node_clock_drift_within_margin => "node-clock-drift-within-margin",
    partition => "partition",
    partial_partition => "partial-partition",
    one_way_loss => "one-way-loss",
    dead_waiter => "dead-waiter",
    holder_crash => "holder-crash",
    ambiguous_acquire => "ambiguous-acquire",
    script_flush => "script-flush",
    try_lock_lossy => "try-lock-lossy",
    acquire_cancel => "acquire-cancel",
    acquire_cancel_stranded => "acquire-cancel-stranded",
    failover_wait_replicas => "failover-wait-replicas",
    fence_expiry_mid_stream => "fence-expiry-mid-stream",
    reentry_shorter_ttl => "reentry-shorter-ttl",
    reentry_lost_inner_release => "reentry-lost-inner-release",
    reentry_sibling_handoff => "reentry-sibling-handoff",
    lone_hold_lossy => "lone-hold-lossy",
    rwlock_lossy => "rwlock-lossy",
    rwlock_dead_queued_writer => "rwlock-dead-queued-writer",
    rwlock_writers_give_up => "rwlock-writers-give-up",
    rwlock_holder_pause => "rwlock-holder-pause",
    rwlock_access_changes => "rwlock-access-changes",
    semaphore_lossy => "semaphore-lossy",
    semaphore_holder_pause => "semaphore-holder-pause",
    semaphore_resize => "semaphore-resize",
    rwlock_partition => "rwlock-partition",
    semaphore_partition => "semaphore-partition",
    rwlock_crash_restart => "rwlock-crash-restart",
    semaphore_crash_restart => "semaphore-crash-restart",
    node_pause => "node-pause",
    node_partition => "node-partition",
    straggler_masters => "straggler-masters",
    crash_restart_aof_always => "crash-restart-aof-always",
    memory_eviction => "memory-eviction",
    failover_late_promotion => "failover-late-promotion",
    failover_zombie_master => "failover-zombie-master",
    sentinel_cut => "sentinel-cut",
    sentinel_stale => "sentinel-stale",
    handoff_give_up => "handoff-give-up",
    handoff_slow_waiter => "handoff-slow-waiter",
    handoff_waiter_pause => "handoff-waiter-pause",
    handoff_dead_waiters => "handoff-dead-waiters",
}
