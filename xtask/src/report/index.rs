//! `cargo xtask report --index`: `results/index.md`, every run directory under `results/`
//! with its date, commit, suites, servers and headline (the headline point of its first
//! suite with one: the cheapest and the dearest server there), so that a run is found again
//! without opening each.
//!
//! It may call the record layer and the report's `markdown` (the headline).

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use clap::ValueEnum;

use crate::plan::suites::Suite;
use crate::record::meta::Meta;
use crate::record::row::Row;
use crate::report::cells::{fmt_rate, fmt_us, table};
use crate::report::markdown::Headline;

/// One run's line of the index.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Entry {
    pub(crate) dir: String,
    pub(crate) date: String,
    pub(crate) commit: String,
    pub(crate) suites: String,
    pub(crate) servers: String,
    pub(crate) headline: String,
}

/// The entry of the run in `dir` (named `name`), from its meta.json and summary.json;
/// what cannot be read is `–`.
pub(crate) fn entry(dir: &Path, name: &str) -> Entry {
    let meta = crate::record::run_dir::read_meta(dir).ok();
    let rows = crate::record::summary::read_summary(dir).unwrap_or_default();
    let suites: Vec<Suite> = meta
        .as_ref()
        .and_then(|m| m.settings["suites"].as_array().cloned())
        .into_iter()
        .flatten()
        .filter_map(|s| Suite::from_str(s.as_str()?, false).ok())
        .collect();
    let servers = crate::record::row::servers(&rows);
    Entry {
        dir: name.to_string(),
        date: meta.as_ref().map_or("–".into(), |m| m.started.clone()),
        commit: meta.as_ref().map_or("–".into(), commit),
        suites: if suites.is_empty() {
            "–".into()
        } else {
            suites
                .iter()
                .map(|s| s.name())
                .collect::<Vec<_>>()
                .join(", ")
        },
        servers: match servers.len() {
            0 => "–".into(),
            n if n > 6 => format!("{n}: {}, …", servers[..5].join(", ")),
            _ => servers.join(", "),
        },
        headline: suites
            .iter()
            .find_map(|&s| headline(&rows, s))
            .or_else(|| capacity(dir))
            .unwrap_or_else(|| "–".into()),
    }
}

fn commit(m: &Meta) -> String {
    let c = m.commit.as_deref().map_or("?", |c| &c[..c.len().min(9)]);
    if m.dirty {
        format!("`{c}` (uncommitted changes)")
    } else {
        format!("`{c}`")
    }
}

/// The cheapest (or fastest) and the dearest (or slowest) server at `suite`'s headline
/// point: `1000 conns @ 20000/s, CPU per request: floor-epoll 10.1 µs … threads 17.4 µs`.
fn headline(rows: &[Row], suite: Suite) -> Option<String> {
    let h = Headline::of(rows, suite)?;
    let here: Vec<&Row> = rows
        .iter()
        .filter(|r| r.suite == h.suite && r.point == h.point)
        .collect();
    let names: Vec<String> = here.iter().map(|r| r.server.clone()).collect();
    let ranked = crate::report::markdown::ranked(rows, suite, &names);
    let value = |s: &String| {
        let r = here.iter().find(|r| &r.server == s)?;
        let v = h.value(r)[0]?;
        Some(if h.cost() {
            fmt_us(Some(v))
        } else {
            format!("{}/s", fmt_rate(Some(v)))
        })
    };
    let first = ranked.first()?;
    let last = ranked.iter().rev().find(|s| value(s).is_some())?;
    Some(format!(
        "{}, {}: {first} {} … {last} {}",
        here.first()?.label,
        if h.cost() {
            "CPU per request"
        } else {
            "requests/s"
        },
        value(first)?,
        value(last)?
    ))
}

