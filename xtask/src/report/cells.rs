//! How numbers look in the report's tables and on the terminal: rates, durations, bytes,
//! and the marks a cell carries (client-bound, disturbed, failed).
//!
//! It may call the record layer's `row` and `verdict`.

use std::fmt::Write as _;

use crate::record::row::{DISTURBED_PCT, Row, STEAL_PCT};
use crate::record::verdict::{self, Verdict};

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
/// something else disturbed the server's CPUs (another program, or steal), § when a CPU
/// quota throttled the server (its latency includes the throttling), ⊘ when completions
/// overflowed the server's io_uring completion queue, ◊ when the load
/// generator did not keep its schedule (its latency is the client's, never a verdict), and ≈
/// when its CPU was interpolated from samples of the live threads rather than read whole at
/// the window's edges (a run from before each server had its cgroup).
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
            if r.overflowed() {
                c.push_str(" ⊘");
            }
            if r.schedule_missed() {
                c.push_str(" ◊");
            }
            if r.cpu_inexact() {
                c.push_str(" ≈");
            }
            c
        }
    }
}

/// The legend of the marks [`mark`] drew on `rows` (a table's), each with its threshold and
/// what it keeps out of the verdicts (`verdict::blocked`), one meaning a mark: `Marks: ‡ …`,
/// or nothing where the table has none.
pub(crate) fn legend<'a>(rows: impl IntoIterator<Item = &'a Row>) -> String {
    let rows: Vec<&Row> = rows.into_iter().filter(|r| r.ok > 0).collect();
    let any = |f: fn(&Row) -> bool| rows.iter().any(|r| f(r));
    let mut said = Vec::new();
    if any(|r| r.client_bound) {
        said.push("† client-bound (loadgen's CPUs over 90% busy): its throughput is the load generator's and is not judged".to_string());
    }
    if any(Row::disturbed) {
        said.push(format!(
            "‡ disturbed (other load over {DISTURBED_PCT:.0}% of a CPU of the server's, interrupts left out, or the hypervisor's steal over {STEAL_PCT:.0}% in the median repeat): judged in no column"
        ));
    }
    if any(Row::throttled) {
        said.push("§ the CPU quota throttled the server: its latency includes it".to_string());
    }
    if any(Row::overflowed) {
        said.push("⊘ the server's io_uring completion queue overflowed: completions waited on the kernel's overflow list during or after the load (`cq_backlog_repeats` in the summary), or were dropped (`cq_dropped`)".to_string());
    }
    if any(Row::schedule_missed) {
        said.push("◊ the load generator missed its schedule: the latency is the client's and is not judged".to_string());
    }
    if any(Row::cpu_inexact) {
        said.push(
            "≈ CPU interpolated from samples of the live threads (a run from before cgroups)"
                .to_string(),
        );
    }
    if said.is_empty() {
        String::new()
    } else {
        format!("Marks: {}.\n\n", said.join("; "))
    }
}

/// The label of a ratio shown with no test behind it: no verdict, no interval of its own, in
/// no family (ARCHITECTURE.md: every ratio tested or said to be untested).
pub(crate) const UNTESTED: &str = "untested";

/// ` (1.23×, untested)`, `a` as a multiple of `b` with no test behind it, or nothing without
/// both figures.
pub(crate) fn times(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!(" ({:.2}×, {UNTESTED})", a / b),
        _ => String::new(),
    }
}

/// Which interval a table shows, said in the line under it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Family {
    /// A report's: each column (a point and a metric) one family of the servers it judges
    /// against the reference.
    Column,
    /// `compare`'s: at each point and metric, every server's B against its A.
    Point,
}

/// A Markdown table, and under it the line that says what its intervals and ratios are
/// ([`intervals`]), where it shows any.
pub(crate) fn table(out: &mut String, head: &[&str], rows: &[Vec<String>]) {
    table_of(out, head, rows, Family::Column);
}

