//! `report.md`: the header, "At a glance", each suite's section (chosen through [`Suite`], so a
//! suite without a section does not compile), every point's details, where the ranking
//! changes along the workloads' sweeps (`workloads`), the failures, and how it was measured.
//!
//! It may call the plan layer, the record layer (rows, meta, statistics) and the report
//! layer's `cells`, `figures` and `anatomy`; a section also the run layer's `series` (chat) or its
//! suite's peer's name (`kv`, `http`).

mod capacity;
mod chat;
mod claims;
mod conclusion;
mod emper;
mod equal_load;
mod glance;
mod http;
mod kv;
#[cfg(test)]
mod legends;
mod memory;
mod quick;
mod scaling;
mod workloads;

use std::fmt::Write as _;

pub(crate) use capacity::capacity_table;
pub(crate) use conclusion::{Headline, ranked};

use crate::plan::servers::Variant;
use crate::plan::suites::Suite;
use crate::record::meta::Meta;
use crate::record::row::{DISTURBED_PCT, Row, STEAL_PCT, find, points_of, servers};
use crate::report::cells::{fmt_bytes, fmt_num, fmt_pct, fmt_rate, fmt_us, mark, table, with_ci};
use crate::report::figures::PlotFile;

// ---------------------------------------------------------------------------------------------
// report.md

/// What the report is written from.
#[derive(Debug)]
pub(crate) struct Input<'a> {
    pub(crate) meta: &'a Meta,
    pub(crate) rows: &'a [Row],
    pub(crate) plots: &'a [PlotFile],
    pub(crate) variants: &'a [Variant],
    /// Default servers that could not run here, and why.
    pub(crate) skipped: &'a [String],
    pub(crate) suites: &'a [Suite],
    pub(crate) server_cpus: String,
    pub(crate) client_cpus: String,
    pub(crate) workers: usize,
    /// The capacity suite's findings (`capacity.json`), when it ran.
    pub(crate) capacity: &'a [crate::record::capacity::Capacity],
}

pub(crate) fn about<'a>(input: &'a Input<'_>, server: &str) -> &'a str {
    input
        .variants
        .iter()
        .find(|v| v.name == server)
        .map_or("", |v| v.about.as_str())
}

