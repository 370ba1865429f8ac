//! The summary's statistics over repeats, kept apart from I/O so that they can be checked by
//! hand: medians with their confidence intervals, and the Mann-Whitney test that says whether
//! two servers differ by more than the noise. (The arithmetic of sampled counters is
//! `run::series`; latency histograms, merged by adding them, never by averaging percentiles,
//! are `run::histogram`.)
//!
//! It may call nothing else of xtask.
//!
//! # Intervals and significance on a handful of repeats
//!
//! A run has 3 to 10 repeats of each point, and their noise is not normal: a shared host only
//! ever adds time, so the values have a long upper tail. Both tools are therefore
//! distribution-free.
//!
//! - **Median interval**: the order-statistic interval `[x(k), x(n+1-k)]` of the sorted
//!   repeats, with the largest `k` whose coverage `1 - 2·P(Bin(n, ½) < k)` is still at least
//!   95%. Its coverage is exact for any continuous distribution, where a bootstrap on 3 to 5
//!   values is known to undercover badly. The price is that few repeats cannot reach 95%:
//!   with n = 3 the best is `[min, max]` at 75%, n = 4 87.5%, n = 5 93.8%, n = 6 96.9%; the
//!   interval is then `[min, max]` and its real level is recorded beside it (`ci_level`).
//! - **Significance**: the two-sided Mann-Whitney U test on the two servers' repeats, exact
//!   (the U distribution counted out) when there are no ties and few values, else the normal
//!   approximation with tie and continuity corrections, as scipy's `mannwhitneyu` computes
//!   it. p < 0.05 shows the ratio; otherwise `~`, as benchstat does. With 3 repeats a side
//!   the smallest p a rank test can give is 2/20 = 0.10, so nothing reaches 0.05: 4 repeats
//!   (p ≥ 0.029) is the least that can, 5 (p ≥ 0.008) the least that can with a margin.
//! - **Paired view**: every round measures every server at a point, so the ratio of two
//!   servers within a round cancels what the round shared (a drift of the machine over the
//!   run). [`paired`] gives the median of the per-round ratios and an exact two-sided sign
//!   test on them (how many rounds put one server above the other, against Bin(n, ½)). The
//!   sign test assumes nothing of the ratios' shape, and its price is power: with 5 rounds the
//!   least p is 2/32 = 0.0625, so it reaches 0.05 only from 6 rounds (1/32 = 0.031).
//!   Mann-Whitney is the better guide when the rounds are alike; the paired view when the
//!   machine drifted from round to round (wide, overlapping intervals whose rounds still agree).
//!   Both need the order within a round to be counterbalanced (`plan::order`): a position
//!   effect in a fixed order is shared by no round and favours one server in every one.

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

/// The significance threshold of [`mann_whitney`].
pub(crate) const ALPHA: f64 = 0.05;

/// Midranks (1-based) of `values`, ties sharing the mean of their ranks, and the tie groups'
/// sizes.
fn midranks(values: &[f64]) -> (Vec<f64>, Vec<usize>) {
    let mut idx: Vec<usize> = (0..values.len()).collect();
    idx.sort_by(|&a, &b| values[a].total_cmp(&values[b]));
    let mut ranks = vec![0.0; values.len()];
    let mut ties = Vec::new();
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j < idx.len() && values[idx[j]] == values[idx[i]] {
            j += 1;
        }
        let r = (i + j + 1) as f64 / 2.0;
        for &k in &idx[i..j] {
            ranks[k] = r;
        }
        if j - i > 1 {
            ties.push(j - i);
        }
        i = j;
    }
    (ranks, ties)
}

