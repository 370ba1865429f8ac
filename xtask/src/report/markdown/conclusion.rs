//! The conclusion: the paragraph that opens a report (report.md, report.html, the terminal),
//! written from the verdicts of each suite's headline point (`verdicts::lines`): the servers
//! that cost the same as the reference within the run's precision, the others grouped by
//! ratio band, those not judged and why, and how many points were disturbed. Other modules
//! add sentences through [`NOTES`]. The at-a-glance table and the terminal summary rank the
//! servers by the same headline figure ([`ranked`], [`terminal`]).
//!
//! It may call what `markdown` may.

use std::fmt::Write as _;

use super::Input;
use crate::plan::suites::Suite;
use crate::record::row::{DISTURBED_PCT, Row, STEAL_PCT, find, servers, servers_that_ran};
use crate::report::cells::{Column, fmt_rate, fmt_us, mark, with_ci};
use crate::report::verdicts;

/// A sentence a module adds to a suite's conclusion (a workload suite's "X and Y swap places
/// under …"), or nothing.
pub(crate) type Note = fn(&Input<'_>, Suite) -> Option<String>;

/// The modules' sentences, in order. A new one is one more function here.
pub(crate) const NOTES: &[Note] = &[super::workloads::swap_note];

/// Ratios within this factor of a band's first are one band.
const BAND: f64 = 1.10;

/// The figure a suite's conclusion rests on: its first open-loop point's CPU per request
/// (the comparison one client core can always make), else its largest closed-loop point's
/// throughput. Capacity has none here (its section leads with its own ranking), nor search
/// (no loadgen rows).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Headline {
    pub(crate) suite: &'static str,
    pub(crate) point: String,
    pub(crate) metric: &'static str,
}

impl Headline {
    /// `suite`'s headline in `rows`, if it has a point that ran.
    pub(crate) fn of(rows: &[Row], suite: Suite) -> Option<Headline> {
        // Capacity's figure is the search's (capacity.json), not a point's; memory's is
        // memory, which has no verdicts.
        if matches!(suite, Suite::Capacity | Suite::Memory) {
            return None;
        }
        let mine: Vec<&Row> = rows
            .iter()
            .filter(|r| r.suite == suite.name() && r.repeats > 0)
            .collect();
        let (point, metric) = if let Some(r) = mine.iter().find(|r| r.rate.is_some()) {
            // CPU per request compares servers at equal load only: where each ran at a share
            // of its own capacity (bursts with --capacities), there is no headline.
            if at_unequal_loads(rows, suite) {
                return None;
            }
            (r.point.clone(), "cpu_us_per_req")
        } else {
            // A suite whose points carry no traffic (memory's idle connections) has none.
            let r = mine
                .iter()
                .filter(|r| r.throughput_per_sec.is_some_and(|t| t > 0.0))
                .max_by(|a, b| a.x.total_cmp(&b.x))?;
            (r.point.clone(), "throughput_per_sec")
        };
        Some(Headline {
            suite: suite.name(),
            point,
            metric,
        })
    }

    /// Whether the figure is a cost (less is better), not a rate.
    pub(crate) fn cost(&self) -> bool {
        self.metric == "cpu_us_per_req"
    }

    /// The headline value of `r`, with its interval.
    pub(crate) fn value(&self, r: &Row) -> [Option<f64>; 3] {
        if self.cost() {
            [
                r.cpu_us_per_req,
                r.cpu_us_per_req_ci_low,
                r.cpu_us_per_req_ci_high,
            ]
        } else {
            [
                r.throughput_per_sec,
                r.throughput_per_sec_ci_low,
                r.throughput_per_sec_ci_high,
            ]
        }
    }

    fn cell(&self, r: &Row) -> String {
        let [v, low, high] = self.value(r);
        with_ci(v, low, high, if self.cost() { fmt_us } else { fmt_rate })
    }
}

/// What a request is called in `suite`.
fn unit(suite: &str) -> &'static str {
    match suite {
        "quick" | "emper-echo" | "scaling" => "echo",
        "chat-cpu" | "chat-room" => "message",
        _ => "request",
    }
}

fn plural(unit: &str) -> String {
    if unit == "echo" {
        "echoes".into()
    } else {
        format!("{unit}s")
    }
}

/// `name's`, or `name'` where it ends in s.
pub(crate) fn possessive(name: &str) -> String {
    if name.ends_with('s') {
        format!("{name}'")
    } else {
        format!("{name}'s")
    }
}

/// `n` in words up to twelve.
fn count(n: usize) -> String {
    const WORDS: [&str; 13] = [
        "no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
        "eleven", "twelve",
    ];
    WORDS
        .get(n)
        .map_or_else(|| n.to_string(), |w| (*w).to_string())
}

