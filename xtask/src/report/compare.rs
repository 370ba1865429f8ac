//! `cargo xtask compare A B`: two result directories side by side, point by point, with the
//! ratio B / A of each number where it is more than noise: at each point and for each
//! number, every server's B against its A is one family (`record::verdict::across_runs`:
//! Welch's t on the log repeats, Bonferroni's correction over the point), and a ratio is shown with
//! its simultaneous interval only where the family finds it; anything else is `~`. A run
//! compared with itself is `~` everywhere.
//!
//! With `--fail-above PCT` it is a gate for a runtime's CI: it exits 1 when a point of B is
//! worse than A's by more than PCT in one metric (`--metric`: CPU per request, throughput or
//! p99) and the point's family of verdicts (the same as the table's) finds the difference real, its last
//! line naming each such point; else 0. The header says when the two runs were made on
//! different machines or commits (from their `meta.json`).
//!
//! It may call the record layer (the two summaries and metas, the verdicts) and the report layer's `cells`
//! and `html`.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, ValueEnum};

use crate::plan::Usage;
use crate::record::meta::Meta;
use crate::record::row::Row;
use crate::record::verdict::{self, Verdict};
use crate::record::{run_dir, summary};
use crate::report::{cells, html};

/// The exit statuses, for `cargo xtask compare --help`.
pub(crate) const HELP: &str = "Exit status:
  0    compared (and, with --fail-above, no point of B really worse than A's by more than PCT)
  1    --fail-above: a point of B is worse than A's by more than PCT in --metric, and the
       reports' significance test finds the difference real; the last line names each one;
       or a run directory could not be read
  2    refused (bad options, runs that share no point)

In a runtime's CI: run the same bench on main and on the change (same machine, same
--servers and --repeat), then
  cargo xtask compare results/main results/pr --fail-above 5% --metric cpu";

/// The metrics `compare` sets side by side, as summary.json names them.
const METRICS: [&str; 4] = [
    "throughput_per_sec",
    "p99_us",
    "cpu_us_per_req",
    "mem_per_conn_bytes",
];

/// Each of `b`'s rows' verdicts against its row in `a` (`None` where `a` has none), for each
/// of [`METRICS`]: a family per point and metric.
fn verdicts(a: &[Row], b: &[Row]) -> Vec<Option<[Option<Verdict>; 4]>> {
    let twin = |rb: &Row| {
        a.iter()
            .find(|r| r.suite == rb.suite && r.server == rb.server && r.point == rb.point)
    };
    let mut out: Vec<Option<[Option<Verdict>; 4]>> = vec![None; b.len()];
    for (i, rb) in b.iter().enumerate() {
        if out[i].is_some() || twin(rb).is_none() {
            continue;
        }
        // Every row of this point that both runs have, one family a metric.
        let at: Vec<usize> = (0..b.len())
            .filter(|&j| b[j].suite == rb.suite && b[j].point == rb.point && twin(&b[j]).is_some())
            .collect();
        let pairs: Vec<(&Row, &Row)> = at
            .iter()
            .filter_map(|&j| Some((twin(&b[j])?, &b[j])))
            .collect();
        let each: Vec<Vec<Option<Verdict>>> = METRICS
            .iter()
            .map(|m| verdict::across_runs(&pairs, m))
            .collect();
        for (k, &j) in at.iter().enumerate() {
            out[j] = Some([each[0][k], each[1][k], each[2][k], each[3][k]]);
        }
    }
    out
}

/// Options of `cargo xtask compare`.
#[derive(Debug, Clone, Args)]
pub(crate) struct CompareArgs {
    /// The baseline run directory (with summary.json).
    pub(crate) a: PathBuf,
    /// The run directory compared with it.
    pub(crate) b: PathBuf,
    /// Also write the comparison, as Markdown, to FILE, and as a page to FILE with the
    /// extension .html.
    #[arg(long, value_name = "FILE")]
    pub(crate) out: Option<PathBuf>,
    /// Exit 1 when a point of B is worse than A's by more than PCT percent in `--metric`
    /// (`5` or `5%`) and the reports' significance test finds the difference real; the last
    /// line names each such point. 0 otherwise.
    #[arg(long, value_name = "PCT", value_parser = parse_pct)]
    pub(crate) fail_above: Option<f64>,
    /// The metric `--fail-above` gates on.
    #[arg(long, value_enum, default_value_t = Metric::Cpu)]
    pub(crate) metric: Metric,
}

