//! Steps aimed at a deadline ([`Step::Approach`](crate::steps::Step)): the model judged
//! at every millisecond the server may have run the step at.
//!
//! A step sent within a round trip of a hold's or an entry's deadline may run on the
//! server on either side of it, and the host cannot tell which: the server ran it at some
//! instant between its send and its reply, and the model's clock lags the server's by up
//! to the round trip of the `TIME` that set it (`timing.rs`). The deadline itself is as
//! uncertain: the step that set it (the anchor) ran at some millisecond of its own window.
//! So the model runs the anchor at each millisecond of its window and the aimed step at
//! each of its own, each pair on a fresh model that replays the case so far (a model holds
//! a Lua state and cannot be copied), and the real reply and messages must agree with one
//! of those runs. The case goes on from the run that agreed. On a server whose clock moves
//! on while a script runs (Redis before 7.2), a step no such run agrees with is judged
//! against [`late_runs`] too: its script, or the anchor's, reading the next millisecond
//! from one of its calls on.
//!
//! What this catches: a model that lets a key, an entry or a hold lapse a millisecond early
//! or late (`>=` for `>`), or reads its clock at another point of a script, disagrees with
//! every run whose window lies on one side of the boundary. The windows are a fraction of a
//! millisecond to a few wide, and the aimed offsets spread over ±2 ms, so such a model
//! fails within the test's cases; a window wide enough to hide it is reported as such.

use std::time::Duration;

use leasehold_sim::engine::clock::ClockModel;
use leasehold_sim::model::{Executed, LateClock, Node, Persistence};

use crate::canon::{Canon, Tolerance, canon_result};
use crate::pubsub::{Message, model_delivered, subscribe_model};
use crate::state::model_state;

/// How far either side of its window an aimed step is run again to tell whether its
/// outcome depends on the deadline at all.
const SENSITIVITY: Duration = Duration::from_millis(3);

/// A fresh model whose wall clock reads `server_us` at the case clock's start.
pub fn model_at(server_us: i64) -> Node {
    let epoch_us = Node::new(0, Persistence::None, ClockModel::new(Duration::ZERO, false))
        .unwrap()
        .wall_us(0);
    let offset = Duration::from_micros(u64::try_from(server_us - epoch_us).unwrap());
    let mut model = Node::new(0, Persistence::None, ClockModel::new(offset, false)).unwrap();
    subscribe_model(&mut model);
    model
}

/// The model times at which the server may have run a step: from its send to its reply,
/// later by as much as the model's clock may lag the server's (`CaseClock::server_window`).
pub type Window = (u64, u64);

/// When a command ran on the model: its model time, and the later clock its script's
/// calls read from some call on (see [`late_runs`]).
pub type At = (u64, Option<LateClock>);

/// The commands the model has run in this case, each at its model time: enough to build
/// the model again as it stands, or as it would stand had the step that set the aimed-at
/// deadline (the anchor) run at another millisecond of its window.
pub struct Replay {
    server_us: i64,
    /// Each command and when it ran.
    ran: Vec<(Vec<Vec<u8>>, At)>,
    /// The anchor's index in `ran`, and its window.
    anchor: Option<(usize, Window)>,
}

impl Replay {
    pub fn new(server_us: i64) -> Self {
        Self {
            server_us,
            ran: Vec::new(),
            anchor: None,
        }
    }

    /// A model that has run every recorded command (the anchor `at`, if given).
    pub fn model(&self, anchor_at: Option<At>) -> Node {
        let mut model = model_at(self.server_us);
        for (i, (args, at)) in self.ran.iter().enumerate() {
            let (t, late) = match (self.anchor, anchor_at) {
                (Some((anchor, _)), Some(at)) if anchor == i => at,
                _ => *at,
            };
            match late {
                Some(late) => model.execute_late(args, t, late),
                None => model.execute(args, t),
            };
        }
        model
    }

    /// Records that the model ran `args` at `t`.
    pub fn record(&mut self, args: Vec<Vec<u8>>, t: u64) {
        self.ran.push((args, (t, None)));
    }

    /// Records that the model ran `args`, which set the deadline the next step aims at, at
    /// the start of its window.
    pub fn record_anchor(&mut self, args: Vec<Vec<u8>>, window: Window) {
        self.anchor = Some((self.ran.len(), window));
        self.record(args, window.0);
    }

    /// Goes on from `run`: the anchor ran when `run` assumed, then the aimed step.
    pub fn settle(&mut self, args: Vec<Vec<u8>>, run: &Run) {
        if let (Some((anchor, _)), Some(at)) = (self.anchor.take(), run.anchor) {
            self.ran[anchor].1 = at;
        }
        self.ran.push((args, (run.t, run.late)));
    }

    /// The first model time, and the start of every later server millisecond, in `window`.
    fn times(&self, (lo, hi): Window) -> Vec<u64> {
        let base_us = model_at(self.server_us).wall_us(0);
        let ms_of = |t: u64| (base_us + i64::try_from(t / 1_000).unwrap()).div_euclid(1_000);
        let start_of = |ms: i64| u64::try_from((ms * 1_000 - base_us) * 1_000).unwrap();
        std::iter::once(lo)
            .chain((ms_of(lo) + 1..=ms_of(hi)).map(start_of))
            .collect()
    }
}

