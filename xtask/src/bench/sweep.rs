//! The sweep of `cargo xtask bench`: the points of the run in their order (repeats rotated
//! over the servers, A B C A B C), each run by the run layer and recorded as it ends (the
//! summary rewritten after each point), then the plots and `report.md`.
//!
//! It may call every layer.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use indicatif::{ProgressBar, ProgressStyle};

use super::BenchArgs;
use crate::plan::placement::Placement;
use crate::plan::servers::{Inventory, Variant};
use crate::plan::suites::{Point, Suite, Workload};
use crate::record::meta::{self, Meta};
use crate::record::row::Row;
use crate::record::run_dir;
use crate::record::summary;
use crate::report::{cells, figures, markdown};
use crate::run::agents::Agents;
use crate::run::cgroup::Quota;
use crate::run::children;
use crate::run::cpus;
use crate::run::machine;
use crate::run::outcome::{Binaries, Failure, Measured, RunFiles};
use crate::run::outside::OutsideClient;
use crate::run::point;

/// The outside clients that `points` need and that are not installed.
pub(super) fn missing_clients(points: &[Point]) -> Vec<&'static dyn OutsideClient> {
    let mut names: Vec<&str> = Vec::new();
    for name in points.iter().filter_map(|p| p.workload.outside_client()) {
        if !names.contains(&name) {
            names.push(name);
        }
    }
    names
        .into_iter()
        .filter_map(crate::run::find_client)
        .filter(|c| c.missing().is_some())
        .collect()
}

/// The points of the run, suite after suite. The points of an outside client that is not
/// installed are left out (`bench::run` says so).
pub(super) fn points(args: &BenchArgs) -> Vec<Point> {
    let points: Vec<Point> = args
        .suites()
        .into_iter()
        .flat_map(|s| s.points(&args.overrides(args.workers())))
        .collect();
    let missing = missing_clients(&points);
    let remote = !args.client_hosts.is_empty();
    points
        .into_iter()
        .filter(|p| match p.workload.outside_client() {
            None => true,
            // An outside client runs here, not on the client hosts.
            Some(_) if remote => false,
            Some(name) => !missing.iter().any(|m| m.program() == name),
        })
        .collect()
}

/// One run of one point against one server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Run {
    /// Index into the points.
    pub(super) point: usize,
    /// 0-based repeat.
    pub(super) round: usize,
    /// Index into the servers.
    pub(super) server: usize,
}