/// What `--fail-above` gates on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Metric {
    /// Server CPU per request (higher is worse).
    Cpu,
    /// Requests per second (lower is worse).
    Throughput,
    /// 99th percentile latency (higher is worse).
    P99,
}

impl Metric {
    /// The summary's name of the metric, and its value in a row.
    fn of(self) -> (&'static str, fn(&Row) -> Option<f64>) {
        match self {
            Metric::Cpu => ("cpu_us_per_req", |r| r.cpu_us_per_req),
            Metric::Throughput => ("throughput_per_sec", |r| r.throughput_per_sec),
            Metric::P99 => ("p99_us", |r| r.p99_us),
        }
    }

    fn title(self) -> &'static str {
        match self {
            Metric::Cpu => "CPU per request",
            Metric::Throughput => "throughput",
            Metric::P99 => "p99 latency",
        }
    }

    /// Whether B / A = `ratio` is worse than A by more than `pct` percent.
    fn worse(self, ratio: f64, pct: f64) -> bool {
        match self {
            Metric::Cpu | Metric::P99 => ratio > 1.0 + pct / 100.0,
            Metric::Throughput => ratio < 1.0 - pct / 100.0,
        }
    }
}

/// `5`, `5%` or `2.5%`: a percentage, not negative.
fn parse_pct(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("`{s}` is not a percentage (write 5 or 5%)"))?;
    if !v.is_finite() || v < 0.0 {
        return Err(format!("`{s}`: the percentage must be 0 or more"));
    }
    Ok(v)
}

/// The end of a compare whose gate found a regression: `main` exits 1 with this as the last
/// line.
#[derive(Debug)]
pub(crate) struct Regressed(pub(crate) String);

impl std::fmt::Display for Regressed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Regressed {}

/// The points of `b` worse than `a`'s by more than `pct` percent in `metric`, with a real
/// difference by the reports' verdict (`suite / server / point: 1.31× [1.20–1.43] (p=0.008)`,
/// with the row's marks), and the points `a` measured that `b` failed or left out (`B failed`,
/// `not in B`): a gate cannot pass a build whose server no longer runs.
pub(crate) fn regressions(a: &[Row], b: &[Row], metric: Metric, pct: f64) -> Vec<String> {
    let (name, _) = metric.of();
    let Some(k) = METRICS.iter().position(|m| *m == name) else {
        return Vec::new();
    };
    let unjudged = disturbed_points(a, b, metric);
    let mut out: Vec<String> = verdicts(a, b)
        .into_iter()
        .zip(b)
        .filter(|(_, rb)| !unjudged.contains(&at(rb)))
        .filter_map(|(each, rb)| {
            let v = each?[k]?;
            (v.differs && metric.worse(v.ratio, pct)).then(|| {
                format!(
                    "{}: {}",
                    at(rb),
                    cells::mark(Some(rb), cells::verdict(Some(&v)))
                )
            })
        })
        .collect();
    for ra in a.iter().filter(|r| r.ok > 0) {
        let twin = b
            .iter()
            .find(|r| r.suite == ra.suite && r.server == ra.server && r.point == ra.point);
        match twin {
            None => out.push(format!("{}: not in B", at(ra))),
            Some(rb) if rb.ok == 0 => out.push(format!(
                "{}: B failed ({})",
                at(rb),
                rb.failure.as_deref().unwrap_or("no repeat succeeded")
            )),
            Some(_) => {}
        }
    }
    out
}

/// A point's name in the gate's lines: `suite / server / point`.
fn at(r: &Row) -> String {
    format!("{} / {} / {}", r.suite, r.server, r.label)
}