/// [`table`] with its verdicts' family named.
pub(crate) fn table_of(out: &mut String, head: &[&str], rows: &[Vec<String>], family: Family) {
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
    out.push_str(&intervals(
        rows.iter().flatten().map(String::as_str),
        family,
    ));
}

/// Whether `cell` shows a verdict's interval (`1.12× [1.05–1.19]`), a median's
/// (`12.3 µs [11.9–13.0]`) or a ratio with no test (`untested`, or `not judged ‡`).
fn shows(cell: &str) -> (bool, bool, bool) {
    let verdict = cell.contains("× [") && !cell.contains(UNTESTED);
    let median = cell
        .match_indices(" [")
        .any(|(i, _)| !cell[..i].ends_with('×') && cell[i..].contains('–'));
    let untested = cell.contains(UNTESTED) || (cell.contains('×') && cell.contains("not judged"));
    (verdict, median, untested)
}

/// The legend line of a table's intervals and ratios, from its `cells`: which interval each
/// bracket is, what a ratio is an estimate of, and its family; empty where the table shows
/// none.
pub(crate) fn intervals<'a>(cells: impl IntoIterator<Item = &'a str>, family: Family) -> String {
    let (mut verdict, mut median, mut untested) = (false, false, false);
    for c in cells {
        let (v, m, u) = shows(c);
        (verdict, median, untested) = (verdict || v, median || m, untested || u);
    }
    let mut said = Vec::new();
    if median {
        said.push(
            "a value's [low–high] is its median's interval over the repeats (order statistics, \
             95% coverage from six repeats; [min, max] below that: 75% at three, 93.8% at five)",
        );
    }
    if verdict {
        said.push(match family {
            Family::Column => {
                "a ratio's [low–high] is its simultaneous 95% interval (Bonferroni's): each column \
                 (a point and a metric) is one family, the servers it judges against the \
                 reference; the ratio is the model's, the geometric mean of the per-round ratios, \
                 which can differ a little from the ratio of the medians beside it"
            }
            Family::Point => {
                "a B/A ratio's [low–high] is its simultaneous 95% interval (Bonferroni's): at each \
                 point and metric every server's B against its A is one family (the gate's is \
                 one family across every point it judges); the ratio is that of the geometric \
                 means of the repeats, which can differ a little from the ratio of the medians \
                 beside it"
            }
        });
    }
    if untested {
        said.push(
            "a ratio marked untested (or not judged, for a server its column leaves out) is a \
             plain ratio of the numbers shown (medians, or peaks): no test, no interval, no \
             family",
        );
    }
    if said.is_empty() {
        String::new()
    } else {
        format!("Intervals and ratios: {}.\n\n", said.join("; "))
    }
}

/// One verdict as a cell: `1.12× [1.05–1.19] (p=0.002)` where the server differs from the
/// reference (the ratio server / reference, its simultaneous interval, the adjusted p),
/// else `~ (1.01× [0.96–1.06])`; `–` where there is none.
pub(crate) fn verdict(v: Option<&Verdict>) -> String {
    match v {
        Some(v) if v.differs => format!(
            "{:.2}× [{:.2}–{:.2}] ({})",
            v.ratio,
            v.low,
            v.high,
            if v.p < 0.001 {
                "p<0.001".to_string()
            } else {
                format!("p={:.3}", v.p)
            }
        ),
        Some(v) => format!("~ ({:.2}× [{:.2}–{:.2}])", v.ratio, v.low, v.high),
        None => "–".into(),
    }
}

