//! What a fault is applied to in one running cell — its containers and its tries side by
//! side — and what it reports for each try: a [`Hit`] (start, what was done, whether it
//! landed and the evidence why). The node faults, holder faults, clock faults and lost
//! grants (`node_faults`, `holder_faults`, `clock_faults`, `clock_drift`, `lost_grant`) act
//! on an [`Injector`]; `inject` dispatches a scenario's fault to them.
//!
//! Invariant: every fault returns exactly one [`Hit`] per try, in the tries' order.

use std::time::{Duration, Instant};

use crate::safety::fault_aim::{HOLDER_WAIT, holder_label, impair, wait_for_next_grant};
use crate::safety::infra::Infra;
use crate::safety::link::Link;
use crate::safety::run_history::RunHistory;
use crate::safety::worker::Board;
use crate::topology::node::Node;

/// What the fault can see of one try.
pub(super) struct TryView<'a> {
    /// Who holds now.
    pub board: &'a Board,
    /// The try's history, whose clock times the fault.
    pub history: &'a RunHistory,
    /// Per-client links (holder-partition only; empty otherwise).
    pub links: &'a [Link],
    /// The process id of worker c0 when it runs in its own process (holder-freeze).
    pub process: Option<u32>,
    /// Clients of the try.
    pub clients: usize,
    /// The try's lock name.
    pub name: &'a str,
    /// The server key whose PTTL shows the try's lease.
    pub key: &'a str,
}

/// What a fault is applied to in one cell.
pub(super) struct Injector<'a> {
    /// The cell's containers.
    pub infra: &'a Infra,
    /// The node holding the lock key when the cell started.
    pub master: &'a Node,
    /// The cell's lease TTL.
    pub ttl: Duration,
    /// When the fault is due (run time).
    pub fault_at: Duration,
    /// The tries, side by side.
    pub tries: Vec<TryView<'a>>,
}

/// One try's outcome of a fault: start stamp, what was done, whether it landed and why.
pub(super) struct Hit {
    pub start: u64,
    pub note: String,
    pub landed: bool,
    pub evidence: String,
}

impl Injector<'_> {
    pub(super) fn ttl_ns(&self) -> u64 {
        u64::try_from(self.ttl.as_nanos()).unwrap_or(u64::MAX)
    }

    /// Run time (ns) by the first try's clock (all tries share the cell's origin).
    pub(super) fn now_ns(&self) -> u64 {
        self.tries.first().map_or(0, |t| t.history.now_ns())
    }

    /// Marks every client of every try impaired until `until_ns`.
    pub(super) fn impair_all(&self, until_ns: u64) {
        for t in &self.tries {
            impair(t.history, 0..t.clients, until_ns);
        }
    }

    /// As [`begin_outage`](Self::begin_outage), but first waits (bounded) for the first
    /// try's lock to change hands, so the fault hits a hold that was just granted: its
    /// holder's next renewal is a whole renewal interval (TTL/3) away, the widest window
    /// the fault can open. The other tries are hit wherever their holds happen to be.
    pub(super) async fn begin_outage_at_grant(
        &self,
        impaired_for: Duration,
    ) -> (Vec<Option<usize>>, u64) {
        if let Some(first) = self.tries.first() {
            wait_for_next_grant(first.board).await;
        }
        self.begin_outage(impaired_for).await
    }

    /// Waits (bounded) for a holder in every try, marks every client impaired until
    /// `impaired_for` after now (plus two TTLs), and returns each try's holder and the
    /// start stamp.
    pub(super) async fn begin_outage(&self, impaired_for: Duration) -> (Vec<Option<usize>>, u64) {
        let holders = self.wait_for_holders().await;
        let start = self.now_ns();
        self.impair_all(start + self.ttl_ns() * 2 + impaired_for.as_nanos() as u64);
        (holders, start)
    }

    /// Waits (bounded by [`HOLDER_WAIT`]) until every try has a holder; each try's holder.
    pub(super) async fn wait_for_holders(&self) -> Vec<Option<usize>> {
        let deadline = Instant::now() + HOLDER_WAIT;
        while self.tries.iter().any(|t| t.board.holder().is_none()) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        self.tries.iter().map(|t| t.board.holder()).collect()
    }

    /// The same hit for every try (a fault on the shared node with no holder to aim at).
    pub(super) fn shared_hits(
        &self,
        start: u64,
        note: &str,
        landed: bool,
        evidence: &str,
    ) -> Vec<Hit> {
        self.tries
            .iter()
            .map(|_| Hit {
                start,
                note: note.to_owned(),
                landed,
                evidence: evidence.to_owned(),
            })
            .collect()
    }
}

/// One hit per try of a node fault: landed when the fault was observed (`observed`) and
/// the try had a holder when it began.
pub(super) fn node_hits(
    holders: &[Option<usize>],
    start: u64,
    note: &str,
    observed: (bool, &str),
) -> Vec<Hit> {
    holders
        .iter()
        .map(|holder| Hit {
            start,
            note: format!("{note} while {} held", holder_label(*holder)),
            landed: observed.0 && holder.is_some(),
            evidence: format!(
                "{}; {}",
                observed.1,
                holder.map_or("nobody held".to_owned(), |h| format!("c{h} held"))
            ),
        })
        .collect()
}
