//! `cargo xtask bench`: build the servers and loadgen, run the suites' points against every
//! server, and write `results/<run-id>/` with the summary, histograms, plots and report.

use std::collections::HashSet;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};

use crate::cells;
use crate::cgroup::Quota;
use crate::children;
use crate::cpus::{self, CpuList};
use crate::figures;
use crate::markdown;
use crate::meta::{self, Meta};
use crate::procfs;
use crate::redis;
use crate::runner::{self, Failure, Measured, Placement, RunFiles};
use crate::servers::{Inventory, Variant};
use crate::suites::{self, Overrides, Point, Suite};
use crate::summary::{self, Row};

/// A list of connection counts, `1,10,100`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConnList(pub(crate) Vec<usize>);

impl FromStr for ConnList {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        suites::parse_conns(s).map(ConnList)
    }
}

fn positive(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!("`{s}` is not a positive number")),
    }
}

fn non_negative(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!("`{s}` is not a number of seconds (0 or more)")),
    }
}

/// Options of `cargo xtask bench`.
#[derive(Debug, Clone, Args)]
pub(crate) struct BenchArgs {
    /// The suites to run, comma-separated: quick (the default, about 6 minutes), emper-echo,
    /// chat-cpu, chat-room, memory, kv, search (the file-content search, alone). `--list`
    /// describes them.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "quick")]
    pub(crate) suite: Vec<Suite>,

    /// The servers, comma-separated: a name plus runtime flags, as in
    /// `threads,tokio-per-core,fiber+completer`; `+name=LABEL` names a variant, so that one
    /// server can run twice (`reactor,reactor+name=again`: an A/A run, where every verdict
    /// must be `~`). Default: one of each server this checkout can build, and for kv also
    /// fiber+kv-owner, go+kv-owner and `redis` (redis-server, when installed). `--list`
    /// names them.
    #[arg(long, value_name = "LIST")]
    pub(crate) servers: Option<String>,

    /// Connection counts to sweep, replacing the suite's (chat-room: connections dealt into
    /// rooms; quick: the open-loop point uses the largest).
    #[arg(long, value_name = "LIST")]
    pub(crate) conns: Option<ConnList>,

    /// Seconds of each point's measured window, replacing the suite's (quick 0.75 at equal load
    /// and 0.4 closed loop, emper-echo 10, chat-cpu 60, chat-room 10, memory 3, kv 1.5). For emper-echo it also replaces the paper's
    /// 2500 echoes per connection.
    #[arg(long, value_name = "SECS", value_parser = positive)]
    pub(crate) duration: Option<f64>,

    /// Seconds of load before each measured window, not recorded (default 1; quick 0.35 at
    /// equal load and 0.2 closed loop, kv 0.5, chat-cpu 2; at least 1 per 2500 connections).
    #[arg(long, value_name = "SECS", value_parser = non_negative)]
    pub(crate) warmup: Option<f64>,

    /// Runs of each point, rotated over the servers (A B C A B C ...) so that a drift of the
    /// machine spreads over all of them [default: quick 5, search 15, the other suites 1].
    /// The summary gives medians with an interval, latency from the runs' histograms added
    /// together, and the report a Mann-Whitney test of each server against the cheapest: a
    /// ratio where p < 0.05, else `~`. The default 5 can show a ratio (least p 0.008; about a
    /// 3% chance of a false one per cell) for a difference larger than the repeats' spread;
    /// 3 never can (least p 0.10); more buy smaller differences and narrower intervals
    /// (at 5 the interval is [min, max], 94% coverage; from 6 an order-statistic 95% one).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100))]
    pub(crate) repeat: Option<u32>,

    /// Run the server in a cgroup with this share of one CPU (0.5: half a CPU, enforced every
    /// 2 ms), so that one loadgen core outruns it and closed-loop points measure the server's
    /// capacity under that share. Needs a writable cgroup CPU controller (v1 or v2; root).
    #[arg(long, value_name = "FRACTION", value_parser = positive)]
    pub(crate) server_cpu_quota: Option<f64>,

    /// CPUs the server runs on.
    #[arg(long, default_value = "1", value_name = "LIST")]
    pub(crate) server_cpus: CpuList,

