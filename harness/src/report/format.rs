//! Number and date formatting shared by the benchmark's markdown tables, so every table
//! prints a missing value, a large count or a spread the same way.

use crate::report::results::Spread;

/// `value` with `digits` decimals, thousands separated from 10,000 up; `–` when missing.
pub fn fmt(value: Option<f64>, digits: u8) -> String {
    match value {
        None => "–".to_owned(),
        Some(v) if !v.is_finite() => "–".to_owned(),
        Some(v) => {
            let s = format!("{v:.prec$}", prec = usize::from(digits));
            if digits == 0 && v.abs() >= 10_000.0 {
                thousands(&s)
            } else {
                s
            }
        }
    }
}

/// `median (min–max)` scaled by `scale`, or only the median with a single repetition.
pub fn fmt_spread(median: Option<f64>, spread: Option<Spread>, scale: f64, digits: u8) -> String {
    let value = fmt(median.map(|v| v * scale), digits);
    match spread {
        Some(s) if s.max > s.min => format!(
            "{value} ({}–{})",
            fmt(Some(s.min * scale), digits),
            fmt(Some(s.max * scale), digits)
        ),
        _ => value,
    }
}

/// `12345` → `12,345` for readability of large counts.
fn thousands(digits: &str) -> String {
    let (sign, digits) = digits
        .strip_prefix('-')
        .map_or(("", digits), |rest| ("-", rest));
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    format!("{sign}{out}")
}

/// Unix seconds → `YYYY-MM-DD HH:MM` (UTC), via the civil-from-days algorithm, so the report
/// needs no date crate.
pub fn utc(unix_s: u64) -> String {
    let days = (unix_s / 86_400) as i64;
    let secs = unix_s % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}",
        secs / 3_600,
        (secs % 3_600) / 60
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn formats_large_numbers_with_separators() {
        assert_eq!(fmt(Some(69_123.4), 0), "69,123");
        assert_eq!(fmt(Some(6_533.0), 0), "6533");
        assert_eq!(fmt(None, 2), "–");
    }

    #[test]
    fn shows_a_spread_only_when_repetitions_differ() {
        let spread = Spread { min: 0.5, max: 2.0 };
        assert_eq!(
            fmt_spread(Some(1.0), Some(spread), 1_000.0, 0),
            "1000 (500–2000)"
        );
        let flat = Spread { min: 1.0, max: 1.0 };
        assert_eq!(fmt_spread(Some(1.0), Some(flat), 1.0, 1), "1.0");
        assert_eq!(fmt_spread(None, None, 1.0, 1), "–");
    }

    #[test]
    fn converts_unix_time_to_utc() {
        assert_eq!(utc(0), "1970-01-01 00:00");
        assert_eq!(utc(1_700_000_000), "2023-11-14 22:13");
    }
}
