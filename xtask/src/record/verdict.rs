//! The verdicts of a column: which servers differ from the column's reference by more than
//! the noise, with the column's false verdicts held as a family. `docs/VERDICTS.md` gives the
//! method, why it is this one, and its error rate and power measured on synthetic runs (the
//! tests in `method`).
//!
//! It may call the record layer's `row` and `student`.
//!
//! - **The model.** Log value = server + round, the rounds being the Williams design's blocks
//!   (`plan::order`): the round-to-round drift of the machine comes out, and each server's
//!   difference from the reference is the mean over the rounds of its log ratio. Each server
//!   has a variance of its own (`two_way`: with two or three servers the paired t's, exact
//!   whatever the third's noise; from four, `S_g · G/(G−1)` from its residuals with
//!   `(K−1)(G−1)/G` degrees of freedom); a difference's degrees of freedom are
//!   Satterthwaite's. One variance pooled over every server would give more degrees of freedom
//!   but lets one noisy server (threads) fake verdicts: the tests measure it.
//! - **The family.** Bonferroni's correction over the column's p-values (valid whatever their
//!   dependence: they share the reference). A verdict is the adjusted p, `m · p`, below 0.05.
//! - **The interval.** Each ratio's simultaneous interval is Bonferroni's, the t interval at
//!   `1 − 0.05/m` for m comparisons in the column, so all of a column's cover their true
//!   ratios together at least 95% of the time, and a verdict is found exactly where its
//!   interval leaves 1 out. (Holm's step-down finds a little more where several servers
//!   differ, but its later steps can find a ratio whose interval reaches 1: a cell that
//!   contradicts itself.)
//! - Where the rounds were not kept (runs of old, `compare` across two runs, which share no
//!   round), the same with one-way residuals: Welch's t.

use crate::record::row::Row;
use crate::record::student;
use two_way::TwoWay;

/// The family's error rate: a column gives a false verdict at most this often.
pub(crate) const ALPHA: f64 = 0.05;

/// One comparison before the family is taken into account: the log ratio, its variance and
/// its degrees of freedom.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Estimate {
    /// The mean log ratio other / reference.
    pub(crate) log_ratio: f64,
    /// Its variance.
    pub(crate) var: f64,
    /// Satterthwaite's degrees of freedom.
    pub(crate) df: f64,
    /// Rounds (or, without rounds, the smaller count of repeats) it rests on.
    pub(crate) n: usize,
}

impl Estimate {
    /// The two-sided p of the difference being zero.
    fn p(&self) -> f64 {
        if self.var > 0.0 {
            student::two_sided_p(self.log_ratio / self.var.sqrt(), self.df)
        } else if self.log_ratio == 0.0 {
            1.0
        } else {
            // Every round the same ratio exactly: no noise to hide it.
            0.0
        }
    }
}

/// One comparison within its family: what a cell shows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Verdict {
    /// other / reference.
    pub(crate) ratio: f64,
    /// The simultaneous interval of the ratio.
    pub(crate) low: f64,
    pub(crate) high: f64,
    /// Bonferroni's adjusted p (`m · p`, at most 1).
    pub(crate) p: f64,
    /// The adjusted p is below [`ALPHA`]: the interval leaves 1 out.
    pub(crate) differs: bool,
    /// Rounds (or repeats) it rests on.
    pub(crate) n: usize,
}

/// Logs of the positive finite values, `None` elsewhere.
fn logs(values: &[Option<f64>]) -> Vec<Option<f64>> {
    values
        .iter()
        .map(|v| v.filter(|x| x.is_finite() && *x > 0.0).map(f64::ln))
        .collect()
}

/// Mean and sum of squared deviations.
fn mean_ss(x: &[f64]) -> (f64, f64) {
    let m = x.iter().sum::<f64>() / x.len() as f64;
    (m, x.iter().map(|v| (v - m).powi(2)).sum())
}

/// The difference `b − a` of two means with variances `va` and `vb` of `da` and `db`
/// degrees of freedom each.
fn satterthwaite(diff: f64, va: f64, da: f64, vb: f64, db: f64, n: usize) -> Option<Estimate> {
    let var = va + vb;
    let df = if var > 0.0 {
        var * var / (va * va / da + vb * vb / db)
    } else {
        da + db
    };
    (df > 0.0 && df.is_finite()).then_some(Estimate {
        log_ratio: diff,
        var,
        df,
        n,
    })
}