/// A part of `report.md`: it appends its text to the report.
type Part = fn(&mut String, &Input<'_>);

/// The parts of `report.md`, in order. A new part of the report is one more function here.
const PARTS: &[Part] = &[
    title,
    conclusion::part,
    header,
    glance::at_a_glance,
    suite_sections,
    workloads::conclusion,
    |out, input| failures(out, input.rows),
    method,
];

/// A suite's section, from the suite's rows (and the report's input, for what else it says).
pub(crate) type Section = fn(&mut String, &[Row], &Input<'_>);

/// What a suite's section says, in order, before its plots and its every point. The match
/// names every suite, so a suite without a section does not compile; a new table of a suite
/// is one more function in its list.
fn sections(suite: Suite) -> &'static [Section] {
    match suite {
        Suite::Quick => &[
            |out, rows, _| quick::section(out, rows),
            |out, rows, input| claims::section(out, rows, input.workers, input.meta.cores),
        ],
        Suite::EmperEcho => &[
            |out, rows, input| emper::tables(out, rows, input.workers),
            |out, rows, input| emper::beside_the_paper(out, rows, input.workers),
        ],
        Suite::ChatCpu => &[
            |out, rows, _| chat::cpu_tables(out, rows),
            |out, rows, _| chat::cpu_beside_the_paper(out, rows),
        ],
        Suite::ChatRoom => &[|out, rows, _| chat::room_section(out, rows)],
        Suite::Memory => &[|out, rows, _| memory::section(out, rows)],
        // Written by the `search` module; it has no loadgen rows.
        Suite::Search => &[],
        Suite::Kv => &[|out, rows, _| kv::section(out, rows)],
        Suite::Http => &[|out, rows, _| http::section(out, rows)],
        Suite::Scaling => &[|out, rows, input| {
            scaling::section(
                out,
                rows,
                &input.server_cpus,
                input.meta.cores,
                input.meta.settings["reference"].as_str(),
            );
        }],
        Suite::Capacity => &[|out, rows, input| capacity::section(out, rows, input.capacity)],
        Suite::Churn | Suite::Idle | Suite::Sizes | Suite::Bursts | Suite::Skew => {
            workloads::sections(suite)
        }
    }
}

/// Renders `report.md`: its [`PARTS`], one after the other.
pub(crate) fn render(input: &Input<'_>) -> String {
    let mut out = String::new();
    for part in PARTS {
        part(&mut out, input);
    }
    out
}

/// The title: the suites.
fn title(out: &mut String, input: &Input<'_>) {
    let names: Vec<&str> = input.suites.iter().map(|s| s.name()).collect();
    let _ = writeln!(out, "# ringside bench: {}\n", names.join(", "));
}

/// The machine and the run's settings.
fn header(out: &mut String, input: &Input<'_>) {
    let m = input.meta;
    let _ = writeln!(
        out,
        "Run `{}` of {} on {} ({} CPUs, Linux {}), commit `{}`{}. The server ran on CPU {} \
         with {} worker(s), the load generator on CPU {}. Load average (1, 5, 15 min) at the \
         start {}, at the end {}. Command: `{}`.{}\n",
        m.run_id,
        m.started,
        m.cpu_model.as_deref().unwrap_or("an unknown CPU"),
        m.cores,
        m.kernel.as_deref().unwrap_or("?"),
        m.commit.as_deref().map_or("?", |c| &c[..c.len().min(12)]),
        if m.dirty {
            " with uncommitted changes"
        } else {
            ""
        },
        input.server_cpus,
        input.workers,
        input.client_cpus,
        m.load_average_start.as_deref().unwrap_or("?"),
        m.load_average_end.as_deref().unwrap_or("?"),
        m.command,
        if m.interrupted {
            " **The run was interrupted (Ctrl-C): what is here is what was measured before.**"
        } else {
            ""
        },
    );
    if !m.resumed_with.is_empty() {
        let _ = writeln!(
            out,
            "**Completed by `--resume` from another commit or a changed tree**: {}; the              points measured then are that code's.\n",
            m.resumed_with.join("; ")
        );
    }
    if let (Some(topology), Some(why)) = (
        m.settings["placement"]["topology"].as_str(),
        m.settings["placement"]["why"].as_str(),
    ) {
        let _ = writeln!(out, "Placement: {topology}; {why}.\n");
    }

    let _ = writeln!(out, "CPU accounting: {}.\n", accounting_line(m));
    if let Some(f) = &m.cpu_frequency {
        let _ = writeln!(
            out,
            "CPU frequency: governor {}, turbo {}.\n",
            f.governor, f.turbo
        );
    }
    let quota = m.settings["server_cpu_quota"].as_f64();
    let _ = writeln!(
        out,
        "CPU vulnerability mitigations: {}. Time stolen by the hypervisor over the run: {}.{}\n",
        crate::record::meta::mitigations_line(&m.mitigations),
        m.steal_pct
            .map_or_else(|| "not read".into(), |s| format!("{s:.1}%")),
        quota.map_or_else(String::new, |q| format!(
            " **The server ran under a CPU quota of {q} CPU** (a cgroup, {} µs period): closed-loop \
             throughput is its capacity under that share, and latency includes the quota's \
             throttling (§).",
            m.settings["cpu_quota_period_us"].as_u64().unwrap_or(0)
        )),
    );
}

/// How the run counted the servers' CPU, from its `meta.json`; for a run from before it was
/// recorded, what was done then.
pub(crate) fn accounting_line(m: &crate::record::meta::Meta) -> String {
    m.accounting.clone().unwrap_or_else(|| {
        "not recorded (a run from before each server had its cgroup): the server's CPU was \
         summed from 500 ms samples of its live threads and interpolated to the window, which \
         loses what threads and processes that exit used; figures marked ≈"
            .into()
    })
}

/// Each suite's section of the run: its title, its [`sections`], its plots, and every point
/// folded away.
fn suite_sections(out: &mut String, input: &Input<'_>) {
    for &suite in input.suites {
        let rows: Vec<Row> = input
            .rows
            .iter()
            .filter(|r| r.suite == suite.name())
            .cloned()
            .collect();
        if rows.is_empty() {
            continue;
        }
        let _ = writeln!(out, "## {}: {}\n", suite.name(), suite.title());
        for section in sections(suite) {
            section(out, &rows, input);
        }
        crate::report::anatomy::of_suite(out, &rows, suite, &input.meta.settings);
        for p in input.plots.iter().filter(|p| p.suite == suite.name()) {
            let _ = writeln!(out, "![{}]({})\n", p.caption, p.file);
        }
        let _ = writeln!(
            out,
            "<details><summary>Every point of {} (all measurements)</summary>\n",
            suite.name()
        );
        details(out, &rows);
        let _ = writeln!(out, "</details>\n");
    }
}

/// A pivot table: a row per server, a column per point of a series.
pub(crate) fn pivot(
    out: &mut String,
    rows: &[Row],
    suite: &str,
    series: &str,
    corner: &str,
    cell: impl Fn(&Row) -> String,
) {
    let points = points_of(rows, suite, series);
    if points.is_empty() {
        return;
    }
    let mut head = vec![corner.to_string()];
    head.extend(points.iter().map(|p| p.1.clone()));
    let body: Vec<Vec<String>> = servers(rows)
        .into_iter()
        .map(|s| {
            let mut cells = vec![format!("**{s}**")];
            for p in &points {
                let r = find(rows, suite, &s, &p.0);
                cells.push(mark(r, r.map(&cell).unwrap_or_default()));
            }
            cells
        })
        .collect();
    let head: Vec<&str> = head.iter().map(String::as_str).collect();
    table(out, &head, &body);
}

pub(crate) fn details(out: &mut String, rows: &[Row]) {
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let m = |c: String| mark(Some(r), c);
            vec![
                r.server.clone(),
                r.label.clone(),
                m(with_ci(
                    r.throughput_per_sec,
                    r.throughput_per_sec_ci_low,
                    r.throughput_per_sec_ci_high,
                    fmt_rate,
                )),
                format!("{}", r.ok),
                m(fmt_us(r.p50_us)),
                m(with_ci(r.p99_us, r.p99_us_ci_low, r.p99_us_ci_high, fmt_us)),
                m(fmt_us(r.p99_99_us)),
                m(fmt_us(r.max_us)),
                fmt_pct(r.cpu_mean_pct),
                fmt_num(r.cpu_cv, 3),
                with_ci(
                    r.cpu_us_per_req,
                    r.cpu_us_per_req_ci_low,
                    r.cpu_us_per_req_ci_high,
                    fmt_us,
                ),
                fmt_us(r.cpu_us_per_req_min),
                format!(
                    "{} / {}",
                    fmt_us(r.user_us_per_req),
                    fmt_us(r.sys_us_per_req)
                ),
                format!(
                    "{} / {}",
                    fmt_num(r.vol_cs_per_req, 2),
                    fmt_num(r.invol_cs_per_req, 3)
                ),
                fmt_bytes(r.peak_mem_bytes),
                format!(
                    "{} / {} / {}",
                    fmt_bytes(r.mem_per_conn_bytes),
                    fmt_bytes(r.kernel_stack_per_conn_bytes),
                    fmt_bytes(r.socket_mem_per_conn_bytes)
                ),
                r.errors.to_string(),
                fmt_us(r.client_cpu_per_msg_us),
                fmt_pct(r.other_load_pct),
                fmt_pct(r.irq_softirq_pct),
                r.steal_pct.map_or("–".into(), |s| format!("{s:.1}%")),
                r.nr_throttled.map_or("–".into(), |n| {
                    format!("{n:.0}, {}", fmt_us(r.throttled_ms.map(|ms| ms * 1e3)))
                }),
            ]
        })
        .collect();
    table(
        out,
        &[
            "server",
            "point",
            "msgs/s [interval]",
            "repeats",
            "p50",
            "p99 [interval]",
            "p99.99",
            "max",
            "CPU",
            "CPU CV",
            "CPU/msg [interval]",
            "CPU/msg lowest",
            "CPU/msg user / sys",
            "ctx sw/msg vol / invol",
            "peak mem",
            "mem/conn user / kernel stacks / sockets",
            "errors",
            "client CPU/msg",
            "other load on server CPU",
            "softirq + irq on server CPU",
            "steal",
            "throttled periods, time",
        ],
        &body,
    );
}

