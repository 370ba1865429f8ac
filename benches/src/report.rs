//! The `micro.md` report: reads criterion's results (`benchmark.json` and
//! `estimates.json` under each benchmark's `new/` directory) and the memory samples, and
//! sets them beside the papers' figures with the ratios, and a sentence wherever our
//! order of costs differs from the paper's.
//!
//! Everything here is pure (paths in, text out), so that the tables and the order
//! comparisons are unit-tested; running the benchmarks is the `micro-report` binary's job.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::ids;
use crate::memory::{Kind, Sample};
use crate::switch::Placement;
use crate::sys::RingSetup;
use crate::syscall::Technique;

/// The papers' figures (DESIGN.md, "Numbers from the papers").
pub mod paper {
    /// io_uring paper, Table I (Xeon E5-4640 2.2 GHz, Linux 5.13), ns per eventfd read.
    pub const BLOCKING_NS: f64 = 955.0;
    pub const EPOLL_NS: f64 = 1656.0;
    pub const LINUX_AIO_NS: f64 = 1922.0;
    pub const POSIX_AIO_NS: f64 = 6224.0;
    pub const IO_URING_NS: f64 = 306.0;
    /// Goroutine-switch article (Go 1.22.1): one goroutine switch.
    pub const GOROUTINE_SWITCH_NS: f64 = 54.0;
    /// Goroutine creation and scheduling, "about 400 ns".
    pub const GOROUTINE_CREATE_NS: f64 = 400.0;
    /// OS thread context switch, "3 to 5 µs".
    pub const THREAD_SWITCH_NS: (f64, f64) = (3000.0, 5000.0);
    /// A goroutine's initial stack.
    pub const GOROUTINE_STACK: f64 = 2048.0;
    /// A thread's stack (`ulimit -s`, 8 MiB).
    pub const THREAD_STACK: f64 = 8.0 * 1024.0 * 1024.0;
}

/// One criterion result: the mean time of one iteration and its 95% confidence interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// The full id, `group/function[/parameter]`.
    pub id: String,
    pub mean_ns: f64,
    pub low_ns: f64,
    pub high_ns: f64,
    /// Elements per iteration, when the benchmark declared a throughput in elements.
    pub elements: Option<u64>,
    /// Bytes per iteration, when the benchmark declared a throughput in bytes.
    pub bytes: Option<u64>,
}

#[derive(Deserialize)]
struct RawBenchmark {
    full_id: String,
    throughput: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct RawEstimates {
    mean: RawEstimate,
}

#[derive(Deserialize)]
struct RawEstimate {
    point_estimate: f64,
    confidence_interval: RawInterval,
}

#[derive(Deserialize)]
struct RawInterval {
    lower_bound: f64,
    upper_bound: f64,
}

/// Parses one benchmark's `benchmark.json` and `estimates.json` (criterion 0.8).
pub fn parse_estimate(benchmark_json: &str, estimates_json: &str) -> serde_json::Result<Estimate> {
    let benchmark: RawBenchmark = serde_json::from_str(benchmark_json)?;
    let estimates: RawEstimates = serde_json::from_str(estimates_json)?;
    let (elements, bytes) = benchmark
        .throughput
        .as_ref()
        .map_or((None, None), throughput);
    Ok(Estimate {
        id: benchmark.full_id,
        mean_ns: estimates.mean.point_estimate,
        low_ns: estimates.mean.confidence_interval.lower_bound,
        high_ns: estimates.mean.confidence_interval.upper_bound,
        elements,
        bytes,
    })
}

/// (elements, bytes) from criterion's serialised `Throughput`.
fn throughput(value: &serde_json::Value) -> (Option<u64>, Option<u64>) {
    let get = |key: &str| value.get(key).and_then(serde_json::Value::as_u64);
    if let Some(both) = value.get("ElementsAndBytes") {
        let field = |key: &str| both.get(key).and_then(serde_json::Value::as_u64);
        return (field("elements"), field("bytes"));
    }
    let bytes = get("Bytes")
        .or_else(|| get("BytesDecimal"))
        .or_else(|| get("Bits").map(|bits| bits / 8));
    (get("Elements"), bytes)
}

/// Every benchmark result under criterion's output directory `dir`, sorted by id.
pub fn load_estimates(dir: &Path) -> io::Result<Vec<Estimate>> {
    let mut found = Vec::new();
    collect(dir, &mut found)?;
    found.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(found)
}

fn collect(dir: &Path, found: &mut Vec<Estimate>) -> io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if !path.is_dir() {
            continue;
        }
        let benchmark = path.join("benchmark.json");
        if path.file_name().is_some_and(|n| n == "new") && benchmark.is_file() {
            let read = |p: &Path| {
                std::fs::read_to_string(p)
                    .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", p.display())))
            };
            let estimate = parse_estimate(&read(&benchmark)?, &read(&path.join("estimates.json"))?)
                .map_err(|e| {
                    io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("{}: {e}", path.display()),
                    )
                })?;
            found.push(estimate);
        } else {
            collect(&path, found)?;
        }
    }
    Ok(())
}

/// Where and how a run was made.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    /// `YYYYMMDD-HHMMSS-<commit>` (UTC), see [`run_id`].
    pub run_id: String,
    pub commit: String,
    pub kernel: String,
    pub cpu: String,
    pub cores: usize,
    pub rustc: String,
    /// The lines of `/sys/devices/system/cpu/vulnerabilities` that are not "Not affected".
    pub mitigations: Vec<String>,
    pub warm_up_s: f64,
    pub measurement_s: f64,
    pub memory_count: u64,
    /// The command that ran the benchmarks.
    pub command: String,
}