/// How many arrangements of `n1` and `n2` values give each U statistic, `0..=n1·n2`.
fn u_counts(n1: usize, n2: usize) -> Vec<f64> {
    // f(i, j)[u]: arrangements of i values of the first sample and j of the second with
    // statistic u; the largest value belongs to one or the other:
    // f(i, j)[u] = f(i - 1, j)[u - j] + f(i, j - 1)[u].
    let mut f: Vec<Vec<Vec<f64>>> = vec![vec![Vec::new(); n2 + 1]; n1 + 1];
    for i in 0..=n1 {
        for j in 0..=n2 {
            let mut v = vec![0.0; i * j + 1];
            if i == 0 || j == 0 {
                v[0] = 1.0;
            } else {
                for (u, slot) in v.iter_mut().enumerate() {
                    let a = if u >= j {
                        f[i - 1][j].get(u - j).copied().unwrap_or(0.0)
                    } else {
                        0.0
                    };
                    *slot = a + f[i][j - 1].get(u).copied().unwrap_or(0.0);
                }
            }
            f[i][j] = v;
        }
    }
    std::mem::take(&mut f[n1][n2])
}

/// The standard normal's upper tail, `P(Z > z)`, from `erfc` (the Chebyshev fit of
/// Numerical Recipes' `erfcc`, fractional error below 1.2e-7).
fn normal_upper_tail(z: f64) -> f64 {
    let x = z / std::f64::consts::SQRT_2;
    let ax = x.abs();
    let t = 1.0 / (1.0 + 0.5 * ax);
    let poly = -ax * ax - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let erfc = t * poly.exp();
    let erfc = if x >= 0.0 { erfc } else { 2.0 - erfc };
    erfc / 2.0
}

/// Values per sample up to which the exact U distribution is used (when there are no ties).
const EXACT_MAX: usize = 25;

/// The two-sided p-value of the Mann-Whitney U test that `a` and `b` come from the same
/// distribution. `None` when either is empty.
pub(crate) fn mann_whitney(a: &[f64], b: &[f64]) -> Option<f64> {
    let a: Vec<f64> = a.iter().copied().filter(|x| x.is_finite()).collect();
    let b: Vec<f64> = b.iter().copied().filter(|x| x.is_finite()).collect();
    let (n1, n2) = (a.len(), b.len());
    if n1 == 0 || n2 == 0 {
        return None;
    }
    let all: Vec<f64> = a.iter().chain(&b).copied().collect();
    let (ranks, ties) = midranks(&all);
    let r1: f64 = ranks[..n1].iter().sum();
    let u = r1 - (n1 * (n1 + 1)) as f64 / 2.0;
    let mean = (n1 * n2) as f64 / 2.0;
    if ties.is_empty() && n1 <= EXACT_MAX && n2 <= EXACT_MAX {
        // Without ties U is a whole number.
        return Some(exact_p(u.round() as usize, &u_counts(n1, n2)));
    }
    let n = (n1 + n2) as f64;
    let tie_term: f64 = ties.iter().map(|&t| (t * t * t - t) as f64).sum::<f64>() / (n * (n - 1.0));
    let var = (n1 * n2) as f64 / 12.0 * ((n + 1.0) - tie_term);
    if var <= 0.0 {
        // Every value equal: no evidence of a difference.
        return Some(1.0);
    }
    let z = ((u - mean).abs() - 0.5).max(0.0) / var.sqrt();
    Some((2.0 * normal_upper_tail(z)).min(1.0))
}

/// The least p-value [`mann_whitney`] can give for `n1` and `n2` values: that of two samples
/// that do not overlap at all. `None` when either is empty.
pub(crate) fn least_p(n1: usize, n2: usize) -> Option<f64> {
    let low: Vec<f64> = (0..n1).map(|i| i as f64).collect();
    let high: Vec<f64> = (0..n2).map(|i| (n1 + i) as f64).collect();
    mann_whitney(&low, &high)
}

/// How often [`mann_whitney`] gives p < [`ALPHA`] for `n1` and `n2` values of one continuous
/// distribution: the test's real size (below ALPHA, since U is discrete), the share of the
/// arrangements of the ranks whose U is significant.
pub(crate) fn false_positive_rate(n1: usize, n2: usize) -> f64 {
    if n1 == 0 || n2 == 0 {
        return 0.0;
    }
    let counts = u_counts(n1, n2);
    let total: f64 = counts.iter().sum();
    let significant: f64 = (0..counts.len())
        .filter(|&u| exact_p(u, &counts) < ALPHA)
        .map(|u| counts[u])
        .sum();
    significant / total
}