/// `a`, `a and b`, `a, b and c`.
fn and(names: &[String]) -> String {
    match names {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// `servers` (each with its ratio) sorted by ratio and cut into bands no wider than
/// [`BAND`]: `a and b 1.24–1.30×; c and d about 1.71×` (within 2% of each other: their
/// mean, to the hundredth, so that 1.13 and 1.15 read 1.14×, not 1.1×).
pub(crate) fn bands(servers: &[(String, f64)]) -> Vec<String> {
    let mut sorted = servers.to_vec();
    sorted.sort_by(|a, b| a.1.total_cmp(&b.1));
    let mut out = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i].1;
        let end = sorted[i..]
            .iter()
            .position(|s| s.1 > start * BAND)
            .map_or(sorted.len(), |k| i + k);
        let band = &sorted[i..end];
        let names: Vec<String> = band.iter().map(|s| s.0.clone()).collect();
        let (low, high) = (start, band[band.len() - 1].1);
        let ratio = if band.len() == 1 {
            format!("{low:.2}×")
        } else if high / low <= 1.02 {
            format!("about {:.2}×", (low + high) / 2.0)
        } else {
            format!("{low:.2}–{high:.2}×")
        };
        out.push(format!("{} {ratio}", and(&names)));
        i = end;
    }
    out
}

/// The rate and the connections of the headline point, as the paragraph opens.
fn at(h: &Headline, r: &Row) -> String {
    let u = unit(h.suite);
    match r.rate {
        Some(rate) => format!(
            "At {} {}/s over {} connections",
            fmt_thousands(rate),
            plural(u),
            r.conns
        ),
        None => format!("In a closed loop at {}", r.label),
    }
}

