//! Rows for the tests here and of the report's Markdown.

use super::*;

/// A closed-loop row of `quick`, for the tests here and of the report's Markdown.
pub(crate) fn row(server: &str, point: &str, x: f64, tp: f64) -> Row {
    Row {
        suite: "quick".into(),
        server: server.into(),
        series: "closed".into(),
        point: point.into(),
        label: format!("{x} conns"),
        x,
        ok: 1,
        repeats: 1,
        throughput_per_sec: Some(tp),
        p99_us: Some(80.0),
        ..Row::default()
    }
}
