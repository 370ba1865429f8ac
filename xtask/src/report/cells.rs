//! How numbers look in the report's tables and on the terminal: rates, durations, bytes,
//! and the marks a cell carries (client-bound, disturbed, failed).
//!
//! It may call the record layer's `row` and `stats`.

use std::fmt::Write as _;

use crate::record::row::Row;
use crate::record::stats;

pub(crate) fn fmt_rate(v: Option<f64>) -> String {
    match v {
        None => "–".into(),
        Some(v) if v >= 100_000.0 => format!("{:.0}k", v / 1000.0),
        Some(v) if v >= 1_000.0 => format!("{:.1}k", v / 1000.0),
        Some(v) if v >= 10.0 => format!("{v:.0}"),
        Some(v) => format!("{v:.1}"),
    }
}

pub(crate) fn fmt_us(v: Option<f64>) -> String {
    match v {
        None => "–".into(),
        Some(v) if v >= 1_000_000.0 => format!("{:.2} s", v / 1e6),
        Some(v) if v >= 10_000.0 => format!("{:.0} ms", v / 1e3),
        Some(v) if v >= 1_000.0 => format!("{:.1} ms", v / 1e3),
        Some(v) if v >= 100.0 => format!("{v:.0} µs"),
        Some(v) if v >= 10.0 => format!("{v:.1} µs"),
        Some(v) => format!("{v:.2} µs"),
    }
}

pub(crate) fn fmt_bytes(v: Option<f64>) -> String {
    match v {
        None => "–".into(),
        Some(v) if v.abs() >= 1024.0 * 1024.0 * 10.0 => format!("{:.0} MiB", v / 1024.0 / 1024.0),
        Some(v) if v.abs() >= 1024.0 * 1024.0 => format!("{:.1} MiB", v / 1024.0 / 1024.0),
        Some(v) if v.abs() >= 10.0 * 1024.0 => format!("{:.0} KiB", v / 1024.0),
        Some(v) if v.abs() >= 1024.0 => format!("{:.1} KiB", v / 1024.0),
        Some(v) => format!("{v:.0} B"),
    }
}

pub(crate) fn fmt_num(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "–".into(), |v| format!("{v:.digits$}"))
}

pub(crate) fn fmt_pct(v: Option<f64>) -> String {
    v.map_or_else(|| "–".into(), |v| format!("{v:.0}%"))
}

/// A cell for a row: `failed`, or the value marked † when the row is client-bound, ‡ when
/// something else disturbed the server's CPUs (another program, or steal), and § when a CPU
/// quota throttled the server (its latency includes the throttling).
pub(crate) fn mark(row: Option<&Row>, cell: String) -> String {
    match row {
        None => "–".into(),
        Some(r) if r.ok == 0 => "failed".into(),
        Some(r) => {
            let mut c = cell;
            if r.client_bound {
                c.push_str(" †");
            }
            if r.disturbed() {
                c.push_str(" ‡");
            }
            if r.throttled() {
                c.push_str(" §");
            }
            c
        }
    }
}

/// ` (1.23×)`, `a` as a multiple of `b`, or nothing without both figures.
pub(crate) fn times(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!(" ({:.2}×)", a / b),
        _ => String::new(),
    }
}

pub(crate) fn table(out: &mut String, head: &[&str], rows: &[Vec<String>]) {
    let _ = writeln!(out, "| {} |", head.join(" | "));
    let _ = writeln!(
        out,
        "|{}",
        head.iter().map(|_| " --- |").collect::<String>()
    );
    for r in rows {
        let _ = writeln!(out, "| {} |", r.join(" | "));
    }
    out.push('\n');
}

/// The values of `metric` over `row`'s repeats, or its one summary value where the repeats
/// were not kept (a run from before they were, or a single repeat).
fn repeats(row: &Row, metric: &str, value: Option<f64>) -> Vec<f64> {
    let v = row.repeats_of(metric);
    if v.is_empty() {
        value.into_iter().collect()
    } else {
        v.to_vec()
    }
}