/// The order of the runs: point after point, and at each point the servers in turn, round
/// after round (A B C A B C ...), so that a slow drift of the machine (heat, a neighbour's
/// build) spreads over all the servers instead of landing on the one whose repeats ran then.
/// A server sits out the points whose workload it does not serve (`serves`: srv-floor the
/// chat and --compute-us points, a peer the points of other protocols).
pub(super) fn schedule(
    points: &[Point],
    servers: &[Variant],
    serves: impl Fn(&Variant, Workload) -> bool,
    repeats: impl Fn(Suite) -> usize,
) -> Vec<Run> {
    let mut runs = Vec::new();
    for (point, p) in points.iter().enumerate() {
        for round in 0..repeats(p.suite) {
            for (server, _) in servers
                .iter()
                .enumerate()
                .filter(|(_, v)| serves(v, p.workload))
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

/// Runs the points of `args` against `variants` and writes the run directory.
pub(super) fn run(
    args: &BenchArgs,
    root: &Path,
    inv: &Inventory,
    variants: &[Variant],
    skipped: &[String],
    quota: Option<Quota>,
) -> Result<()> {
    let profile = args.cargo_profile.as_str();
    let mut meta = Meta::collect(root, inv.go_version.clone());
    let out = run_dir::path(args.out.as_deref(), root, &meta.run_id);
    let argv = if args.resuming {
        // The run keeps its identity, its start and its options; this is only more of it.
        let before = run_dir::read_meta(&out)?;
        meta.run_id = before.run_id;
        meta.started = before.started;
        meta.command = before.command;
        before.settings["argv"].clone()
    } else {
        run_dir::create(&out)?;
        serde_json::json!(super::own_argv())
    };
    let out = out.canonicalize().unwrap_or(out);
    let place = Placement {
        server_cpus: args.server_cpus.clone(),
        client_cpus: args.client_cpus.clone(),
        workers: args.workers(),
        listen: args
            .server_addr
            .clone()
            .unwrap_or_else(|| "127.0.0.1".to_string()),
    };
    meta.settings = serde_json::json!({
        "suites": args.suites().iter().map(|s| s.name()).collect::<Vec<_>>(),
        "servers": variants,
        "not_run": skipped,
        "server_cpus": place.server_cpus.to_string(),
        "client_cpus": place.client_cpus.to_string(),
        "workers": place.workers,
        "placement": args.placed,
        "client_hosts": args.client_hosts,
        "server_addr": args.server_addr,
        "repeat": args.suites().iter().map(|&s| (s.name(), args.repeats(s))).collect::<std::collections::BTreeMap<_, _>>(),
        "server_cpu_quota": args.server_cpu_quota,
        "cpu_quota_period_us": quota.as_ref().map(|q| q.period_us),
        "conns": args.conns.as_ref().map(|c| c.0.clone()),
        "duration": args.duration,
        "warmup": args.warmup,
        "rate": args.rate,
        "cargo_profile": profile,
        "quiet_wait": args.quiet_wait,
        "points": points(args),
        "argv": argv,
    });
    run_dir::write_meta(&out, &meta)?;
    if !args.resuming {
        // Before the first point: a run killed at once still leaves a directory the report
        // renders.
        summary::write_summary(&out, &[])?;
    }

    let steal_start = machine::machine_steal_ticks();
    // The harness samples /proc and waits; it does that beside loadgen, never on the
    // server's CPUs.
    cpus::pin_current_thread(&place.client_cpus)?;

    let points = points(args);
    let runs = schedule(
        &points,
        variants,
        |v, w| inv.serves(v, w),
        |s| args.repeats(s),
    );
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
    let agents = if args.client_hosts.is_empty() {
        None
    } else {
        let agents = Agents::new(
            args.client_hosts.clone(),
            args.ssh_config.clone(),
            args.client_loadgen.clone(),
            &loadgen,
            args.client_cpus_given.clone(),
        )?;
        agents.prepare()?;
        Some(Arc::new(agents))
    };
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
            // A run that ended before a `--resume` keeps its outcome and does not run again.
            let kept = if args.resuming {
                run_dir::load_outcome(&files)
            } else {
                None
            };
            let outcome = match kept {
                Some(outcome) => outcome,
                None => {
                    let mut busy_note = None;
                    if args.quiet_wait > 0.0 {
                        let cpus: Vec<usize> = place
                            .server_cpus
                            .as_slice()
                            .iter()
                            .chain(place.client_cpus.as_slice())
                            .copied()
                            .collect();
                        if !machine::wait_until_quiet(
                            &cpus,
                            0.9,
                            Duration::from_secs_f64(args.quiet_wait),
                        ) {
                            busy_note = Some(format!(
                                "the CPUs were still busy with something else after waiting {} s",
                                args.quiet_wait
                            ));
                        }
                    }
                    let mut progress = |secs: f64| {
                        bar.set_position((base + (secs * 1000.0).min(est)) as u64);
                    };
                    let outcome = point::run_point(
                        point,
                        variant,
                        &Binaries {
                            server: bins(variant),
                            loadgen: loadgen.clone(),
                            agents: agents.clone(),
                        },
                        &place,
                        quota.as_ref(),
                        &files,
                        &out,
                        &mut progress,
                    )
                    .map(|mut m| {
                        m.notes.extend(busy_note);
                        m
                    });
                    run_dir::save_outcome(&files, &outcome)?;
                    outcome
                }
            };
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
        // The point's last round is done: a row per server that serves it (one that sits it
        // out, as srv-floor does a chat or http point, has no row rather than a failed one).
        if runs.get(i + 1).is_none_or(|n| n.point != run.point) {
            for (s, v) in variants.iter().enumerate() {
                if !inv.serves(v, point.workload) {
                    continue;
                }
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
    if let Some(agents) = &agents {
        agents.stop();
    }

    meta.finished = Some(meta::iso8601(std::time::SystemTime::now()));
    meta.interrupted = children::interrupted();
    meta.load_average_end = meta::load_average();
    meta.steal_pct = meta::steal_since(steal_start);
    run_dir::write_meta(&out, &meta)?;
    summary::write_summary(&out, &rows)?;
    let plots = figures::draw_plots(&out, &rows, place.workers)?;
    let suites = args.suites();
    let input = markdown::Input {
        meta: &meta,
        rows: &rows,
        plots: &plots,
        variants,
        skipped,
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
    if suites.contains(&Suite::Scaling) {
        println!("{}", super::scaling_stop(&place.server_cpus));
    }
    println!("Report: {}", out.join("report.md").display());
    if meta.interrupted {
        bail!("stopped before the end; the report has what was measured");
    }
    super::exit::all_ran(&rows, &out)
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