/// The capacity suite's headline: the highest and the lowest capacity found of its first
/// workload, from capacity.json.
fn capacity(dir: &Path) -> Option<String> {
    let lines = crate::record::capacity::read(dir).ok()?;
    let first = lines.first()?;
    let mut found: Vec<(&str, f64)> = lines
        .iter()
        .filter(|c| c.workload == first.workload && c.is_the_servers())
        .filter_map(|c| Some((c.server.as_str(), c.capacity_per_sec?)))
        .collect();
    found.sort_by(|a, b| b.1.total_cmp(&a.1));
    let (top, bottom) = (found.first()?, found.last()?);
    Some(format!(
        "{} capacity at {}: {} {}/s … {} {}/s",
        first.workload,
        first.objective,
        top.0,
        fmt_rate(Some(top.1)),
        bottom.0,
        fmt_rate(Some(bottom.1))
    ))
}

/// `results/index.md` of the run directories under `results`, newest first.
pub(crate) fn render(results: &Path) -> Result<String> {
    let mut dirs: Vec<String> = std::fs::read_dir(results)
        .with_context(|| format!("reading {}", results.display()))?
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().to_string())
        .collect();
    // Run ids (a date first) newest first, then the other directories (a set of A/A runs).
    let dated = |d: &String| d.starts_with(|c: char| c.is_ascii_digit());
    dirs.sort_unstable_by(|a, b| dated(b).cmp(&dated(a)).then_with(|| b.cmp(a)));
    let body: Vec<Vec<String>> = dirs
        .iter()
        .map(|d| entry(&results.join(d), d))
        .map(|e| {
            vec![
                format!("[`{0}`]({0}/)", e.dir),
                e.date,
                e.commit,
                e.suites,
                e.servers,
                e.headline,
            ]
        })
        .collect();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Every run\n\nWritten by `cargo xtask report --index` from each directory's \
         `meta.json` and `summary.json` (`results/README.md` says what each run is for). The \
         headline is the first suite's headline point: the cheapest (or fastest) server and \
         the dearest (or slowest).\n"
    );
    table(
        &mut out,
        &["run", "started", "commit", "suites", "servers", "headline"],
        &body,
    );
    Ok(out)
}

/// Writes `results/index.md` under `root`, and returns its path.
pub(crate) fn write(root: &Path) -> Result<std::path::PathBuf> {
    let results = root.join("results");
    let text = render(&results)?;
    let path = results.join("index.md");
    std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_index_lists_every_run_with_its_headline() {
        let results = tempfile::tempdir().unwrap();
        let run = results.path().join("20261201-000000-abcdef012");
        std::fs::create_dir_all(&run).unwrap();
        let meta = Meta {
            started: "2026-12-01T00:00:00Z".into(),
            commit: Some("abcdef0123456".into()),
            dirty: true,
            settings: serde_json::json!({"suites": ["quick"]}),
            ..Meta::default()
        };
        std::fs::write(run.join("meta.json"), serde_json::to_string(&meta).unwrap()).unwrap();
        let mut rows = Vec::new();
        for (s, cpu) in [("a", 12.0), ("b", 10.0), ("c", 15.0)] {
            let mut r = crate::record::row::tests::row(s, "open", 1000.0, 20_000.0);
            r.rate = Some(20_000.0);
            r.label = "1000 conns @ 20000/s".into();
            r.cpu_us_per_req = Some(cpu);
            rows.push(r);
        }
        std::fs::write(
            run.join("summary.json"),
            serde_json::to_string(&rows).unwrap(),
        )
        .unwrap();
        std::fs::create_dir_all(results.path().join("aa-old")).unwrap();
        let text = render(results.path()).unwrap();
        let line = text
            .lines()
            .find(|l| l.contains("20261201-000000-abcdef012"))
            .unwrap();
        assert!(
            line.contains(
                "| 2026-12-01T00:00:00Z | `abcdef012` (uncommitted changes) | quick | a, b, c |"
            ),
            "{line}"
        );
        assert!(
            line.contains("CPU per request: b 10.0 µs … c 15.0 µs"),
            "{line}"
        );
        // A directory without meta.json or summary is listed too, with what it lacks.
        assert!(
            text.contains("| [`aa-old`](aa-old/) | – | – | – | – | – |"),
            "{text}"
        );
    }
}