/// `20000` as `20,000`.
fn fmt_thousands(v: f64) -> String {
    let digits = format!("{:.0}", v.round());
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The paragraph of one suite's headline, `notes` after it; `None` where the suite has no
/// headline or no reference.
pub(crate) fn paragraph(input: &Input<'_>, suite: Suite, notes: &[String]) -> Option<String> {
    let h = Headline::of(input.rows, suite)?;
    let lines: Vec<verdicts::Line> =
        verdicts::lines(input.rows, input.meta.settings["reference"].as_str())
            .into_iter()
            .filter(|l| l.suite == h.suite && l.point == h.point && l.metric == h.metric)
            .collect();
    let reference = lines.first()?.reference.clone();
    let row = |s: &str| find(input.rows, h.suite, s, &h.point);
    let base = row(&reference).and_then(|r| h.value(r)[0]);
    let (mut same, mut differ, mut unjudged, mut raw) = (vec![], vec![], vec![], vec![]);
    for l in lines.iter().filter(|l| l.status != "reference") {
        match (l.status, l.ratio) {
            ("same", _) => same.push(l.server.clone()),
            ("differs", Some(ratio)) => differ.push((l.server.clone(), ratio)),
            ("not judged", _) => unjudged.push(format!(
                "{} ({})",
                l.server,
                l.why.as_deref().unwrap_or("not judged")
            )),
            _ => match (row(&l.server).and_then(|r| h.value(r)[0]), base) {
                (Some(v), Some(b)) if b > 0.0 => raw.push((l.server.clone(), v / b)),
                _ => unjudged.push(format!("{} (no value)", l.server)),
            },
        }
    }
    let first = row(&reference)?;
    let what = if h.cost() {
        format!("CPU per {}", unit(h.suite))
    } else {
        format!("{}/s", plural(unit(h.suite)))
    };
    let mut text = format!(
        "{}, against {} {what} (the reference): ",
        at(&h, first),
        possessive(&reference)
    );
    let mut parts = Vec::new();
    if !same.is_empty() {
        parts.push(format!(
            "{} {} {} as {reference} within this run's precision ({})",
            count(same.len()),
            if same.len() == 1 { "server" } else { "servers" },
            if h.cost() {
                "cost the same"
            } else {
                "serve the same"
            },
            same.join(", ")
        ));
    }
    parts.extend(bands(&differ));
    if !raw.is_empty() {
        let why = lines
            .iter()
            .find(|l| l.status == "not tested")
            .and_then(|l| l.why.clone())
            .unwrap_or_else(|| "too few repeats to test".into());
        parts.push(format!(
            "without a verdict ({why}), the medians' ratios: {}",
            bands(&raw).join("; ")
        ));
    }
    if parts.is_empty() {
        parts.push("no other server to compare".into());
    }
    text.push_str(&parts.join("; "));
    text.push('.');
    if !unjudged.is_empty() {
        let _ = write!(text, " Not judged: {}.", unjudged.join(", "));
    }
    let _ = write!(text, " {}", disturbed(input.rows, h.suite));
    for n in notes {
        let _ = write!(text, " {n}");
    }
    Some(text)
}

/// `N of M points disturbed (‡ …)` over `suite`'s rows.
fn disturbed(rows: &[Row], suite: &str) -> String {
    let ran: Vec<&Row> = rows
        .iter()
        .filter(|r| r.suite == suite && r.repeats > 0)
        .collect();
    let n = ran.iter().filter(|r| r.disturbed()).count();
    if n == 0 {
        format!("None of its {} points was disturbed (‡).", ran.len())
    } else {
        format!(
            "{n} of its {} points disturbed (‡: other load over {DISTURBED_PCT:.0}% of a CPU or \
             steal over {STEAL_PCT:.0}%), judged in no column.",
            ran.len()
        )
    }
}

/// The sentences [`NOTES`] add to `suite`'s paragraph.
fn notes(input: &Input<'_>, suite: Suite) -> Vec<String> {
    NOTES.iter().filter_map(|n| n(input, suite)).collect()
}

/// Whether `suite`'s servers ran a point at different rates: each at a share of its own
/// capacity (bursts with `--capacities`), so that their CPU per request does not compare.
fn at_unequal_loads(rows: &[Row], suite: Suite) -> bool {
    let mine: Vec<&Row> = rows
        .iter()
        .filter(|r| r.suite == suite.name() && r.repeats > 0 && r.rate.is_some())
        .collect();
    mine.iter()
        .any(|r| mine.iter().any(|o| o.point == r.point && o.rate != r.rate))
}

/// The paragraph of a suite whose servers ran at unequal loads: why no CPU is compared, its
/// disturbed points, and what its notes say (where the ranking of latencies changes).
fn unequal_loads(input: &Input<'_>, suite: Suite, notes: &[String]) -> Option<String> {
    if !at_unequal_loads(input.rows, suite) {
        return None;
    }
    let mut text = format!(
        "Each server ran {} at a share of its own capacity (`--capacities`), so no server's CPU per request is held against another's: the run ranks latencies, each under its own load. {}",
        suite.name(),
        disturbed(input.rows, suite.name())
    );
    for n in notes {
        let _ = write!(text, " {n}");
    }
    Some(text)
}

/// `suite`'s paragraph: capacity's from its searches, another's from its headline point.
fn paragraph_of(input: &Input<'_>, suite: Suite) -> Option<String> {
    if suite == Suite::Capacity {
        let mut p = capacity::paragraph(input.capacity)?;
        for n in notes(input, suite) {
            let _ = write!(p, " {n}");
        }
        return Some(p);
    }
    let notes = notes(input, suite);
    paragraph(input, suite, &notes).or_else(|| unequal_loads(input, suite, &notes))
}

/// The conclusion of the run: a paragraph for each suite of the run that has one.
pub(crate) fn paragraphs(input: &Input<'_>) -> Vec<String> {
    input
        .suites
        .iter()
        .filter_map(|&suite| paragraph_of(input, suite))
        .collect()
}

/// The conclusion of `report.md`, under its title ([`paragraphs`]).
pub(crate) fn part(out: &mut String, input: &Input<'_>) {
    for p in paragraphs(input) {
        let _ = writeln!(out, "**In one paragraph.** {p}\n");
    }
}

/// `names` ranked by `suite`'s headline figure (cheapest, or fastest, first; those without it
/// last, in the order given).
pub(crate) fn ranked(rows: &[Row], suite: Suite, names: &[String]) -> Vec<String> {
    let Some(h) = Headline::of(rows, suite) else {
        return names.to_vec();
    };
    let key = |s: &String| {
        find(rows, h.suite, s, &h.point)
            .and_then(|r| h.value(r)[0])
            .map(|v| if h.cost() { v } else { -v })
    };
    let mut out = names.to_vec();
    out.sort_by(|a, b| match (key(a), key(b)) {
        (Some(x), Some(y)) => x.total_cmp(&y),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => std::cmp::Ordering::Equal,
    });
    out
}

/// The end of a run on the terminal: each suite's paragraph, then a line a server, ranked,
/// as hyperfine prints them: the headline value with its interval, then its verdict.
pub(crate) fn terminal(input: &Input<'_>) -> String {
    let mut out = String::new();
    for &suite in input.suites {
        if let Some(p) = paragraph_of(input, suite) {
            let _ = writeln!(out, "{p}\n");
        }
        let Some(h) = Headline::of(input.rows, suite) else {
            continue;
        };
        let mine: Vec<Row> = input
            .rows
            .iter()
            .filter(|r| r.suite == h.suite)
            .cloned()
            .collect();
        // The reference as the verdicts name it: by the run's order, not the ranking's.
        let reference = super::reference(input, suite, &servers_that_ran(&mine));
        let names = ranked(input.rows, suite, &servers(&mine));
        let col = Column::new(
            input.rows,
            h.suite,
            &h.point,
            h.metric,
            reference.as_deref(),
        );
        let label = find(input.rows, h.suite, &names[0], &h.point).map_or("", |r| r.label.as_str());
        let _ = writeln!(
            out,
            "{} ({}, {}):",
            suite.name(),
            label,
            if h.cost() {
                "CPU per request"
            } else {
                "requests/s"
            }
        );
        for s in &names {
            let Some(r) = find(input.rows, h.suite, s, &h.point) else {
                continue;
            };
            let verdict = match col.cell(s) {
                // One run: no verdict, the bare multiple.
                none if none == "–" => {
                    let base = reference
                        .as_deref()
                        .and_then(|b| find(input.rows, h.suite, b, &h.point))
                        .and_then(|b| h.value(b)[0]);
                    col.multiple(s, h.value(r)[0], base).trim().to_string()
                }
                cell => cell,
            };
            let _ = writeln!(out, "  {s:<20} {:<32} {verdict}", mark(Some(r), h.cell(r)));
        }
        out.push('\n');
    }
    out
}

mod capacity;
#[cfg(test)]
mod tests;