    /// CPUs loadgen runs on (one loadgen thread per CPU).
    #[arg(long, default_value = "0", value_name = "LIST")]
    pub(crate) client_cpus: CpuList,

    /// Server worker threads [default: one per server CPU].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub(crate) workers: Option<u32>,

    /// quick: echoes/s of the open-loop point (default 20000); chat-room: MSG deliveries/s
    /// (default 5000).
    #[arg(long, value_name = "PER_SEC", value_parser = positive)]
    pub(crate) rate: Option<f64>,

    /// The run directory [default: results/<date>-<time>-<commit>].
    #[arg(long, value_name = "DIR")]
    pub(crate) out: Option<PathBuf>,

    /// Describe the suites and the servers, and exit.
    #[arg(long)]
    pub(crate) list: bool,

    /// Before each point, wait up to this many seconds for the server's and loadgen's CPUs to
    /// be idle (90%), so that a point does not measure another program too; 0 does not wait.
    #[arg(long, default_value_t = 10.0, value_name = "SECS", value_parser = non_negative)]
    pub(crate) quiet_wait: f64,

    /// Use the binaries already built instead of building them.
    #[arg(long)]
    pub(crate) no_build: bool,

    /// search: the directory tree to search [default: the generated corpus, written once
    /// under target/search-corpus/].
    #[arg(long, value_name = "DIR")]
    pub(crate) tree: Option<PathBuf>,

    /// search: the generated corpus when no --tree is given: full (about 40,000 files,
    /// 300 MB) or small (2,000 files, 16 MB, for a quick look).
    #[arg(long, value_enum, default_value = "full")]
    pub(crate) corpus: crate::search_suite::CorpusSize,

    /// search: the byte string to count in a --tree (the generated corpus plants its own,
    /// io_uring).
    #[arg(long, default_value = "io_uring", value_name = "STR")]
    pub(crate) needle: String,

    /// search: drop the page cache before every run (root only) instead of one untimed
    /// warm-up pass.
    #[arg(long)]
    pub(crate) cold: bool,

    /// The cargo profile to build and run (release; dev for quick tests of the harness).
    #[arg(long, default_value = "release", hide = true)]
    pub(crate) cargo_profile: String,
}

impl BenchArgs {
    fn overrides(&self, workers: usize) -> Overrides {
        Overrides {
            conns: self.conns.as_ref().map(|c| c.0.clone()),
            duration: self.duration,
            warmup: self.warmup,
            rate: self.rate,
            workers,
        }
    }

    fn workers(&self) -> usize {
        self.workers.map_or(self.server_cpus.len(), |w| w as usize)
    }

    /// Runs of each point of `suite`.
    pub(crate) fn repeats(&self, suite: Suite) -> usize {
        self.repeat.unwrap_or_else(|| suite.default_repeats()) as usize
    }

    /// The suites in the order given, without repeats.
    fn suites(&self) -> Vec<Suite> {
        let mut out: Vec<Suite> = Vec::new();
        for s in &self.suite {
            if !out.contains(s) {
                out.push(*s);
            }
        }
        out
    }
}

/// The points of the run, suite after suite. kv's redis-benchmark points are left out where
/// redis-benchmark is not installed (`run` says so).
fn points(args: &BenchArgs) -> Vec<Point> {
    let no_benchmark = args.suites().contains(&Suite::Kv) && redis::missing_benchmark().is_some();
    args.suites()
        .into_iter()
        .flat_map(|s| s.points(&args.overrides(args.workers())))
        .filter(|p| {
            !(no_benchmark
                && matches!(
                    p.workload,
                    suites::Workload::Kv {
                        driver: suites::KvDriver::RedisBenchmark,
                        ..
                    }
                ))
        })
        .collect()
}

/// One run of one point against one server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Run {
    /// Index into the points.
    point: usize,
    /// 0-based repeat.
    round: usize,
    /// Index into the servers.
    server: usize,
}

