//! Where the ranking changes across a sweep (issue 62's workloads): each server's ratio to the
//! reference along a sweep of points, the places where two servers swap (`swaps`: by more
//! than a margin, and only where their repeats' intervals keep them apart), the rank
//! correlation of two rankings (`spearman`), and the least-squares line (`least_squares`)
//! that gives churn's CPU per connection lifetime. Pure arithmetic on rows: the figures
//! (`figures::crossover`) and the sections (`markdown::workloads`) call it.
//!
//! It may call the record layer's `row`.

use crate::record::row::{Row, find};

/// The least-squares line through `points`, `(intercept, slope)`; `None` for fewer than two
/// points or for points all at one x.
pub(crate) fn least_squares(points: &[(f64, f64)]) -> Option<(f64, f64)> {
    let n = points.len() as f64;
    if points.len() < 2 {
        return None;
    }
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    if sxx <= f64::EPSILON * n {
        return None;
    }
    let slope = sxy / sxx;
    Some((my - slope * mx, slope))
}

/// The ranks of `values`, 1 for the least, ties sharing their average rank.
fn ranks(values: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&a, &b| values[a].total_cmp(&values[b]));
    let mut out = vec![0.0; values.len()];
    let mut i = 0;
    while i < order.len() {
        let mut j = i;
        while j + 1 < order.len() && values[order[j + 1]] == values[order[i]] {
            j += 1;
        }
        let rank = (i + j) as f64 / 2.0 + 1.0;
        for &k in &order[i..=j] {
            out[k] = rank;
        }
        i = j + 1;
    }
    out
}

/// Spearman's rank correlation of two measures of the same servers (`a[i]` and `b[i]` the
/// same server's): 1 where they rank them alike, -1 where in reverse. `None` for fewer than
/// three servers or a measure that ranks them all equal.
pub(crate) fn spearman(a: &[f64], b: &[f64]) -> Option<f64> {
    if a.len() != b.len() || a.len() < 3 {
        return None;
    }
    let (ra, rb) = (ranks(a), ranks(b));
    let n = a.len() as f64;
    let mean = (n + 1.0) / 2.0;
    let cov: f64 = ra
        .iter()
        .zip(&rb)
        .map(|(x, y)| (x - mean) * (y - mean))
        .sum();
    let va: f64 = ra.iter().map(|x| (x - mean).powi(2)).sum();
    let vb: f64 = rb.iter().map(|y| (y - mean).powi(2)).sum();
    (va > 0.0 && vb > 0.0).then(|| cov / (va * vb).sqrt())
}

/// Each server's value along a sweep, a step a point (`None` where it has none).
pub(crate) type ByServer = Vec<(String, Vec<Option<f64>>)>;

/// A figure a sweep follows: its value in a row (the median over repeats) and the interval
/// the row carries around it (the median's [min, max] or order-statistic interval; `None`
/// below 3 repeats).
#[derive(Clone, Copy)]
pub(crate) struct Reading {
    pub(crate) value: fn(&Row) -> Option<f64>,
    pub(crate) interval: fn(&Row) -> Option<(f64, f64)>,
}

/// Server CPU per request.
pub(crate) const CPU: Reading = Reading {
    value: |r| r.cpu_us_per_req,
    interval: |r| r.cpu_us_per_req_ci_low.zip(r.cpu_us_per_req_ci_high),
};

/// The p99 latency.
pub(crate) const P99: Reading = Reading {
    value: |r| r.p99_us,
    interval: |r| r.p99_us_ci_low.zip(r.p99_us_ci_high),
};

/// Requests per second.
pub(crate) const THROUGHPUT: Reading = Reading {
    value: |r| r.throughput_per_sec,
    interval: |r| {
        r.throughput_per_sec_ci_low
            .zip(r.throughput_per_sec_ci_high)
    },
};

