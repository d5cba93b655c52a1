//! The whole observable keyspace of each side (TYPE, PTTL and contents of every key), and
//! when the two agree.

use std::collections::BTreeMap;

use leasehold_sim::model::{Data, Node};
use redis::aio::MultiplexedConnection;

use crate::canon::{Canon, Tolerance, all_agree};

/// One key's observable state: TYPE, PTTL and contents (hash fields sorted: HGETALL order
/// is unspecified by Redis).
#[derive(Debug, Clone)]
pub struct KeyState {
    kind: String,
    pttl: Canon,
    contents: Vec<Canon>,
}

pub async fn real_state(conn: &mut MultiplexedConnection) -> BTreeMap<String, KeyState> {
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query_async(conn).await.unwrap();
    let mut state = BTreeMap::new();
    for key in keys {
        let kind: String = redis::cmd("TYPE")
            .arg(&key)
            .query_async(conn)
            .await
            .unwrap();
        let pttl: i64 = redis::cmd("PTTL")
            .arg(&key)
            .query_async(conn)
            .await
            .unwrap();
        let contents: Vec<Canon> = match kind.as_str() {
            "string" => {
                let v: Vec<u8> = redis::cmd("GET").arg(&key).query_async(conn).await.unwrap();
                vec![Canon::Bytes(v)]
            }
            "hash" => {
                let mut pairs: Vec<(Vec<u8>, Vec<u8>)> = redis::cmd("HGETALL")
                    .arg(&key)
                    .query_async(conn)
                    .await
                    .unwrap();
                pairs.sort();
                pairs
                    .into_iter()
                    .flat_map(|(f, v)| [Canon::Bytes(f), Canon::Bytes(v)])
                    .collect()
            }
            "list" => {
                let items: Vec<Vec<u8>> = redis::cmd("LRANGE")
                    .arg(&key)
                    .arg(0)
                    .arg(-1)
                    .query_async(conn)
                    .await
                    .unwrap();
                items.into_iter().map(Canon::Bytes).collect()
            }
            "zset" => {
                let mut items: Vec<(Vec<u8>, Vec<u8>)> = redis::cmd("ZRANGE")
                    .arg(&key)
                    .arg(0)
                    .arg(-1)
                    .arg("WITHSCORES")
                    .query_async(conn)
                    .await
                    .unwrap();
                // By member, as a hash's fields (and `model_state`'s sorted sets): scores are
                // server ms, compared within the tolerance, so two members whose scores tie on
                // one side and lie 1 ms apart on the other would otherwise swap places.
                items.sort();
                items
                    .into_iter()
                    .flat_map(|(m, s)| [Canon::Bytes(m), Canon::Bytes(s)])
                    .collect()
            }
            other => vec![Canon::Other(other.to_owned())],
        };
        state.insert(
            key,
            KeyState {
                kind,
                pttl: Canon::Int(pttl),
                contents,
            },
        );
    }
    state
}

pub fn model_state(node: &Node, t: u64) -> BTreeMap<String, KeyState> {
    let now_ms = node.wall_us(t) / 1_000;
    let mut state = BTreeMap::new();
    for (key, entry) in node.data().iter() {
        // Expired strictly after its deadline, as Redis's `keyIsExpired` (`now > when`).
        if entry.expires_at.is_some_and(|at| now_ms > at) {
            continue;
        }
        let contents = match &entry.data {
            Data::Str(v) => vec![Canon::Bytes(v.clone())],
            Data::Hash(fields) => {
                let mut pairs = fields.clone();
                pairs.sort();
                pairs
                    .into_iter()
                    .flat_map(|(f, v)| [Canon::Bytes(f), Canon::Bytes(v)])
                    .collect()
            }
            Data::List(items) => items.iter().cloned().map(Canon::Bytes).collect(),
            Data::ZSet(members) => {
                // By member, as `real_state` orders a sorted set.
                let mut pairs: Vec<(Vec<u8>, Vec<u8>)> = members
                    .iter()
                    .map(|(s, m)| (m.clone(), format_score(*s).into_bytes()))
                    .collect();
                pairs.sort();
                pairs
                    .into_iter()
                    .flat_map(|(m, s)| [Canon::Bytes(m), Canon::Bytes(s)])
                    .collect()
            }
        };
        state.insert(
            String::from_utf8_lossy(key).into_owned(),
            KeyState {
                kind: entry.data.type_name().to_owned(),
                pttl: Canon::Int(entry.expires_at.map_or(-1, |at| at - now_ms)),
                contents,
            },
        );
    }
    state
}

fn format_score(score: f64) -> String {
    if score.fract() == 0.0 && score.abs() < 1e17 {
        format!("{}", score as i64)
    } else {
        format!("{score}")
    }
}

/// Whether two PTTLs agree: "no expiry" (-1) on both sides, or remaining times within
/// `tolerance` however short (a key set to lapse in 20 ms is read a few ms later).
fn pttl_agrees(real: &Canon, model: &Canon, tolerance: Tolerance) -> bool {
    match (real, model) {
        (Canon::Int(r), Canon::Int(m)) if *r >= 0 && *m >= 0 => (r - m).abs() <= tolerance.0,
        _ => real.agrees(model, tolerance),
    }
}

/// Whether both sides hold the same keys with agreeing types, PTTLs and contents.
pub fn states_agree(
    real: &BTreeMap<String, KeyState>,
    model: &BTreeMap<String, KeyState>,
    tolerance: Tolerance,
) -> bool {
    real.len() == model.len()
        && real.iter().zip(model).all(|((rk, r), (mk, m))| {
            rk == mk
                && r.kind == m.kind
                && pttl_agrees(&r.pttl, &m.pttl, tolerance)
                && all_agree(&r.contents, &m.contents, tolerance)
        })
}