/// The order of the runs: point after point, and at each point the servers in turn, round
/// after round (A B C A B C ...), so that a slow drift of the machine (heat, a neighbour's
/// build) spreads over all the servers instead of landing on the one whose repeats ran then.
/// An echo-only server (srv-floor) sits out the chat and --compute-us points.
fn schedule(points: &[Point], servers: &[Variant], repeats: impl Fn(Suite) -> usize) -> Vec<Run> {
    let mut runs = Vec::new();
    for (point, p) in points.iter().enumerate() {
        for round in 0..repeats(p.suite) {
            for (server, _) in servers
                .iter()
                .enumerate()
                .filter(|(_, v)| v.serves(p.workload))
            {
                runs.push(Run {
                    point,
                    round,
                    server,
                });
            }
        }
    }
    runs
}

fn list(args: &BenchArgs, inv: &Inventory) {
    let (defaults, _) = inv.defaults();
    println!("Suites (--suite, comma-separated):\n");
    for s in Suite::ALL {
        if s == Suite::Search {
            println!(
                "  {:<11} {} (alone: every search-* program and ripgrep, {} rotated runs each; \
                 --tree, --corpus, --needle, --cold)",
                s.name(),
                s.title(),
                args.repeats(s)
            );
            continue;
        }
        let points = s.points(&args.overrides(args.workers()));
        let secs: f64 = points.iter().map(Point::estimate_secs).sum::<f64>()
            * args.repeats(s) as f64
            * defaults.len().max(1) as f64;
        println!(
            "  {:<11} {} ({} points a server, about {:.0} min with the {} default servers)",
            s.name(),
            s.title(),
            points.len(),
            secs / 60.0,
            defaults.len()
        );
        println!("              --rate: {}", s.rate_meaning());
    }
    println!("\nServers (--servers NAME[+FLAG[=VALUE]]..., e.g. fiber+completer):\n");
    for name in inv.names() {
        match inv.parse(&name) {
            Ok(v) => {
                let state = inv
                    .missing(&v.binary)
                    .map_or_else(|| "buildable".to_string(), |why| format!("not here: {why}"));
                let cmd = std::iter::once(v.binary.clone())
                    .chain(v.flags.clone())
                    .collect::<Vec<_>>()
                    .join(" ");
                println!("  {name:<16} {cmd:<32} {} [{state}]", v.about);
            }
            Err(e) => println!("  {name:<16} {e}"),
        }
    }
    match &inv.go_version {
        Some(v) => println!("\ngo: {v}"),
        None => println!("\ngo: not on PATH, so srv-go is not built"),
    }
}

