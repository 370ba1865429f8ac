//! `cargo xtask compare A B`: two result directories side by side, point by point, with the
//! ratio B / A of each number where it is more than noise: at each point and for each
//! number, every server's B against its A is one family (`record::verdict::across_runs`:
//! Welch's t on the log repeats, Holm's step-down over the point), and a ratio is shown with
//! its simultaneous interval only where the family finds it; anything else is `~`. A run
//! compared with itself is `~` everywhere.
//!
//! It may call the record layer (the two summaries, the verdicts) and the report layer's
//! `cells`.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use crate::record::row::Row;
use crate::record::summary;
use crate::record::verdict::{self, Verdict};
use crate::report::cells;

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
    /// Also write the comparison, as Markdown, to FILE.
    #[arg(long, value_name = "FILE")]
    pub(crate) out: Option<PathBuf>,
}

/// The comparison table of two runs' rows, as Markdown.
pub(crate) fn compare(a: &[Row], b: &[Row], a_name: &str, b_name: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# {b_name} against {a_name}\n");
    let _ = writeln!(
        out,
        "Each *B/A* cell is the ratio B / A (above 1× B is higher) with its simultaneous interval and Holm's adjusted p where the difference is real, else `~` with the ratio and interval: at each point and for each number, every server's B against its A is one family (Welch's t on the log repeats, Holm's step-down over the point's servers), so a point's column says something false in at most 5% of comparisons of equal runs. Compare runs of 3 repeats or more (5, the default, finds a 10% difference at 2% noise). For throughput higher is better; for latency, CPU and memory lower is better. † marks a client-bound point, ‡ one where something else used the server's CPU (or the hypervisor stole over 2% of it), § one where a CPU quota throttled the server.\n"
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
    let text = compare(
        &a,
        &b,
        &args.a.display().to_string(),
        &args.b.display().to_string(),
    );
    print!("{text}");
    if let Some(path) = &args.out {
        std::fs::write(path, &text)
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
    }
    Ok(())
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
        let t = compare(&a, &b, "A", "B");
        assert!(
            t.contains("| quick | threads | 1 conns | 1.0k | 1.5k | 1.50× [1.49–1.52] (p<0.001) | 100 µs | 100 µs | ~ (1.00× [1.00–1.00]) |"),
            "{t}"
        );
        assert!(t.contains("Only in A: quick / go / 1 conns."), "{t}");
        assert!(t.contains("Only in B: quick / fiber / 1 conns."), "{t}");
        // Overlapping repeats: no verdict, whatever the medians say.
        let c = vec![row("threads", &[900.0, 1100.0, 1000.0, 1200.0, 950.0])];
        let t = compare(&a[..1], &c, "A", "C");
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
        let t = compare(&a, &b, "A", "B");
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
        let t = compare(&a, &a, "A", "A");
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
}
