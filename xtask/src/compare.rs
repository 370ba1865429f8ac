//! `cargo xtask compare A B`: two result directories side by side, point by point, with the
//! ratio B / A of each number (a ratio above 1 means B is higher).

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use crate::cells;
use crate::summary::{self, Row};

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

fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if a.abs() > f64::EPSILON => format!("{:.2}×", b / a),
        _ => "–".into(),
    }
}

/// The comparison table of two runs' rows, as Markdown.
pub(crate) fn compare(a: &[Row], b: &[Row], a_name: &str, b_name: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# {b_name} against {a_name}\n");
    let _ = writeln!(
        out,
        "Ratios are B / A: above 1× B is higher. For throughput higher is better; for latency, CPU and memory lower is better. † marks a client-bound point, ‡ one where something else used the server's CPU.\n"
    );
    let _ = writeln!(
        out,
        "| suite | server | point | msgs/s A | msgs/s B | ratio | p99 A | p99 B | ratio | CPU/msg A | CPU/msg B | ratio | mem/conn A | mem/conn B | ratio |"
    );
    let _ = writeln!(out, "|{}", " --- |".repeat(15));
    let cb = |r: &Row| match (r.client_bound, r.disturbed()) {
        (true, true) => " † ‡",
        (true, false) => " †",
        (false, true) => " ‡",
        (false, false) => "",
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
            cb(ra),
            cells::fmt_rate(rb.throughput_per_sec),
            cb(rb),
            ratio(ra.throughput_per_sec, rb.throughput_per_sec),
            cells::fmt_us(ra.p99_us),
            cells::fmt_us(rb.p99_us),
            ratio(ra.p99_us, rb.p99_us),
            cells::fmt_us(ra.cpu_us_per_req),
            cells::fmt_us(rb.cpu_us_per_req),
            ratio(ra.cpu_us_per_req, rb.cpu_us_per_req),
            cells::fmt_bytes(ra.mem_per_conn_bytes),
            cells::fmt_bytes(rb.mem_per_conn_bytes),
            ratio(ra.mem_per_conn_bytes, rb.mem_per_conn_bytes),
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

    fn row(server: &str, tp: f64) -> Row {
        Row {
            suite: "quick".into(),
            server: server.into(),
            point: "closed-c1".into(),
            label: "1 conns".into(),
            ok: 1,
            throughput_per_sec: Some(tp),
            p99_us: Some(100.0),
            ..Row::default()
        }
    }

    #[test]
    fn ratios_side_by_side() {
        let a = vec![row("threads", 1000.0), row("go", 10.0)];
        let b = vec![row("threads", 1500.0), row("fiber", 5.0)];
        let t = compare(&a, &b, "A", "B");
        assert!(
            t.contains(
                "| quick | threads | 1 conns | 1.0k | 1.5k | 1.50× | 100 µs | 100 µs | 1.00× |"
            ),
            "{t}"
        );
        assert!(t.contains("Only in A: quick / go / 1 conns."), "{t}");
        assert!(t.contains("Only in B: quick / fiber / 1 conns."), "{t}");
    }
}