/// Runs `cargo xtask bench`.
pub(crate) fn run(args: BenchArgs) -> Result<()> {
    // Before anything else, so that a user who cannot drop caches learns it at once.
    if args.cold {
        crate::search_suite::check_cold()?;
    }
    let root = crate::project_root();
    let inv = Inventory::discover(&root)?;
    if args.list {
        list(&args, &inv);
        return Ok(());
    }
    // The search suite runs programs, not servers under loadgen: its own module runs it.
    if args.suites().contains(&Suite::Search) {
        if args.suites().len() > 1 {
            return Err(anyhow::Error::new(crate::Usage(
                "--suite search runs alone; run the other suites in another `cargo xtask bench`"
                    .into(),
            )));
        }
        if args.needle.is_empty() {
            return Err(anyhow::Error::new(crate::Usage(
                "--needle must not be empty".into(),
            )));
        }
        return crate::search_suite::run(&args, &root, &inv);
    }
    // Before the build: a quota this machine cannot give is a usage error, found at once.
    let quota = args
        .server_cpu_quota
        .map(|f| {
            Quota::new(f).map_err(|why| {
                anyhow::Error::new(crate::Usage(format!(
                    "--server-cpu-quota {f}: {why}; run without --server-cpu-quota, or where \
                     cgroups are writable"
                )))
            })
        })
        .transpose()?;
    children::install_interrupt_handler()?;
    cpus::check_allowed(&args.server_cpus, "--server-cpus")?;
    cpus::check_allowed(&args.client_cpus, "--client-cpus")?;
    if args.server_cpus.overlaps(&args.client_cpus) {
        eprintln!(
            "warning: the server (CPUs {}) and loadgen (CPUs {}) share a CPU: they will \
             measure each other",
            args.server_cpus, args.client_cpus
        );
    }

    let (mut variants, mut skipped) = match &args.servers {
        Some(list) => (inv.select(list)?, Vec::new()),
        None => inv.defaults(),
    };
    if args.suites().contains(&Suite::Kv) {
        // kv measures every server beside redis-server itself, driven by redis-benchmark
        // too; what is missing is said, and the rest runs.
        if args.servers.is_none() {
            // The article's design beside the shared store: one owner of the map, fed by
            // every connection over a channel (kv only; see `Variant::serves`).
            for owner in ["fiber+kv-owner", "go+kv-owner"] {
                let base = owner.split('+').next().unwrap_or_default();
                if variants.iter().any(|v| v.name == base) {
                    variants.push(inv.parse(owner)?);
                }
            }
            match redis::missing_server() {
                None => variants.push(redis::variant()),
                Some(why) => skipped.push(format!("redis: {why}")),
            }
        }
        if let Some(why) = redis::missing_benchmark() {
            skipped.push(format!(
                "kv's redis-benchmark points: {why}; the loadgen points run"
            ));
        }
    }
    for s in &skipped {
        eprintln!("not running {s}");
    }
    if variants.is_empty() {
        bail!("no server can be built in this checkout");
    }
    let profile = args.cargo_profile.as_str();
    if args.no_build {
        for bin in variants
            .iter()
            .map(|v| v.binary.as_str())
            .filter(|b| *b != redis::SERVER)
            .chain(["loadgen"])
        {
            let path = inv.binary_path(bin, profile);
            if !path.is_file() {
                bail!("{} is not built; run without --no-build", path.display());
            }
        }
    } else {
        inv.build(&root, &variants, profile)?;
    }
    if children::interrupted() {
        bail!("interrupted during the build");
    }
    inv.check_flags(&variants, profile)?;

    let mut meta = Meta::collect(&root, inv.go_version.clone());
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| root.join("results").join(&meta.run_id));
    if out.is_dir() && std::fs::read_dir(&out).is_ok_and(|mut d| d.next().is_some()) {
        bail!(
            "{} exists and is not empty; choose another --out",
            out.display()
        );
    }
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let out = out.canonicalize().unwrap_or(out);
    let place = Placement {
        server_cpus: args.server_cpus.clone(),
        client_cpus: args.client_cpus.clone(),
        workers: args.workers(),
        quota,
    };
    meta.settings = serde_json::json!({
        "suites": args.suites().iter().map(|s| s.name()).collect::<Vec<_>>(),
        "servers": variants,
        "not_run": skipped,
        "server_cpus": place.server_cpus.to_string(),
        "client_cpus": place.client_cpus.to_string(),
        "workers": place.workers,
        "repeat": args.suites().iter().map(|&s| (s.name(), args.repeats(s))).collect::<std::collections::BTreeMap<_, _>>(),
        "server_cpu_quota": args.server_cpu_quota,
        "cpu_quota_period_us": place.quota.as_ref().map(|q| q.period_us),
        "conns": args.conns.as_ref().map(|c| c.0.clone()),
        "duration": args.duration,
        "warmup": args.warmup,
        "rate": args.rate,
        "cargo_profile": profile,
        "quiet_wait": args.quiet_wait,
        "points": points(&args),
    });
    write_meta(&out, &meta)?;

    let steal_start = procfs::machine_steal_ticks();
    // The harness samples /proc and waits; it does that beside loadgen, never on the
    // server's CPUs.
    cpus::pin_current_thread(&place.client_cpus)?;

    let points = points(&args);
    let runs = schedule(&points, &variants, |s| args.repeats(s));
    if runs.is_empty() {
        bail!("no server of --servers serves these suites (srv-floor serves plain echo only)");
    }
    let est_ms = |r: &Run| points[r.point].estimate_secs() * 1000.0;
    let total_ms: f64 = runs.iter().map(est_ms).sum();
    eprintln!(
        "{} points × {} server(s), {} runs in rotation, about {:.0} min; results in {}",
        points.len(),
        variants.len(),
        runs.len(),
        total_ms / 60_000.0,
        out.display()
    );
    let bar = ProgressBar::new(total_ms as u64);
    bar.set_style(
        ProgressStyle::with_template(
            "{elapsed_precise} [{wide_bar}] {percent:>3}% ETA {eta} {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    bar.enable_steady_tick(Duration::from_millis(500));

    let bins = |v: &Variant| inv.binary_path(&v.binary, profile);
    let loadgen = inv.binary_path("loadgen", profile);
    let mut rows: Vec<Row> = Vec::new();
    let mut no_start: HashSet<(Suite, usize)> = HashSet::new();
    let mut outcomes: Vec<Vec<Result<Measured, Failure>>> = vec![Vec::new(); variants.len()];
    let mut done_ms = 0.0f64;
    for (i, run) in runs.iter().enumerate() {
        if children::interrupted() {
            break;
        }
        let point = &points[run.point];
        let variant = &variants[run.server];
        let repeat = args.repeats(point.suite);
        let est = est_ms(run);
        let dir = out.join(point.suite.name()).join(&variant.name);
        if no_start.contains(&(point.suite, run.server)) {
            if outcomes[run.server].is_empty() {
                outcomes[run.server].push(Err(Failure::Start(
                    "skipped: the server did not start at an earlier point of this suite".into(),
                )));
            }
        } else if !matches!(outcomes[run.server].last(), Some(Err(Failure::Start(_)))) {
            bar.set_message(format!(
                "{} · {} · {}{}",
                point.suite.name(),
                variant.name,
                point.label,
                if repeat > 1 {
                    format!(" (round {}/{repeat})", run.round + 1)
                } else {
                    String::new()
                }
            ));
            let files = RunFiles {
                dir: dir.clone(),
                stem: if repeat > 1 {
                    format!("{}.r{}", point.id, run.round + 1)
                } else {
                    point.id.clone()
                },
            };
            let base = done_ms;
            let mut busy_note = None;
            if args.quiet_wait > 0.0 {
                let cpus: Vec<usize> = place
                    .server_cpus
                    .as_slice()
                    .iter()
                    .chain(place.client_cpus.as_slice())
                    .copied()
                    .collect();
                if !procfs::wait_until_quiet(&cpus, 0.9, Duration::from_secs_f64(args.quiet_wait)) {
                    busy_note = Some(format!(
                        "the CPUs were still busy with something else after waiting {} s",
                        args.quiet_wait
                    ));
                }
            }
            let mut progress = |secs: f64| {
                bar.set_position((base + (secs * 1000.0).min(est)) as u64);
            };
            let outcome = runner::run_point(
                point,
                variant,
                &runner::Binaries {
                    server: bins(variant),
                    loadgen: loadgen.clone(),
                },
                &place,
                &files,
                &out,
                &mut progress,
            )
            .map(|mut m| {
                m.notes.extend(busy_note);
                m
            });
            if matches!(outcome, Err(Failure::Start(_))) {
                no_start.insert((point.suite, run.server));
            }
            let interrupted = matches!(outcome, Err(Failure::Interrupted));
            outcomes[run.server].push(outcome);
            if interrupted {
                break;
            }
        }
        done_ms += est;
        bar.set_position(done_ms as u64);
        // The point's last round is done: a row per server.
        if runs.get(i + 1).is_none_or(|n| n.point != run.point) {
            for (s, v) in variants.iter().enumerate() {
                let dir = out.join(point.suite.name()).join(&v.name);
                let _ = std::fs::create_dir_all(&dir);
                let row = summary::aggregate(point, v, &outcomes[s], &out, &dir);
                outcomes[s].clear();
                // A hidden bar (no terminal) prints nothing, so the line goes to stderr itself.
                if bar.is_hidden() {
                    eprintln!("{}", point_line(&row));
                } else {
                    bar.println(point_line(&row));
                }
                rows.push(row);
            }
            summary::write_summary(&out, &rows)?;
        }
    }
    bar.finish_and_clear();

    meta.finished = Some(meta::iso8601(std::time::SystemTime::now()));
    meta.interrupted = children::interrupted();
    meta.load_average_end = meta::load_average();
    meta.steal_pct = meta::steal_since(steal_start);
    write_meta(&out, &meta)?;
    summary::write_summary(&out, &rows)?;
    let plots = figures::draw_plots(&out, &rows, place.workers)?;
    let suites = args.suites();
    let input = markdown::Input {
        meta: &meta,
        rows: &rows,
        plots: &plots,
        variants: &variants,
        skipped: &skipped,
        suites: &suites,
        server_cpus: place.server_cpus.to_string(),
        client_cpus: place.client_cpus.to_string(),
        workers: place.workers,
    };
    std::fs::write(out.join("report.md"), markdown::render(&input)).context("writing report.md")?;

    println!();
    if suites.contains(&Suite::Quick) {
        print!("{}", markdown::glance(&input));
    }
    let others: Vec<Row> = rows
        .iter()
        .filter(|r| r.suite != "quick")
        .cloned()
        .collect();
    if !others.is_empty() {
        print!("{}", markdown::terminal_table(&others));
    }
    println!("Report: {}", out.join("report.md").display());
    if meta.interrupted {
        bail!("stopped before the end; the report has what was measured");
    }
    Ok(())
}

fn write_meta(out: &std::path::Path, meta: &Meta) -> Result<()> {
    let text = serde_json::to_string_pretty(meta)?;
    std::fs::write(out.join("meta.json"), text).context("writing meta.json")
}

/// The line printed above the progress bar when a point is done.
fn point_line(r: &Row) -> String {
    if let Some(f) = &r.failure {
        let first = f.lines().next().unwrap_or_default();
        return format!(
            "{:<10} {:<18} {:<24} FAILED: {first}",
            r.suite, r.server, r.label
        );
    }
    format!(
        "{:<10} {:<18} {:<24} {:>8} msg/s  p99 {:>9}  CPU {:>5}  {:>9}/msg  {:>9}/conn{}{}{}{}",
        r.suite,
        r.server,
        r.label,
        cells::fmt_rate(r.throughput_per_sec),
        cells::fmt_us(r.p99_us),
        r.cpu_mean_pct.map_or("–".into(), |c| format!("{c:.0}%")),
        cells::fmt_us(r.cpu_us_per_req),
        cells::fmt_bytes(r.mem_per_conn_bytes),
        if r.errors > 0 {
            format!("  {} errors", r.errors)
        } else {
            String::new()
        },
        if r.client_bound {
            "  † client-bound"
        } else {
            ""
        },
        if r.disturbed() { "  ‡ disturbed" } else { "" },
        if r.throttled() { "  § throttled" } else { "" },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        bench: BenchArgs,
    }

    fn parse(args: &[&str]) -> Result<BenchArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("bench").chain(args.iter().copied())).map(|c| c.bench)
    }

    #[test]
    fn search_options() {
        let a = parse(&[
            "--suite", "search", "--corpus", "small", "--cold", "--tree", "/t",
        ])
        .unwrap();
        assert_eq!(a.suites(), [Suite::Search]);
        assert_eq!(a.corpus, crate::search_suite::CorpusSize::Small);
        assert!(a.cold);
        assert_eq!(a.tree.as_deref(), Some(std::path::Path::new("/t")));
        assert_eq!(a.needle, "io_uring");
        assert!(Suite::Search.points(&a.overrides(1)).is_empty());
        assert!(parse(&["--corpus", "huge"]).is_err());
    }

    #[test]
    fn defaults() {
        let a = parse(&[]).unwrap();
        assert_eq!(a.suites(), [Suite::Quick]);
        assert_eq!(a.server_cpus, CpuList::one(1));
        assert_eq!(a.client_cpus, CpuList::one(0));
        assert_eq!(a.workers(), 1);
        assert_eq!(a.repeat, None);
        assert_eq!(a.repeats(Suite::Quick), 5);
        assert_eq!(a.repeats(Suite::Memory), 1);
        assert_eq!(a.repeats(Suite::Search), 15);
        assert_eq!(a.server_cpu_quota, None);
        assert_eq!(a.cargo_profile, "release");
        assert_eq!(a.quiet_wait, 10.0);
    }

    #[test]
    fn every_option() {
        let a = parse(&[
            "--suite",
            "emper-echo,chat-cpu,emper-echo",
            "--servers",
            "threads,fiber+completer",
            "--conns",
            "1,10",
            "--duration",
            "2.5",
            "--warmup",
            "0",
            "--repeat",
            "3",
            "--server-cpus",
            "2-3",
            "--client-cpus",
            "0,1",
            "--workers",
            "4",
            "--rate",
            "1000",
            "--out",
            "/tmp/x",
            "--no-build",
            "--quiet-wait",
            "0",
            "--server-cpu-quota",
            "0.5",
        ])
        .unwrap();
        assert_eq!(a.suites(), [Suite::EmperEcho, Suite::ChatCpu]);
        assert_eq!(a.servers.as_deref(), Some("threads,fiber+completer"));
        assert_eq!(a.conns, Some(ConnList(vec![1, 10])));
        assert_eq!(
            (a.duration, a.warmup, a.rate),
            (Some(2.5), Some(0.0), Some(1000.0))
        );
        assert_eq!(a.repeat, Some(3));
        assert_eq!(a.repeats(Suite::Memory), 3);
        assert_eq!(a.server_cpu_quota, Some(0.5));
        assert_eq!(a.server_cpus.to_string(), "2,3");
        assert_eq!(a.workers(), 4);
        assert!(a.no_build && !a.list);
        assert_eq!(a.quiet_wait, 0.0);
        assert_eq!(a.overrides(a.workers()).conns, Some(vec![1, 10]));
    }

    #[test]
    fn bad_options_are_refused_with_the_valid_values() {
        let e = parse(&["--suite", "fast"]).unwrap_err().to_string();
        assert!(
            e.contains("quick") && e.contains("emper-echo") && e.contains("memory"),
            "{e}"
        );
        assert!(parse(&["--duration", "0"]).is_err());
        assert!(parse(&["--duration", "-1"]).is_err());
        assert!(parse(&["--warmup", "x"]).is_err());
        assert!(parse(&["--repeat", "0"]).is_err());
        assert!(parse(&["--conns", "0,1"]).is_err());
        assert!(parse(&["--server-cpus", "1-0"]).is_err());
        assert!(parse(&["--rate", "0"]).is_err());
        assert!(parse(&["--workers", "0"]).is_err());
        assert!(parse(&["--server-cpu-quota", "0"]).is_err());
    }

    #[test]
    fn repeats_rotate_over_the_servers() {
        let a = parse(&["--conns", "1,10", "--repeat", "2"]).unwrap();
        let pts = points(&a);
        let v = |n: &str| Variant {
            name: n.into(),
            binary: format!("srv-{n}"),
            flags: vec![],
            about: String::new(),
        };
        let runs = schedule(&pts, &[v("a"), v("b"), v("c")], |s| a.repeats(s));
        let order: Vec<(usize, usize, usize)> =
            runs.iter().map(|r| (r.point, r.round, r.server)).collect();
        // A B C A B C at the first point, then the next point.
        assert_eq!(
            order[..7],
            [
                (0, 0, 0),
                (0, 0, 1),
                (0, 0, 2),
                (0, 1, 0),
                (0, 1, 1),
                (0, 1, 2),
                (1, 0, 0)
            ]
        );
        assert_eq!(runs.len(), pts.len() * 2 * 3);
        assert_eq!(pts.last().map(|p| p.id.as_str()), Some("open-c10-r50000"));
    }

    #[test]
    fn an_echo_only_server_sits_out_the_chat_points() {
        let a = parse(&["--suite", "quick,chat-cpu", "--conns", "1", "--repeat", "1"]).unwrap();
        let pts = points(&a);
        let floor = Variant {
            name: "floor-epoll".into(),
            binary: "srv-floor".into(),
            flags: vec!["--api".into(), "epoll".into()],
            about: String::new(),
        };
        let runs = schedule(&pts, &[floor], |s| a.repeats(s));
        assert!(!runs.is_empty());
        assert!(
            runs.iter()
                .all(|r| pts[r.point].suite != crate::suites::Suite::ChatCpu),
            "srv-floor was scheduled for a chat point"
        );
    }
}