/// The points of `b` that the gate does not judge in `metric`, because the machine disturbed
/// them in either run: for CPU, other load or much steal (`Row::cpu_disturbed`); for the
/// time-based metrics, any ‡ (`Row::disturbed`), and for p99 also a load generator that missed
/// its schedule (◊: the latency is the client's). Two runs are two moments of the machine, and
/// a disturbed moment reads as a regression that is not the code's.
fn disturbed_points(a: &[Row], b: &[Row], metric: Metric) -> Vec<String> {
    let flagged = |r: &Row| match metric {
        Metric::Cpu => r.cpu_disturbed(),
        Metric::Throughput => r.disturbed(),
        Metric::P99 => r.disturbed() || r.schedule_missed(),
    };
    b.iter()
        .filter(|rb| {
            let ra = a
                .iter()
                .find(|r| r.suite == rb.suite && r.server == rb.server && r.point == rb.point);
            rb.ok > 0 && (flagged(rb) || ra.is_some_and(flagged))
        })
        .map(at)
        .collect()
}

/// What differs between the machines and commits of two runs, a sentence each, from their
/// `meta.json` (nothing where either has none).
pub(crate) fn provenance(a: Option<&Meta>, b: Option<&Meta>) -> Vec<String> {
    let (Some(a), Some(b)) = (a, b) else {
        return vec![
            "One of the runs has no meta.json: whether they ran on the same machine and commit is not known.".into(),
        ];
    };
    let mut out = Vec::new();
    let machine = |m: &Meta| {
        format!(
            "{} ({} CPUs, Linux {})",
            m.cpu_model.as_deref().unwrap_or("an unknown CPU"),
            m.cores,
            m.kernel.as_deref().unwrap_or("?")
        )
    };
    if machine(a) != machine(b) {
        out.push(format!(
            "**Different machines**: A ran on {}, B on {}; a ratio mixes the machines with the code.",
            machine(a),
            machine(b)
        ));
    }
    let commit = |m: &Meta| {
        let c = m.commit.as_deref().map_or("?", |c| &c[..c.len().min(12)]);
        format!(
            "{c}{}",
            if m.dirty {
                " (with uncommitted changes)"
            } else {
                ""
            }
        )
    };
    let accounting = |m: &Meta| {
        m.accounting
            .clone()
            .unwrap_or_else(|| "samples of the live threads (a run from before 2026-12)".into())
    };
    if accounting(a) != accounting(b) {
        out.push(format!(
            "**Different CPU accounting**: A's CPU is {}, B's {}; a CPU ratio mixes the two ways of counting with the code.",
            accounting(a),
            accounting(b)
        ));
    }
    if commit(a) != commit(b) {
        out.push(format!(
            "**Different commits**: A is `{}`, B `{}`.",
            commit(a),
            commit(b)
        ));
    }
    out
}

