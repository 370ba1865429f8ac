//! `cargo xtask compare A B`: two result directories side by side, point by point, with the
//! ratio B / A of each number where it is more than noise: at each point and for each
//! number, every server's B against its A is one family (`record::verdict::across_runs`:
//! Welch's t on the log repeats, Bonferroni's correction over the point), and a ratio is shown with
//! its simultaneous interval only where the family finds it; anything else is `~`. A run
//! compared with itself is `~` everywhere.
//!
//! With `--fail-above PCT` it is a gate for a runtime's CI (`gate`): one rule, `gate::RULE`,
//! three ends (0 pass, 1 fail, 3 inconclusive), the decisions written as JSON by `--json FILE`.
//! The header says when the two runs were made on different machines or commits (from their
//! `meta.json`), and what the gate set each change against.
//!
//! Where B's CPU per request is higher, a line names what changed in the anatomy of a request
//! (`report::anatomy`: system calls, switches, faults per request).
//!
//! It may call the record layer (the two summaries and metas, the verdicts) and the report layer's `cells`,
//! `anatomy` and `html`.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, ValueEnum};

use crate::plan::Usage;
use crate::record::meta::Meta;
use crate::record::row::Row;
use crate::record::verdict::{self, Verdict};
use crate::record::{run_dir, summary};
use crate::report::{cells, html, stdout};

/// The exit statuses, for `cargo xtask compare --help` (`gate::RULE` follows them).
pub(crate) const HELP: &str = "Exit status:
  0    compared (and, with --fail-above, every point both runs share was judged and none
       failed)
  1    --fail-above: the gate failed (the rule below): a point of B worse than A's, or
       a point of A that B lost (failed there, or not run); the last line names each
       point; or a run directory (its summary.json) could not be read, or --out or
       --json could not be written
  2    refused (bad options, runs that share no point)
  3    --fail-above: inconclusive: nothing failed, but a point both runs share could not
       be judged (the last line names each, with why): not a pass

In a runtime's CI: run the same bench on main and on the change (same machine, same
--servers and --repeat, 3 or more, with the suite's reference, floor-epoll, in both as
the control), then
  cargo xtask compare results/main results/pr --fail-above 5% --metric cpu --json gate.json

The table's B/A intervals are simultaneous 95% intervals over each point and metric (one
family a point, the line under the table says so); the gate's are one family across every
point it judges, so they can be wider.

The rule: ";

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
    /// The baseline run directory (with summary.json); with --baseline, the run directory
    /// compared with the baseline.
    pub(crate) a: PathBuf,
    /// The run directory compared with A (not given with --baseline).
    #[arg(required_unless_present = "baseline")]
    pub(crate) b: Option<PathBuf>,
    /// Compare the one run directory given with the baseline NAME that `cargo xtask bench
    /// --save-baseline NAME` saved: `compare --baseline main results/<run-id>`.
    #[arg(long, value_name = "NAME", conflicts_with = "b", value_parser = crate::record::run_dir::baseline_name)]
    pub(crate) baseline: Option<String>,
    /// Also write the comparison, as Markdown, to FILE, and as a page to FILE with the
    /// extension .html.
    #[arg(long, value_name = "FILE")]
    pub(crate) out: Option<PathBuf>,
    /// Gate on `--metric` (`5` or `5%`): exit 1 when a point of B is worse than A's by more
    /// than PCT percent with 95% confidence (the whole of its interval beyond 1 + PCT), 3 when
    /// a point both share could not be judged, else 0 (the rule: after the exit statuses).
    #[arg(long, value_name = "PCT", value_parser = parse_pct)]
    pub(crate) fail_above: Option<f64>,
    /// The metric `--fail-above` gates on.
    #[arg(long, value_enum, default_value_t = Metric::Cpu)]
    pub(crate) metric: Metric,
    /// The server unchanged between the runs that the gate sets every other's change
    /// against (the ratio of ratios); default the suite's own reference (floor-epoll, redis,
    /// nginx) where both runs carry it; `none` for none.
    #[arg(long, value_name = "NAME")]
    pub(crate) control: Option<String>,
    /// Write the gate's decisions (each point's status, ratio, interval, p, control, and
    /// why it was not judged) and its end to FILE as JSON.
    #[arg(long, value_name = "FILE", requires = "fail_above")]
    pub(crate) json: Option<PathBuf>,
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

/// The end of a compare whose gate did not pass: `main` exits with `status` (1 failed, 3
/// inconclusive) and this as the last line.
#[derive(Debug)]
pub(crate) struct GateEnd {
    pub(crate) status: u8,
    pub(crate) line: String,
}

impl std::fmt::Display for GateEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.line)
    }
}

impl std::error::Error for GateEnd {}

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

