//! Student's t distribution, for the verdicts of `verdict`: its two-sided tail and its
//! quantile, at any (fractional) degrees of freedom, as Welch's and Satterthwaite's
//! approximations give them. The tail is the regularized incomplete beta function
//! (`P(|T| > t) = I_{ν/(ν+t²)}(ν/2, ½)`), by its continued fraction (Numerical Recipes'
//! `betacf`) with Lanczos' log-gamma; the quantile inverts the tail by Newton's method within a bracket. Written out
//! here rather than taken from a crate: these two functions are all the verdicts need.
//!
//! It may call nothing else of xtask.

/// `ln Γ(x)` for `x > 0` (Lanczos, g = 7, nine terms: about 15 significant digits).
fn ln_gamma(x: f64) -> f64 {
    const G: f64 = 7.0;
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection: Γ(x) Γ(1 - x) = π / sin(πx).
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = C[0];
    let t = x + G + 0.5;
    for (i, c) in C.iter().enumerate().skip(1) {
        a += c / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// The continued fraction of the incomplete beta function (modified Lentz), for
/// `x < (a + 1) / (a + b + 2)`, where it converges fast.
fn beta_fraction(a: f64, b: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 - qab * x / qap;
    if d.abs() < TINY {
        d = TINY;
    }
    d = 1.0 / d;
    let mut h = d;
    for m in 1..=300 {
        let m = f64::from(m);
        let m2 = 2.0 * m;
        let aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1.0 + aa * d;
        d = if d.abs() < TINY { TINY } else { d };
        c = 1.0 + aa / c;
        c = if c.abs() < TINY { TINY } else { c };
        d = 1.0 / d;
        h *= d * c;
        let aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1.0 + aa * d;
        d = if d.abs() < TINY { TINY } else { d };
        c = 1.0 + aa / c;
        c = if c.abs() < TINY { TINY } else { c };
        d = 1.0 / d;
        let del = d * c;
        h *= del;
        if (del - 1.0).abs() < 1e-15 {
            break;
        }
    }
    h
}

/// The regularized incomplete beta function `I_x(a, b)`, `0 ≤ x ≤ 1`.
fn incomplete_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let front =
        (ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln()).exp();
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_fraction(a, b, x) / a
    } else {
        1.0 - front * beta_fraction(b, a, 1.0 - x) / b
    }
}

/// `P(|T| > t)` for Student's t with `df` degrees of freedom (`df > 0`): the two-sided p of
/// a t statistic.
pub(crate) fn two_sided_p(t: f64, df: f64) -> f64 {
    if t.is_nan() || df.is_nan() || df <= 0.0 {
        return 1.0;
    }
    if t.is_infinite() {
        return 0.0;
    }
    incomplete_beta(df / 2.0, 0.5, df / (df + t * t)).clamp(0.0, 1.0)
}

/// Student's density at `t`, `df` degrees of freedom.
fn density(t: f64, df: f64) -> f64 {
    let ln_c =
        ln_gamma((df + 1.0) / 2.0) - ln_gamma(df / 2.0) - 0.5 * (df * std::f64::consts::PI).ln();
    (ln_c - (df + 1.0) / 2.0 * (t * t / df).ln_1p()).exp()
}

/// The `t > 0` with `P(|T| > t) = p` (`0 < p < 1`) for `df` degrees of freedom: the
/// two-sided critical value, `t_{1 - p/2, df}`.
pub(crate) fn two_sided_critical(p: f64, df: f64) -> f64 {
    // The tail falls as t grows: bracket the root, then Newton's steps (the tail's slope is
    // twice the density) where they stay inside the bracket, halving where they do not.
    let (mut low, mut high) = (0.0f64, 1.0f64);
    while two_sided_p(high, df) > p && high < 1e12 {
        low = high;
        high *= 2.0;
    }
    let mut t = 0.5 * (low + high);
    for _ in 0..200 {
        let f = two_sided_p(t, df) - p;
        if f > 0.0 {
            low = t;
        } else {
            high = t;
        }
        let newton = t + f / (2.0 * density(t, df));
        let next = if newton > low && newton < high {
            newton
        } else {
            0.5 * (low + high)
        };
        if (next - t).abs() <= 1e-13 * t.max(1e-300) || high - low <= 1e-13 * high {
            return next;
        }
        t = next;
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol * b.abs().max(1e-300)
    }

    #[test]
    fn the_tail_has_its_closed_forms_at_one_and_two_degrees() {
        // One degree is Cauchy: P(|T| > t) = 1 - 2 atan(t) / π; two: 1 - t / √(2 + t²).
        for t in [0.1, 0.5, 1.0, 2.0, 7.0, 40.0] {
            let cauchy = 1.0 - 2.0 * f64::atan(t) / std::f64::consts::PI;
            assert!(close(two_sided_p(t, 1.0), cauchy, 1e-10), "t {t}");
            let two = 1.0 - t / (2.0 + t * t).sqrt();
            assert!(close(two_sided_p(t, 2.0), two, 1e-10), "t {t}");
        }
        assert_eq!(two_sided_p(0.0, 5.0), 1.0);
        assert_eq!(two_sided_p(f64::INFINITY, 5.0), 0.0);
        assert_eq!(two_sided_p(1.0, 0.0), 1.0);
        // Symmetric.
        assert_eq!(two_sided_p(-2.0, 5.0), two_sided_p(2.0, 5.0));
    }

    #[test]
    fn critical_values_match_the_tables() {
        // R's qt(0.975, df) and qt(0.995, df).
        for (df, q975, q995) in [
            (1.0, 12.706_204_736, 63.656_741_163),
            (4.0, 2.776_445_105, 4.604_094_871),
            (10.0, 2.228_138_852, 3.169_272_673),
            (30.0, 2.042_272_456, 2.749_995_654),
            (60.0, 2.000_297_822, 2.660_283_029),
        ] {
            assert!(close(two_sided_critical(0.05, df), q975, 1e-8), "df {df}");
            assert!(close(two_sided_critical(0.01, df), q995, 1e-8), "df {df}");
        }
        // Far out, as Holm and Bonferroni over fifteen need: qt(1 - 0.05/30, 4) = 6.0, and
        // the normal's 1.96 at a large df.
        let t = two_sided_critical(0.05 / 15.0, 4.0);
        assert!((two_sided_p(t, 4.0) - 0.05 / 15.0).abs() < 1e-12, "{t}");
        assert!(close(two_sided_critical(0.05, 1e7), 1.959_964, 1e-6));
        // Fractional degrees lie between their neighbours.
        let mid = two_sided_critical(0.05, 6.5);
        assert!(two_sided_critical(0.05, 7.0) < mid && mid < two_sided_critical(0.05, 6.0));
    }

    #[test]
    fn log_gamma_is_right_at_known_points() {
        assert!(ln_gamma(1.0).abs() < 1e-13);
        assert!(close(ln_gamma(5.0), 24f64.ln(), 1e-13));
        assert!(close(
            ln_gamma(0.5),
            std::f64::consts::PI.sqrt().ln(),
            1e-13
        ));
        assert!(close(ln_gamma(0.25), 3.625_609_908_221_908f64.ln(), 1e-12));
    }
}