/// The comparison table of two runs' rows, as Markdown.
pub(crate) fn compare(
    a: &[Row],
    b: &[Row],
    a_name: &str,
    b_name: &str,
    notes: &[String],
) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# {b_name} against {a_name}\n");
    for n in notes {
        let _ = writeln!(out, "{n}\n");
    }
    let _ = writeln!(
        out,
        "Each *B/A* cell is the ratio B / A (above 1× B is higher) with its simultaneous interval and the adjusted p where the difference is real, else `~` with the ratio and interval: at each point and for each number, every server's B against its A is one family (Welch's t on the log repeats, Bonferroni's correction over the point's servers), so a point's column says something false in at most 5% of comparisons of equal runs. Compare runs of 3 repeats or more (5, the default, finds a 10% difference at 2% noise). For throughput higher is better; for latency, CPU and memory lower is better. † marks a client-bound point, ‡ one where something else used the server's CPU (or the hypervisor stole over 2% of it), § one where a CPU quota throttled the server.\n"
    );
    let _ = writeln!(
        out,
        "| suite | server | point | msgs/s A | msgs/s B | B/A | p99 A | p99 B | B/A | CPU/msg A | CPU/msg B | B/A | mem/conn A | mem/conn B | B/A |"
    );
    let _ = writeln!(out, "|{}", " --- |".repeat(15));
    let m = |r: &Row| {
        let mut s = String::new();
        if r.client_bound {
            s.push_str(" †");
        }
        if r.disturbed() {
            s.push_str(" ‡");
        }
        if r.throttled() {
            s.push_str(" §");
        }
        s
    };
    let mut only_b = Vec::new();
    let verdicts = verdicts(a, b);
    for (rb, v) in b.iter().zip(&verdicts) {
        let (Some(ra), Some(v)) = (
            a.iter()
                .find(|r| r.suite == rb.suite && r.server == rb.server && r.point == rb.point),
            v,
        ) else {
            only_b.push(format!("{} / {} / {}", rb.suite, rb.server, rb.label));
            continue;
        };
        let c = |k: usize| cells::verdict(v[k].as_ref());
        let _ = writeln!(
            out,
            "| {} | {} | {} | {}{} | {}{} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            rb.suite,
            rb.server,
            rb.label,
            cells::fmt_rate(ra.throughput_per_sec),
            m(ra),
            cells::fmt_rate(rb.throughput_per_sec),
            m(rb),
            c(0),
            cells::fmt_us(ra.p99_us),
            cells::fmt_us(rb.p99_us),
            c(1),
            cells::fmt_us(ra.cpu_us_per_req),
            cells::fmt_us(rb.cpu_us_per_req),
            c(2),
            cells::fmt_bytes(ra.mem_per_conn_bytes),
            cells::fmt_bytes(rb.mem_per_conn_bytes),
            c(3),
        );
    }
    let only_a: Vec<String> = a
        .iter()
        .filter(|ra| {
            !b.iter()
                .any(|r| r.suite == ra.suite && r.server == ra.server && r.point == ra.point)
        })
        .map(|r| format!("{} / {} / {}", r.suite, r.server, r.label))
        .collect();
    if !only_a.is_empty() {
        let _ = writeln!(out, "\nOnly in A: {}.", only_a.join("; "));
    }
    if !only_b.is_empty() {
        let _ = writeln!(out, "\nOnly in B: {}.", only_b.join("; "));
    }
    out
}

/// Runs `cargo xtask compare`.
pub(crate) fn run(args: &CompareArgs) -> Result<()> {
    let a = summary::read_summary(&args.a)?;
    let b = summary::read_summary(&args.b)?;
    let (meta_a, meta_b) = (
        run_dir::read_meta(&args.a).ok(),
        run_dir::read_meta(&args.b).ok(),
    );
    let notes = provenance(meta_a.as_ref(), meta_b.as_ref());
    let (a_name, b_name) = (args.a.display().to_string(), args.b.display().to_string());
    let text = compare(&a, &b, &a_name, &b_name, &notes);
    print!("{text}");
    if let Some(path) = &args.out {
        std::fs::write(path, &text)
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
        let page = path.with_extension("html");
        html::write_page(&page, &html::Page::comparison(&a_name, &b_name, &text))?;
        println!("Page: {}", page.display());
    }
    let Some(pct) = args.fail_above else {
        return Ok(());
    };
    let matched = b.iter().any(|rb| {
        a.iter()
            .any(|r| r.suite == rb.suite && r.server == rb.server && r.point == rb.point)
    });
    if !matched {
        return Err(Usage(format!(
            "--fail-above: {b_name} and {a_name} share no point (same suite, server and point) to compare"
        ))
        .into());
    }
    let unjudged = disturbed_points(&a, &b, args.metric);
    if !unjudged.is_empty() {
        println!(
            "compare: not judged, the machine disturbed them (‡: other load, or the hypervisor's steal; ◊: the load generator missed its schedule): {}",
            unjudged.join("; ")
        );
    }
    let worse = regressions(&a, &b, args.metric, pct);
    let what = format!("{} by more than {pct}%", args.metric.title());
    let judged = b.iter().filter(|rb| !unjudged.contains(&at(rb))).count();
    if worse.is_empty() && judged == 0 {
        return Err(Regressed(format!(
            "compare: every point of B was disturbed (‡), so none could be judged in {what}: run both again on a quiet machine"
        ))
        .into());
    }
    if worse.is_empty() {
        println!("compare: no point of B is worse than A in {what} with a real difference: pass");
        Ok(())
    } else {
        Err(Regressed(format!(
            "compare: {} point(s) of B worse than A in {what}: {}",
            worse.len(),
            worse.join("; ")
        ))
        .into())
    }
}

#[cfg(test)]
mod tests;