/// The exact two-sided p-value of the sign test: `above` rounds where one server was higher,
/// `below` where it was lower (ties left out): `2·P(Bin(n, ½) ≤ min(above, below))`, at most 1.
pub(crate) fn sign_test(above: usize, below: usize) -> f64 {
    let n = above + below;
    (2.0 * binomial_half_cdf(n, above.min(below))).min(1.0)
}

/// Two servers compared round by round (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Paired {
    /// The median over the rounds of `b / a`.
    pub(crate) ratio: f64,
    /// Rounds where both gave a value.
    pub(crate) rounds: usize,
    /// Rounds where `b` was above `a`, and below it.
    pub(crate) above: usize,
    pub(crate) below: usize,
    /// The sign test's two-sided p.
    pub(crate) p: f64,
}

/// `b` against `a` round by round: `a[k]` and `b[k]` are the two servers' values in round `k`
/// (`None` where a repeat failed). `None` when no round has both, or `a`'s value is not
/// positive in all of them.
pub(crate) fn paired(a: &[Option<f64>], b: &[Option<f64>]) -> Option<Paired> {
    let pairs: Vec<(f64, f64)> = a
        .iter()
        .zip(b)
        .filter_map(|(x, y)| Some(((*x)?, (*y)?)))
        .filter(|(x, y)| x.is_finite() && y.is_finite())
        .collect();
    if pairs.is_empty() || pairs.iter().any(|&(x, _)| x <= 0.0) {
        return None;
    }
    let ratios: Vec<f64> = pairs.iter().map(|&(x, y)| y / x).collect();
    let above = ratios.iter().filter(|&&r| r > 1.0).count();
    let below = ratios.iter().filter(|&&r| r < 1.0).count();
    Some(Paired {
        ratio: median(&ratios)?,
        rounds: ratios.len(),
        above,
        below,
        p: sign_test(above, below),
    })
}