/// A run id: the UTC date and time of `unix_secs`, then the commit.
pub fn run_id(unix_secs: u64, commit: &str) -> String {
    let days = unix_secs / 86_400;
    let secs = unix_secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}{m:02}{d:02}-{:02}{:02}{:02}-{commit}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`, for days on or after the epoch).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + u64::from(m <= 2);
    (y, m, d)
}

/// A row placed in an order comparison: its figure in the paper and ours.
#[derive(Debug, Clone, PartialEq)]
pub struct Ranked {
    /// A stable key, for the explanations.
    pub key: &'static str,
    pub label: String,
    pub paper: f64,
    pub ours: f64,
}

/// The pairs `(i, j)` where the paper has row `i` strictly cheaper than row `j` and we
/// have it strictly dearer: the places where our order differs from the paper's. Rows
/// that the paper gives the same figure are not compared.
pub fn inversions(rows: &[Ranked]) -> Vec<(usize, usize)> {
    let mut found = Vec::new();
    for (i, a) in rows.iter().enumerate() {
        for (j, b) in rows.iter().enumerate() {
            if a.paper < b.paper && a.ours > b.ours {
                found.push((i, j));
            }
        }
    }
    found
}

/// Why our order differs from the paper's where a reason is known: `a` is the row the
/// paper has cheaper, `b` the one it has dearer.
fn known_reason(a: &str, b: &str) -> Option<&'static str> {
    Some(match (a, b) {
        ("io_uring_batch1", "blocking") => {
            "With one `io_uring_enter` per read, io_uring makes the same single system call as \
             `read(2)` and adds the SQE and CQE on top, so it cannot be cheaper. The paper's \
             306 ns, a third of its blocking read, can only come from amortising the entry \
             over many requests (its Table I counts 0 to 1 traps per io_uring request); our \
             16- and 64-read rows do that."
        }
        ("io_uring_batch1", "epoll") => {
            "One `io_uring_enter` per read is one system call against epoll's two, but it also \
             sets up a request, runs the read through io_uring's issue path and posts a CQE; on \
             this kernel that bookkeeping outweighs the second trap, and only batching wins."
        }
        ("epoll", "linux_aio") => {
            "Both make two system calls per read (`epoll_wait` then `read`, against `io_submit` \
             then `io_getevents`), and Linux AIO performs an eventfd read inline inside \
             `io_submit`; the paper's 16% gap between them is small, and here the per-call work \
             (epoll re-polling a level-triggered fd, AIO allocating and completing a request) \
             settles the order instead."
        }
        ("spawn_thread", "handoff_same") | ("spawn_thread", "handoff_across") => {
            "The paper's 400 ns creation figure is a goroutine's; an OS thread's spawn-and-join \
             is `clone(2)`, a stack mapping, the new thread's first scheduling and a futex \
             wake-up at its exit, several context switches' worth of work, so an OS thread \
             costs more to create than to switch to. The comparable rows are the fiber and \
             Tokio spawns."
        }
        ("tokio_pingpong", "spawn_tokio_ct") | ("tokio_pingpong", "spawn_tokio_mt") => {
            "A Tokio hand-off is a `Notify` (a mutex-guarded waiter list) plus a wake-up through \
             the run queue, while a spawn and join on the same worker allocates a task that \
             runs at once from the LIFO slot or local queue; both are a few hundred \
             instructions, so the paper's 7-to-1 ratio between a goroutine switch and a \
             goroutine creation does not carry over to Tokio, where switching is not cheaper \
             than spawning."
        }
        ("fiber_yield", "spawn_fiber") => {
            "A fiber yield goes through the worker's dispatch loop (run queue, completion check) \
             twice per ping-pong round, while a spawn-and-join reuses a pooled stack; the two \
             cost the same order of work in our runtime."
        }
        _ => return None,
    })
}

/// Relative gaps below this are within this machine's run-to-run noise.
const NOISE: f64 = 0.15;

/// Why `a` (cheaper in the paper) is dearer than `b` here: the known reason, or what
/// can be said without one.
fn explanation(a: &Ranked, b: &Ranked, reason: Option<String>) -> String {
    let gap = (a.ours - b.ours) / b.ours;
    match reason {
        Some(reason) => reason,
        None if gap < NOISE => format!(
            "The two are within {:.0}% of each other, less than the run-to-run noise of this \
             shared 2-core VM, so their order here is not significant.",
            gap * 100.0
        ),
        None => "No explanation for this inversion is recorded in the report generator \
                 (benches/src/report.rs); it is worth a look."
            .to_owned(),
    }
}

/// Why `a` (cheaper in the paper) is dearer than `b` here, if known.
type Reason<'a> = &'a dyn Fn(&str, &str) -> Option<String>;

/// One sentence per row that is dearer than rows the paper has dearer, merging the rows
/// it is inverted with that share an explanation.
fn inversion_sentences(rows: &[Ranked], fmt: fn(f64) -> String, reason: Reason<'_>) -> Vec<String> {
    let mut groups: Vec<(usize, String, Vec<usize>)> = Vec::new();
    for (i, j) in inversions(rows) {
        let text = explanation(&rows[i], &rows[j], reason(rows[i].key, rows[j].key));
        match groups.iter_mut().find(|(a, t, _)| *a == i && *t == text) {
            Some(group) => group.2.push(j),
            None => groups.push((i, text, vec![j])),
        }
    }
    groups
        .into_iter()
        .map(|(i, text, js)| {
            let a = &rows[i];
            let dearer: Vec<String> = js
                .iter()
                .map(|&j| format!("**{}** ({})", rows[j].label, fmt(rows[j].ours)))
                .collect();
            let mut papers: Vec<String> = js.iter().map(|&j| fmt(rows[j].paper)).collect();
            papers.dedup();
            format!(
                "- **{}** ({}) is dearer than {} here, though the paper has it cheaper ({} \
                 against {}). {text}",
                a.label,
                fmt(a.ours),
                join_and(&dearer),
                fmt(a.paper),
                join_and(&papers)
            )
        })
        .collect()
}

/// `a`, `a and b`, `a, b and c`.
fn join_and(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// The rows cheapest first by `key`, rows with equal figures grouped:
/// `a and b (54 ns) < c (400 ns)`.
fn ordered(rows: &[Ranked], key: fn(&Ranked) -> f64, fmt: fn(f64) -> String) -> String {
    let mut sorted: Vec<&Ranked> = rows.iter().collect();
    sorted.sort_by(|a, b| key(a).total_cmp(&key(b)));
    let mut groups: Vec<(f64, Vec<String>)> = Vec::new();
    for r in sorted {
        match groups.last_mut() {
            Some((value, labels)) if *value == key(r) => labels.push(r.label.clone()),
            _ => groups.push((key(r), vec![r.label.clone()])),
        }
    }
    groups
        .iter()
        .map(|(value, labels)| format!("{} ({})", join_and(labels), fmt(*value)))
        .collect::<Vec<_>>()
        .join(" < ")
}

/// `paper: a < b < c; ours: ...` and a sentence for each place the orders differ.
fn order_section(out: &mut String, rows: &[Ranked], fmt: fn(f64) -> String, reason: Reason<'_>) {
    let _ = writeln!(
        out,
        "Cheapest first, the paper: {}.\n",
        ordered(rows, |r| r.paper, fmt)
    );
    let _ = writeln!(
        out,
        "Cheapest first, ours: {}.\n",
        ordered(rows, |r| r.ours, fmt)
    );
    let sentences = inversion_sentences(rows, fmt, reason);
    if sentences.is_empty() {
        let _ = writeln!(out, "Our order is the paper's.\n");
        return;
    }
    let _ = writeln!(out, "Where our order differs from the paper's, and why:\n");
    for sentence in sentences {
        let _ = writeln!(out, "{sentence}");
    }
    out.push('\n');
}

/// Nanoseconds as a person reads them.
pub fn fmt_ns(ns: f64) -> String {
    if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e4 {
        format!("{:.1} µs", ns / 1e3)
    } else if ns >= 1e3 {
        format!("{:.2} µs", ns / 1e3)
    } else if ns >= 10.0 {
        format!("{ns:.0} ns")
    } else {
        format!("{ns:.1} ns")
    }
}

/// Bytes as a person reads them (binary units).
pub fn fmt_bytes(bytes: f64) -> String {
    if bytes >= 1024.0 * 1024.0 {
        format!("{:.2} MiB", bytes / (1024.0 * 1024.0))
    } else if bytes >= 1024.0 {
        format!("{:.1} KiB", bytes / 1024.0)
    } else {
        format!("{bytes:.0} B")
    }
}

fn fmt_ratio(ratio: f64) -> String {
    if ratio >= 10.0 {
        format!("{ratio:.0}×")
    } else {
        format!("{ratio:.2}×")
    }
}

/// Everything one run measured.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub meta: Meta,
    pub estimates: Vec<Estimate>,
    pub memory: Vec<Sample>,
}

/// A row of a comparison table before it is written.
struct Line {
    key: &'static str,
    label: String,
    /// The paper's figure, as a range (equal ends for a single figure).
    paper: (f64, f64),
    /// How the paper's figure is shown.
    paper_text: String,
    /// The criterion id of our figure.
    id: String,
}

impl Line {
    fn new(
        key: &'static str,
        label: &str,
        paper: (f64, f64),
        paper_text: &str,
        id: String,
    ) -> Line {
        Line {
            key,
            label: label.to_owned(),
            paper,
            paper_text: paper_text.to_owned(),
            id,
        }
    }

    /// Ours over the paper's, a range of ratios for a range.
    fn ratio(&self, ours: f64) -> String {
        let (lo, hi) = self.paper;
        if lo == hi {
            fmt_ratio(ours / lo)
        } else {
            format!("{} – {}", fmt_ratio(ours / hi), fmt_ratio(ours / lo))
        }
    }
}

impl Report {
    fn estimate(&self, id: &str) -> Option<&Estimate> {
        self.estimates.iter().find(|e| e.id == id)
    }

    /// Our mean for `id`, formatted, or "not measured".
    fn figure(&self, id: &str) -> String {
        self.estimate(id)
            .map_or_else(|| "not measured".to_owned(), |e| fmt_ns(e.mean_ns))
    }

    /// Why `a` (cheaper in the paper) is dearer than `b` in this run, if known. Some
    /// reasons quote this run's reference points.
    fn reason(&self, a: &str, b: &str) -> Option<String> {
        match (a, b) {
            ("io_uring_batch64", "blocking") | ("io_uring_batch16", "blocking") => Some(format!(
                "Batching amortises the trap, which costs {trap} here (`getppid`), but not the \
                 request: each io_uring request costs {nop} even as a NOP and {batched} as an \
                 eventfd read, while `read(2)` does only about {inside} of work once inside the \
                 kernel ({blocking} in all). io_uring's per-request path (allocating the \
                 request, dispatching the opcode, looking up the file, posting the CQE) runs \
                 many more kernel functions than `read(2)`, and on this CPU calls and returns \
                 in the kernel pay for the mitigations listed above (retpolines, SRSO's safe \
                 RET), which we have not isolated. On the paper's machine the balance was the \
                 other way: its blocking read cost three times its io_uring read.",
                trap = self.figure(&ids::full(ids::BASELINE, ids::TRAP, None)),
                nop = self.figure(&ids::full(ids::BASELINE, ids::IO_URING_NOP, None)),
                batched = self.figure(
                    &Technique::IoUring {
                        setup: RingSetup::Default,
                        batch: 64
                    }
                    .full_id()
                ),
                blocking = self.figure(&Technique::Blocking.full_id()),
                inside = match (
                    self.estimate(&Technique::Blocking.full_id()),
                    self.estimate(&ids::full(ids::BASELINE, ids::TRAP, None)),
                ) {
                    (Some(read), Some(trap)) => fmt_ns((read.mean_ns - trap.mean_ns).max(0.0)),
                    _ => "(not measured)".to_owned(),
                },
            )),
            _ => known_reason(a, b).map(str::to_owned),
        }
    }

    fn sample(&self, kind: Kind) -> Option<&Sample> {
        self.memory.iter().find(|s| s.kind == kind.id())
    }

    /// The whole `micro.md`.
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        self.header(&mut out);
        self.table_one(&mut out);
        self.switching(&mut out);
        self.protocol(&mut out);
        self.memory_section(&mut out);
        self.notes(&mut out);
        self.all_results(&mut out);
        out
    }

    fn header(&self, out: &mut String) {
        let m = &self.meta;
        let _ = writeln!(out, "# Microbenchmarks, run {}\n", m.run_id);
        let _ = writeln!(
            out,
            "Our figures beside the papers': the io_uring paper's Table I (system-call \
             techniques, Xeon E5-4640 2.2 GHz, Linux 5.13) and the goroutine-switch article \
             (Go 1.22.1 on a Mac). Times are criterion's mean per operation with its 95% \
             confidence interval; ratios are ours divided by the paper's. The machines differ, \
             so the ratios say as much about the hardware as about the techniques; the order \
             of the techniques is what carries over.\n"
        );
        let _ = writeln!(
            out,
            "- commit `{}`, kernel {}, {} ({} CPUs), {}",
            m.commit, m.kernel, m.cpu, m.cores, m.rustc
        );
        if !m.mitigations.is_empty() {
            let _ = writeln!(
                out,
                "- CPU vulnerability mitigations: {}",
                m.mitigations.join("; ")
            );
        }
        let _ = writeln!(
            out,
            "- criterion warm-up {} s, measurement {} s per benchmark; memory: {} of each unit\n- command: `{}`\n",
            m.warm_up_s, m.measurement_s, m.memory_count, m.command
        );
    }

    /// Writes a comparison table of `lines`; returns the rows for an order comparison.
    fn comparison(&self, out: &mut String, lines: &[Line]) -> Vec<Ranked> {
        let _ = writeln!(out, "| operation | paper | ours | 95% CI | ours ÷ paper |");
        let _ = writeln!(out, "|---|---:|---:|---:|---:|");
        let mut ranked = Vec::new();
        for line in lines {
            match self.estimate(&line.id) {
                Some(e) => {
                    let _ = writeln!(
                        out,
                        "| {} | {} | {} | {} – {} | {} |",
                        line.label,
                        line.paper_text,
                        fmt_ns(e.mean_ns),
                        fmt_ns(e.low_ns),
                        fmt_ns(e.high_ns),
                        line.ratio(e.mean_ns)
                    );
                    ranked.push(Ranked {
                        key: line.key,
                        label: line.label.clone(),
                        // A range ranks by its middle.
                        paper: (line.paper.0 + line.paper.1) / 2.0,
                        ours: e.mean_ns,
                    });
                }
                None => {
                    let _ = writeln!(
                        out,
                        "| {} | {} | not measured in this run | | |",
                        line.label, line.paper_text
                    );
                }
            }
        }
        out.push('\n');
        ranked
    }

    fn table_one(&self, out: &mut String) {
        let _ = writeln!(out, "## System-call techniques (io_uring paper, Table I)\n");
        let _ = writeln!(
            out,
            "One read of an eventfd whose counter is already non-zero, so that the technique \
             and not a wait is timed. Each read is checked against the value written to its \
             fd.\n"
        );
        let single = |ns: f64| (ns, ns);
        let mut lines = vec![
            Line::new(
                "blocking",
                "blocking `read`",
                single(paper::BLOCKING_NS),
                &fmt_ns(paper::BLOCKING_NS),
                Technique::Blocking.full_id(),
            ),
            Line::new(
                "epoll",
                "`epoll_wait` + non-blocking `read`",
                single(paper::EPOLL_NS),
                &fmt_ns(paper::EPOLL_NS),
                Technique::Epoll.full_id(),
            ),
            Line::new(
                "linux_aio",
                "Linux AIO (`io_submit` + `io_getevents`)",
                single(paper::LINUX_AIO_NS),
                &fmt_ns(paper::LINUX_AIO_NS),
                Technique::LinuxAio.full_id(),
            ),
            Line::new(
                "posix_aio",
                "POSIX AIO (glibc: a thread pool)",
                single(paper::POSIX_AIO_NS),
                &fmt_ns(paper::POSIX_AIO_NS),
                Technique::PosixAio.full_id(),
            ),
        ];
        for batch in ids::IO_URING_BATCHES {
            for setup in RingSetup::ALL {
                let key = match (batch, setup) {
                    (1, RingSetup::Default) => "io_uring_batch1",
                    (64, RingSetup::Default) => "io_uring_batch64",
                    _ => "io_uring_other",
                };
                let per = if batch == 1 {
                    "1 read".to_owned()
                } else {
                    format!("{batch} reads")
                };
                lines.push(Line::new(
                    key,
                    &format!("io_uring, {per} per enter, {}", setup.label()),
                    single(paper::IO_URING_NS),
                    &fmt_ns(paper::IO_URING_NS),
                    Technique::IoUring { setup, batch }.full_id(),
                ));
            }
        }
        let ranked = self.comparison(out, &lines);
        // The order compares the paper's five techniques; io_uring appears twice (one and 64
        // reads per enter, default ring), since the paper does not say how it submitted.
        let ranked: Vec<Ranked> = ranked
            .into_iter()
            .filter(|r| r.key != "io_uring_other")
            .collect();
        let trap = self.figure(&ids::full(ids::BASELINE, ids::TRAP, None));
        let nop = self.figure(&ids::full(ids::BASELINE, ids::IO_URING_NOP, None));
        let fiber_nop = self.figure(&ids::full(ids::BASELINE, ids::FIBER_NOP, None));
        let _ = writeln!(
            out,
            "Two reference points, not in the paper: a trivial system call (`getppid`, one trap \
             and almost no work inside) costs {trap}; an io_uring request that does no I/O (a \
             NOP, 64 per enter) costs {nop}. A NOP that a fiber submits and waits for (one \
             enter each, plus the runtime's own work: the op, reaping its completion, waking \
             and resuming the fiber) costs {fiber_nop}.\n"
        );
        order_section(out, &ranked, fmt_ns, &|a, b| self.reason(a, b));
    }

    fn switching(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "## Switching and spawning (goroutine-switch article)\n"
        );
        let _ = writeln!(
            out,
            "A switch is one way: a round trip counts as two. Every switch is checked (the \
             other side answered, or the two sides strictly alternated), and every spawned \
             thread, task or fiber returns a value computed from its argument.\n"
        );
        let (lo, hi) = paper::THREAD_SWITCH_NS;
        let switch = (paper::GOROUTINE_SWITCH_NS, paper::GOROUTINE_SWITCH_NS);
        let create = (paper::GOROUTINE_CREATE_NS, paper::GOROUTINE_CREATE_NS);
        let switch_text = format!("goroutine switch {}", fmt_ns(paper::GOROUTINE_SWITCH_NS));
        let create_text = format!("goroutine create ~{}", fmt_ns(paper::GOROUTINE_CREATE_NS));
        let thread_text = format!("thread switch {}–{} µs", lo / 1e3, hi / 1e3);
        let lines = [
            Line::new(
                "coroutine_raw",
                "raw coroutine switch (corosensei, no scheduler)",
                switch,
                &switch_text,
                ids::full(ids::SWITCH, ids::COROUTINE_RAW, None),
            ),
            Line::new(
                "fiber_yield",
                "fiber to fiber through our scheduler (`yield_now`, 1 worker)",
                switch,
                &switch_text,
                ids::full(ids::SWITCH, ids::FIBER_YIELD, None),
            ),
            Line::new(
                "tokio_pingpong",
                "Tokio task to task (`Notify` hand-off, current-thread)",
                switch,
                &switch_text,
                ids::full(ids::SWITCH, ids::TOKIO_PINGPONG, None),
            ),
            Line::new(
                "spawn_fiber",
                "spawn + join a fiber (1 worker)",
                create,
                &create_text,
                ids::full(ids::SPAWN_JOIN, ids::SPAWN_FIBER, None),
            ),
            Line::new(
                "spawn_tokio_ct",
                "spawn + join a Tokio task (current-thread)",
                create,
                &create_text,
                ids::full(ids::SPAWN_JOIN, ids::SPAWN_TOKIO, Some(ids::CURRENT_THREAD)),
            ),
            Line::new(
                "spawn_tokio_mt",
                "spawn + join a Tokio task (multi-thread, 2 workers)",
                create,
                &create_text,
                ids::full(ids::SPAWN_JOIN, ids::SPAWN_TOKIO, Some(ids::MULTI_THREAD)),
            ),
            Line::new(
                "spawn_thread",
                "spawn + join an OS thread",
                create,
                &create_text,
                ids::full(ids::SPAWN_JOIN, ids::SPAWN_THREAD, None),
            ),
            Line::new(
                "handoff_same",
                "OS thread hand-off, same core (futex)",
                (lo, hi),
                &thread_text,
                ids::thread_handoff(Placement::SameCore),
            ),
            Line::new(
                "handoff_across",
                "OS thread hand-off, across cores (futex)",
                (lo, hi),
                &thread_text,
                ids::thread_handoff(Placement::AcrossCores),
            ),
        ];
        let ranked = self.comparison(out, &lines);
        let _ = writeln!(
            out,
            "For the order, the paper's thread switch counts as {} (the middle of its range), and \
             every switch and spawn row of ours is set against the goroutine figure of its \
             kind.\n",
            fmt_ns((lo + hi) / 2.0)
        );
        order_section(out, &ranked, fmt_ns, &|a, b| self.reason(a, b));
    }

    fn protocol(&self, out: &mut String) {
        let _ = writeln!(out, "## Protocol and storage\n");
        let _ = writeln!(
            out,
            "The papers give no figures for these; they are here so that a server's cost per \
             message can be set against what the shared code costs. Chat corpora are 1,000 \
             lines, mostly `SAY`/`MSG` with 16–200 bytes of text; the room log is a file in a \
             temporary directory with `--fsync never`; replay reads a 10,000-message room the \
             way `JOIN room 0` does, 64 KiB at a time.\n"
        );
        let _ = writeln!(
            out,
            "| operation | per item | items/s | MB/s | 95% CI of a pass |"
        );
        let _ = writeln!(out, "|---|---:|---:|---:|---:|");
        let rows = [
            (
                "parse a client line (`Command::parse`)",
                ids::full(ids::CHAT, ids::PARSE_COMMAND, None),
            ),
            (
                "encode a client line (`Command::encode`)",
                ids::full(ids::CHAT, ids::ENCODE_COMMAND, None),
            ),
            (
                "parse a server line (`Reply::parse`)",
                ids::full(ids::CHAT, ids::PARSE_REPLY, None),
            ),
            (
                "encode a server line (`Reply::encode`)",
                ids::full(ids::CHAT, ids::ENCODE_REPLY, None),
            ),
            (
                "append a 64-byte message (`RoomLog::append`)",
                ids::full(ids::ROOM_LOG, ids::APPEND, None),
            ),
            (
                "replay a message (`RoomLog::read_since`)",
                ids::full(ids::ROOM_LOG, ids::REPLAY, None),
            ),
        ];
        for (label, id) in rows {
            match self.estimate(&id) {
                Some(e) => {
                    let items = e.elements.unwrap_or(1).max(1) as f64;
                    let per = e.mean_ns / items;
                    let rate = items / (e.mean_ns / 1e9);
                    let mbs = e.bytes.map_or("".to_owned(), |b| {
                        format!("{:.0}", b as f64 / (e.mean_ns / 1e9) / 1e6)
                    });
                    let _ = writeln!(
                        out,
                        "| {label} | {} | {} | {mbs} | {} – {} |",
                        fmt_ns(per),
                        fmt_rate(rate),
                        fmt_ns(e.low_ns),
                        fmt_ns(e.high_ns)
                    );
                }
                None => {
                    let _ = writeln!(out, "| {label} | not measured in this run | | | |");
                }
            }
        }
        let _ = writeln!(
            out,
            "\nMB/s counts whole lines for the codecs and message text for the replay.\n"
        );
    }

    fn memory_section(&self, out: &mut String) {
        let _ = writeln!(out, "## Memory per parked unit\n");
        let _ = writeln!(
            out,
            "How much the process's resident set (RSS) and address space grow per unit, with \
             {} units parked at once, each kind measured in a fresh process. The paper's \
             figures are stack sizes: the goroutine's 2 KiB initial stack, and the 8 MiB a \
             thread's stack reserves; the ratio sets our RSS against the 2 KiB, and for \
             threads also our address space against the 8 MiB.\n",
            self.meta.memory_count
        );
        let _ = writeln!(
            out,
            "| parked unit | RSS per unit | address space per unit | paper | ours ÷ paper |"
        );
        let _ = writeln!(out, "|---|---:|---:|---:|---:|");
        let rows = [
            (Kind::Fiber, "fiber (our runtime, 64 KiB pooled stacks)"),
            (
                Kind::Coroutine,
                "raw corosensei coroutine (`DefaultStack`, 1 MiB)",
            ),
            (Kind::TokioTask, "idle Tokio task"),
            (Kind::Thread, "parked OS thread (std default: 2 MiB stack)"),
        ];
        let mut ranked = Vec::new();
        for (kind, label) in rows {
            let Some(s) = self.sample(kind) else {
                let _ = writeln!(out, "| {label} | not measured in this run | | | |");
                continue;
            };
            let rss = s.rss_per_unit();
            let vsz = s.vsz_per_unit();
            let (paper_text, ratio, paper) = match kind {
                Kind::Thread => (
                    "goroutine 2 KiB; thread stack 8 MiB".to_owned(),
                    format!(
                        "RSS {}; address space {}",
                        fmt_ratio(rss / paper::GOROUTINE_STACK),
                        fmt_ratio(vsz / paper::THREAD_STACK)
                    ),
                    paper::THREAD_STACK,
                ),
                _ => (
                    "goroutine 2 KiB".to_owned(),
                    fmt_ratio(rss / paper::GOROUTINE_STACK),
                    paper::GOROUTINE_STACK,
                ),
            };
            let _ = writeln!(
                out,
                "| {label} | {} | {} | {paper_text} | {ratio} |",
                fmt_bytes(rss),
                fmt_bytes(vsz)
            );
            ranked.push(Ranked {
                key: kind.id(),
                label: label.to_owned(),
                paper,
                ours: rss,
            });
        }
        out.push('\n');
        let _ = writeln!(
            out,
            "The paper's order is a goroutine below a thread; ours compares RSS per unit.\n"
        );
        let sentences = inversion_sentences(&ranked, fmt_bytes, &|a, b| {
            known_reason(a, b).map(str::to_owned)
        });
        if sentences.is_empty() {
            let _ = writeln!(
                out,
                "Our order is the paper's: every lightweight unit costs less resident memory \
                 than a parked thread.\n"
            );
        } else {
            for sentence in sentences {
                let _ = writeln!(out, "{sentence}");
            }
            out.push('\n');
        }
    }

    fn notes(&self, out: &mut String) {
        let _ = writeln!(out, "## How to read these\n");
        let notes = [
            "POSIX AIO is glibc's: `aio_read` queues the request for a pool of helper threads \
             inside the process, one of which performs the read (a `pread` that fails with \
             ESPIPE on an eventfd, then a `read`), and `aio_suspend` sleeps until it signals \
             completion. No kernel asynchronous I/O is involved, which is why it is the \
             slowest technique, in the paper and here.",
            "io_uring rows submit 1, 16 or 64 reads per `io_uring_enter` and wait for all of \
             them in the same call; the time is per read. The three ring setups are the \
             default, COOP_TASKRUN, and SINGLE_ISSUER with DEFER_TASKRUN.",
            "The thread hand-off is a futex ping-pong between two threads pinned to one CPU \
             (every hand-off is a context switch there) or to two (every hand-off wakes a \
             sleeping thread on the other CPU); one hand-off is half a round trip. The raw \
             coroutine switch is half a resume-and-suspend round trip.",
            "Across cores, a hand-off wakes a thread whose CPU has gone idle. In a VM an \
             idle virtual CPU halts into the hypervisor, and waking it is an interprocessor \
             interrupt through the host and a reschedule of the vCPU thread there, which is \
             why that row is so far above the paper's 3–5 µs on bare metal.",
            "The Tokio switch is a hand-off through `tokio::sync::Notify`, not \
             `tokio::task::yield_now`: Tokio defers a yielding task's wake-up until the \
             scheduler next parks and then wakes deferred tasks last-in first-out, so two \
             yielding tasks do not strictly alternate, and a yield is not reliably a switch.",
            "RSS does not include the kernel's own memory per thread (its task struct and \
             16 KiB kernel stack). A thread's address space includes its share of glibc's \
             per-thread malloc arenas, which are reserved, not resident.",
            "This is a 2-CPU VM shared with other work: single runs move by 10% or more. \
             Compare rows of one run with each other rather than across runs.",
        ];
        for note in notes {
            let _ = writeln!(out, "- {note}");
        }
        if self
            .estimate(&ids::full(ids::SWITCH, ids::FIBER_YIELD, None))
            .is_none()
            || self.sample(Kind::Fiber).is_none()
        {
            let _ = writeln!(
                out,
                "- Some fiber rows were not measured in this run: the fiber runtime could not \
                 start (the benchmark output says why, usually io_uring being unavailable)."
            );
        }
        out.push('\n');
    }

    fn all_results(&self, out: &mut String) {
        let _ = writeln!(out, "## Every result of this run\n");
        let _ = writeln!(out, "| criterion id | mean per iteration | 95% CI |");
        let _ = writeln!(out, "|---|---:|---:|");
        let by_id: BTreeMap<&str, &Estimate> =
            self.estimates.iter().map(|e| (e.id.as_str(), e)).collect();
        for (id, e) in by_id {
            let _ = writeln!(
                out,
                "| `{id}` | {} | {} – {} |",
                fmt_ns(e.mean_ns),
                fmt_ns(e.low_ns),
                fmt_ns(e.high_ns)
            );
        }
        for s in &self.memory {
            let _ = writeln!(
                out,
                "| `{}/{}` ({} parked) | RSS {} → {} | address space {} → {} |",
                ids::MEMORY,
                s.kind,
                s.count,
                fmt_bytes(s.rss_before as f64),
                fmt_bytes(s.rss_after as f64),
                fmt_bytes(s.vsz_before as f64),
                fmt_bytes(s.vsz_after as f64)
            );
        }
    }
}

fn fmt_rate(per_s: f64) -> String {
    if per_s >= 1e6 {
        format!("{:.1} M", per_s / 1e6)
    } else if per_s >= 1e3 {
        format!("{:.0} k", per_s / 1e3)
    } else {
        format!("{per_s:.0}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BENCHMARK: &str = r#"{"group_id":"room_log","function_id":"replay","value_str":null,"throughput":{"ElementsAndBytes":{"elements":10000,"bytes":1074250}},"full_id":"room_log/replay","directory_name":"room_log/replay","title":"room_log/replay"}"#;
    const ESTIMATES: &str = r#"{"mean":{"confidence_interval":{"confidence_level":0.95,"lower_bound":644746.1,"upper_bound":714563.2},"point_estimate":676732.6,"standard_error":17882.4},"median":{"confidence_interval":{"confidence_level":0.95,"lower_bound":1.0,"upper_bound":2.0},"point_estimate":1.5,"standard_error":0.1},"slope":null}"#;

    fn estimate(id: &str, mean_ns: f64) -> Estimate {
        Estimate {
            id: id.to_owned(),
            mean_ns,
            // Exact in binary, so the JSON round trip is exact too.
            low_ns: mean_ns * 0.5,
            high_ns: mean_ns * 2.0,
            elements: None,
            bytes: None,
        }
    }

    #[test]
    fn criterion_files_parse() {
        let e = parse_estimate(BENCHMARK, ESTIMATES).unwrap();
        assert_eq!(e.id, "room_log/replay");
        assert_eq!(
            (e.mean_ns, e.low_ns, e.high_ns),
            (676732.6, 644746.1, 714563.2)
        );
        assert_eq!((e.elements, e.bytes), (Some(10000), Some(1074250)));
        assert!(parse_estimate("{}", ESTIMATES).is_err());
        assert!(parse_estimate(BENCHMARK, "{\"mean\":{}}").is_err());
    }

    #[test]
    fn throughputs_of_every_kind() {
        let t = |json: &str| throughput(&serde_json::from_str(json).unwrap());
        assert_eq!(t(r#"{"Elements":7}"#), (Some(7), None));
        assert_eq!(t(r#"{"Bytes":9}"#), (None, Some(9)));
        assert_eq!(t(r#"{"BytesDecimal":9}"#), (None, Some(9)));
        assert_eq!(t(r#"{"Bits":64}"#), (None, Some(8)));
        assert_eq!(
            t(r#"{"ElementsAndBytes":{"elements":2,"bytes":3}}"#),
            (Some(2), Some(3))
        );
    }

    #[test]
    fn estimates_are_found_under_new_directories_only() {
        let dir = tempfile::tempdir().unwrap();
        for sub in ["room_log/replay/new", "room_log/replay/base"] {
            let path = dir.path().join(sub);
            std::fs::create_dir_all(&path).unwrap();
            std::fs::write(path.join("benchmark.json"), BENCHMARK).unwrap();
            std::fs::write(path.join("estimates.json"), ESTIMATES).unwrap();
        }
        let found = load_estimates(dir.path()).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].id, "room_log/replay");
        let broken = dir.path().join("x/new");
        std::fs::create_dir_all(&broken).unwrap();
        std::fs::write(broken.join("benchmark.json"), "not json").unwrap();
        std::fs::write(broken.join("estimates.json"), ESTIMATES).unwrap();
        assert!(load_estimates(dir.path()).is_err());
    }

    #[test]
    fn run_ids() {
        assert_eq!(run_id(0, "abc1234"), "19700101-000000-abc1234");
        // 2000-02-29 12:34:56 UTC, a leap day.
        assert_eq!(run_id(951_827_696, "c"), "20000229-123456-c");
        // 2026-11-21 00:17:00 UTC.
        assert_eq!(run_id(1_795_220_220, "e8ba0ef"), "20261121-001700-e8ba0ef");
    }

    #[test]
    fn formats() {
        assert_eq!(fmt_ns(4.25), "4.2 ns");
        assert_eq!(fmt_ns(955.0), "955 ns");
        assert_eq!(fmt_ns(1656.0), "1.66 µs");
        assert_eq!(fmt_ns(89_875.0), "89.9 µs");
        assert_eq!(fmt_ns(2_500_000.0), "2.50 ms");
        assert_eq!(fmt_bytes(463.0), "463 B");
        assert_eq!(fmt_bytes(4445.0), "4.3 KiB");
        assert_eq!(fmt_bytes(8.0 * 1024.0 * 1024.0), "8.00 MiB");
        assert_eq!(fmt_ratio(0.5), "0.50×");
        assert_eq!(fmt_ratio(22.4), "22×");
    }

    fn ranked(key: &'static str, paper: f64, ours: f64) -> Ranked {
        Ranked {
            key,
            label: key.to_owned(),
            paper,
            ours,
        }
    }

    #[test]
    fn inversions_are_pairs_in_the_wrong_order() {
        let rows = [
            ranked("io_uring_batch1", 306.0, 600.0),
            ranked("io_uring_batch64", 306.0, 100.0),
            ranked("blocking", 955.0, 500.0),
            ranked("epoll", 1656.0, 900.0),
        ];
        // batch1 is dearer than blocking here; the two io_uring rows tie in the paper.
        assert_eq!(inversions(&rows), vec![(0, 2)]);
        let same = [ranked("a", 1.0, 1.0), ranked("b", 2.0, 2.0)];
        assert!(inversions(&same).is_empty());
    }

    #[test]
    fn an_inversion_gets_its_reason_or_says_it_has_none() {
        let (a, b) = (ranked("x", 1.0, 105.0), ranked("y", 2.0, 100.0));
        assert_eq!(explanation(&a, &b, Some("Because.".into())), "Because.");
        assert!(explanation(&a, &b, None).contains("not significant"));
        let far = ranked("x", 1.0, 300.0);
        assert!(explanation(&far, &b, None).contains("No explanation"));
    }

    #[test]
    fn inversions_sharing_a_reason_make_one_sentence() {
        let rows = [
            ranked("spawn", 400.0, 9000.0),
            ranked("same", 4000.0, 6000.0),
            ranked("across", 4000.0, 8000.0),
        ];
        let sentences = inversion_sentences(&rows, fmt_ns, &|_, _| Some("Because.".into()));
        assert_eq!(
            sentences,
            vec![
                "- **spawn** (9.00 µs) is dearer than **same** (6.00 µs) and **across** \
                 (8.00 µs) here, though the paper has it cheaper (400 ns against 4.00 µs). \
                 Because."
                    .to_owned()
            ]
        );
        let split = inversion_sentences(&rows, fmt_ns, &|_, b| Some(format!("{b}.")));
        assert_eq!(split.len(), 2);
    }

    #[test]
    fn orders_group_equal_figures() {
        let rows = [
            ranked("c", 400.0, 3.0),
            ranked("a", 54.0, 1.0),
            ranked("b", 54.0, 2.0),
        ];
        assert_eq!(
            ordered(&rows, |r| r.paper, fmt_ns),
            "a and b (54 ns) < c (400 ns)"
        );
        assert_eq!(
            ordered(&rows, |r| r.ours, fmt_ns),
            "a (1.0 ns) < b (2.0 ns) < c (3.0 ns)"
        );
        assert_eq!(
            join_and(&["x".into(), "y".into(), "z".into()]),
            "x, y and z"
        );
    }

    fn sample_report() -> Report {
        let mut estimates: Vec<Estimate> = Technique::all()
            .iter()
            .map(|t| estimate(&t.full_id(), 500.0))
            .collect();
        // io_uring dearer than a blocking read, with one read per enter and with 64: two
        // inversions.
        for (id, ns) in [
            ("eventfd_read/io_uring_batch1/default", 700.0),
            ("eventfd_read/io_uring_batch64/default", 600.0),
        ] {
            estimates.iter_mut().find(|e| e.id == id).unwrap().mean_ns = ns;
        }
        estimates.push(estimate("baseline/getppid", 250.0));
        estimates.push(estimate("switch/coroutine_raw", 5.0));
        estimates.push(estimate("spawn_join/thread", 20_000.0));
        estimates.push(estimate("switch/thread_handoff/same_core", 3000.0));
        estimates.push(Estimate {
            elements: Some(1000),
            bytes: Some(100_000),
            ..estimate("chat/parse_command", 100_000.0)
        });
        Report {
            meta: Meta {
                run_id: "20261121-001700-e8ba0ef".into(),
                memory_count: 10_000,
                ..Meta::default()
            },
            estimates,
            memory: vec![Sample {
                kind: "coroutine".into(),
                count: 10_000,
                rss_before: 0,
                rss_after: 40_960_000,
                vsz_before: 0,
                vsz_after: 10_000 << 20,
            }],
        }
    }

    #[test]
    fn the_markdown_sets_ours_beside_the_papers() {
        let md = sample_report().markdown();
        assert!(md.starts_with("# Microbenchmarks, run 20261121-001700-e8ba0ef"));
        // Blocking read: 500 ns against 955 ns.
        assert!(
            md.contains("| blocking `read` | 955 ns | 500 ns | 250 ns – 1.00 µs | 0.52× |"),
            "{md}"
        );
        // The inversions and their reasons, one quoting this run's reference points.
        assert!(md.contains("same single system call"), "{md}");
        assert!(md.contains("which costs 250 ns here"), "{md}");
        assert!(md.contains("about 250 ns of work once inside"), "{md}");
        assert!(md.contains("costs not measured even as a NOP"), "{md}");
        // The thread switch is a range of ratios: 3 µs against 3–5 µs.
        assert!(md.contains("| 0.60× – 1.00× |"), "{md}");
        // An OS thread spawn dearer than a thread switch: explained.
        assert!(
            md.contains("costs more to create than to switch to"),
            "{md}"
        );
        // Per line: 100 µs per 1000 lines.
        assert!(
            md.contains("| parse a client line (`Command::parse`) | 100 ns | 10.0 M | 1000 |"),
            "{md}"
        );
        // Missing rows say so, and the fiber rows' absence is explained.
        assert!(md.contains("| spawn + join a fiber (1 worker) | goroutine create ~400 ns | not measured in this run"), "{md}");
        assert!(md.contains("fiber runtime could not start"), "{md}");
        // Memory: 4096 B of RSS per coroutine is 2× the goroutine's 2 KiB.
        assert!(
            md.contains("| 4.0 KiB | 1.00 MiB | goroutine 2 KiB | 2.00× |"),
            "{md}"
        );
        assert!(md.contains("`memory/coroutine` (10000 parked)"), "{md}");
    }

    #[test]
    fn the_report_round_trips_through_json() {
        let report = sample_report();
        let json = serde_json::to_string(&report).unwrap();
        assert_eq!(serde_json::from_str::<Report>(&json).unwrap(), report);
    }
}
