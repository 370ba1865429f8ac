//! The page's figures of each point: a row per server, and for throughput, CPU per request and
//! p99 its median as a dot and its interval as a bar, on a scale shared by the column's rows.
//! The values and intervals are in each mark's title (shown on hover), each row carries its
//! server (the page's bar hides it) and links to the point's raw histogram (`.hgrm`).
//!
//! It may call the record layer's `row` and the report layer's `cells`.

use serde::Serialize;

use crate::record::row::Row;
use crate::report::cells::{fmt_rate, fmt_us, with_ci};

/// Where a column's scale starts and how wide it is, in percent of the mark's width (the
/// page draws with percentages, so that a mark stretches with the window and its dot stays
/// round).
const LEFT: f64 = 2.0;
const WIDTH: f64 = 96.0;

/// One metric of one server at one point, placed on its column's scale.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Mark {
    /// The median's place, percent of the mark's width.
    x: f64,
    /// The interval's ends, when the repeats gave one.
    lo: Option<f64>,
    hi: Option<f64>,
    /// The value and its interval, as the tables write them.
    text: String,
}

/// A server's row at a point.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct DotRow {
    server: String,
    /// The raw histogram, relative to the run directory.
    hgrm: Option<String>,
    failed: bool,
    marks: Vec<Option<Mark>>,
}

/// A point's figure.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct PointDots {
    id: String,
    label: String,
    /// Where each column's scale ends, as the tables write it.
    scales: Vec<String>,
    rows: Vec<DotRow>,
}

/// A suite's figures.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct SuiteDots {
    suite: String,
    /// The columns' titles (each column's scale runs from 0 to the most a row reaches).
    columns: Vec<String>,
    points: Vec<PointDots>,
}

/// A column: its title, the summary's metric, its value and interval, and how it is written.
type Column = (
    &'static str,
    fn(&Row) -> (Option<f64>, Option<f64>, Option<f64>),
    fn(Option<f64>) -> String,
);

const COLUMNS: [Column; 3] = [
    (
        "requests/s",
        |r| {
            (
                r.throughput_per_sec,
                r.throughput_per_sec_ci_low,
                r.throughput_per_sec_ci_high,
            )
        },
        fmt_rate,
    ),
    (
        "server CPU per request",
        |r| {
            (
                r.cpu_us_per_req,
                r.cpu_us_per_req_ci_low,
                r.cpu_us_per_req_ci_high,
            )
        },
        fmt_us,
    ),
    (
        "p99 latency",
        |r| (r.p99_us, r.p99_us_ci_low, r.p99_us_ci_high),
        fmt_us,
    ),
];

/// Each suite's figures, its points in the order the rows first name them, its servers in
/// the order they ran.
pub(crate) fn of_rows(rows: &[Row]) -> Vec<SuiteDots> {
    let mut suites: Vec<&str> = Vec::new();
    for r in rows {
        if !suites.contains(&r.suite.as_str()) {
            suites.push(&r.suite);
        }
    }
    suites
        .into_iter()
        .map(|suite| {
            let rs: Vec<&Row> = rows.iter().filter(|r| r.suite == suite).collect();
            let mut points: Vec<(&str, &str)> = Vec::new();
            for r in &rs {
                if !points.iter().any(|p| p.0 == r.point) {
                    points.push((&r.point, &r.label));
                }
            }
            SuiteDots {
                suite: suite.to_string(),
                columns: COLUMNS.iter().map(|c| c.0.to_string()).collect(),
                points: points
                    .into_iter()
                    .map(|(id, label)| point(&rs, id, label))
                    .collect(),
            }
        })
        .collect()
}

/// The figure of point `id` of a suite's rows `rs`.
fn point(rs: &[&Row], id: &str, label: &str) -> PointDots {
    let at: Vec<&Row> = rs.iter().copied().filter(|r| r.point == id).collect();
    // Each column's scale: 0 to the most any row reaches, its interval included.
    let most: Vec<f64> = COLUMNS
        .iter()
        .map(|c| {
            at.iter()
                .filter(|r| r.ok > 0)
                .filter_map(|r| {
                    let (v, _, hi) = (c.1)(r);
                    hi.or(v)
                })
                .fold(0.0, f64::max)
        })
        .collect();
    let rows = at
        .iter()
        .map(|r| DotRow {
            server: r.server.clone(),
            hgrm: r.hist.as_ref().map(|h| match h.strip_suffix(".hist") {
                Some(stem) => format!("{stem}.hgrm"),
                None => h.clone(),
            }),
            failed: r.ok == 0,
            marks: COLUMNS
                .iter()
                .zip(&most)
                .map(|(c, &most)| mark(r, c, most))
                .collect(),
        })
        .collect();
    PointDots {
        id: format!("{}-{id}", rs.first().map_or("", |r| r.suite.as_str())),
        label: label.to_string(),
        scales: COLUMNS
            .iter()
            .zip(&most)
            .map(|(c, &m)| (c.2)(Some(m)))
            .collect(),
        rows,
    }
}

/// Row `r`'s mark in column `c`, whose scale ends at `most`.
fn mark(r: &Row, c: &Column, most: f64) -> Option<Mark> {
    let (v, lo, hi) = (c.1)(r);
    let v = v.filter(|_| r.ok > 0)?;
    let place = |x: f64| {
        let at = if most > 0.0 {
            (x / most).clamp(0.0, 1.0)
        } else {
            0.0
        };
        ((LEFT + at * WIDTH) * 10.0).round() / 10.0
    };
    Some(Mark {
        x: place(v),
        lo: lo.map(place),
        hi: hi.map(place),
        text: with_ci(Some(v), lo, hi, c.2),
    })
}