/// Each of `others` against `reference` by the two-way model (module docs); values by
/// round, `None` where a round gave none. A server with a value in every round the
/// reference has is in the table; one without is compared on the rounds it shares with the
/// reference alone (the paired t). `None` for a server with fewer than two such rounds.
pub(crate) fn against_reference(
    reference: &[Option<f64>],
    others: &[&[Option<f64>]],
) -> Vec<Option<Estimate>> {
    let r = logs(reference);
    let rounds: Vec<usize> = (0..r.len()).filter(|&k| r[k].is_some()).collect();
    let others: Vec<Vec<Option<f64>>> = others.iter().map(|o| logs(o)).collect();
    let at = |v: &[Option<f64>], k: usize| v.get(k).copied().flatten();
    let complete: Vec<usize> = (0..others.len())
        .filter(|&g| rounds.iter().all(|&k| at(&others[g], k).is_some()))
        .collect();
    // The table: the reference and the complete servers over the reference's rounds.
    let mut table: Vec<Vec<f64>> = vec![rounds.iter().map(|&k| at(&r, k).unwrap_or(0.0)).collect()];
    table.extend(complete.iter().map(|&g| {
        rounds
            .iter()
            .map(|&k| at(&others[g], k).unwrap_or(0.0))
            .collect()
    }));
    let fitted = TwoWay::fit(&table);
    (0..others.len())
        .map(|g| {
            let i = complete.iter().position(|&c| c == g);
            let fit = i.and_then(|i| Some((i, fitted.as_ref()?.difference(0, i + 1)?)));
            match fit {
                Some((i, (var, df))) => Some(Estimate {
                    log_ratio: mean_ss(&table[i + 1]).0 - mean_ss(&table[0]).0,
                    var,
                    df,
                    n: rounds.len(),
                }),
                // Not in the table (or no noise to read): the rounds it shares with the
                // reference alone.
                None => paired(&r, &others[g]),
            }
        })
        .collect()
}

/// `b` against `a` on the rounds both have (logs already): the paired t.
fn paired(a: &[Option<f64>], b: &[Option<f64>]) -> Option<Estimate> {
    let d: Vec<f64> = a
        .iter()
        .zip(b)
        .filter_map(|(x, y)| Some((*y)? - (*x)?))
        .collect();
    if d.len() < 2 {
        return None;
    }
    let (m, ss) = mean_ss(&d);
    let n = d.len() as f64;
    satterthwaite(m, 0.0, 1.0, ss / (n - 1.0) / n, n - 1.0, d.len())
}

/// `b` against `a` from bare repeats (no rounds to pair them): Welch's t on the logs.
pub(crate) fn welch(a: &[f64], b: &[f64]) -> Option<Estimate> {
    let some = |x: &[f64]| -> Vec<f64> {
        logs(&x.iter().copied().map(Some).collect::<Vec<_>>())
            .into_iter()
            .flatten()
            .collect()
    };
    let (a, b) = (some(a), some(b));
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let ((ma, sa), (mb, sb)) = (mean_ss(&a), mean_ss(&b));
    let (na, nb) = (a.len() as f64, b.len() as f64);
    satterthwaite(
        mb - ma,
        sa / (na - 1.0) / na,
        na - 1.0,
        sb / (nb - 1.0) / nb,
        nb - 1.0,
        a.len().min(b.len()),
    )
}

/// The comparisons of a column as one family: Bonferroni's adjusted p and verdict, and each
/// ratio's simultaneous interval at the same level, so that a ratio is found exactly where its
/// interval leaves 1 out (module docs). `None` stays `None` and does not count.
pub(crate) fn family(estimates: &[Option<Estimate>]) -> Vec<Option<Verdict>> {
    let m = estimates.iter().flatten().count();
    estimates
        .iter()
        .map(|e| {
            let e = e.as_ref()?;
            let adjusted = (m as f64 * e.p()).min(1.0);
            let half = student::two_sided_critical(ALPHA / m as f64, e.df) * e.var.sqrt();
            Some(Verdict {
                ratio: e.log_ratio.exp(),
                low: (e.log_ratio - half).exp(),
                high: (e.log_ratio + half).exp(),
                p: adjusted,
                differs: adjusted < ALPHA,
                n: e.n,
            })
        })
        .collect()
}