/// A column of verdicts: every server at one point of a suite against the reference, on one
/// metric, as one family (`record::verdict`). The one way the report (and whatever else
/// shows a verdict) asks whether a server differs from the reference.
#[derive(Debug, Clone)]
pub(crate) struct Column {
    /// The reference's name, if the column has one.
    pub(crate) reference: Option<String>,
    /// Why the reference's row cannot be tested against, if it cannot.
    pub(crate) unusable: Option<&'static str>,
    verdicts: Vec<(String, Option<Verdict>)>,
    /// The servers the column does not judge, and the mark that says why
    /// (`verdict::blocked`): ◊ (a latency that is the load generator's), ‡ (something else
    /// took the server's CPUs), † (a throughput that is the load generator's), `failed`. They
    /// are not in the family.
    blocked: Vec<(String, &'static str)>,
}

impl Column {
    /// The column of `metric` at `suite`'s `point`, `reference` against every other server
    /// of `rows` there.
    pub(crate) fn new(
        rows: &[Row],
        suite: &str,
        point: &str,
        metric: &str,
        reference: Option<&str>,
    ) -> Column {
        let at: Vec<&Row> = rows
            .iter()
            .filter(|r| r.suite == suite && r.point == point)
            .collect();
        let base = reference.and_then(|name| at.iter().find(|r| r.server == name).copied());
        let Some(base) = base else {
            return Column {
                reference: reference.map(str::to_string),
                unusable: reference.map(|_| "not measured at this point"),
                verdicts: Vec::new(),
                blocked: Vec::new(),
            };
        };
        let others: Vec<&Row> = at
            .iter()
            .filter(|r| r.server != base.server)
            .copied()
            .collect();
        let verdicts = verdict::column(base, &others, metric);
        Column {
            reference: Some(base.server.clone()),
            unusable: verdict::unusable(base, metric),
            verdicts: others
                .iter()
                .map(|r| r.server.clone())
                .zip(verdicts)
                .collect(),
            blocked: others
                .iter()
                .filter_map(|r| {
                    let why = verdict::blocked(r, metric)?;
                    Some((r.server.clone(), verdict::blocked_mark(why)))
                })
                .collect(),
        }
    }

    /// `server`'s verdict, if it has one.
    pub(crate) fn of(&self, server: &str) -> Option<&Verdict> {
        self.verdicts
            .iter()
            .find(|(s, _)| s == server)
            .and_then(|(_, v)| v.as_ref())
    }

    /// The mark of `server`'s row where the column does not judge it.
    fn blocked_mark(&self, server: &str) -> Option<&'static str> {
        self.blocked
            .iter()
            .find(|(s, _)| s == server)
            .map(|(_, m)| *m)
    }

    /// `server`'s cell: `reference` for the reference itself, `not tested` where the
    /// reference is unusable, `the client's ◊` where the value is the load generator's,
    /// `not judged ‡` (or †) where something else took its CPUs (or the load generator was the
    /// limit of its throughput), `failed`, else [`verdict`].
    pub(crate) fn cell(&self, server: &str) -> String {
        if self.reference.as_deref() == Some(server) {
            return "reference".into();
        } else if self.unusable.is_some() {
            return "not tested".into();
        }
        match self.blocked_mark(server) {
            Some("◊") => "the client's ◊".into(),
            Some("failed") => "failed".into(),
            Some(m) => format!("not judged {m}"),
            None => verdict(self.of(server)),
        }
    }

    /// `server`'s multiple of the reference as a table of one repeat or more shows it beside
    /// a value: ` (1.12× [1.05–1.19] (p=0.002))` where the column could test it,
    /// ` (1.12×, not judged ‡)` where the column does not judge the row, else the bare
    /// multiple of `value` over `reference_value` (` (1.12×, untested)`, one run: no
    /// verdict), and
    /// nothing for the reference itself nor for a value that is the load generator's.
    pub(crate) fn multiple(
        &self,
        server: &str,
        value: Option<f64>,
        reference_value: Option<f64>,
    ) -> String {
        if self.reference.as_deref() == Some(server) || self.blocked_mark(server) == Some("◊") {
            return String::new();
        }
        match (self.of(server), self.blocked_mark(server)) {
            (Some(v), _) if self.unusable.is_none() => format!(" ({})", verdict(Some(v))),
            (_, Some(m)) if m != "failed" => match (value, reference_value) {
                (Some(a), Some(b)) if b > 0.0 => format!(" ({:.2}×, not judged {m})", a / b),
                _ => String::new(),
            },
            _ => times(value, reference_value),
        }
    }

