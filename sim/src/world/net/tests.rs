//! The network's unit tests: lane order, loss breaking a connection, held messages and
//! the retransmission budget.

use super::*;

fn lossy(loss: f64) -> NetState {
    NetState::new(
        NetConfig {
            loss,
            ..NetConfig::default()
        },
        SimRng::new(7),
    )
}

const CLIENT: Endpoint = Endpoint::Process(0);
const NODE: Endpoint = Endpoint::Node(0);
const BUDGET: u64 = 3_000_000_000;

/// A request on connection `conn` tagged `req`.
fn request(conn: ConnId, req: ReqId) -> impl FnOnce() -> Event {
    move || Event::Request {
        conn,
        epoch: 0,
        to: NODE,
        req,
        body: RequestBody::Command(Vec::new()),
    }
}

/// The request id of a released request event.
fn req_of(event: &Event) -> ReqId {
    match event {
        Event::Request { req, .. } => *req,
        other => panic!("not a request: {other:?}"),
    }
}

fn send(net: &mut NetState, now: u64, lane: Lane, req: ReqId) -> Arrival {
    let (from, to) = match lane {
        Lane::Down(_) => (NODE, CLIENT),
        _ => (CLIENT, NODE),
    };
    let conn = match lane {
        Lane::Up(c) | Lane::Down(c) => c,
        _ => 0,
    };
    net.send(now, from, to, lane, request(conn, req))
}

#[test]
fn the_budget_stays_below_the_checkers_ambiguous_window() {
    assert_eq!(nanos(RETRANSMIT_BUDGET), BUDGET);
    assert!(RETRANSMIT_BUDGET < Duration::from_secs(10));
}

/// TCP never loses one message and delivers the next: a loss breaks the connection,
/// everything after it on either lane is lost, and once reset it carries messages again.
#[test]
fn a_lost_message_breaks_its_connection_until_the_reset() {
    let mut net = lossy(1.0);
    let Arrival::Reset(at, conn) = send(&mut net, 1_000, Lane::Up(3), 1) else {
        panic!("a lost request must reset its connection");
    };
    assert_eq!(conn, 3);
    assert!(at >= 1_000 + nanos(net.config.min_delay));
    net.config.loss = 0.0;
    assert!(matches!(
        send(&mut net, 2_000, Lane::Up(3), 2),
        Arrival::Lost
    ));
    assert!(matches!(
        send(&mut net, 2_000, Lane::Down(3), 2),
        Arrival::Lost
    ));
    assert!(matches!(
        send(&mut net, 2_000, Lane::Up(4), 3),
        Arrival::At(..)
    ));
    net.mend(3);
    assert!(matches!(
        send(&mut net, 3_000, Lane::Up(3), 4),
        Arrival::At(..)
    ));
}

/// A replication batch lost is a gap the replica resyncs across, not a reset.
#[test]
fn a_lost_replication_batch_is_only_lost() {
    let mut net = lossy(1.0);
    assert!(matches!(
        send(&mut net, 0, Lane::Repl(0, 1), 1),
        Arrival::Lost
    ));
    net.config.loss = 0.0;
    assert!(matches!(
        send(&mut net, 0, Lane::Repl(0, 1), 2),
        Arrival::At(..)
    ));
}

/// A replication batch sent across a cut is gone, not held: the replica resyncs.
#[test]
fn a_cut_replication_link_loses_what_crosses_it() {
    let mut net = lossy(0.0);
    let (master, replica) = (Endpoint::Node(0), Endpoint::Node(1));
    assert!(net.set_cut(0, master, replica, true).is_empty());
    let batch = net.send(0, master, replica, Lane::Repl(0, 1), request(0, 1));
    assert!(matches!(batch, Arrival::Lost));
    assert!(net.set_cut(1_000, master, replica, false).is_empty());
}

/// What is sent into a cut arrives after the heal, in the order it was sent, and a
/// message sent after the heal still arrives behind it.
#[test]
fn a_cut_holds_a_lane_in_order_until_the_heal() {
    let mut net = lossy(0.0);
    assert!(net.set_cut(0, CLIENT, NODE, true).is_empty());
    let Arrival::Held(Some(check)) = send(&mut net, 1_000, Lane::Up(3), 1) else {
        panic!("a request sent into a cut must be held, arming the budget");
    };
    assert_eq!(check, 1_000 + BUDGET);
    for req in 2..=5 {
        // One budget check per connection.
        assert!(matches!(
            send(&mut net, 1_000 + req, Lane::Up(3), req),
            Arrival::Held(None)
        ));
    }
    let heal = 2_000_000_000;
    let released = net.set_cut(heal, CLIENT, NODE, false);
    let order: Vec<ReqId> = released.iter().map(|(_, e)| req_of(e)).collect();
    assert_eq!(order, [1, 2, 3, 4, 5]);
    let times: Vec<u64> = released.iter().map(|(at, _)| *at).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]));
    assert!(times[0] >= heal + nanos(net.config.min_delay));
    let Arrival::At(after, _) = send(&mut net, heal, Lane::Up(3), 6) else {
        panic!("a healed link carries messages again");
    };
    assert!(after >= times[4]);
    // Nothing is held any more: the budget check finds the connection clear.
    assert_eq!(net.expire(check, 3), Expiry::Clear);
}

