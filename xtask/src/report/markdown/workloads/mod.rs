//! The sections of issue 62's workloads, one module each: `churn` (CPU per connection
//! lifetime, accepts/s, the connections counted on both sides), `idle` (memory per idle and
//! per active connection, CPU at no load, the active clients' p99 as idle ones grow), `sizes`
//! (CPU per request and per KiB, Gbit/s, where the runtimes converge), `bursts` (whether the
//! ranking under bursts is Poisson's) and `skew` (kv under key skew). Each table carries the
//! verdicts against the suite's reference (`cells::Column`), and each section ends with where
//! two servers swap places along its sweep (`report::crossover`).
//!
//! It may call what `markdown` may, and the report layer's `crossover`.

mod bursts;
mod churn;
mod idle;
mod sizes;
mod skew;

use std::fmt::Write as _;

/// A workload's section of `report.md`, with the run's `--reference`.
macro_rules! section {
    ($name:ident) => {
        |out: &mut String, rows: &[Row], input: &Input<'_>| {
            $name::section(out, rows, input.meta.settings["reference"].as_str());
        }
    };
}

/// The sections of `suite`, one of the five workloads (`markdown::sections`).
pub(crate) fn sections(suite: Suite) -> &'static [super::Section] {
    match suite {
        Suite::Churn => &[section!(churn)],
        Suite::Idle => &[section!(idle)],
        Suite::Sizes => &[section!(sizes)],
        Suite::Bursts => &[section!(bursts)],
        Suite::Skew => &[section!(skew)],
        _ => &[],
    }
}

/// The swaps a conclusion names; the rest it counts (the section lists them all).
const SWAPS_NAMED: usize = 3;

/// The sentence a workload adds to its suite's conclusion paragraph (a `conclusion::Note`):
/// the places along its sweep where two servers swap (the first [`SWAPS_NAMED`], and how many
/// in all), or nothing where none do.
pub(crate) fn swap_note(input: &Input<'_>, suite: Suite) -> Option<String> {
    let swaps = crate::report::figures::crossover_swaps(input.rows, suite, SWAP_MARGIN)?;
    match swaps.len() {
        0 => None,
        n if n <= SWAPS_NAMED => Some(format!(
            "Along the {} sweep the ranking changes: {}.",
            suite.name(),
            swaps.join("; ")
        )),
        n => Some(format!(
            "Along the {} sweep the ranking changes {n} times ({}; \"Where the ranking changes\" lists them), among them: {}.",
            suite.name(),
            swap_rule(),
            swaps[..SWAPS_NAMED].join("; ")
        )),
    }
}

/// The report's conclusion of the workloads that ran: where, along each one's sweep (its
/// crossover figure's), two servers swap places.
pub(crate) fn conclusion(out: &mut String, input: &Input<'_>) {
    let said: Vec<(Suite, Vec<String>)> = input
        .suites
        .iter()
        .filter_map(|&s| {
            Some((
                s,
                crate::report::figures::crossover_swaps(input.rows, s, SWAP_MARGIN)?,
            ))
        })
        .collect();
    if said.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "## Where the ranking changes\n\nAlong each workload's sweep (its crossover figure), the places where two servers swap ({}):\n",
        swap_rule()
    );
    for (suite, lines) in said {
        if lines.is_empty() {
            let _ = writeln!(out, "- {}: no two servers swap places.", suite.name());
        }
        for l in lines {
            let _ = writeln!(out, "- {}: {l}.", suite.name());
        }
    }
    out.push('\n');
}

use super::Input;
use crate::plan::suites::Suite;
use crate::record::row::{Row, find, servers_that_ran};
use crate::report::cells::{Column, mark, table};
use crate::report::crossover;

/// How far apart two servers must be, at both ends, for a change of order to count as a
/// swap: 10%, beyond what a single run of a short point moves by itself.
pub(crate) const SWAP_MARGIN: f64 = 0.10;

/// The reference of `suite`'s verdicts among the servers that ran: `explicit`
/// (`--reference`), else the suite's own, else the first.
fn reference(suite: Suite, rows: &[Row], explicit: Option<&str>) -> Option<String> {
    suite.reference(&servers_that_ran(rows), explicit)
}

/// The rows' point ids of `suite` whose series is `series`, in x order, with their labels.
fn points(rows: &[Row], suite: Suite, series: &str) -> Vec<(String, String)> {
    crate::record::row::points_of(rows, suite.name(), series)
        .into_iter()
        .map(|(id, label, _)| (id, label))
        .collect()
}

