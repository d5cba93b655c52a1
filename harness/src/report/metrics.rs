//! The pure metric definitions of DESIGN section 3 (Jain's index, hand-off gap, medians over
//! repetitions). Every report and every benchmark computes them through this module only, so a
//! number in `summary.md` always means what the design says it means.

/// Jain's fairness index over per-client acquisition counts: `(Σx)² / (n · Σx²)`.
///
/// 1.0 means every client acquired equally often; `1/n` means one client got everything.
/// An empty slice or all-zero counts (nobody acquired anything) has no fairness to speak of;
/// we return 1.0 there because no client was favoured over another.
pub fn jain_index(counts: &[u64]) -> f64 {
    let n = counts.len() as f64;
    let sum: f64 = counts.iter().map(|&c| c as f64).sum();
    let sum_sq: f64 = counts.iter().map(|&c| (c as f64) * (c as f64)).sum();
    if counts.is_empty() || sum_sq == 0.0 {
        return 1.0;
    }
    (sum * sum) / (n * sum_sq)
}

/// Hand-off gap in microseconds: `wall time / acquisitions − mean hold time`, the idle lock
/// time per acquisition.
///
/// Signed on purpose: hold times are measured by the clients (acquire returned → release
/// returned), which overlap the next holder's by up to a round trip, so a lock that hands off
/// perfectly can show a slightly negative gap. Hiding that would hide a measurement artefact.
/// Returns `None` when nothing was acquired (the gap is undefined, not zero).
pub fn handoff_gap_us(wall_us: f64, acquisitions: u64, mean_hold_us: f64) -> Option<f64> {
    if acquisitions == 0 {
        return None;
    }
    Some(wall_us / acquisitions as f64 - mean_hold_us)
}

/// Median of a sample (mean of the two middle values for an even count); `None` if empty.
/// Used to fold repetitions of one grid cell into the reported number (DESIGN section 4).
pub fn median(values: &[f64]) -> Option<f64> {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| !v.is_nan()).collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    if sorted.len() % 2 == 1 {
        Some(sorted[mid])
    } else {
        Some((sorted[mid - 1] + sorted[mid]) / 2.0)
    }
}

/// `numerator / denominator` as a ratio, `None` when the denominator is zero or either side is
/// missing; used for "×" columns against peers.
pub fn ratio(numerator: Option<f64>, denominator: Option<f64>) -> Option<f64> {
    match (numerator, denominator) {
        (Some(n), Some(d)) if d != 0.0 => Some(n / d),
        _ => None,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn jain_is_one_for_equal_shares() {
        assert!(close(jain_index(&[5, 5, 5, 5]), 1.0));
    }

    #[test]
    fn jain_is_one_over_n_when_one_client_takes_everything() {
        assert!(close(jain_index(&[12, 0, 0, 0]), 0.25));
    }

    #[test]
    fn jain_matches_the_formula_for_uneven_shares() {
        // (1+2+3)² / (3 · (1+4+9)) = 36 / 42
        assert!(close(jain_index(&[1, 2, 3]), 36.0 / 42.0));
    }

    #[test]
    fn jain_of_nothing_favours_nobody() {
        assert!(close(jain_index(&[]), 1.0));
        assert!(close(jain_index(&[0, 0]), 1.0));
    }

    #[test]
    fn handoff_gap_is_idle_time_per_acquisition() {
        // 1 s of wall time, 500 acquisitions, each held 1.5 ms: 2 ms per acquisition, 0.5 ms idle.
        let gap = handoff_gap_us(1_000_000.0, 500, 1_500.0);
        assert!(close(gap.unwrap_or(f64::NAN), 500.0));
    }

    #[test]
    fn handoff_gap_can_be_negative_when_client_hold_times_overlap() {
        let gap = handoff_gap_us(1_000.0, 10, 120.0);
        assert!(close(gap.unwrap_or(f64::NAN), -20.0));
    }

    #[test]
    fn handoff_gap_is_undefined_without_acquisitions() {
        assert_eq!(handoff_gap_us(1_000.0, 0, 0.0), None);
    }

    #[test]
    fn median_of_odd_and_even_samples() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn ratio_refuses_zero_denominators() {
        assert_eq!(ratio(Some(4.0), Some(2.0)), Some(2.0));
        assert_eq!(ratio(Some(4.0), Some(0.0)), None);
        assert_eq!(ratio(None, Some(1.0)), None);
    }
}
