//! The harness's own view of the servers under test: admin connections, and the counters a
//! cell snapshots before and after it runs (`INFO commandstats` for commands, `INFO cpu` for
//! the Redis process's CPU time), so a cell's delta is what its clients cost the server.

use std::time::Duration;

use redis::aio::MultiplexedConnection;

use crate::bench::commandstats::{self, CommandStats};
use crate::error::{Error, Result};

/// One server's counters at one instant.
#[derive(Debug, Clone, Default)]
pub struct ServerCounters {
    /// `INFO commandstats`.
    pub commands: CommandStats,
    /// `used_cpu_sys + used_cpu_user` of `INFO cpu`: the whole Redis process (main thread,
    /// networking, background threads).
    pub cpu: Duration,
}

/// One admin connection per server, separate from every benchmarked client's.
pub async fn admin_connections(urls: &[String]) -> Result<Vec<MultiplexedConnection>> {
    let mut conns = Vec::with_capacity(urls.len());
    for url in urls {
        let client = redis::Client::open(url.as_str()).map_err(|err| Error::redis(url, err))?;
        conns.push(
            client
                .get_multiplexed_async_connection()
                .await
                .map_err(|err| Error::redis(url, err))?,
        );
    }
    Ok(conns)
}

/// One server's `INFO commandstats`, and its `INFO cpu` as `parse` reads it, over `conn`.
pub async fn counters<T>(
    conn: &mut MultiplexedConnection,
    url: &str,
    parse: impl Fn(&str) -> std::result::Result<T, String>,
) -> Result<(CommandStats, T)> {
    let commands = commandstats::snapshot(conn, url).await?;
    let info: String = redis::cmd("INFO")
        .arg("cpu")
        .query_async(conn)
        .await
        .map_err(|err| Error::redis(url, err))?;
    let cpu = parse(&info).map_err(|reason| Error::Report {
        what: format!("INFO cpu from {url}"),
        reason,
    })?;
    Ok((commands, cpu))
}

/// Snapshots every server's counters, in `urls` order.
pub async fn snapshot_all(
    conns: &mut [MultiplexedConnection],
    urls: &[String],
) -> Result<Vec<ServerCounters>> {
    let mut all = Vec::with_capacity(conns.len());
    for (conn, url) in conns.iter_mut().zip(urls) {
        let (commands, cpu) = counters(conn, url, used_cpu).await?;
        all.push(ServerCounters { commands, cpu });
    }
    Ok(all)
}

/// CPU the servers used between two [`snapshot_all`]s, summed over servers.
pub fn cpu_since(after: &[ServerCounters], before: &[ServerCounters]) -> Duration {
    after
        .iter()
        .zip(before)
        .map(|(a, b)| a.cpu.saturating_sub(b.cpu))
        .sum()
}

/// `used_cpu_sys + used_cpu_user` (seconds with µs decimals) from the text of `INFO cpu`.
fn used_cpu(info: &str) -> std::result::Result<Duration, String> {
    let field = |name: &str| -> std::result::Result<f64, String> {
        let value = info
            .lines()
            .find_map(|l| l.trim().strip_prefix(name)?.strip_prefix(':'))
            .ok_or_else(|| format!("no {name} field"))?;
        value
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v >= 0.0)
            .ok_or_else(|| format!("bad {name}: {value}"))
    };
    Ok(Duration::from_secs_f64(
        field("used_cpu_sys")? + field("used_cpu_user")?,
    ))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    const INFO_CPU: &str = "# CPU\r\nused_cpu_sys:1.250000\r\nused_cpu_user:0.750500\r\n\
        used_cpu_sys_children:0.000000\r\nused_cpu_user_children:0.000000\r\n\
        used_cpu_sys_main_thread:1.200000\r\nused_cpu_user_main_thread:0.700000\r\n";

    #[test]
    fn adds_system_and_user_time_of_the_process() {
        assert_eq!(
            used_cpu(INFO_CPU).unwrap(),
            Duration::from_micros(2_000_500)
        );
    }

    #[test]
    fn refuses_missing_or_malformed_fields() {
        assert!(used_cpu("used_cpu_sys:1.0\r\n").is_err());
        assert!(used_cpu("used_cpu_sys:x\r\nused_cpu_user:1.0\r\n").is_err());
    }

    #[test]
    fn cpu_delta_sums_servers() {
        let at = |ms: u64| ServerCounters {
            commands: CommandStats::default(),
            cpu: Duration::from_millis(ms),
        };
        let before = [at(100), at(200)];
        let after = [at(150), at(230)];
        assert_eq!(cpu_since(&after, &before), Duration::from_millis(80));
    }
}