/// Columns after a grid's points: their heads, and a server's cells under them.
type Extra<'a> = (&'a [&'a str], &'a dyn Fn(&str) -> Vec<String>);

/// A grid without columns after its points.
const NO_EXTRA: Extra<'static> = (&[], &|_| Vec::new());

/// What a crossover compares: its name, its value and interval, and whether lower is better.
type Measure<'a> = (&'a str, crossover::Reading, bool);

/// A table of a server a line, a column per point of `points` (`cell` of the server's row
/// there, its marks added), then the `extra` columns named in `extra_head`.
fn grid(
    out: &mut String,
    rows: &[Row],
    suite: Suite,
    (corner, points): (&str, &[(String, String)]),
    cell: impl Fn(&Row) -> String,
    (extra_head, extra): Extra<'_>,
) {
    if points.is_empty() {
        return;
    }
    let mut head = vec![corner.to_string()];
    head.extend(points.iter().map(|p| p.1.clone()));
    head.extend(extra_head.iter().map(|h| h.to_string()));
    let body: Vec<Vec<String>> = servers_that_ran(rows)
        .into_iter()
        .filter(|s| {
            points
                .iter()
                .any(|p| find(rows, suite.name(), s, &p.0).is_some_and(|r| r.repeats > 0))
        })
        .map(|s| {
            let mut cells = vec![format!("**{s}**")];
            for p in points {
                let r = find(rows, suite.name(), &s, &p.0).filter(|r| r.repeats > 0);
                cells.push(mark(r, r.map(&cell).unwrap_or_default()));
            }
            cells.extend(extra(&s));
            cells
        })
        .collect();
    let head: Vec<&str> = head.iter().map(String::as_str).collect();
    table(out, &head, &body);
}

/// `value` and, beside it, the verdict of `metric` at the row's point against `reference`
/// (or the bare multiple of one run).
fn judged(
    rows: &[Row],
    r: &Row,
    (metric, value): (&str, fn(&Row) -> Option<f64>),
    reference: Option<&str>,
    show: fn(Option<f64>) -> String,
) -> String {
    let col = Column::new(rows, &r.suite, &r.point, metric, reference);
    let base = reference
        .and_then(|name| find(rows, &r.suite, name, &r.point))
        .and_then(value);
    format!(
        "{}{}",
        show(value(r)),
        col.multiple(&r.server, value(r), base)
    )
}

/// The section's last words: where two servers swap places along `points` by `y` (each as a
/// ratio to `reference`) with their repeats apart, or that none do, and how many swaps of the
/// medians alone the repeats' spread leaves unnamed.
fn crossovers(
    out: &mut String,
    rows: &[Row],
    suite: Suite,
    (points, reference): (&[(String, String)], Option<&str>),
    (what, y, lower_better): Measure<'_>,
) {
    // A sweep of one point has no places to swap.
    let (Some(reference), 2..) = (reference, points.len()) else {
        return;
    };
    let ids: Vec<String> = points.iter().map(|p| p.0.clone()).collect();
    let labels: Vec<String> = points.iter().map(|p| p.1.clone()).collect();
    let (swaps, unnamed) =
        crossover::swaps_told_apart(rows, (suite.name(), &ids), reference, y, SWAP_MARGIN);
    let said = crossover::sentences(&swaps, &labels, what, lower_better);
    let within = if unnamed == 0 {
        String::new()
    } else {
        format!(
            " {unnamed} swap(s) of the medians alone are not named: there the two servers' repeats overlap, or the run has too few repeats (under 3) for an interval."
        )
    };
    if said.is_empty() {
        let _ = writeln!(
            out,
            "**Where the ranking changes** ({what}, {} to {}): no two servers swap places by more than {:.0}% with their repeats apart.{within}\n",
            labels.first().map_or("", String::as_str),
            labels.last().map_or("", String::as_str),
            SWAP_MARGIN * 100.0
        );
    } else {
        let _ = writeln!(
            out,
            "**Where the ranking changes** ({what}; {}):\n",
            swap_rule()
        );
        for s in said {
            let _ = writeln!(out, "- {s}");
        }
        if !within.is_empty() {
            let _ = writeln!(out, "\n{}", within.trim_start());
        }
        out.push('\n');
    }
}

/// What counts as a swap, as the report says it.
fn swap_rule() -> String {
    format!(
        "a swap counts where the two differ by more than {:.0}% on both sides and their repeats' intervals do not overlap at either",
        SWAP_MARGIN * 100.0
    )
}
