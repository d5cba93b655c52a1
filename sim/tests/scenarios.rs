//! Every named DESIGN §5 scenario reaches its expected verdict for every strategy the

#![allow(clippy::unwrap_used, clippy::expect_used)]
//! lock crate implements (RedLock rows are pending and skipped).

use leasehold_sim::scenario::{self, DEFAULT_SEEDS, Expect};
use leasehold_sim::workload::Strategy;

fn check(name: &str) {
    let sc = scenario::find(name).unwrap();
    for strategy in Strategy::ALL {
        let cell = scenario::run_cell(sc, strategy, DEFAULT_SEEDS).unwrap();
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
            for sc in scenario::SCENARIOS {
                assert!(tested.contains(&sc.name), "no test for scenario {}", sc.name);
            }
        }
    };
}

scenario_tests! {
    holder_pause => "holder-pause",
    network_delay => "network-delay",
    node_clock_jump => "node-clock-jump",
    client_clock_drift => "client-clock-drift",
    client_clock_drift_watchdog => "client-clock-drift-watchdog",
    crash_restart_no_persistence => "crash-restart-no-persistence",
    crash_restart_delayed => "crash-restart-delayed",
    failover_async_replication => "failover-async-replication",
    failover_replica_clock_behind => "failover-replica-clock-behind",
    partition => "partition",
    dead_waiter => "dead-waiter",
    holder_crash => "holder-crash",
    ambiguous_acquire => "ambiguous-acquire",
    script_flush => "script-flush",
}
