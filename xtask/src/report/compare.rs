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
/// time-based metrics, any ‡ (`Row::disturbed`). Two runs are two moments of the machine, and
/// a disturbed moment reads as a regression that is not the code's.
fn disturbed_points(a: &[Row], b: &[Row], metric: Metric) -> Vec<String> {
    let flagged = |r: &Row| match metric {
        Metric::Cpu => r.cpu_disturbed(),
        Metric::Throughput | Metric::P99 => r.disturbed(),
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
            "compare: not judged, the machine disturbed them (‡: other load, or the hypervisor's steal): {}",
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
mod tests {
    use super::*;

    fn row(server: &str, tp: &[f64]) -> Row {
        let mut r = Row {
            suite: "quick".into(),
            server: server.into(),
            point: "closed-c1".into(),
            label: "1 conns".into(),
            ok: tp.len(),
            throughput_per_sec: crate::record::stats::median(tp),
            p99_us: Some(100.0),
            cpu_us_per_req: Some(10.0),
            ..Row::default()
        };
        r.per_repeat
            .insert("throughput_per_sec".into(), tp.to_vec());
        r.per_repeat.insert("p99_us".into(), vec![100.0; tp.len()]);
        r
    }

    #[test]
    fn ratios_only_where_the_repeats_tell_them_from_noise() {
        let a = vec![
            row("threads", &[1000.0, 1010.0, 990.0, 1005.0, 995.0]),
            row("go", &[10.0]),
        ];
        let b = vec![
            row("threads", &[1500.0, 1490.0, 1510.0, 1505.0, 1495.0]),
            row("fiber", &[5.0]),
        ];
        let t = compare(&a, &b, "A", "B", &[]);
        assert!(
            t.contains("| quick | threads | 1 conns | 1.0k | 1.5k | 1.50× [1.49–1.52] (p<0.001) | 100 µs | 100 µs | ~ (1.00× [1.00–1.00]) |"),
            "{t}"
        );
        assert!(t.contains("Only in A: quick / go / 1 conns."), "{t}");
        assert!(t.contains("Only in B: quick / fiber / 1 conns."), "{t}");
        // Overlapping repeats: no verdict, whatever the medians say.
        let c = vec![row("threads", &[900.0, 1100.0, 1000.0, 1200.0, 950.0])];
        let t = compare(&a[..1], &c, "A", "C", &[]);
        let line = t.lines().find(|l| l.starts_with("| quick")).unwrap();
        assert!(!line.contains("(p"), "{line}");
        assert!(line.contains("| ~ (1.02× ["), "{line}");
    }

    #[test]
    fn a_point_is_one_family() {
        // At one point, fifteen servers whose B is their A again with other noise, and one
        // 20% faster in B: the one is found, and none of the fifteen is.
        let noisy = |k: u32, by: f64| -> Vec<f64> {
            (0..5)
                .map(|i| by * 1000.0 * (1.0 + 0.01 * f64::from((i * 7 + k * 3) % 5) - 0.02))
                .collect()
        };
        let names: Vec<String> = (0..16).map(|s| format!("s{s}")).collect();
        let a: Vec<Row> = (0..16)
            .map(|s| row(&names[s], &noisy(s as u32, 1.0)))
            .collect();
        let b: Vec<Row> = (0..16)
            .map(|s| {
                row(
                    &names[s],
                    &noisy(s as u32 + 1, if s == 4 { 1.2 } else { 1.0 }),
                )
            })
            .collect();
        let t = compare(&a, &b, "A", "B", &[]);
        let found: Vec<&str> = t.lines().filter(|l| l.contains("(p")).collect();
        assert_eq!(found.len(), 1, "{t}");
        assert!(found[0].starts_with("| quick | s4 |"), "{t}");
    }

    #[test]
    fn a_run_compared_with_itself_is_all_tildes() {
        let a = vec![
            row("threads", &[1000.0, 1300.0, 900.0]),
            row("fiber", &[2000.0, 2100.0, 1900.0, 2050.0, 2200.0]),
            row("go", &[10.0]),
        ];
        let t = compare(&a, &a, "A", "A", &[]);
        let body: Vec<&str> = t.lines().filter(|l| l.starts_with("| quick")).collect();
        assert_eq!(body.len(), 3);
        for l in body {
            assert!(!l.contains("(p"), "{l}");
        }
        assert!(
            t.contains("| quick | fiber | 1 conns | 2.0k | 2.0k | ~ (1.00× [0.9"),
            "{t}"
        );
    }

    fn cpu_row(server: &str, cpu: &[f64]) -> Row {
        let mut r = row(server, &[1000.0; 5]);
        r.cpu_us_per_req = Some(crate::record::stats::median(cpu).unwrap_or(0.0));
        r.per_repeat.insert("cpu_us_per_req".into(), cpu.to_vec());
        r
    }

    #[test]
    fn the_gate_fails_a_real_regression_above_the_threshold_only() {
        let a = vec![cpu_row("reactor", &[10.0, 10.1, 9.9, 10.05, 9.95])];
        // 20% dearer in every repeat: real, and above 5%.
        let b = vec![cpu_row("reactor", &[12.0, 12.1, 11.9, 12.05, 11.95])];
        let worse = regressions(&a, &b, Metric::Cpu, 5.0);
        assert_eq!(worse.len(), 1, "{worse:?}");
        assert!(
            worse[0].starts_with("quick / reactor / 1 conns: 1.20× [1.19–1.21] (p<0.001)"),
            "{worse:?}"
        );
        // Real but below the threshold.
        assert!(regressions(&a, &b, Metric::Cpu, 25.0).is_empty());
        // Cheaper is no regression, however real.
        assert!(regressions(&b, &a, Metric::Cpu, 5.0).is_empty());
        // The same run: nothing.
        assert!(regressions(&a, &a, Metric::Cpu, 0.0).is_empty());
        // Above the threshold by the medians, but the repeats overlap: no verdict, no failure.
        let c = vec![cpu_row("reactor", &[9.0, 14.0, 12.0, 8.0, 15.0])];
        assert!(regressions(&a, &c, Metric::Cpu, 5.0).is_empty());
        // A point the hypervisor stole a third of in B is not judged, however much dearer.
        let mut stolen = b.clone();
        stolen[0].steal_median_pct = Some(35.0);
        assert!(regressions(&a, &stolen, Metric::Cpu, 5.0).is_empty());
        assert_eq!(disturbed_points(&a, &stolen, Metric::Cpu).len(), 1);
        // A little steal leaves the CPU judged (the task clock leaves stolen time out).
        stolen[0].steal_median_pct = Some(4.0);
        assert_eq!(regressions(&a, &stolen, Metric::Cpu, 5.0).len(), 1);
        // A point B failed, and one B left out, fail the gate whatever the metric.
        let mut failed = a.clone();
        failed[0].ok = 0;
        failed[0].failure = Some("the server did not start".into());
        let worse = regressions(&a, &failed, Metric::Cpu, 5.0);
        assert_eq!(worse.len(), 1, "{worse:?}");
        assert!(
            worse[0].contains("B failed (the server did not start)"),
            "{worse:?}"
        );
        let worse = regressions(&a, &[], Metric::Throughput, 5.0);
        assert_eq!(
            worse,
            vec!["quick / reactor / 1 conns: not in B".to_string()]
        );
        // Throughput: lower is worse.
        let slow = vec![row("reactor", &[800.0, 810.0, 790.0, 805.0, 795.0])];
        let fast = vec![row("reactor", &[1000.0, 1010.0, 990.0, 1005.0, 995.0])];
        assert_eq!(regressions(&fast, &slow, Metric::Throughput, 5.0).len(), 1);
        assert!(regressions(&slow, &fast, Metric::Throughput, 5.0).is_empty());
    }

    #[test]
    fn percentages_parse_with_or_without_the_sign() {
        assert_eq!(parse_pct("5%"), Ok(5.0));
        assert_eq!(parse_pct("2.5"), Ok(2.5));
        assert!(parse_pct("-1").is_err());
        assert!(parse_pct("five").is_err());
    }

    #[test]
    fn the_header_says_when_machines_or_commits_differ() {
        let a = Meta {
            cpu_model: Some("EPYC".into()),
            cores: 2,
            commit: Some("aaaaaaaaaaaaaaaa".into()),
            ..Meta::default()
        };
        assert!(provenance(Some(&a), Some(&a)).is_empty());
        let b = Meta {
            cores: 4,
            commit: Some("bbbbbbbbbbbb".into()),
            ..a.clone()
        };
        let notes = provenance(Some(&a), Some(&b));
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(notes[0].contains("Different machines"), "{notes:?}");
        assert!(
            notes[1].contains("`aaaaaaaaaaaa`, B `bbbbbbbbbbbb`"),
            "{notes:?}"
        );
        assert_eq!(provenance(None, Some(&a)).len(), 1);
    }
}