/// The two-sided exact p-value of the statistic `u`, given the counts of [`u_counts`].
fn exact_p(u: usize, counts: &[f64]) -> f64 {
    let total: f64 = counts.iter().sum();
    let le: f64 = counts[..=u].iter().sum();
    let ge: f64 = counts[u..].iter().sum();
    (2.0 * le.min(ge) / total).min(1.0)
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
    // 3.14 below is a measurement of the published sample, not an approximation of π.
    #[allow(clippy::approx_constant)]
    fn mann_whitney_gives_known_p_values() {
        // Exact, no ties. Fully separated samples of 3 and of 5: 2/C(6,3) and 2/C(10,5).
        assert!(close(
            mann_whitney(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]).unwrap(),
            0.1
        ));
        let p = mann_whitney(&[1.0, 2.0, 3.0, 4.0, 5.0], &[6.0, 7.0, 8.0, 9.0, 10.0]).unwrap();
        assert!(close(p, 2.0 / 252.0));
        // U = 17 of 20: two-sided exact p = 14/126 (scipy.stats.mannwhitneyu, method="exact").
        let p = mann_whitney(&[19.0, 22.0, 16.0, 29.0, 24.0], &[20.0, 11.0, 17.0, 12.0]).unwrap();
        assert!(close(p, 1.0 / 9.0), "{p}");
        // R's wilcox.test example data (Hollander and Wolfe), which has ties: the normal
        // approximation with tie and continuity corrections, U = 58, p = 0.132919
        // (scipy's method="asymptotic").
        let x = [1.83, 0.50, 1.62, 2.48, 1.68, 1.88, 1.55, 3.06, 1.30];
        let y = [0.878, 0.647, 0.598, 2.05, 1.06, 1.29, 1.06, 3.14, 1.29];
        let p = mann_whitney(&x, &y).unwrap();
        assert!((p - 0.132_919_458).abs() < 1e-6, "{p}");
        // The same samples and identical ones are no evidence of anything.
        assert_eq!(mann_whitney(&x, &x), Some(1.0));
        assert_eq!(mann_whitney(&[5.0], &[5.0]), Some(1.0));
        assert_eq!(mann_whitney(&[], &[1.0]), None);
        // Symmetric in its arguments.
        assert_eq!(mann_whitney(&y, &x), mann_whitney(&x, &y));
        assert!((normal_upper_tail(1.959_964) - 0.025).abs() < 1e-6);
    }

    #[test]
    fn what_the_repeats_can_show() {
        // 3 a side can never reach 0.05; 4 only without overlap; 5 with two pairs out of order.
        assert!(close(least_p(3, 3).unwrap(), 0.1));
        assert!(close(least_p(4, 4).unwrap(), 2.0 / 70.0));
        assert!(close(least_p(5, 5).unwrap(), 2.0 / 252.0));
        assert_eq!(least_p(0, 5), None);
        let two_swapped = mann_whitney(&[1.0, 2.0, 3.0, 4.5, 5.5], &[4.0, 6.0, 7.0, 8.0, 9.0]);
        assert!(two_swapped.unwrap() < ALPHA, "{two_swapped:?}");
        // The real size of the test: no false verdicts at 3, and 8 of 252 arrangements
        // (U <= 2 or U >= 23) at 5 a side.
        assert_eq!(false_positive_rate(3, 3), 0.0);
        assert!(close(false_positive_rate(5, 5), 8.0 / 252.0));
        assert!(false_positive_rate(12, 12) <= ALPHA);
        assert!(false_positive_rate(12, 12) > 0.04);
    }

    #[test]
    fn the_sign_test_gives_exact_binomial_p_values() {
        // 5 of 5 rounds one way: 2 · (1/2)^5; 6 of 6: 2 · (1/2)^6.
        assert!(close(sign_test(5, 0), 2.0 / 32.0));
        assert!(close(sign_test(0, 6), 2.0 / 64.0));
        // 9 of 10: 2 · (1 + 10) / 1024; 6 of 8: 2 · (1 + 8 + 28) / 256.
        assert!(close(sign_test(9, 1), 22.0 / 1024.0));
        assert!(close(sign_test(2, 6), 74.0 / 256.0));
        // 3 of 5 and an even split are no evidence at all; no rounds neither.
        assert_eq!(sign_test(3, 2), 1.0);
        assert_eq!(sign_test(4, 4), 1.0);
        assert_eq!(sign_test(0, 0), 1.0);
        // Symmetric.
        assert_eq!(sign_test(1, 7), sign_test(7, 1));
        // Neither 5 rounds can reach 0.05, 6 can.
        assert!(sign_test(5, 0) > ALPHA && sign_test(6, 0) < ALPHA);
    }

    #[test]
    fn paired_ratios_take_the_rounds_both_ran() {
        let a = [Some(10.0), Some(10.0), None, Some(20.0), Some(10.0)];
        let b = [Some(11.0), Some(12.0), Some(99.0), Some(21.0), None];
        let p = paired(&a, &b).unwrap();
        // Rounds 1, 2 and 4: ratios 1.1, 1.2 and 1.05.
        assert_eq!((p.rounds, p.above, p.below), (3, 3, 0));
        assert!(close(p.ratio, 1.1));
        assert!(close(p.p, 2.0 / 8.0));
        // An equal round is a tie: it counts as a round but on neither side.
        let p = paired(&[Some(1.0), Some(1.0)], &[Some(1.0), Some(0.5)]).unwrap();
        assert_eq!((p.rounds, p.above, p.below), (2, 0, 1));
        assert!(close(p.ratio, 0.75));
        assert_eq!(paired(&[None], &[Some(1.0)]), None);
        assert_eq!(paired(&[Some(0.0)], &[Some(1.0)]), None);
        assert_eq!(paired(&[], &[]), None);
    }

    #[test]
    fn lowest() {
        assert_eq!(min(&[3.0, f64::NAN, 2.0]), Some(2.0));
        assert_eq!(min(&[]), None);
    }
}