pub(crate) fn failures(out: &mut String, rows: &[Row]) {
    let bad: Vec<&Row> = rows
        .iter()
        .filter(|r| r.failure.is_some() || !r.notes.is_empty())
        .collect();
    if bad.is_empty() {
        return;
    }
    let _ = writeln!(out, "## Failures and notes\n");
    for r in bad {
        if let Some(f) = &r.failure {
            let _ = writeln!(
                out,
                "- **{} / {} / {}** failed: {}",
                r.suite,
                r.server,
                r.label,
                f.replace('\n', " ⏎ ")
            );
        }
        for n in &r.notes {
            let _ = writeln!(
                out,
                "- {} / {} / {}: {}",
                r.suite,
                r.server,
                r.label,
                n.replace('\n', " ⏎ ")
            );
        }
    }
    out.push('\n');
}

pub(crate) fn method(out: &mut String, input: &Input<'_>) {
    let _ = writeln!(out, "## How this was measured\n");
    let _ = writeln!(
        out,
        "- Every point starts the server afresh on CPU {} (`--cpus`, and pinned by the harness before it runs), waits for its `READY` line, then runs `loadgen` pinned to CPU {}: connections first, then a warmup that is not recorded, then the measured window. Latency is recorded in HdrHistograms; percentiles come from the histograms of all repeats added together, never from averaged percentiles. In the open loop latency counts from when a message was due (coordinated omission included).",
        input.server_cpus, input.client_cpus
    );
    let _ = writeln!(
        out,
        "- The server's CPU is its cgroup's counter (a group per server start: v2 `cpu.stat` `usage_usec`, v1 `cpuacct.usage`), which counts every thread and process that ever ran in it, exited and reaped included, read by loadgen at the edges of its measured window (with client hosts, by the harness a warmup and a duration after the agents' go; with an outside client, as it starts and after it exits). Without a writable cgroup it is the process tree's `/proc/<pid>/stat` (utime + stime + cutime + cstime, 10 ms ticks) at the same edges; the header says which. CPU per message = CPU seconds in the window / messages in the window. Beside it, every 500 ms, the process tree is sampled for the CPU over time, context switches (every thread's `status`) and memory (PSS from `smaps_rollup`, so pages shared by forked processes count once). *softirq + irq on server CPU* is `/proc/stat`'s interrupt time on the server's CPUs over the window: on loopback mostly the peer's receive path, which the kernel runs on the sender's CPU."
    );
    let _ = writeln!(
        out,
        "- The coefficient of variation is σ/μ of the 500 ms CPU samples inside the window (sample standard deviation), as the C-versus-Go paper computed it from `top`."
    );
    let _ = writeln!(
        out,
        "- ‡ disturbed: the server's CPUs were busier than the server by more than {DISTURBED_PCT:.0}% of a CPU over the window (their busy time in `/proc/stat` less their interrupt and softirq time, which on loopback is mostly the benchmark's own traffic, less the server's own CPU time): something else ran there; or the hypervisor stole more than {STEAL_PCT:.0}% of their time in the median repeat (`steal` in `/proc/stat`; a little steal is left out of the server's own CPU time by the kernel). A ‡ point is judged in no column, nor by the gate of `compare`. † client-bound: loadgen's CPUs were over 90% busy, so the point measures the load generator as much as the server: its throughput is judged in no column, nor by the gate. § throttled: the server ran under `--server-cpu-quota` (a cgroup with a CPU quota every few milliseconds) and the quota stopped it in some periods; its latency includes those stops. ◊ off schedule: at an open-loop point the load generator did not send on its schedule (`schedule_ok` false in the summary), so the latency measured is the client's, not the server's: it is marked in every table and never judged against a reference."
    );
    let _ = writeln!(
        out,
        "- Repeats run in rounds (every server once, then every server again), so that a drift of the machine spreads over all servers; within a round the servers run in the order of a Williams design (a Latin square whose rows put each server in each position, and after each other server, equally often; for an odd count of servers the square and its mirror), its rows in turn round after round, so that what the first run of a round pays lands on no one server; which server plays which part of the square is drawn at each point from the run's seed, so that what the design leaves over (with 2 servers and 5 rounds one goes first 3 times) is not the same server's in every run. `meta.json` records the seed (`order_seed`; `--order-seed N` draws the same orders again) and the order of every round (`orders`), and `--resume` keeps it. A number is the median of the repeats; the interval in brackets (`_ci_low`, `_ci_high` in summary.csv) is the distribution-free order-statistic interval of the median, `[x(k), x(n+1−k)]` with the largest k whose coverage 1 − 2·P(Bin(n, ½) < k) stays at least 95%; with fewer than 6 repeats no such k exists, the interval is [min, max] and `ci_level` says its real coverage (3 repeats 75%, 4 87.5%, 5 93.8%). A bootstrap was not used: on 3 to 5 values it covers far less than it claims. Latency intervals come from each repeat's own percentile. *lowest* CPU per message is the least of the repeats: on a shared host noise only adds CPU time. A comparison of a server with its column's reference (named in advance: floor-epoll for echo, redis for kv, nginx for http, search-fiber for search, else `--reference`, by default the first of `--servers`) models log value = server + round over the rounds of the point (`per_round` in summary.json: throughput, CPU per message, and each round's p99 and p99.9), each server with its own variance from its residuals (S·G/(G−1) with (K−1)(G−1)/G degrees of freedom for G servers and K rounds, four servers or more; with two or three, the paired t on the two servers' log ratios, K−1 degrees of freedom, whatever the third's noise), the difference's degrees of freedom Satterthwaite's; Bonferroni's correction over the column holds its false verdicts to 5% as a family, and each ratio's interval is simultaneous (Bonferroni, t at 1 − 0.05/m). Where the rounds were not kept, or in `compare` (two runs share no round), Welch's t on the log repeats. A ratio is shown only where the adjusted p is below 0.05, else `~`. docs/VERDICTS.md gives the method, why, and its error rate and power on synthetic runs."
    );
    let _ = writeln!(
        out,
        "- Files: `summary.csv` and `summary.json` (a row per server and point), `meta.json` (machine, kernel, CPU vulnerability mitigations, CPU frequency governor and turbo, steal over the run, compilers, command), `<suite>/<server>/<point>.hist` (V2 HdrHistogram) and `.hgrm` (percentile table), loadgen's JSON and interval log, and each server's stderr, beside each point.\n"
    );
}

