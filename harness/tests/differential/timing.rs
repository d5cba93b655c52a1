//! The model's clock follows the server's, and the tolerance that follows from the case's
//! own measured round trips.
//!
//! At the start of a case the model's wall clock is set to the server's `TIME`, and every
//! command runs on the model at the host instant it is sent. The server and the host read
//! the same kernel clock, so the model can only lag the server, and only by:
//! - `d0`, the time between the server reading `TIME` and the test receiving it: at most
//!   the round trip of that `TIME` (`sync`);
//! - `e`, the time between sending a command and the server running it: at most the round
//!   trip of that command (a step, or the keyspace read the model's state is compared
//!   with, taken at the read's start);
//! - 1 ms per ms truncation (the model and the server each floor µs to ms).
//!
//! A time-derived value is one clock reading (a deadline, a token: off by `d0 + e` plus
//! truncation) or the difference of two (a PTTL: `d0` cancels, off by one `e` either way
//! plus truncation), so the case's tolerance is `d0 + widest e + 2 ms` — no flat allowance.

use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;

use crate::canon::Tolerance;

/// Both sides floor µs to ms: a reading or a difference of two is off by at most 2 ms.
const TRUNCATION_MS: i64 = 2;

/// A case's time base and the widest round trip seen so far.
pub struct CaseClock {
    start: Instant,
    /// Round trip of the `TIME` that set the model's clock (bounds `d0`).
    sync_rtt: Duration,
    /// Widest send-to-reply window of any command compared so far (bounds `e`).
    widest: Duration,
}

impl CaseClock {
    /// Reads the server's `TIME`: the clock and the server's µs at the clock's start.
    pub async fn sync(conn: &mut MultiplexedConnection) -> (Self, i64) {
        let sent = Instant::now();
        let (secs, micros): (i64, i64) = redis::cmd("TIME").query_async(conn).await.unwrap();
        let start = Instant::now();
        let clock = Self {
            start,
            sync_rtt: start - sent,
            widest: Duration::ZERO,
        };
        (clock, secs * 1_000_000 + micros)
    }

    /// Model time (ns since the clock's start) of host instant `at`.
    pub fn model_time(&self, at: Instant) -> u64 {
        u64::try_from(at.duration_since(self.start).as_nanos()).unwrap()
    }

    /// The model times at which the server may have run a command sent at `sent` and
    /// answered at `received`: the window itself, and later by as much as the model's
    /// clock may lag the server's (`d0`, the round trip of the `TIME` that set it).
    pub fn server_window(&self, sent: Instant, received: Instant) -> (u64, u64) {
        let lag = u64::try_from(self.sync_rtt.as_nanos()).unwrap();
        (self.model_time(sent), self.model_time(received) + lag)
    }

    /// Records a command's window: sent at `sent`, its reply in at `received`.
    pub fn observe(&mut self, sent: Instant, received: Instant) {
        self.widest = self.widest.max(received - sent);
    }

    /// What the measured windows allow between time-derived values of the two sides.
    pub fn tolerance(&self) -> Tolerance {
        let lag = self.sync_rtt + self.widest;
        Tolerance(i64::try_from(lag.as_millis()).unwrap() + 1 + TRUNCATION_MS)
    }

    /// How long after a reply to wait so that a deadline `ttl` after the command ran has
    /// passed on both sides: the server ran it before the reply, and the model lags the
    /// server by less than the tolerance.
    pub fn past_deadline(&self, ttl: Duration) -> Duration {
        let tolerance = Duration::from_millis(u64::try_from(self.tolerance().0).unwrap());
        ttl + tolerance + Duration::from_millis(1)
    }
}
