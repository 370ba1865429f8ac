//! The summary's statistics over repeats, kept apart from I/O so that they can be checked by
//! hand: medians with their confidence intervals. (Whether two servers differ by more than
//! the noise is `verdict`'s; the arithmetic of sampled counters is `run::series`; latency
//! histograms, merged by adding them, never by averaging percentiles, are `run::histogram`.)
//!
//! It may call nothing else of xtask.
//!
//! # Intervals on a handful of repeats
//!
//! A run has 3 to 10 repeats of each point, and their noise is not normal: a shared host only
//! ever adds time, so the values have a long upper tail. The interval is therefore
//! distribution-free.
//!
//! - **Median interval**: the order-statistic interval `[x(k), x(n+1-k)]` of the sorted
//!   repeats, with the largest `k` whose coverage `1 - 2·P(Bin(n, ½) < k)` is still at least
//!   95%. Its coverage is exact for any continuous distribution, where a bootstrap on 3 to 5
//!   values is known to undercover badly. The price is that few repeats cannot reach 95%:
//!   with n = 3 the best is `[min, max]` at 75%, n = 4 87.5%, n = 5 93.8%, n = 6 96.9%; the
//!   interval is then `[min, max]` and its real level is recorded beside it (`ci_level`).

/// The median of `f` over the `items` that say it (the repeats of a point, say).
pub(crate) fn median_of<T>(items: &[&T], f: impl Fn(&T) -> Option<f64>) -> Option<f64> {
    median(&items.iter().filter_map(|m| f(m)).collect::<Vec<f64>>())
}

/// The median (the mean of the middle two for an even count), or `None` for no values.
pub(crate) fn median(values: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// The spread of repeats: (max - min) / median, as a fraction. `None` for fewer than two
/// values or a zero median.
pub(crate) fn spread(values: &[f64]) -> Option<f64> {
    if values.len() < 2 {
        return None;
    }
    let m = median(values)?;
    if m.abs() < f64::EPSILON {
        return None;
    }
    let max = values.iter().copied().fold(f64::MIN, f64::max);
    let min = values.iter().copied().fold(f64::MAX, f64::min);
    Some((max - min) / m)
}

/// The lowest finite value, or `None` for none.
pub(crate) fn min(values: &[f64]) -> Option<f64> {
    values
        .iter()
        .copied()
        .filter(|x| x.is_finite())
        .min_by(f64::total_cmp)
}

/// The confidence the order-statistic intervals aim at.
pub(crate) const CI_LEVEL: f64 = 0.95;

/// `P(Bin(n, ½) ≤ k)`.
fn binomial_half_cdf(n: usize, k: usize) -> f64 {
    // C(n, i) / 2^n summed; n is the number of repeats, at most 100.
    let mut c = 1.0f64;
    let mut sum = 0.0;
    for i in 0..=k.min(n) {
        if i > 0 {
            c = c * (n + 1 - i) as f64 / i as f64;
        }
        sum += c;
    }
    sum / 2f64.powi(n as i32)
}

/// A confidence interval for the median of the distribution `values` were drawn from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Interval {
    pub(crate) low: f64,
    pub(crate) high: f64,
    /// The probability that an interval made this way covers the true median: `CI_LEVEL` or
    /// more when there are enough values, less (and said) when there are not.
    pub(crate) level: f64,
}

/// The distribution-free interval for the median (see the module docs): `None` below two
/// finite values.
pub(crate) fn median_interval(values: &[f64]) -> Option<Interval> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    let n = v.len();
    if n < 2 {
        return None;
    }
    v.sort_by(f64::total_cmp);
    // Coverage of [x(k), x(n+1-k)] (1-based) is 1 - 2 P(Bin(n, 1/2) <= k - 1).
    let coverage = |k: usize| 1.0 - 2.0 * binomial_half_cdf(n, k - 1);
    let mut k = 1;
    while k < n.div_ceil(2) && coverage(k + 1) >= CI_LEVEL {
        k += 1;
    }
    Some(Interval {
        low: v[k - 1],
        high: v[n - k],
        level: coverage(k),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn median_and_spread() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        assert_eq!(spread(&[90.0, 100.0, 110.0]), Some(0.2));
        assert_eq!(spread(&[100.0]), None);
    }

    /// SplitMix64, for simulations that are the same on every run.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> f64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            (z >> 11) as f64 / (1u64 << 53) as f64
        }
    }

    #[test]
    fn order_statistic_levels() {
        // [min, max] of 3 covers the median unless all three fall on one side: 1 - 2/8.
        let i = median_interval(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((i.low, i.high), (1.0, 3.0));
        assert!(close(i.level, 0.75));
        assert!(close(
            median_interval(&[1.0, 2.0, 3.0, 4.0, 5.0]).unwrap().level,
            1.0 - 2.0 / 32.0
        ));
        // With 10 values, k = 2: [x(2), x(9)], 1 - 2 · 11/1024 = 97.9%.
        let ten: Vec<f64> = (1..=10).map(f64::from).collect();
        let i = median_interval(&ten).unwrap();
        assert_eq!((i.low, i.high), (2.0, 9.0));
        assert!(close(i.level, 1.0 - 2.0 * 11.0 / 1024.0));
        assert!(median_interval(&[1.0]).is_none());
    }

    #[test]
    fn the_interval_covers_the_true_median_at_its_stated_rate() {
        // Exponential draws (a long upper tail, as noisy timings have), true median ln 2.
        let mut rng = Rng(0x5eed);
        let truth = std::f64::consts::LN_2;
        for n in [3usize, 5, 10, 20] {
            let trials = 4000;
            let mut covered = 0;
            let mut level = 0.0;
            for _ in 0..trials {
                let v: Vec<f64> = (0..n).map(|_| -(1.0 - rng.next()).ln()).collect();
                let i = median_interval(&v).unwrap();
                level = i.level;
                covered += usize::from(i.low <= truth && truth <= i.high);
            }
            let rate = covered as f64 / trials as f64;
            // Four standard errors of a binomial proportion.
            let tol = 4.0 * (level * (1.0 - level) / trials as f64).sqrt();
            assert!(
                (rate - level).abs() < tol,
                "n {n}: covered {rate}, stated {level}"
            );
            if n >= 10 {
                assert!(level >= CI_LEVEL, "n {n}: {level}");
            }
        }
    }

    #[test]
    fn lowest() {
        assert_eq!(min(&[3.0, f64::NAN, 2.0]), Some(2.0));
        assert_eq!(min(&[]), None);
    }
}