/// Two servers swapping places along a sweep: `first` was ahead of `second` at step `from`
/// (by more than the margin) and behind it at step `to` (the next step where they differ by
/// more than the margin).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Swap {
    pub(crate) first: String,
    pub(crate) second: String,
    pub(crate) from: usize,
    pub(crate) to: usize,
}

/// Where two servers of `series` swap places: for each pair, each change of which one is
/// higher, counting only the steps where they differ by more than `margin` (0.1: 10%) so
/// that noise between two equals is no swap, and where `apart(a, b, step)` says their
/// repeats tell them apart there. `first` is the higher at `from`.
pub(crate) fn swaps(
    series: &ByServer,
    margin: f64,
    apart: impl Fn(&str, &str, usize) -> bool,
) -> Vec<Swap> {
    let mut out = Vec::new();
    for (i, (a, va)) in series.iter().enumerate() {
        for (b, vb) in &series[i + 1..] {
            // The last step where one was clearly ahead, and whether it was a.
            let mut last: Option<(usize, bool)> = None;
            for (step, (x, y)) in va.iter().zip(vb).enumerate() {
                let (Some(x), Some(y)) = (x, y) else { continue };
                if *x <= 0.0
                    || *y <= 0.0
                    || (x / y - 1.0).abs() <= margin && (y / x - 1.0).abs() <= margin
                    || !apart(a, b, step)
                {
                    continue;
                }
                let a_ahead = x > y;
                if let Some((from, was)) = last
                    && was != a_ahead
                {
                    let (first, second) = if was { (a, b) } else { (b, a) };
                    out.push(Swap {
                        first: first.clone(),
                        second: second.clone(),
                        from,
                        to: step,
                    });
                }
                last = Some((step, a_ahead));
            }
        }
    }
    out
}

/// The swaps along `points` of `suite` by `reading`, each server as a ratio to `reference`:
/// those whose two servers' repeats are apart at both places ([`told_apart`]), and how many
/// swaps of the medians alone that leaves unnamed.
pub(crate) fn swaps_told_apart(
    rows: &[Row],
    (suite, points): (&str, &[String]),
    reference: &str,
    reading: Reading,
    margin: f64,
) -> (Vec<Swap>, usize) {
    let by = ratios(rows, suite, points, reference, reading.value);
    let of_medians = swaps(&by, margin, |_, _, _| true).len();
    let told = swaps(&by, margin, told_apart(rows, suite, points, reading));
    let unnamed = of_medians.saturating_sub(told.len());
    (told, unnamed)
}

/// Whether two servers' repeats tell them apart at `points[step]` of `suite`: both rows carry
/// an interval of `reading` and the two do not overlap. (Every swap the report names passes
/// this at both of its steps: with 5 repeats, two [min, max] intervals apart is what a
/// rank test would call a difference at p < 0.01.)
fn told_apart<'a>(
    rows: &'a [Row],
    suite: &'a str,
    points: &'a [String],
    reading: Reading,
) -> impl Fn(&str, &str, usize) -> bool + 'a {
    move |a, b, step| {
        let span = |server: &str| {
            let p = points.get(step)?;
            find(rows, suite, server, p)
                .filter(|r| r.ok > 0)
                .and_then(reading.interval)
        };
        match (span(a), span(b)) {
            (Some((a_low, a_high)), Some((b_low, b_high))) => a_high < b_low || b_high < a_low,
            _ => false,
        }
    }
}

/// Each server's `y` at `points` (ids of `suite`) over the reference's at the same point: its
/// ratio to the reference along the sweep. Servers in the rows' order; the reference's own
/// line is 1 wherever it has a value.
pub(crate) fn ratios(
    rows: &[Row],
    suite: &str,
    points: &[String],
    reference: &str,
    y: fn(&Row) -> Option<f64>,
) -> ByServer {
    crate::record::row::servers(rows)
        .into_iter()
        .map(|s| {
            let line = points
                .iter()
                .map(|p| {
                    let mine = find(rows, suite, &s, p).filter(|r| r.ok > 0).and_then(y)?;
                    let base = find(rows, suite, reference, p)
                        .filter(|r| r.ok > 0)
                        .and_then(y)?;
                    (base > 0.0).then(|| mine / base)
                })
                .collect();
            (s, line)
        })
        .filter(|(_, line): &(String, Vec<Option<f64>>)| line.iter().any(Option::is_some))
        .collect()
}

