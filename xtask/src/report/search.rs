//! The search suite's report: a table of wall and CPU time per program (median and its
//! interval over the runs) beside the paper's 1.17×, `search.csv`, a box plot in the manner
//! of the paper's Figure 9, and `report.md`.
//!
//! It may call the plan layer's `suites` (the reference), the run layer's `search` (what a
//! search run measured), the record layer's `meta`, `stats` and `verdict`, and the report
//! layer's `cells`.

use std::fmt::Write as _;
use std::fs;
use std::path::Path;

use anyhow::{Context, Result, anyhow};
use plotters::prelude::*;

use crate::plan::suites::Suite;
use crate::record::meta::Meta;
use crate::record::{stats, verdict};
use crate::report::cells;
use crate::run::search::{Measure, RIPGREP, SearchRun};

/// The paper's headline: EMPER's search beat Go's by this factor (Figure 9).
const PAPER_FIBER_OVER_GO: f64 = 1.17;

/// How each program reads its files, for the report: the runtimes' file APIs differ more
/// than their sockets do, and one of them does not use its runtime at all.
const FILE_IO: &[(&str, &str)] = &[
    ("search-threads", "blocking std::fs on a pool of OS threads"),
    (
        "search-tokio",
        "tokio::fs, a blocking thread pool behind the async calls",
    ),
    ("search-tokio-uring", "tokio-uring's io_uring file reads"),
    ("search-monoio", "monoio's io_uring file reads"),
    (
        "search-glommio",
        "glommio's io_uring reads of a BufferedFile (through the page cache)",
    ),
    ("search-compio", "compio's io_uring file reads"),
    (
        "search-smol",
        "smol's own file I/O (async-fs: a blocking thread pool, like tokio::fs)",
    ),
    ("search-fiber", "our fibers' io_uring reads"),
    (
        "search-go",
        "blocking reads in goroutines (Go's runtime parks the goroutine, a thread waits)",
    ),
];

/// What the report says of search-may: the call a pseudo-blocking runtime exists to avoid.
const MAY_BLOCKS: &str = "**search-may reads with blocking `std::fs` calls inside may's     coroutines**: may has no file I/O of its own, so each read blocks the scheduler thread that     runs the coroutine, and every other coroutine on that thread waits. That is the call a     pseudo-blocking runtime exists to avoid; its time here is what a may user who reads files     this way gets, not what may's sockets cost.";

/// One program's runs, summarised.
#[derive(Debug)]
struct Line {
    program: String,
    wall: Vec<f64>,
    user: Vec<f64>,
    sys: Vec<f64>,
    cpu: Vec<f64>,
    /// The wall time of each round (0-based), `None` where the round gave none.
    by_round: Vec<Option<f64>>,
    /// The first failure, which takes the program out of the plot and comparisons.
    failure: Option<String>,
}

fn lines(run: &SearchRun) -> Vec<Line> {
    let mut out: Vec<Line> = Vec::new();
    for m in &run.measures {
        let i = match out.iter().position(|l| l.program == m.program) {
            Some(i) => i,
            None => {
                out.push(Line {
                    program: m.program.clone(),
                    wall: Vec::new(),
                    user: Vec::new(),
                    sys: Vec::new(),
                    cpu: Vec::new(),
                    by_round: Vec::new(),
                    failure: None,
                });
                out.len() - 1
            }
        };
        let l = &mut out[i];
        if let Some(f) = &m.failure {
            l.failure
                .get_or_insert_with(|| format!("round {}: {f}", m.round));
        }
        l.wall.push(m.wall_s);
        l.user.push(m.user_s);
        l.sys.push(m.sys_s);
        l.cpu.push(m.user_s + m.sys_s);
        let k = m.round.saturating_sub(1);
        if l.by_round.len() <= k {
            l.by_round.resize(k + 1, None);
        }
        l.by_round[k] = Some(m.wall_s);
    }
    out
}

/// `median [low, high]` in seconds.
fn cell(values: &[f64]) -> String {
    let med = stats::median(values);
    match (med, stats::median_interval(values)) {
        (Some(m), Some(ci)) => format!("{m:.3} [{:.3}, {:.3}]", ci.low, ci.high),
        (Some(m), None) => format!("{m:.3}"),
        _ => "–".into(),
    }
}

