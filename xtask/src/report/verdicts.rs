//! `verdicts.csv` and `verdicts.json`: every verdict of a run, machine-readable, so that a
//! script reads a file instead of a table. A line per suite, point, metric and server: the
//! reference named in advance, the ratio server / reference with its simultaneous interval,
//! Bonferroni's adjusted p, the size of its family (each point and metric is one column, one
//! family: `record::verdict`), and the row's ‡, † and ◊ flags, with why a server was not
//! judged. The metrics are those the report tests somewhere (CPU per request, throughput, p99,
//! p99.9), at every point, so a line may be a column no table shows: it is its own family.
//!
//! It may call the record layer and the report's `cells`.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;

use crate::plan::suites::Suite;
use crate::record::row::{self, Row};
use crate::record::verdict;
use crate::report::cells::Column;

/// The metrics with verdicts.
const METRICS: [&str; 4] = ["cpu_us_per_req", "throughput_per_sec", "p99_us", "p99_9_us"];

/// One server's verdict on one metric at one point.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Line {
    pub(crate) suite: String,
    pub(crate) point: String,
    pub(crate) metric: &'static str,
    pub(crate) server: String,
    pub(crate) reference: String,
    /// `reference`, `differs`, `same` (`~`), `not judged` (the row is blocked: `why`), `not
    /// tested` (the reference is: `why`), or `none` (too few repeats).
    pub(crate) status: &'static str,
    pub(crate) ratio: Option<f64>,
    pub(crate) low: Option<f64>,
    pub(crate) high: Option<f64>,
    pub(crate) p: Option<f64>,
    /// Verdicts in the column's family (Bonferroni's m).
    pub(crate) family: usize,
    pub(crate) why: Option<String>,
    pub(crate) disturbed: bool,
    pub(crate) client_bound: bool,
    pub(crate) schedule_missed: bool,
}

/// Every verdict of `rows`, the reference of each suite named by `explicit` (`--reference`)
/// or the suite's own (`Suite::reference`).
pub(crate) fn lines(rows: &[Row], explicit: Option<&str>) -> Vec<Line> {
    let mut out = Vec::new();
    for suite in Suite::ALL {
        let mine: Vec<Row> = rows
            .iter()
            .filter(|r| r.suite == suite.name())
            .cloned()
            .collect();
        let Some(reference) = suite.reference(&row::servers_that_ran(&mine), explicit) else {
            continue;
        };
        let mut points: Vec<&str> = Vec::new();
        for r in &mine {
            if !points.contains(&r.point.as_str()) {
                points.push(&r.point);
            }
        }
        for point in points {
            for metric in METRICS {
                column(&mut out, &mine, (suite.name(), point), metric, &reference);
            }
        }
    }
    out
}

/// The lines of one column.
fn column(
    out: &mut Vec<Line>,
    rows: &[Row],
    at: (&str, &str),
    metric: &'static str,
    reference: &str,
) {
    let col = Column::new(rows, at.0, at.1, metric, Some(reference));
    let here: Vec<&Row> = rows.iter().filter(|r| r.point == at.1).collect();
    let family = here.iter().filter(|r| col.of(&r.server).is_some()).count();
    for r in here {
        let v = col.of(&r.server);
        let blocked = verdict::blocked(r, metric);
        let (status, why) = if r.server == reference {
            ("reference", col.unusable.map(str::to_string))
        } else if let Some(why) = col.unusable {
            ("not tested", Some(format!("the reference is {why}")))
        } else if let Some(why) = blocked {
            ("not judged", Some(why.to_string()))
        } else {
            match v {
                Some(v) if v.differs => ("differs", None),
                Some(_) => ("same", None),
                None => ("none", Some("too few repeats to test".into())),
            }
        };
        out.push(Line {
            suite: at.0.into(),
            point: at.1.into(),
            metric,
            server: r.server.clone(),
            reference: reference.into(),
            status,
            ratio: v.map(|v| v.ratio),
            low: v.map(|v| v.low),
            high: v.map(|v| v.high),
            p: v.map(|v| v.p),
            family,
            why,
            disturbed: r.disturbed(),
            client_bound: r.client_bound,
            schedule_missed: r.schedule_missed(),
        });
    }
}

/// Writes `verdicts.csv` and `verdicts.json` of `rows` into `dir`.
pub(crate) fn write(dir: &Path, rows: &[Row], explicit: Option<&str>) -> Result<()> {
    let lines = lines(rows, explicit);
    let json = serde_json::to_string_pretty(&lines)?;
    std::fs::write(dir.join("verdicts.json"), json + "\n").context("writing verdicts.json")?;
    let mut csv = String::from(
        "suite,point,metric,server,reference,status,ratio,low,high,p,family,why,disturbed,client_bound,schedule_missed\n",
    );
    for l in &lines {
        let v = serde_json::to_value(l)?;
        let fields: Vec<String> = [
            "suite",
            "point",
            "metric",
            "server",
            "reference",
            "status",
            "ratio",
            "low",
            "high",
            "p",
            "family",
            "why",
            "disturbed",
            "client_bound",
            "schedule_missed",
        ]
        .iter()
        .map(|k| row::csv_field(&v[*k]))
        .collect();
        let _ = writeln!(csv, "{}", fields.join(","));
    }
    std::fs::write(dir.join("verdicts.csv"), csv).context("writing verdicts.csv")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(server: &str, cpu: &[f64]) -> Row {
        let mut r = Row {
            suite: "quick".into(),
            server: server.into(),
            point: "open".into(),
            ok: cpu.len(),
            repeats: cpu.len(),
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
    fn each_verdict_is_a_line_with_its_reference_family_and_flags() {
        let mut rows = vec![
            row("floor-epoll", &[2.0, 2.02, 1.98, 2.01, 1.99]),
            row("reactor", &[3.0, 3.03, 2.97, 3.01, 2.99]),
            row("tokio", &[3.0, 3.03, 2.97, 3.01, 2.99]),
        ];
        rows[2].other_load_pct = Some(40.0);
        let all = lines(&rows, None);
        let cpu: Vec<&Line> = all
            .iter()
            .filter(|l| l.metric == "cpu_us_per_req")
            .collect();
        assert_eq!(cpu.len(), 3);
        assert_eq!(cpu[0].status, "reference");
        assert_eq!((cpu[1].status, cpu[1].family), ("differs", 1));
        assert!(cpu[1].ratio.is_some_and(|r| (r - 1.5).abs() < 0.01));
        assert_eq!(cpu[1].reference, "floor-epoll");
        assert_eq!(cpu[2].status, "not judged");
        assert!(cpu[2].disturbed && cpu[2].why.as_deref().is_some_and(|w| w.contains('‡')));
        let dir = std::env::temp_dir().join(format!("xtask-verdicts-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        write(&dir, &rows, None).unwrap();
        let csv = std::fs::read_to_string(dir.join("verdicts.csv")).unwrap();
        assert!(
            csv.lines()
                .nth(2)
                .unwrap()
                .starts_with("quick,open,cpu_us_per_req,reactor,floor-epoll,differs,1.5"),
            "{csv}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