/// Whether `metric` is a latency (a percentile, the mean, the least or the most, in µs): what
/// a row whose load generator fell off its schedule does not measure of the server.
pub(crate) fn is_latency(metric: &str) -> bool {
    let percentile = metric
        .strip_prefix('p')
        .is_some_and(|m| m.starts_with(|c: char| c.is_ascii_digit()));
    metric.ends_with("_us") && (percentile || matches!(metric, "max_us" | "avg_us" | "min_us"))
}

/// Why `row`'s `metric` is judged in no column and by no gate, if it is not: the one rule,
/// and each of its reasons is the mark the tables draw. It failed; its latency is the load
/// generator's (◊, a latency metric only: its CPU is still the server's); something else took
/// its CPUs (‡, `Row::disturbed`, every metric); or the load generator was the limit (†, its
/// throughput is the client's). A reference blocked so leaves its column untested; any other
/// row blocked so has no verdict and is not in the family.
pub(crate) fn blocked(row: &Row, metric: &str) -> Option<&'static str> {
    if row.ok == 0 {
        Some("failed")
    } else if is_latency(metric) && row.schedule_missed() {
        Some("off its schedule (◊: the latency is the load generator's)")
    } else if row.disturbed() {
        Some("disturbed by other load (‡)")
    } else if row.client_bound && metric.starts_with("throughput") {
        Some("client-bound (†: the throughput is the load generator's)")
    } else {
        None
    }
}

/// The mark of [`blocked`]'s reason, for a cell: `◊`, `‡`, `†` or `failed`.
pub(crate) fn blocked_mark(why: &str) -> &'static str {
    ["◊", "‡", "†"]
        .into_iter()
        .find(|m| why.contains(m))
        .unwrap_or("failed")
}

fn judged(row: &Row, metric: &str) -> bool {
    blocked(row, metric).is_none()
}

/// Why `row` cannot be a column's reference on `metric`, if it cannot: [`blocked`].
pub(crate) fn unusable(row: &Row, metric: &str) -> Option<&'static str> {
    blocked(row, metric)
}

/// A column's verdicts on `metric`: each of `others` against `reference`, one family. Where
/// every row kept its values by round, the two-way model; else Welch's t on the repeats.
/// Empty where the reference is [`unusable`]. A row that is [`blocked`] (failed, ◊ for a
/// latency, ‡, † for throughput) has no verdict and takes no part: it is neither in the
/// model's table nor counted in the family.
pub(crate) fn column(reference: &Row, others: &[&Row], metric: &str) -> Vec<Option<Verdict>> {
    if unusable(reference, metric).is_some() {
        return vec![None; others.len()];
    }
    let by_round = !reference.rounds_of(metric).is_empty()
        && others
            .iter()
            .all(|o| !o.rounds_of(metric).is_empty() || !judged(o, metric));
    let estimates: Vec<Option<Estimate>> = if by_round {
        let rounds: Vec<&[Option<f64>]> = others
            .iter()
            .map(|o| {
                if judged(o, metric) {
                    o.rounds_of(metric)
                } else {
                    &[]
                }
            })
            .collect();
        against_reference(reference.rounds_of(metric), &rounds)
    } else {
        others
            .iter()
            .map(|o| welch(reference.repeats_of(metric), o.repeats_of(metric)))
            .collect()
    };
    let estimates: Vec<Option<Estimate>> = estimates
        .into_iter()
        .zip(others)
        .map(|(e, o)| e.filter(|_| judged(o, metric)))
        .collect();
    family(&estimates)
}

/// Two runs' verdicts at one point on `metric`: each server's row of the second run against
/// its row of the first (`pairs`, first then second), one family. The two runs share no
/// round, so Welch's t on the repeats. A pair with a row that is not [`judged`] has none.
pub(crate) fn across_runs(pairs: &[(&Row, &Row)], metric: &str) -> Vec<Option<Verdict>> {
    let estimates: Vec<Option<Estimate>> = pairs
        .iter()
        .map(|(a, b)| {
            (judged(a, metric) && judged(b, metric))
                .then(|| welch(a.repeats_of(metric), b.repeats_of(metric)))
                .flatten()
        })
        .collect();
    family(&estimates)
}

#[cfg(test)]
mod tests;
mod two_way;