/// The wall times of `others` against `reference`'s, one family (`record::verdict`: log
/// wall time = program + round, Bonferroni over the family), as cells.
fn ratios(reference: &Line, others: &[&Line]) -> Vec<String> {
    let rounds: Vec<&[Option<f64>]> = others.iter().map(|l| l.by_round.as_slice()).collect();
    verdict::family(&verdict::against_reference(&reference.by_round, &rounds))
        .iter()
        .map(|v| cells::verdict(v.as_ref()))
        .collect()
}

/// Writes `search.csv`, the plots and `report.md` into `out`; returns the table.
pub(crate) fn write(out: &Path, run: &SearchRun, meta: &Meta) -> Result<String> {
    let lines = lines(run);
    write_csv(out, &run.measures)?;
    let ok: Vec<&Line> = lines.iter().filter(|l| l.failure.is_none()).collect();
    draw_box_plots(out, run, &ok)?;
    let table = table(run, &lines, &ok, meta.settings["reference"].as_str());
    let text = markdown(run, meta, &table);
    fs::write(out.join("report.md"), &text).context("writing report.md")?;
    let page = crate::report::html::Page::of_markdown("ringside bench: search", &text, Some(out));
    crate::report::html::write_page(&out.join("report.html"), &page)?;
    Ok(table)
}

/// The box plots of wall and CPU time, of the programs whose counts were right.
fn draw_box_plots(out: &Path, run: &SearchRun, ok: &[&Line]) -> Result<()> {
    let mode = if run.cold { "cold" } else { "warm" };
    box_plot(
        &out.join("search-wall.svg"),
        &format!(
            "File search, {mode} cache: wall time per run ({} runs)",
            run.repeat
        ),
        "seconds (wall)",
        &ok.iter()
            .map(|l| (l.program.as_str(), l.wall.as_slice()))
            .collect::<Vec<_>>(),
    )?;
    box_plot(
        &out.join("search-cpu.svg"),
        &format!("File search, {mode} cache: CPU time per run (user + system)"),
        "seconds of CPU",
        &ok.iter()
            .map(|l| (l.program.as_str(), l.cpu.as_slice()))
            .collect::<Vec<_>>(),
    )?;
    Ok(())
}

/// The table of every program's times, against the reference's (search-fiber's unless
/// `--reference` named another), and the paper beside.
fn table(run: &SearchRun, lines: &[Line], ok: &[&Line], explicit: Option<&str>) -> String {
    let mode = if run.cold { "cold" } else { "warm" };
    let names: Vec<String> = ok.iter().map(|l| l.program.clone()).collect();
    let reference = Suite::Search.reference(&names, explicit);
    let base = ok.iter().find(|l| Some(&l.program) == reference.as_ref());
    let others: Vec<&Line> = ok
        .iter()
        .filter(|l| Some(&l.program) != reference.as_ref())
        .copied()
        .collect();
    let verdicts = base.map(|b| ratios(b, &others)).unwrap_or_default();
    let mut rows = Vec::new();
    for l in lines {
        let vs = if l.failure.is_some() {
            "–".into()
        } else if Some(&l.program) == reference.as_ref() {
            "reference".into()
        } else {
            others
                .iter()
                .position(|o| o.program == l.program)
                .and_then(|i| verdicts.get(i).cloned())
                .unwrap_or_else(|| "–".into())
        };
        rows.push(vec![
            l.program.clone(),
            cell(&l.wall),
            cell(&l.user),
            cell(&l.sys),
            cell(&l.cpu),
            vs,
            l.failure
                .as_ref()
                .map_or_else(|| "ok".into(), |f| format!("FAILED: {f}")),
        ]);
    }
    let mut table = String::new();
    let interval = match stats::median_interval(&vec![0.0; run.repeat]) {
        Some(i) => format!(" [{:.0}% interval]", i.level * 100.0),
        None => String::new(),
    };
    let _ = writeln!(
        table,
        "Search, {mode} cache, {} run(s) a program, {} worker(s) on CPUs {}; seconds, \
         median{interval}:\n",
        run.repeat, run.workers, run.cpus,
    );
    cells::table(
        &mut table,
        &[
            "program",
            "wall",
            "user",
            "system",
            "CPU",
            "wall against the reference",
            "counts",
        ],
        &rows,
    );
    let _ = writeln!(
        table,
        "Wall time against **{}**, named in advance (search-fiber unless `--reference` says \
         otherwise): a ratio with its simultaneous interval and the adjusted p where the \
         column (log wall time = program + round, each program's own variance, Bonferroni's \
         step-down) finds a difference, else `~`.\n",
        reference.as_deref().unwrap_or("no program")
    );
    table.push_str(&against_the_paper(run, ok));
    table
}

