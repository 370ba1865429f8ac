//! `cargo xtask compare A B`: two result directories side by side, point by point, with the
//! ratio B / A of each number where it is more than noise: a Mann-Whitney test on the two
//! runs' repeats (p < 0.05) shows the ratio, anything else is `~`, as benchstat does. A run
//! compared with itself is `~` everywhere.
//!
//! It may call the record layer (the two summaries) and the report layer's `cells`.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use crate::record::row::Row;
use crate::record::summary;
use crate::report::cells;

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
        "Each *B/A* cell is the ratio B / A (above 1× B is higher) where a Mann-Whitney test on the two runs' repeats finds the difference real (p < 0.05), else `~`; p and the repeats (n = A+B) beside it. With 3 repeats a side no difference can reach p < 0.05 (the least p is 0.10): compare runs of 4 or more. For throughput higher is better; for latency, CPU and memory lower is better. † marks a client-bound point, ‡ one where something else used the server's CPU (or the hypervisor stole over 2% of it), § one where a CPU quota throttled the server.\n"
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
    for rb in b {
        let Some(ra) = a
            .iter()
            .find(|r| r.suite == rb.suite && r.server == rb.server && r.point == rb.point)
        else {
            only_b.push(format!("{} / {} / {}", rb.suite, rb.server, rb.label));
            continue;
        };
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
            cells::delta(
                ra,
                rb,
                "throughput_per_sec",
                ra.throughput_per_sec,
                rb.throughput_per_sec
            ),
            cells::fmt_us(ra.p99_us),
            cells::fmt_us(rb.p99_us),
            cells::delta(ra, rb, "p99_us", ra.p99_us, rb.p99_us),
            cells::fmt_us(ra.cpu_us_per_req),
            cells::fmt_us(rb.cpu_us_per_req),
            cells::delta(
                ra,
                rb,
                "cpu_us_per_req",
                ra.cpu_us_per_req,
                rb.cpu_us_per_req
            ),
            cells::fmt_bytes(ra.mem_per_conn_bytes),
            cells::fmt_bytes(rb.mem_per_conn_bytes),
            cells::delta(
                ra,
                rb,
                "mem_per_conn_bytes",
                ra.mem_per_conn_bytes,
                rb.mem_per_conn_bytes
            ),
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
            t.contains("| quick | threads | 1 conns | 1.0k | 1.5k | 1.50× (p=0.008 n=5+5) | 100 µs | 100 µs | ~ (p=1.000 n=5+5) |"),
            "{t}"
        );
        assert!(t.contains("Only in A: quick / go / 1 conns."), "{t}");
        assert!(t.contains("Only in B: quick / fiber / 1 conns."), "{t}");
        // Overlapping repeats: no verdict, whatever the medians say.
        let c = vec![row("threads", &[900.0, 1100.0, 1000.0, 1200.0, 950.0])];
        let t = compare(&a[..1], &c, "A", "C");
        let line = t.lines().find(|l| l.starts_with("| quick")).unwrap();
        assert!(!line.contains('×'), "{line}");
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
            assert!(!l.contains('×'), "{l}");
            assert!(l.contains("~ (p=1.000"), "{l}");
        }
    }
}