    /// What a table says of its reference: its name, or why its column is not tested.
    pub(crate) fn about(&self) -> String {
        match (&self.reference, self.unusable) {
            (None, _) => "no reference".into(),
            (Some(r), None) => format!("against **{r}**"),
            (Some(r), Some(why)) => {
                format!("the reference, **{r}**, is {why} here: its column is not tested")
            }
        }
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

    #[test]
    fn an_overflowed_ring_is_marked_and_said_in_the_legend() {
        let mut r = row("monoio", &[10.0]);
        assert_eq!(mark(Some(&r), "5 µs".into()), "5 µs");
        (r.cq_dropped, r.cq_backlog_repeats) = (Some(0), Some(0));
        assert_eq!(mark(Some(&r), "5 µs".into()), "5 µs");
        assert_eq!(legend([&r]), "");
        r.cq_backlog_repeats = Some(2);
        assert_eq!(mark(Some(&r), "5 µs".into()), "5 µs ⊘");
        assert!(legend([&r]).contains("⊘ the server's io_uring completion queue overflowed"));
        (r.cq_dropped, r.cq_backlog_repeats) = (Some(3), Some(0));
        assert_eq!(mark(Some(&r), "5 µs".into()), "5 µs ⊘");
    }

    fn row(server: &str, cpu: &[f64]) -> Row {
        let mut r = Row {
            suite: "kv".into(),
            server: server.into(),
            point: "p".into(),
            ok: cpu.len(),
            cpu_us_per_req: crate::record::stats::median(cpu),
            ..Row::default()
        };
        r.per_repeat.insert("cpu_us_per_req".into(), cpu.to_vec());
        r.per_round.insert(
            "cpu_us_per_req".into(),
            cpu.iter().copied().map(Some).collect(),
        );
        r
    }

    #[test]
    fn a_multiple_is_a_verdict_where_the_column_can_test_it() {
        let rows = vec![
            row("redis", &[10.0, 10.2, 9.9]),
            row("a", &[20.1, 20.3, 19.8]),
            row("b", &[10.1, 10.0, 10.0]),
        ];
        let col = Column::new(&rows, "kv", "p", "cpu_us_per_req", Some("redis"));
        assert_eq!(col.multiple("redis", Some(10.0), Some(10.0)), "");
        assert!(
            col.multiple("a", Some(20.1), Some(10.0))
                .starts_with(" (2.00× [")
        );
        assert!(
            col.multiple("b", Some(10.0), Some(10.0))
                .starts_with(" (~ (1.0")
        );
        // One run a point: the bare multiple, no verdict, and labelled so.
        let once = vec![row("redis", &[10.0]), row("a", &[20.0])];
        let col = Column::new(&once, "kv", "p", "cpu_us_per_req", Some("redis"));
        assert_eq!(
            col.multiple("a", Some(20.0), Some(10.0)),
            " (2.00×, untested)"
        );
        // A disturbed server is not in the family: its cell says so, and the legend why.
        let mut marked = rows.clone();
        marked[1].other_load_pct = Some(40.0);
        let col = Column::new(&marked, "kv", "p", "cpu_us_per_req", Some("redis"));
        assert_eq!(col.cell("a"), "not judged ‡");
        assert!(col.multiple("a", Some(20.1), Some(10.0)) == " (2.01×, not judged ‡)");
        assert!(col.cell("b").starts_with("~ (1.0"));
        assert!(legend(&marked).starts_with("Marks: ‡ disturbed (other load over 10% of a CPU"));
        assert_eq!(legend(&rows), "");
        // No redis in the run: nothing to set beside.
        let col = Column::new(&once[1..], "kv", "p", "cpu_us_per_req", Some("redis"));
        assert_eq!(col.multiple("a", Some(20.0), None), "");
        assert_eq!(col.cell("a"), "not tested");
    }
}