/// The verdict of B against A for one metric: the ratio `b / a`, the p of the test on the two
/// rows' repeats, their counts, and whether the difference is real (p < `stats::ALPHA`). The
/// one place the tables, `report.html` and `compare --fail-above` get a verdict from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Verdict {
    pub(crate) ratio: f64,
    pub(crate) p: f64,
    pub(crate) n_a: usize,
    pub(crate) n_b: usize,
    pub(crate) real: bool,
}

impl std::fmt::Display for Verdict {
    /// As benchstat shows it: `1.23× (p=0.008 n=5+5)` where the difference is real, else
    /// `~ (p=0.400 n=3+3)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = format!("p={:.3} n={}+{}", self.p, self.n_a, self.n_b);
        if self.real {
            write!(f, "{:.2}× ({n})", self.ratio)
        } else {
            write!(f, "~ ({n})")
        }
    }
}

/// B against A for one metric: the Mann-Whitney test on the two rows' repeats, a real
/// difference where p < 0.05; `None` without both figures.
pub(crate) fn verdict(
    a: &Row,
    b: &Row,
    metric: &str,
    va: Option<f64>,
    vb: Option<f64>,
) -> Option<Verdict> {
    let (x, y) = (va?, vb?);
    let (ra, rb) = (repeats(a, metric, va), repeats(b, metric, vb));
    let p = stats::mann_whitney(&ra, &rb)?;
    Some(Verdict {
        ratio: if x.abs() > f64::EPSILON {
            y / x
        } else {
            f64::NAN
        },
        p,
        n_a: ra.len(),
        n_b: rb.len(),
        real: p < stats::ALPHA && x.abs() > f64::EPSILON,
    })
}

/// B against A for one metric, as benchstat shows it (see [`verdict`]): the ratio `b / a`
/// where the Mann-Whitney test on the two rows' repeats says p < 0.05, else `~`; with the
/// p-value and the repeats, `1.23× (p=0.008 n=5+5)`, `~ (p=0.400 n=3+3)`.
pub(crate) fn delta(a: &Row, b: &Row, metric: &str, va: Option<f64>, vb: Option<f64>) -> String {
    verdict(a, b, metric, va, vb).map_or_else(|| "–".into(), |v| v.to_string())
}

/// B against A round by round, beside [`delta`]'s verdict: the median of the per-round ratios
/// `b / a` (the rounds where both gave a value) and the sign test's p on them,
/// `1.05× (p=0.062, 5 of 5 rounds above)`; `–` where the rows share no round (a run from
/// before rounds were kept, or a server that failed every round).
pub(crate) fn paired(a: &Row, b: &Row, metric: &str) -> String {
    match stats::paired(a.rounds_of(metric), b.rounds_of(metric)) {
        Some(p) => format!(
            "{:.2}× (p={:.3}, {} of {} rounds above)",
            p.ratio, p.p, p.above, p.rounds
        ),
        None => "–".into(),
    }
}

/// The per-round cell of `r` against the best row of a column (`best` for the best itself).
pub(crate) fn paired_against(best: Option<&Row>, r: &Row, metric: &str) -> String {
    match best {
        Some(b) if b.server == r.server => "best".into(),
        Some(b) => paired(b, r, metric),
        None => "–".into(),
    }
}

/// A value with its interval, `12.3 µs [11.9–13.0]`, in the format `f` gives the value.
pub(crate) fn with_ci(
    v: Option<f64>,
    low: Option<f64>,
    high: Option<f64>,
    f: fn(Option<f64>) -> String,
) -> String {
    match (v, low, high) {
        (Some(_), Some(l), Some(h)) => format!("{} [{}–{}]", f(v), f(Some(l)), f(Some(h))),
        _ => f(v),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(fmt_rate(Some(123_456.0)), "123k");
        assert_eq!(fmt_rate(Some(12_345.0)), "12.3k");
        assert_eq!(fmt_rate(Some(42.0)), "42");
        assert_eq!(fmt_us(Some(5.123)), "5.12 µs");
        assert_eq!(fmt_us(Some(1500.0)), "1.5 ms");
        assert_eq!(fmt_us(Some(2_500_000.0)), "2.50 s");
        assert_eq!(fmt_bytes(Some(2048.0)), "2.0 KiB");
        assert_eq!(fmt_bytes(Some(20.0 * 1024.0 * 1024.0)), "20 MiB");
        assert_eq!(fmt_us(None), "–");
    }
}