/// What a column of verdicts says and how far to trust it, for "how to read it" with
/// `repeats` rounds a point and `servers` servers in the column (docs/VERDICTS.md has the
/// method and its figures).
pub(crate) fn verdicts_note(repeats: usize, servers: usize) -> String {
    let tests = servers.saturating_sub(1);
    let power = if repeats < 3 {
        format!("with {repeats} repeats there is too little to test: run `--repeat 5`")
    } else {
        format!(
            "{tests} comparisons over {repeats} rounds; on synthetic runs of the default run's \
             shape a column of equal servers speaks falsely in about 2% of runs, and a server \
             10% dearer is found in 96%"
        )
    };
    format!(
        "*against* is each server's verdict against the reference named before the run (the \
         kernel's floor, redis, nginx, or `--reference`): server and round (the rounds of \
         the counterbalanced Williams order) modelled, Bonferroni's correction over the column, a ratio with its simultaneous interval only where it finds \
         a difference, else `~` ({power}; `docs/VERDICTS.md`). A flagged (‡, †) or failed \
         reference leaves its column untested, and one off its schedule (◊) its latency's."
    )
}

/// The reference of `suite`'s verdicts among `servers` (in run order): `--reference` as the
/// run recorded it, else the suite's own (`Suite::reference`).
pub(crate) fn reference(input: &Input<'_>, suite: Suite, servers: &[String]) -> Option<String> {
    suite.reference(servers, input.meta.settings["reference"].as_str())
}

