//! Durations in spec files as text a person can read and write: `"1500ms"`, `"2s"`.
//!
//! Used through `#[serde(with = "crate::engine::duration_text")]` on `Duration` fields (and the
//! [`option`] and [`pair`] modules on `Option<Duration>` and `(Duration, Duration)`).
//!
//! Invariant: the text is exact. A duration is written in the largest unit that divides it
//! (`s`, `ms`, `us`, `ns`), so reading it back gives the same duration to the nanosecond,
//! and a replayed spec runs the run it was saved from. Reading also accepts serde's own
//! form, `{"secs": 1, "nanos": 500000000}`, so specs saved before this format still load.

use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Nanoseconds per unit, largest first: the writer picks the first that divides the
/// duration, the reader accepts any of them.
const UNITS: [(&str, u128); 4] = [
    ("s", 1_000_000_000),
    ("ms", 1_000_000),
    ("us", 1_000),
    ("ns", 1),
];

/// Nanoseconds per second, to split a count of nanoseconds into a `Duration`.
const NANOS_PER_SEC: u128 = 1_000_000_000;

/// `d` as text in the largest unit that divides it (`"0s"` for zero).
pub fn to_text(d: Duration) -> String {
    let nanos = d.as_nanos();
    // The last unit (ns) divides every duration, so the search always finds one.
    let (unit, per) = UNITS
        .iter()
        .find(|(_, per)| nanos.is_multiple_of(*per))
        .copied()
        .unwrap_or(("ns", 1));
    format!("{}{unit}", nanos / per)
}

/// Parses `"<whole number><unit>"` with a unit among `s`, `ms`, `us`, `ns`; the error
/// names the text and what was wrong with it.
pub fn parse(text: &str) -> Result<Duration, String> {
    let digits = text.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit = &text[digits.len()..];
    let per = UNITS
        .iter()
        .find(|(name, _)| *name == unit)
        .map(|(_, per)| *per)
        .ok_or_else(|| {
            format!("invalid duration {text:?}: expected a whole number then s, ms, us or ns")
        })?;
    let count: u128 = digits
        .parse()
        .map_err(|_| format!("invalid duration {text:?}: {digits:?} is not a whole number"))?;
    let nanos = count
        .checked_mul(per)
        .ok_or_else(|| format!("invalid duration {text:?}: too long"))?;
    let secs = u64::try_from(nanos / NANOS_PER_SEC)
        .map_err(|_| format!("invalid duration {text:?}: too long"))?;
    // The remainder of a division by NANOS_PER_SEC is below it, so it fits a u32.
    let subsec = u32::try_from(nanos % NANOS_PER_SEC).unwrap_or(0);
    Ok(Duration::new(secs, subsec))
}

/// What a spec file may hold for a duration: the text, or serde's struct form.
#[derive(Deserialize)]
#[serde(untagged)]
enum Written {
    Text(String),
    Struct(Duration),
}

impl Written {
    fn duration<E: serde::de::Error>(self) -> Result<Duration, E> {
        match self {
            Self::Text(text) => parse(&text).map_err(E::custom),
            Self::Struct(d) => Ok(d),
        }
    }
}

/// Writes `d` as text.
pub fn serialize<S: Serializer>(d: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&to_text(*d))
}

/// Reads text or serde's struct form.
pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
    Written::deserialize(deserializer)?.duration()
}

/// The same for an `Option<Duration>` (`null` for none).
pub mod option {
    use super::*;

    /// Writes the duration as text, or `null`.
    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        d.map(to_text).serialize(s)
    }

    /// Reads text, serde's struct form or `null`.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        Option::<Written>::deserialize(d)?
            .map(Written::duration)
            .transpose()
    }
}

/// The same for a `(Duration, Duration)` range (a two-element array).
pub mod pair {
    use super::*;

    /// Writes both ends as text.
    pub fn serialize<S: Serializer>(d: &(Duration, Duration), s: S) -> Result<S::Ok, S::Error> {
        (to_text(d.0), to_text(d.1)).serialize(s)
    }

    /// Reads both ends, each as text or serde's struct form.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<(Duration, Duration), D::Error> {
        let (low, high) = <(Written, Written)>::deserialize(d)?;
        Ok((low.duration()?, high.duration()?))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Spec {
        #[serde(with = "crate::engine::duration_text")]
        ttl: Duration,
        #[serde(with = "crate::engine::duration_text::option")]
        timeout: Option<Duration>,
        #[serde(with = "crate::engine::duration_text::pair")]
        hold: (Duration, Duration),
    }

    #[test]
    fn writes_the_largest_exact_unit() {
        assert_eq!(to_text(Duration::from_secs(2)), "2s");
        assert_eq!(to_text(Duration::from_millis(1_500)), "1500ms");
        assert_eq!(to_text(Duration::from_micros(50)), "50us");
        assert_eq!(to_text(Duration::from_nanos(7)), "7ns");
        assert_eq!(to_text(Duration::ZERO), "0s");
    }

    #[test]
    fn round_trips_to_the_nanosecond() {
        for d in [
            Duration::ZERO,
            Duration::from_millis(1_500),
            Duration::new(3, 1),
            Duration::from_micros(123_456_789),
            Duration::MAX,
        ] {
            assert_eq!(parse(&to_text(d)).unwrap(), d);
        }
        let spec = Spec {
            ttl: Duration::from_secs(1),
            timeout: None,
            hold: (Duration::from_millis(20), Duration::from_millis(200)),
        };
        let json = serde_json::to_string(&spec).unwrap();
        assert_eq!(
            json,
            r#"{"ttl":"1s","timeout":null,"hold":["20ms","200ms"]}"#
        );
        assert_eq!(serde_json::from_str::<Spec>(&json).unwrap(), spec);
    }

    #[test]
    fn reads_the_struct_form_of_older_specs() {
        let old = r#"{"ttl":{"secs":1,"nanos":500000000},"timeout":{"secs":10,"nanos":0},
            "hold":[{"secs":0,"nanos":20000000},"200ms"]}"#;
        let spec: Spec = serde_json::from_str(old).unwrap();
        assert_eq!(spec.ttl, Duration::from_millis(1_500));
        assert_eq!(spec.timeout, Some(Duration::from_secs(10)));
        assert_eq!(
            spec.hold,
            (Duration::from_millis(20), Duration::from_millis(200))
        );
    }

    #[test]
    fn bad_text_is_refused_naming_it() {
        for bad in ["1.5s", "15", "2 min", "ms", "-3ms"] {
            let err = parse(bad).unwrap_err();
            assert!(err.contains(&format!("{bad:?}")), "{bad}: {err}");
        }
        let json = r#"{"ttl":"1.5s","timeout":null,"hold":["1ms","2ms"]}"#;
        let err = serde_json::from_str::<Spec>(json).unwrap_err().to_string();
        assert!(err.contains(r#"invalid duration "1.5s""#), "{err}");
    }
}