/// What the comparison's marks mean, under its table: one meaning each, the same test that
/// keeps a pair out of its family (`verdict::blocked`).
const MARKS: &str = "† client-bound (loadgen's CPUs over 90% busy: its throughput is the client's, not judged); ‡ disturbed (something else used over 10% of a CPU of the server's, or the hypervisor stole over 10% of them in the median repeat: not judged on any number); § a CPU quota throttled the server; ◊ the load generator missed its schedule (its latency is the client's, not judged).";

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
        "Each *B/A* cell is the ratio B / A (above 1× B is higher) with its simultaneous interval and the adjusted p where the difference is real, else `~` with the ratio and interval: at each point and for each number, every server's B against its A is one family (Welch's t on the log repeats, Bonferroni's correction over the point's servers), so a point's column says something false in at most 5% of comparisons of equal runs. The table's families are its points, uncontrolled; the gate (`--fail-above`) is one family of every point it judges, each change set against the control's where there is one, so its interval can be wider than the table's. Compare runs of 3 repeats or more (5, the default, finds a 10% difference at 2% noise). For throughput higher is better; for latency, CPU and memory lower is better. A cell's `–` is a pair with no verdict: {}\n",
        MARKS
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
    let mut shown = Vec::new();
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
        shown.extend((0..4).map(c));
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
    out.push('\n');
    out.push_str(&cells::intervals(
        shown.iter().map(String::as_str),
        cells::Family::Point,
    ));
    anatomy::changes(&mut out, a, b, &verdicts);
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

/// `compare --help`'s text after the options: the exit statuses and the gate's rule.
pub(crate) fn help() -> String {
    format!("{HELP}{}", gate::RULE)
}

/// Runs `cargo xtask compare`.
pub(crate) fn run(args: &CompareArgs) -> Result<()> {
    let (dir_a, dir_b) = match (&args.baseline, &args.b) {
        (Some(name), _) => (
            run_dir::baseline(&crate::plan::project_root(), name)
                .map_err(|e| Usage(format!("--baseline: {e:#}")))?,
            args.a.clone(),
        ),
        (None, Some(b)) => (args.a.clone(), b.clone()),
        (None, None) => {
            return Err(Usage(
                "compare takes two run directories, A and B, or --baseline NAME and one".into(),
            )
            .into());
        }
    };
    let a = summary::read_summary(&dir_a)?;
    let b = summary::read_summary(&dir_b)?;
    let (meta_a, meta_b) = (
        run_dir::read_meta(&dir_a).ok(),
        run_dir::read_meta(&dir_b).ok(),
    );
    let mut notes = provenance(meta_a.as_ref(), meta_b.as_ref());
    let (a_name, b_name) = (dir_a.display().to_string(), dir_b.display().to_string());
    let gate = match args.fail_above {
        Some(pct) => {
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
            let g = gate::judge(&a, &b, args.metric, pct, args.control.as_deref());
            notes.extend(g.notes());
            Some(g)
        }
        None => None,
    };
    let text = compare(&a, &b, &a_name, &b_name, &notes);
    stdout::put(&text);
    if let Some(path) = &args.out {
        std::fs::write(path, &text)
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
        let page = path.with_extension("html");
        html::write_page(&page, &html::Page::comparison(&a_name, &b_name, &text))?;
        stdout::line(format_args!("Page: {}", page.display()));
    }
    let Some(gate) = gate else {
        return Ok(());
    };
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&gate)?;
        std::fs::write(path, json + "\n")
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
    }
    end(&gate, args.metric)
}

/// The gate's last lines: the points it could not judge, the control's change, and its end
/// (`GateEnd` where it did not pass).
fn end(gate: &gate::Gate, metric: Metric) -> Result<()> {
    use gate::{Outcome, Status};
    let lines = |s: Status| gate.with(s).map(gate::line).collect::<Vec<_>>();
    let what = format!("{} by more than {}%", metric.title(), gate.fail_above_pct);
    for c in lines(Status::Control) {
        stdout::line(format_args!(
            "compare: the control's change (the machine's, taken out of the others'): {c}"
        ));
    }
    let unjudged = lines(Status::Unjudged);
    if !unjudged.is_empty() {
        stdout::line(format_args!("compare: not judged: {}", unjudged.join("; ")));
    }
    let line = match gate.outcome {
        Outcome::Pass => {
            stdout::line(format_args!(
                "compare: pass: no point of B is worse than A in {what} with 95% confidence ({} judged, one family)",
                gate.family
            ));
            return Ok(());
        }
        Outcome::Fail => {
            let failed = lines(Status::Fail);
            format!(
                "compare: fail: {} point(s) of B worse than A in {what}, or lost: {}",
                failed.len(),
                failed.join("; ")
            )
        }
        Outcome::Inconclusive => format!(
            "compare: inconclusive (exit {}): {} point(s) judged, {} could not be: {}",
            gate::INCONCLUSIVE,
            gate.family,
            unjudged.len(),
            if unjudged.is_empty() {
                "nothing to judge".to_string()
            } else {
                unjudged.join("; ")
            }
        ),
    };
    Err(GateEnd {
        status: gate.exit_status,
        line,
    }
    .into())
}

mod anatomy;
mod gate;

#[cfg(test)]
mod tests;