/// The conclusion's paragraphs (report.html shows them under its title).
pub(crate) fn conclusion(input: &Input<'_>) -> Vec<String> {
    conclusion::paragraphs(input)
}

/// The end of a run on the terminal: each suite's conclusion and a line a server, ranked.
pub(crate) fn terminal(input: &Input<'_>) -> String {
    conclusion::terminal(input)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::row::tests::row;

    #[test]
    fn pivot_marks_client_bound_and_failed_points() {
        let mut rows = vec![
            row("a", "c1", 1.0, 1000.0),
            row("a", "c10", 10.0, 5000.0),
            row("b", "c1", 1.0, 900.0),
        ];
        rows[1].client_bound = true;
        let mut failed = row("b", "c10", 10.0, 0.0);
        failed.ok = 0;
        failed.throughput_per_sec = None;
        failed.failure = Some("the server did not start: boom".into());
        rows.push(failed);
        let mut out = String::new();
        pivot(&mut out, &rows, "quick", "closed", "echoes/s", |r| {
            fmt_rate(r.throughput_per_sec)
        });
        assert!(out.contains("| echoes/s | 1 conns | 10 conns |"), "{out}");
        assert!(out.contains("| **a** | 1.0k | 5.0k † |"), "{out}");
        assert!(out.contains("| **b** | 900 | failed |"), "{out}");
        let mut f = String::new();
        failures(&mut f, &rows);
        assert!(f.contains("boom"));
    }
}