/// `report.md`: the run, the tree and what the counts are checked against, the table, the
/// plots.
fn markdown(run: &SearchRun, meta: &Meta, table: &str) -> String {
    let mode = if run.cold { "cold" } else { "warm" };
    let mut md = String::new();
    let _ = writeln!(
        md,
        "# File-content search, {mode} cache ({})\n",
        meta.run_id
    );
    let _ = writeln!(
        md,
        "Commit {}{}, kernel {}, {} cores ({}). Tree `{}`, needle `{}`{}. Counts checked \
         against {}; a program whose counts differ in any run is marked failed and is not \
         plotted.\n",
        meta.commit.as_deref().unwrap_or("?"),
        if meta.dirty { " (dirty)" } else { "" },
        meta.kernel.as_deref().unwrap_or("?"),
        meta.cores,
        meta.cpu_model.as_deref().unwrap_or("?"),
        run.tree.display(),
        run.needle,
        run.manifest.as_ref().map_or_else(String::new, |m| format!(
            " (generated: {} files, {} bytes, {} directories {} deep; {} files hold {} matches)",
            m.files, m.bytes, m.dirs, m.max_depth, m.files_matched, m.matches
        )),
        run.reference.as_ref().map_or_else(
            || "nothing (no ripgrep, no manifest)".into(),
            |r| format!("{}: {} files matched, {} matches", r.0, r.1, r.2)
        ),
    );
    md.push_str(table);
    md.push_str(&how_they_read(run));
    if !run.not_run.is_empty() {
        let _ = writeln!(md, "\nNot run: {}.", run.not_run.join("; "));
    }
    let _ = writeln!(
        md,
        "\n![wall time](search-wall.svg)\n\n![CPU time](search-cpu.svg)"
    );
    md
}

/// How each program of the run reads its files, and what search-may's reads cost its
/// coroutines.
fn how_they_read(run: &SearchRun) -> String {
    let ran = |p: &str| run.measures.iter().any(|m| m.program == p);
    let mut ways: Vec<String> = FILE_IO
        .iter()
        .filter(|(p, _)| ran(p))
        .map(|(p, how)| format!("{p}: {how}"))
        .collect();
    if ran("search-may") {
        ways.push("search-may: std::fs inside coroutines".into());
    }
    if ways.is_empty() {
        return String::new();
    }
    let mut md = format!("\nHow each program reads its files: {}.\n", ways.join("; "));
    if ran("search-may") {
        let _ = writeln!(md, "\n{MAY_BLOCKS}");
    }
    md
}

/// The sentence that sets this run beside the paper's Figure 9: search-go against search-fiber
/// and ripgrep against search-fiber, or which of them did not run or failed.
fn against_the_paper(run: &SearchRun, ok: &[&Line]) -> String {
    let mut out = String::new();
    let find = |name: &str| ok.iter().find(|l| l.program == name);
    let fiber = find("search-fiber");
    let _ = write!(
        out,
        "The paper (Figure 9: the Linux 5.13 tree on NFS, a 48-core Xeon, 15 runs): EMPER {PAPER_FIBER_OVER_GO}× faster than Go, every concurrency platform faster than ripgrep. Here: "
    );
    // search-go and ripgrep against search-fiber, one family of two.
    let go = find("search-go");
    let rg = find(RIPGREP);
    let pair: Vec<&Line> = [go, rg].into_iter().flatten().copied().collect();
    let said = fiber.map(|f| ratios(f, &pair)).unwrap_or_default();
    match (fiber, go) {
        (Some(_), Some(_)) => {
            let _ = write!(out, "search-go / search-fiber = {}", said[0]);
        }
        _ => {
            // Not run: not asked for (`--servers`), not built or not installed.
            let missing: Vec<String> = ["search-fiber", "search-go"]
                .into_iter()
                .filter(|p| find(p).is_none())
                .map(|p| {
                    let ran = run.measures.iter().any(|m| m.program == p);
                    format!("{p} {}", if ran { "failed" } else { "did not run" })
                })
                .collect();
            out.push_str(&missing.join(" and "));
        }
    }
    if let (Some(_), Some(_)) = (fiber, rg) {
        let _ = write!(out, "; ripgrep / search-fiber = {}", said[said.len() - 1]);
    }
    out.push_str(".\n");
    out
}