/// A message sent on a lane that holds an earlier one waits behind it even if its own
/// link is up.
#[test]
fn a_held_message_blocks_its_lane_not_others() {
    let mut net = lossy(0.0);
    let other = Endpoint::Node(1);
    let _ = net.set_cut(0, CLIENT, NODE, true);
    assert!(matches!(
        send(&mut net, 0, Lane::Up(3), 1),
        Arrival::Held(_)
    ));
    let behind = net.send(10, CLIENT, other, Lane::Up(3), request(3, 2));
    assert!(matches!(behind, Arrival::Held(None)));
    let elsewhere = net.send(10, CLIENT, other, Lane::Up(4), request(4, 3));
    assert!(matches!(elsewhere, Arrival::At(..)));
    let released = net.set_cut(1_000, CLIENT, NODE, false);
    let order: Vec<ReqId> = released.iter().map(|(_, e)| req_of(e)).collect();
    assert_eq!(order, [1, 2]);
}

/// A cut longer than the budget breaks the connection at the budget's end: what it held
/// never arrives, not even after the heal, and it carries nothing until reset.
#[test]
fn a_cut_longer_than_the_budget_breaks_the_connection() {
    let mut net = lossy(0.0);
    let _ = net.set_cut(0, CLIENT, NODE, true);
    let Arrival::Held(Some(check)) = send(&mut net, 1_000, Lane::Up(3), 1) else {
        panic!("held");
    };
    assert!(matches!(
        send(&mut net, 5_000, Lane::Down(3), 2),
        Arrival::Held(None)
    ));
    assert_eq!(net.expire(check - 1, 3), Expiry::Recheck(check));
    assert_eq!(net.expire(check, 3), Expiry::Broken);
    assert!(net.set_cut(check + 1, CLIENT, NODE, false).is_empty());
    assert!(matches!(
        send(&mut net, check + 2, Lane::Up(3), 3),
        Arrival::Lost
    ));
    net.mend(3);
    assert!(matches!(
        send(&mut net, check + 3, Lane::Up(3), 4),
        Arrival::At(..)
    ));
}

/// The budget counts from the oldest message still held: a connection whose early
/// messages were delivered is rechecked for the ones held later.
#[test]
fn the_budget_counts_from_the_oldest_held_message() {
    let mut net = lossy(0.0);
    let _ = net.set_cut(0, CLIENT, NODE, true);
    let Arrival::Held(Some(check)) = send(&mut net, 0, Lane::Up(3), 1) else {
        panic!("held");
    };
    assert_eq!(net.set_cut(1_000, CLIENT, NODE, false).len(), 1);
    let _ = net.set_cut(2_000, CLIENT, NODE, true);
    assert!(matches!(
        send(&mut net, 2_000, Lane::Up(3), 2),
        Arrival::Held(None)
    ));
    assert_eq!(net.expire(check, 3), Expiry::Recheck(2_000 + BUDGET));
    assert_eq!(net.expire(2_000 + BUDGET, 3), Expiry::Broken);
}

/// A reset or closed connection's held messages die with its socket.
#[test]
fn a_reset_connection_drops_what_it_held() {
    let mut net = lossy(0.0);
    let _ = net.set_cut(0, CLIENT, NODE, true);
    assert!(matches!(
        send(&mut net, 0, Lane::Up(3), 1),
        Arrival::Held(_)
    ));
    net.forget(3);
    assert!(net.set_cut(1_000, CLIENT, NODE, false).is_empty());
    assert_eq!(net.expire(BUDGET, 3), Expiry::Clear);
}

/// A one-way cut holds what crosses it in its direction only: requests still arrive while
/// replies wait for the heal.
#[test]
fn a_one_way_cut_holds_replies_and_lets_requests_through() {
    let mut net = lossy(0.0);
    assert!(net.set_one_way(0, NODE, CLIENT, true).is_empty());
    assert!(net.is_cut(NODE, CLIENT) && !net.is_cut(CLIENT, NODE));
    assert!(matches!(
        send(&mut net, 1_000, Lane::Up(3), 1),
        Arrival::At(..)
    ));
    assert!(matches!(
        send(&mut net, 2_000, Lane::Down(3), 2),
        Arrival::Held(Some(_))
    ));
    // Healing the other way, which is not cut, releases nothing.
    assert!(net.set_one_way(3_000, CLIENT, NODE, false).is_empty());
    let released = net.set_one_way(4_000, NODE, CLIENT, false);
    assert_eq!(
        released.iter().map(|(_, e)| req_of(e)).collect::<Vec<_>>(),
        [2]
    );
}
