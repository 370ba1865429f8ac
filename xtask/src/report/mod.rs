//! The report layer: showing what a run recorded. It owns `report.md` (`markdown`, one
//! section per suite, and `search` for the search suite's), the figures (`figures`: which
//! plots a suite gets) and their drawing (`plots`, and `ranked` for a point's ranked dots), how numbers and marks look (`cells`),
//! `cargo xtask compare` (`compare`), every verdict as `verdicts.csv`/`.json` (`verdicts`), `report.html` (`html`: report.md's text as a page, with
//! sortable tables, the plots inline and a figure of each point), and, in this file, `cargo xtask report DIR`, which draws
//! the plots and writes `report.md` of a run directory again from what the run saved
//! (`summary.json`, `meta.json`, the histograms), so that a better report can be had for an
//! old run without measuring again.
//!
//! It may call the plan, run and record layers (to read what was planned, measured and
//! kept), never a task.

pub(crate) mod anatomy;
pub(crate) mod cells;
pub(crate) mod compare;
pub(crate) mod crossover;
pub(crate) mod figures;
pub(crate) mod html;
pub(crate) mod index;
pub(crate) mod markdown;
pub(crate) mod plots;
pub(crate) mod ranked;
pub(crate) mod search;
pub(crate) mod stdout;
pub(crate) mod verdicts;

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};

use crate::plan::servers::Variant;
use crate::plan::suites::Suite;
use crate::record::meta::Meta;
use crate::record::summary;

/// Options of `cargo xtask report`.
#[derive(Debug, Clone, Args)]
pub(crate) struct ReportArgs {
    /// The run directory.
    #[arg(required_unless_present = "index")]
    pub(crate) dir: Option<PathBuf>,
    /// Write results/index.md instead: every run directory under results/ with its date,
    /// commit, suites, servers and headline.
    #[arg(long, conflicts_with = "dir")]
    pub(crate) index: bool,
}

/// Runs `cargo xtask report`.
pub(crate) fn run(args: &ReportArgs) -> Result<()> {
    let Some(dir) = &args.dir else {
        let path = index::write(&crate::plan::project_root())?;
        stdout::line(format_args!("Index: {}", path.display()));
        return Ok(());
    };
    let rows = summary::read_summary(dir)?;
    let path = dir.join("meta.json");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let meta: Meta =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    let settings = &meta.settings;
    let variants: Vec<Variant> =
        serde_json::from_value(settings["servers"].clone()).unwrap_or_default();
    let skipped: Vec<String> =
        serde_json::from_value(settings["not_run"].clone()).unwrap_or_default();
    let suites: Vec<Suite> = settings["suites"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| Suite::from_str(s.as_str()?, false).ok())
        .collect();
    let text_of = |k: &str, default: &str| settings[k].as_str().unwrap_or(default).to_string();
    let workers = settings["workers"].as_u64().map_or(1, |w| w as usize);
    let plots = figures::draw_plots(dir, &rows, workers)?;
    let capacity = crate::record::capacity::read(dir)?;
    let input = markdown::Input {
        meta: &meta,
        rows: &rows,
        plots: &plots,
        variants: &variants,
        skipped: &skipped,
        suites: &suites,
        server_cpus: text_of("server_cpus", "1"),
        client_cpus: text_of("client_cpus", "0"),
        workers,
        capacity: &capacity,
    };
    write(dir, &input)?;
    stdout::put(markdown::terminal(&input));
    stdout::line(format_args!("Report: {}", dir.join("report.md").display()));
    Ok(())
}

/// Writes `report.md`, `verdicts.csv` and `.json`, and `report.html` of the run in `dir` (by
/// `bench` and `report` alike).
pub(crate) fn write(dir: &std::path::Path, input: &markdown::Input<'_>) -> Result<()> {
    let text = markdown::render(input);
    std::fs::write(dir.join("report.md"), &text).context("writing report.md")?;
    verdicts::write(dir, input.rows, input.meta.settings["reference"].as_str())?;
    html::write_report(dir, input, &text)
}