fn write_csv(out: &Path, measures: &[Measure]) -> Result<()> {
    let mut csv = String::from(
        "program,round,wall_s,user_s,sys_s,files,bytes,files_matched,matches,errors,failure\n",
    );
    let opt = |v: Option<u64>| v.map_or_else(String::new, |v| v.to_string());
    for m in measures {
        let _ = writeln!(
            csv,
            "{},{},{:.6},{:.6},{:.6},{},{},{},{},{},\"{}\"",
            m.program,
            m.round,
            m.wall_s,
            m.user_s,
            m.sys_s,
            opt(m.files),
            opt(m.bytes),
            m.files_matched,
            m.matches,
            opt(m.errors),
            m.failure.as_deref().unwrap_or("").replace('"', "'")
        );
    }
    fs::write(out.join("search.csv"), csv).context("writing search.csv")
}

/// The quartiles by linear interpolation between order statistics.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    let pos = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

/// A box per program: the box from the first to the third quartile, a line at the median,
/// whiskers to the least and greatest run (every run is shown; there are 15).
fn box_plot(path: &Path, title: &str, y_desc: &str, data: &[(&str, &[f64])]) -> Result<()> {
    let err = |e: &dyn std::fmt::Debug| anyhow!("drawing {}: {e:?}", path.display());
    let top = data
        .iter()
        .flat_map(|(_, v)| v.iter().copied())
        .fold(0.0f64, f64::max)
        .max(1e-3)
        * 1.1;
    let n = data.len().max(1);
    let root = SVGBackend::new(path, (960, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(72)
        .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), 0.0f64..top)
        .map_err(|e| err(&e))?;
    let names: Vec<String> = data.iter().map(|(n, _)| (*n).to_owned()).collect();
    let x_label = move |x: &f64| {
        let i = x.round();
        if (x - i).abs() < 1e-6 && i >= 0.0 {
            names.get(i as usize).cloned().unwrap_or_default()
        } else {
            String::new()
        }
    };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n * 2 + 1)
        .x_label_formatter(&x_label)
        .y_desc(y_desc)
        .draw()
        .map_err(|e| err(&e))?;
    for (i, (_, values)) in data.iter().enumerate() {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            continue;
        }
        v.sort_by(f64::total_cmp);
        let x = i as f64;
        let (q1, med, q3) = (quantile(&v, 0.25), quantile(&v, 0.5), quantile(&v, 0.75));
        let (lo, hi) = (v[0], v[v.len() - 1]);
        let style = BLUE.stroke_width(2);
        chart
            .draw_series([
                Rectangle::new([(x - 0.3, q1), (x + 0.3, q3)], BLUE.mix(0.2).filled()),
                Rectangle::new([(x - 0.3, q1), (x + 0.3, q3)], style),
            ])
            .map_err(|e| err(&e))?;
        chart
            .draw_series([
                PathElement::new(vec![(x - 0.3, med), (x + 0.3, med)], RED.stroke_width(3)),
                PathElement::new(vec![(x, q3), (x, hi)], style),
                PathElement::new(vec![(x, q1), (x, lo)], style),
                PathElement::new(vec![(x - 0.15, hi), (x + 0.15, hi)], style),
                PathElement::new(vec![(x - 0.15, lo), (x + 0.15, lo)], style),
            ])
            .map_err(|e| err(&e))?;
    }
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

#[cfg(test)]
mod tests;
