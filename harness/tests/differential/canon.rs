//! Replies and stored values in comparable form, and when two of them agree.
//!
//! Integers (or numeric strings, scores) of at least [`TIME_LIKE_MIN`] are time-derived
//! (PTTLs, deadlines in server ms, fencing tokens in server µs) and agree within the case's
//! [`Tolerance`]; everything else (counts, flags, the small values the generator writes,
//! error codes) must be equal.

use std::fmt;

use redis::Value;

/// Values at or above this are treated as time-derived (ms durations/deadlines, µs tokens).
/// Counts, flags and the small values the generator writes stay far below it.
const TIME_LIKE_MIN: i64 = 1_000;
/// Values at or above this are µs timestamps (fencing tokens); below, milliseconds.
const MICROS_MIN: i64 = 1_000_000_000_000_000;

/// How far a time-derived value may differ between the sides, in ms (see `timing.rs`).
#[derive(Debug, Clone, Copy)]
pub struct Tolerance(pub i64);

/// A reply or stored value in comparable form.
#[derive(Clone)]
pub enum Canon {
    Nil,
    Int(i64),
    Bytes(Vec<u8>),
    Status(String),
    Array(Vec<Canon>),
    /// Error code only, the message's first word (`ERR`, `WRONGTYPE`, `NOSCRIPT`, ...): the
    /// rest carries script SHAs and line numbers, and differs between servers (Valkey 8
    /// reworded NOSCRIPT's, Valkey 9.1 the Lua errors'), which is formatting, not semantics.
    Error(String),
    Other(String),
}

/// Bytes print as text: the keys, ids and values compared here are ASCII.
impl fmt::Debug for Canon {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Canon::Nil => f.write_str("nil"),
            Canon::Int(n) => write!(f, "{n}"),
            Canon::Bytes(b) => write!(f, "{:?}", String::from_utf8_lossy(b)),
            Canon::Status(s) => write!(f, "+{s}"),
            Canon::Array(items) => f.debug_list().entries(items).finish(),
            Canon::Error(code) => write!(f, "-{code}"),
            Canon::Other(other) => f.write_str(other),
        }
    }
}

fn numeric(bytes: &[u8]) -> Option<i64> {
    let text = std::str::from_utf8(bytes).ok()?;
    text.parse::<i64>().ok().or_else(|| {
        text.parse::<f64>()
            .ok()
            .filter(|f| f.fract() == 0.0)
            .map(|f| f as i64)
    })
}

fn close(a: i64, b: i64, tolerance: Tolerance) -> bool {
    if a == b {
        return true;
    }
    if a.min(b) < TIME_LIKE_MIN {
        return false;
    }
    let allowed = if a.min(b) >= MICROS_MIN {
        tolerance.0 * 1_000
    } else {
        tolerance.0
    };
    (a - b).abs() <= allowed
}

impl Canon {
    /// Whether `self` and `other` agree, time-derived values within `tolerance`.
    pub fn agrees(&self, other: &Self, tolerance: Tolerance) -> bool {
        use Canon::*;
        match (self, other) {
            (Nil, Nil) => true,
            (Int(a), Int(b)) => close(*a, *b, tolerance),
            // Text that is not one number compares word by word: a fair waiter's entry is
            // `<deadline ms> <TTL ms> <attempt>`.
            (Bytes(a), Bytes(b)) => match (numeric(a), numeric(b)) {
                (Some(x), Some(y)) => close(x, y, tolerance),
                _ => text_agrees(a, b, tolerance),
            },
            (Status(a), Status(b)) | (Error(a), Error(b)) | (Other(a), Other(b)) => a == b,
            (Array(a), Array(b)) => all_agree(a, b, tolerance),
            _ => false,
        }
    }
}

/// Whether two texts (message payloads) agree word by word: the separators between words
/// (any byte not an ASCII letter or digit) are equal, a decimal word (no leading zero)
/// agrees as a number, time-derived within `tolerance`, and any other word (hex ids,
/// zero-padded counters, names) is equal. A payload that carries a token or a TTL (the fair
/// hand-off's) is compared as a reply carrying them would be.
pub fn text_agrees(a: &[u8], b: &[u8], tolerance: Tolerance) -> bool {
    let separator = |c: &u8| !c.is_ascii_alphanumeric();
    let separators = |s: &[u8]| s.iter().copied().filter(separator).collect::<Vec<u8>>();
    let words = |s: &[u8]| s.split(separator).map(<[u8]>::to_vec).collect::<Vec<_>>();
    let decimal = |w: &[u8]| {
        let plain = !w.is_empty() && w.iter().all(u8::is_ascii_digit);
        let padded = w.len() > 1 && w[0] == b'0';
        (plain && !padded).then(|| std::str::from_utf8(w).ok()?.parse::<i64>().ok())?
    };
    separators(a) == separators(b)
        && words(a).iter().zip(words(b)).all(|(x, y)| {
            *x == y
                || matches!((decimal(x), decimal(&y)), (Some(p), Some(q)) if close(p, q, tolerance))
        })
}

/// Element-wise agreement of two sequences of equal length.
pub fn all_agree(a: &[Canon], b: &[Canon], tolerance: Tolerance) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.agrees(y, tolerance))
}

pub fn canon_value(value: Value) -> Canon {
    match value {
        Value::Nil => Canon::Nil,
        Value::Int(n) => Canon::Int(n),
        Value::BulkString(b) => Canon::Bytes(b),
        Value::SimpleString(s) => Canon::Status(s),
        Value::Okay => Canon::Status("OK".into()),
        Value::Array(items) => Canon::Array(items.into_iter().map(canon_value).collect()),
        Value::ServerError(e) => Canon::Error(e.code().to_owned()),
        other => Canon::Other(format!("{other:?}")),
    }
}

pub fn canon_result(result: redis::RedisResult<Value>) -> Canon {
    match result {
        Ok(v) => canon_value(v),
        Err(e) => Canon::Error(e.code().unwrap_or("?").to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEN_MS: Tolerance = Tolerance(10);

    #[test]
    fn payload_tokens_and_ttls_agree_within_the_tolerance() {
        let real = b"0000000000000001:fedcba9876543210:1795473918579325:60000:3";
        let model = b"0000000000000001:fedcba9876543210:1795473918572000:60000:3";
        assert!(text_agrees(real, model, TEN_MS));
        let late = b"0000000000000001:fedcba9876543210:1795473918560000:60000:3";
        assert!(!text_agrees(real, late, TEN_MS));
    }

    #[test]
    fn payload_ids_counters_and_separators_must_be_equal() {
        let real = b"0000000000000001:fedcba9876543210:7";
        for other in [
            &b"0000000000000002:fedcba9876543210:7"[..],
            b"0000000000000001:fedcba9876543211:7",
            b"0000000000000001:fedcba9876543210:8",
            b"0000000000000001|fedcba9876543210:7",
            b"0000000000000001:fedcba9876543210",
        ] {
            assert!(!text_agrees(real, other, TEN_MS), "{other:?}");
        }
        assert!(text_agrees(b"released", b"released", TEN_MS));
    }
}
