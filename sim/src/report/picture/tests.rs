//! The picture of hand-made histories: lanes, bands, problem marks, well-formed XML, and a
//! bounded size for a long run.

#![allow(clippy::expect_used)]

use crate::checker::{FAULT_TOUCHED, Problem, ProblemKind};
use crate::world::calls::{Family, LockOp, LockReply, OpKind};
use crate::world::faults::{Fault, ProcSel};
use crate::world::history::{Access, FaultMark, HistEvent, HistKind};
use crate::world::net::Target;

use super::{Scene, render};

const S: u64 = 1_000_000_000;
const MS: u64 = 1_000_000;

fn ev(at: u64, proc: usize, lock: &str, kind: HistKind) -> HistEvent {
    HistEvent {
        at,
        proc,
        incarnation: 0,
        lock: lock.to_owned(),
        kind,
    }
}

/// A wait, a grant's call and reply, the belief, and its release's call and reply.
fn hold(h: &mut Vec<HistEvent>, proc: usize, token: u64, (from, to): (u64, u64)) {
    let id = h.len() as u64;
    let op = |kind| LockOp {
        family: Family::Mutex,
        kind,
        hold: token,
        owner: token,
        ttl_ms: 1000,
        queued: false,
        entry_ms: 0,
    };
    let key = "leasehold:{res}";
    let target = Target::Node(0);
    h.push(ev(from - 2 * MS, proc, "res", HistKind::WaitStart));
    let (call, reply) = (op(OpKind::Acquire), LockReply::Granted { token });
    h.push(ev(
        from - MS,
        proc,
        key,
        HistKind::Call {
            id,
            target,
            op: call,
        },
    ));
    h.push(ev(from, proc, key, HistKind::Return { id, reply }));
    let access = Access::Exclusive;
    h.push(ev(from, proc, "res", HistKind::Acquired { token, access }));
    h.push(ev(to, proc, "res", HistKind::Released));
    let (call, reply) = (op(OpKind::Release), LockReply::Released(0));
    h.push(ev(
        to,
        proc,
        key,
        HistKind::Call {
            id: id + 1,
            target,
            op: call,
        },
    ));
    h.push(ev(
        to + MS,
        proc,
        key,
        HistKind::Return { id: id + 1, reply },
    ));
}

fn pause(proc: usize, from: u64, ms: u64) -> FaultMark {
    FaultMark {
        fault: Fault::Pause {
            who: ProcSel::Holder,
            ms,
        },
        proc: Some((proc, 0)),
        from,
        until: from + ms * MS,
    }
}

fn overlap(at: u64, excused: bool, touched_by: &[&str]) -> Problem {
    Problem {
        kind: ProblemKind::Overlap,
        lock: "res".to_owned(),
        at,
        detail: "res: c0.0 <held> while c1.0 was granted & more".to_owned(),
        touched_by: touched_by.iter().map(|k| (*k).to_owned()).collect(),
        excused,
        rule: excused.then_some(FAULT_TOUCHED),
        excuse: excused.then(|| touched_by.join(", ")),
    }
}

/// Tags balance and every `&` starts an entity: enough of XML's well-formedness to catch
/// an unescaped string or a tag left open.
fn assert_well_formed(doc: &str) {
    let mut open: Vec<&str> = Vec::new();
    let mut rest = doc;
    while let Some(start) = rest.find('<') {
        let text = &rest[..start];
        for (i, _) in text.match_indices('&') {
            let entity = &text[i..];
            assert!(
                ["&amp;", "&lt;", "&gt;", "&quot;", "&apos;"]
                    .iter()
                    .any(|e| entity.starts_with(e)),
                "bare & in {text:?}"
            );
        }
        let end = rest[start..].find('>').expect("a tag ends") + start;
        let tag = &rest[start + 1..end];
        assert!(!tag.contains('<'), "a tag inside a tag: {tag}");
        if tag.starts_with('?') || tag.ends_with('/') {
        } else if let Some(name) = tag.strip_prefix('/') {
            assert_eq!(open.pop(), Some(name), "</{name}> closes what was open");
        } else {
            open.push(tag.split_whitespace().next().expect("a tag has a name"));
        }
        rest = &rest[end + 1..];
    }
    assert!(open.is_empty(), "left open: {open:?}");
}