/// The sentences the report's conclusion of a workload says of `swaps`, the steps named by
/// `labels`; what the values are (`what`: "CPU per request") and which way is better
/// (`lower_better`) say who comes out ahead.
pub(crate) fn sentences(
    swaps: &[Swap],
    labels: &[String],
    what: &str,
    lower_better: bool,
) -> Vec<String> {
    let label = |i: usize| labels.get(i).map_or("?", String::as_str);
    swaps
        .iter()
        .map(|s| {
            // `first` was higher at `from`: ahead there where higher is better.
            let (ahead, behind) = if lower_better {
                (&s.second, &s.first)
            } else {
                (&s.first, &s.second)
            };
            format!(
                "{ahead} leads {behind} on {what} at {} but trails it at {}",
                label(s.from),
                label(s.to)
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fit_recovers_a_line_and_refuses_one_x() {
        // CPU per request = 3 µs + 40 µs per connection / R, at R = 1, 10, 100 and ∞.
        let pts: Vec<(f64, f64)> = [1.0, 0.1, 0.01, 0.0]
            .iter()
            .map(|&x| (x, 3.0 + 40.0 * x))
            .collect();
        let (a, b) = least_squares(&pts).unwrap();
        assert!((a - 3.0).abs() < 1e-9 && (b - 40.0).abs() < 1e-9, "{a} {b}");
        // Noise around it: the slope stays near.
        let noisy = [(1.0, 43.5), (0.1, 6.6), (0.01, 3.9), (0.0, 2.8)];
        let (_, b) = least_squares(&noisy).unwrap();
        assert!((b - 40.0).abs() < 1.5, "{b}");
        assert_eq!(least_squares(&[(1.0, 2.0)]), None);
        assert_eq!(least_squares(&[(1.0, 2.0), (1.0, 3.0)]), None);
    }

    #[test]
    fn spearman_is_one_for_the_same_order_and_minus_one_for_the_reverse() {
        let a = [10.0, 20.0, 30.0, 40.0];
        assert_eq!(spearman(&a, &[1.0, 2.0, 3.0, 100.0]), Some(1.0));
        assert_eq!(spearman(&a, &[4.0, 3.0, 2.0, 1.0]), Some(-1.0));
        // One pair swapped of five: 1 - 6·2 / (5·24) = 0.9.
        let r = spearman(&[1.0, 2.0, 3.0, 4.0, 5.0], &[1.0, 2.0, 4.0, 3.0, 5.0]).unwrap();
        assert!((r - 0.9).abs() < 1e-12, "{r}");
        // Ties share their rank.
        assert_eq!(ranks(&[5.0, 1.0, 5.0]), [2.5, 1.0, 2.5]);
        assert_eq!(spearman(&[1.0, 2.0], &[1.0, 2.0]), None);
        assert_eq!(spearman(&[1.0, 1.0, 1.0], &[1.0, 2.0, 3.0]), None);
    }

    fn line(name: &str, v: &[Option<f64>]) -> (String, Vec<Option<f64>>) {
        (name.to_string(), v.to_vec())
    }

    #[test]
    fn swaps_are_found_where_the_order_changes_beyond_the_margin() {
        let series = vec![
            line("a", &[Some(1.0), Some(1.0), Some(1.0), Some(1.0)]),
            // Crosses a between steps 1 and 2.
            line("b", &[Some(0.5), Some(0.8), Some(1.5), Some(2.0)]),
            // Within 10% of a throughout: never a swap, whatever its wobble.
            line("c", &[Some(1.05), Some(0.95), Some(1.08), Some(0.93)]),
            // No value where it would cross.
            line("d", &[Some(0.5), None, None, Some(0.5)]),
        ];
        let s = swaps(&series, 0.1, |_, _, _| true);
        // a over b (0.8 → 1.5); b over c too; b over d never swaps (d stays below).
        assert!(
            s.contains(&Swap {
                first: "a".into(),
                second: "b".into(),
                from: 1,
                to: 2
            }),
            "{s:?}"
        );
        assert!(
            s.contains(&Swap {
                first: "c".into(),
                second: "b".into(),
                from: 1,
                to: 2
            }),
            "{s:?}"
        );
        assert_eq!(s.len(), 2, "{s:?}");
        let labels: Vec<String> = ["16B", "1KiB", "64KiB", "1MiB"].map(String::from).to_vec();
        let said = sentences(&s[..1], &labels, "CPU per request", true);
        assert_eq!(
            said,
            ["b leads a on CPU per request at 1KiB but trails it at 64KiB"]
        );
        let said = sentences(&s[..1], &labels, "throughput", false);
        assert_eq!(
            said,
            ["a leads b on throughput at 1KiB but trails it at 64KiB"]
        );
    }

    #[test]
    fn ratios_are_to_the_reference_at_each_point() {
        let row = |server: &str, point: &str, cpu: f64| Row {
            suite: "sizes".into(),
            server: server.into(),
            point: point.into(),
            ok: 1,
            cpu_us_per_req: Some(cpu),
            ..Row::default()
        };
        let rows = vec![
            row("ref", "p1", 2.0),
            row("ref", "p2", 4.0),
            row("x", "p1", 3.0),
            row("x", "p2", 2.0),
        ];
        let pts = vec!["p1".to_string(), "p2".to_string()];
        let r = ratios(&rows, "sizes", &pts, "ref", |r| r.cpu_us_per_req);
        assert_eq!(r[0], line("ref", &[Some(1.0), Some(1.0)]));
        assert_eq!(r[1], line("x", &[Some(1.5), Some(0.5)]));
        assert_eq!(swaps(&r, 0.1, |_, _, _| true).len(), 1);
    }

    #[test]
    fn a_swap_is_named_only_where_the_repeats_keep_the_two_apart() {
        // x is dearer than ref at p1 and cheaper at p2, by far more than 10% at both.
        let row = |server: &str, point: &str, cpu: f64, spread: f64| Row {
            suite: "sizes".into(),
            server: server.into(),
            point: point.into(),
            ok: 5,
            repeats: 5,
            cpu_us_per_req: Some(cpu),
            cpu_us_per_req_ci_low: Some(cpu - spread),
            cpu_us_per_req_ci_high: Some(cpu + spread),
            ..Row::default()
        };
        let pts = vec!["p1".to_string(), "p2".to_string()];
        let named = |rows: &[Row]| {
            let (told, unnamed) = swaps_told_apart(rows, ("sizes", &pts), "ref", CPU, 0.1);
            assert_eq!(told.len() + unnamed, 1, "one swap of the medians in all");
            told.len()
        };
        let tight = vec![
            row("ref", "p1", 2.0, 0.1),
            row("ref", "p2", 4.0, 0.1),
            row("x", "p1", 3.0, 0.1),
            row("x", "p2", 2.0, 0.1),
        ];
        assert_eq!(named(&tight), 1);
        // x's repeats at p2 reach over ref's: the medians still swap, the report names none.
        let mut loose = tight.clone();
        loose[3] = row("x", "p2", 2.0, 2.5);
        assert_eq!(named(&loose), 0);
        // Reaching just into the other's interval is enough to not be apart.
        let mut just = tight.clone();
        just[3] = row("x", "p2", 2.0, 1.95);
        assert_eq!(named(&just), 0);
        // A row without an interval (one repeat) tells nothing apart.
        let mut once = tight.clone();
        once[2].cpu_us_per_req_ci_low = None;
        assert_eq!(named(&once), 0);
    }
}
