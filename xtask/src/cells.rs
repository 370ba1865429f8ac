//! How numbers look in the report's tables and on the terminal: rates, durations, bytes,
//! and the marks a cell carries (client-bound, disturbed, failed).

use std::fmt::Write as _;

use crate::summary::Row;

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

/// A cell for a row: `failed`, or the value marked † when the row is client-bound and ‡ when
/// something else disturbed the server's CPUs.
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
            c
        }
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