#[test]
fn overlapping_holds_under_a_pause_show_lanes_band_and_the_unexcused_problem() {
    let mut history = Vec::new();
    hold(&mut history, 0, 7, (S, 4 * S));
    hold(&mut history, 1, 8, (2 * S + 500 * MS, 3 * S));
    history.sort_by_key(|e| e.at);
    let faults = [pause(0, S + 500 * MS, 2000)];
    let problems = [overlap(2 * S + 500 * MS, false, &[])];
    let doc = render(&Scene {
        title: "hand-made <run>",
        history: &history,
        faults: &faults,
        problems: &problems,
        end: 5 * S,
    });
    assert_well_formed(&doc);
    assert!(doc.contains("hand-made &lt;run&gt;"), "the title, escaped");
    for lane in ["client c0", "client c1", "node 0", "lock res"] {
        assert!(doc.contains(&format!(">{lane}<")), "lane {lane}");
    }
    assert!(doc.contains(">pause c0.0 2000 ms<"), "the fault's label");
    let bands = doc
        .lines()
        .filter(|l| l.starts_with(r#"<rect class="band""#) && l.contains("<title>pause c0.0"))
        .count();
    assert_eq!(bands, 1, "one band, on c0's lane");
    assert!(
        doc.contains(">t7<") && doc.contains(">t8<"),
        "tokens in the bars"
    );
    assert!(
        doc.contains("believed it held res (exclusive) with token 7 from 1.000000s to 4.000000s")
    );
    assert!(
        doc.contains("held for c1.0 with token 8 from 2.500000s"),
        "server truth"
    );
    assert!(
        doc.contains(r#"<line class="problem""#),
        "the problem's line"
    );
    assert!(doc.contains("#1 Overlap on res at 2.500000s: not excused (touched by no fault)"));
    assert!(
        doc.contains("c0.0 &lt;held&gt; while c1.0 was granted &amp; more"),
        "detail, escaped"
    );
    assert!(
        !doc.contains(r#"class="window""#),
        "a short run is drawn whole"
    );
}

#[test]
fn an_excused_problem_is_named_with_the_faults_that_excuse_it() {
    let mut history = Vec::new();
    hold(&mut history, 0, 7, (S, 4 * S));
    hold(&mut history, 1, 8, (2 * S + 500 * MS, 3 * S));
    history.sort_by_key(|e| e.at);
    let problems = [overlap(2 * S + 500 * MS, true, &["pause"])];
    let doc = render(&Scene {
        title: "excused",
        history: &history,
        faults: &[pause(0, S + 500 * MS, 2000)],
        problems: &problems,
        end: 5 * S,
    });
    assert!(doc.contains("#1 Overlap on res at 2.500000s: excused (touched by pause)"));
    assert!(doc.contains(r#"<line class="problem excused""#));
    assert!(!doc.contains(": not excused"));
}

#[test]
fn a_long_busy_run_stays_small_and_zooms_on_its_first_unexcused_problem() {
    // 30 s of 8 ms holds handed between two clients: 3,000 holds, each with its wait and
    // its server hold.
    let mut history = Vec::new();
    for i in 0..3_000u64 {
        let from = S + i * 10 * MS;
        hold(&mut history, (i % 2) as usize, i + 1, (from, from + 8 * MS));
    }
    history.sort_by_key(|e| e.at);
    let end = 31 * S + 100 * MS;
    let problems = [
        overlap(5 * S, true, &["pause"]),
        overlap(20 * S, false, &[]),
    ];
    let doc = render(&Scene {
        title: "long",
        history: &history,
        faults: &[pause(0, 4 * S, 2000)],
        problems: &problems,
        end,
    });
    assert_well_formed(&doc);
    assert!(doc.len() < 400_000, "{} bytes", doc.len());
    assert!(doc.contains(">whole run<"), "an overview strip");
    assert!(
        doc.contains("the detail below: 18.000000s to 21.000000s"),
        "the window is around the unexcused problem"
    );
    let rects = doc.matches("<rect").count();
    assert!(
        rects < 3_000,
        "{rects} rectangles for 9,000 marks: the overview merges"
    );
    assert!(
        doc.contains("with token 1851 from"),
        "holds in the window are drawn one by one"
    );
    assert!(
        !doc.contains("with token 5 from"),
        "holds long before it are not"
    );
}

#[test]
fn a_server_lane_ends_a_hold_where_the_oracle_saw_it_on_no_node() {
    let mut history = Vec::new();
    hold(&mut history, 0, 7, (S, 3 * S));
    let gone = HistKind::LeaseGone {
        holding: 0,
        quorum: 1,
    };
    history.push(ev(S + 500 * MS, 0, "res", gone));
    history.sort_by_key(|e| e.at);
    let doc = render(&Scene {
        title: "jumped",
        history: &history,
        faults: &[],
        problems: &[],
        end: 4 * S,
    });
    assert!(doc.contains(
        "held for c0.0 with token 7 from 1.000000s (grant&apos;s reply) to 1.500000s (ended by the oracle seeing it on no node)"
    ));
    assert!(
        doc.contains("but only 0 of the 1 nodes needed hold it"),
        "the oracle's tick"
    );
    assert!(doc.contains("none: the checker found nothing"));
}