/// One run of the aimed step on the model.
pub struct Run {
    /// The model after the step.
    pub model: Node,
    /// When the anchor ran in this run (none without an anchor).
    pub anchor: Option<At>,
    /// Model time the step ran at.
    pub t: u64,
    /// The later millisecond the step's script read its clock at from some call on.
    pub late: Option<LateClock>,
    pub reply: Canon,
    pub messages: Vec<Message>,
}

fn run_at(
    replay: &Replay,
    args: &[Vec<u8>],
    (anchor, t): (Option<At>, u64),
    late: Option<LateClock>,
) -> Run {
    let mut model = replay.model(anchor);
    let outcome = match late {
        Some(late) => model.execute_late(args, t, late),
        None => model.execute(args, t),
    };
    let reply = match outcome.executed {
        Executed::Reply(reply) => canon_result(reply.into_result()),
        Executed::Wait { .. } => Canon::Other("WAIT".into()),
    };
    let messages = model_delivered(&model, &outcome.effects.published);
    Run {
        model,
        anchor,
        t,
        late,
        reply,
        messages,
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap()
}

/// The step run at every server millisecond of `window`, after the anchor run at every
/// millisecond of its own window: the deadline moves with the anchor.
pub fn runs_in(replay: &Replay, args: &[Vec<u8>], window: Window) -> Vec<Run> {
    starts(replay, window)
        .into_iter()
        .map(|at| run_at(replay, args, at, None))
        .collect()
}

/// Every (anchor time, step time) pair [`runs_in`] runs.
fn starts(replay: &Replay, window: Window) -> Vec<(Option<At>, u64)> {
    let anchors = match replay.anchor {
        Some((_, anchor)) => replay
            .times(anchor)
            .into_iter()
            .map(|t| Some((t, None)))
            .collect(),
        None => vec![None],
    };
    let times = replay.times(window);
    anchors
        .into_iter()
        .flat_map(|anchor| times.iter().map(move |&t| (anchor, t)))
        .collect()
}

/// Each way a script started at `t` reads a later millisecond of `times` from some call
/// on, for a script that made `calls` calls at `t`.
fn lates(t: u64, times: &[u64], calls: usize) -> impl Iterator<Item = LateClock> + '_ {
    times
        .iter()
        .filter(move |&&later| later > t)
        .flat_map(move |&later| {
            (0..calls).map(move |from_call| LateClock {
                from_call,
                t: later,
            })
        })
}

/// The runs of a server whose clock moves on while a script runs (Redis before 7.2, see
/// [`LateClock`]): the step's script, or the anchor's, starts at a millisecond of its
/// window and, from each of its `redis.call`s on, reads a later millisecond of that
/// window. A script of a few dozen µs straddles a millisecond now and then; a step aimed at
/// a deadline sees it when a `PTTL` reads 0 ms left of a key its lookups still keep, or
/// when the anchor set a hold's deadline from its `TIME` and the key's expiry a
/// millisecond later.
pub fn late_runs(replay: &Replay, args: &[Vec<u8>], window: Window) -> Vec<Run> {
    let times = replay.times(window);
    let mut runs = Vec::new();
    for (anchor, t) in starts(replay, window) {
        let calls = run_at(replay, args, (anchor, t), None).model.script_calls();
        for late in lates(t, &times, calls) {
            runs.push(run_at(replay, args, (anchor, t), Some(late)));
        }
    }
    // The anchor is the last command recorded (an aimed step follows it at once), so the
    // model's last script run is the anchor's.
    if let Some((index, anchor_window)) = replay.anchor
        && index + 1 == replay.ran.len()
    {
        let anchor_times = replay.times(anchor_window);
        for &at in &anchor_times {
            let calls = replay.model(Some((at, None))).script_calls();
            for late in lates(at, &anchor_times, calls) {
                for &t in &times {
                    runs.push(run_at(replay, args, (Some((at, Some(late))), t), None));
                }
            }
        }
    }
    runs
}

/// Whether the step's outcome depends on when it ran: its reply or the keys left live
/// differ between runs [`SENSITIVITY`] before and after its window. A step aimed at a
/// deadline that is not sensitive has not tested the deadline.
pub fn sensitive(
    replay: &Replay,
    args: &[Vec<u8>],
    (lo, hi): Window,
    tolerance: Tolerance,
) -> bool {
    let margin = nanos(SENSITIVITY);
    let early = run_at(replay, args, (None, lo.saturating_sub(margin)), None);
    let late = run_at(replay, args, (None, hi + margin), None);
    let live = |run: &Run| {
        model_state(&run.model, run.t)
            .into_keys()
            .collect::<Vec<_>>()
    };
    let slack = Tolerance(tolerance.0 + 2 * i64::try_from(SENSITIVITY.as_millis()).unwrap());
    !early.reply.agrees(&late.reply, slack) || live(&early) != live(&late)
}
