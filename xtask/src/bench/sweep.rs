//! The sweep of `cargo xtask bench`, from the [`Plan`]: the record started, the points of
//! the run in their order (repeats in rounds, every server once a round, in the order of a
//! Williams design: `plan::order`), each run by the run layer and recorded as it ends (the
//! summary rewritten after each point), the record finished, then the plots and `report.md`.
//!
//! It may call every layer.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Result, bail};
use indicatif::{ProgressBar, ProgressStyle};

use super::plan::Plan;
use crate::plan::order::{self, PointOrder};
use crate::plan::servers::{Inventory, Variant};
use crate::plan::suites::Suite;
use crate::record::meta::{self, Meta};
use crate::record::row::Row;
use crate::record::run_dir;
use crate::record::summary;
use crate::report::stdout;
use crate::report::{cells, figures, markdown};
use crate::run::agents::Agents;
use crate::run::cgroup::Accounting;
use crate::run::children;
use crate::run::cpus;
use crate::run::machine;
use crate::run::outcome::{Binaries, Failure, Measured, RunFiles};
use crate::run::point;

mod anatomy;
pub(crate) use anatomy::Counters;

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

/// The order of the runs: point after point, and at each point round after round, every
/// server once a round, so that a slow drift of the machine (heat, a neighbour's build)
/// spreads over all the servers instead of landing on the one whose repeats ran then; within
/// a round, in the order `orders` gives (`plan::order`, aligned with the points), so that no
/// position of the round falls to one server. A server sits out the points whose workload it
/// does not serve: `orders` does not name it there (srv-floor at the chat and --compute-us
/// points, a peer at the points of other protocols).
pub(super) fn schedule(orders: &[PointOrder], servers: &[Variant]) -> Vec<Run> {
    let mut runs = Vec::new();
    for (point, o) in orders.iter().enumerate() {
        for (round, names) in o.rounds.iter().enumerate() {
            for name in names {
                if let Some(server) = servers.iter().position(|v| &v.name == name) {
                    runs.push(Run {
                        point,
                        round,
                        server,
                    });
                }
            }
        }
    }
    runs
}

/// Runs the plan's points and writes the run directory: the record started, the runs in
/// their order ([`schedule`]) by a [`Sweep`], the record finished, and the report.
pub(super) fn run(
    plan: &Plan,
    root: &Path,
    inv: &Inventory,
    accounting: &Accounting,
    counters: Counters,
) -> Result<()> {
    let (out, mut meta) = start_record(plan, root, inv, accounting)?;
    let steal_start = machine::machine_steal_ticks();
    // The harness samples /proc and waits beside loadgen, never on the server's CPUs; it
    // keeps still there while loadgen measures (`run::point`).
    cpus::pin_current_thread(&plan.place.client_cpus)?;
    let runs = schedule(&meta.orders, &plan.servers);
    if runs.is_empty() {
        bail!("no server of --servers serves these suites (srv-floor serves plain echo only)");
    }
    let mut sweep = Sweep::new(plan, inv, &out, accounting, &runs)?;
    sweep.run_all(&runs)?;
    let mut rows = sweep.finish();
    if counters == Counters::Pass && !children::interrupted() {
        anatomy::pass(plan, inv, &out, accounting, &meta.orders, &mut rows)?;
    }
    meta.finished = Some(meta::iso8601(std::time::SystemTime::now()));
    meta.interrupted = children::interrupted();
    meta.load_average_end = meta::load_average();
    meta.steal_pct = meta::steal_since(steal_start);
    run_dir::write_meta(&out, &meta)?;
    summary::write_summary(&out, &rows)?;
    report(plan, &out, &meta, &rows)
}

/// The run directory made (or, resuming, found) and its `meta.json` written with the plan's
/// settings; an empty summary too, so that a run killed at once still leaves a directory the
/// report renders.
pub(super) fn start_record(
    plan: &Plan,
    root: &Path,
    inv: &Inventory,
    accounting: &Accounting,
) -> Result<(PathBuf, Meta)> {
    let mut meta = Meta::collect(root, inv.go_version.clone());
    let out = run_dir::path(plan.out.as_deref(), root, &meta.run_id);
    let mut recorded = None;
    let mut seed = Some(plan.order_seed);
    let argv = if plan.resuming {
        // The run keeps its identity, its start and its options; this is only more of it.
        let before = run_dir::read_meta(&out)?;
        meta = meta.resuming(&before);
        recorded = Some(before.orders);
        seed = before.order_seed;
        before.settings["argv"].clone()
    } else {
        run_dir::create(&out)?;
        serde_json::json!(super::resume::own_argv())
    };
    let out = out.canonicalize().unwrap_or(out);
    meta.settings = super::settings::settings(plan, accounting, argv);
    meta.accounting = Some(accounting.describe());
    let planned = order::plan(
        &plan.points,
        &plan.servers,
        |v, w| inv.serves(v, w),
        |s| plan.repeats(s),
        seed.unwrap_or(plan.order_seed),
    );
    // A resumed run's rounds keep the order they began with, as its meta.json recorded it.
    meta.orders = match &recorded {
        Some(r) => order::keep(r, planned, &plan.servers),
        None => planned,
    };
    meta.order_seed = seed;
    run_dir::write_meta(&out, &meta)?;
    if !plan.resuming {
        summary::write_summary(&out, &[])?;
    }
    Ok((out, meta))
}

/// The sweep under way: the runs' outcomes gathered until each point's last round, then
/// turned into rows; the progress bar; what a run needs besides its point and server.
struct Sweep<'a> {
    plan: &'a Plan,
    inv: &'a Inventory,
    out: &'a Path,
    accounting: &'a Accounting,
    bar: ProgressBar,
    loadgen: PathBuf,
    agents: Option<Arc<Agents>>,
    /// The estimated milliseconds of each point, and of the runs done.
    est_ms: Vec<f64>,
    done_ms: f64,
    /// The outcomes of each server at the point under way.
    outcomes: Vec<Vec<Result<Measured, Failure>>>,
    /// The suites at whose points a server did not start: it sits out their other points.
    no_start: HashSet<(Suite, usize)>,
    rows: Vec<Row>,
}

impl<'a> Sweep<'a> {
    /// Says what is ahead, and prepares the progress bar and the client hosts.
    fn new(
        plan: &'a Plan,
        inv: &'a Inventory,
        out: &'a Path,
        accounting: &'a Accounting,
        runs: &[Run],
    ) -> Result<Sweep<'a>> {
        let est_ms: Vec<f64> = plan
            .points
            .iter()
            .map(|p| p.estimate_secs() * 1000.0)
            .collect();
        let total_ms: f64 = runs.iter().map(|r| est_ms[r.point]).sum();
        eprintln!(
            "{} points × {} server(s), {} runs in counterbalanced rounds, about {:.0} min; results in {}",
            plan.points.len(),
            plan.servers.len(),
            runs.len(),
            total_ms / 60_000.0,
            out.display()
        );
        let loadgen = inv.binary_path("loadgen", &plan.profile);
        let agents = client_agents(plan, &loadgen)?;
        Ok(Sweep {
            plan,
            inv,
            out,
            accounting,
            bar: progress_bar(total_ms),
            loadgen,
            agents,
            est_ms,
            done_ms: 0.0,
            outcomes: vec![Vec::new(); plan.servers.len()],
            no_start: HashSet::new(),
            rows: Vec::new(),
        })
    }

    /// Every run in turn, each point's rows recorded after its last round; stops at an
    /// interruption.
    fn run_all(&mut self, runs: &[Run]) -> Result<()> {
        for (i, run) in runs.iter().enumerate() {
            if children::interrupted() {
                break;
            }
            if self.one(run)? == Flow::Stop {
                break;
            }
            self.done_ms += self.est_ms[run.point];
            self.bar.set_position(self.done_ms as u64);
            if runs.get(i + 1).is_none_or(|n| n.point != run.point) {
                self.point_done(run.point)?;
            }
        }
        Ok(())
    }

    /// One run: skipped where its server did not start earlier in the suite, kept where a
    /// resumed run has its outcome, else run now.
    fn one(&mut self, run: &Run) -> Result<Flow> {
        let point = &self.plan.points[run.point];
        let outcomes = &mut self.outcomes[run.server];
        if self.no_start.contains(&(point.suite, run.server)) {
            if outcomes.is_empty() {
                outcomes.push(Err(Failure::Start(
                    "skipped: the server did not start at an earlier point of this suite".into(),
                )));
            }
            return Ok(Flow::Go);
        }
        if matches!(outcomes.last(), Some(Err(Failure::Start(_)))) {
            return Ok(Flow::Go);
        }
        let outcome = self.outcome(run)?;
        if matches!(outcome, Err(Failure::Start(_))) {
            self.no_start.insert((point.suite, run.server));
        }
        let flow = if matches!(outcome, Err(Failure::Interrupted)) {
            Flow::Stop
        } else {
            Flow::Go
        };
        self.outcomes[run.server].push(outcome);
        Ok(flow)
    }

    /// The outcome of `run`: the one a resumed run kept, or a new one, saved.
    fn outcome(&mut self, run: &Run) -> Result<Result<Measured, Failure>> {
        let variant = &self.plan.servers[run.server];
        let point = &*self
            .plan
            .shares
            .as_run(&self.plan.points[run.point], &variant.name);
        let repeat = self.plan.repeats(point.suite);
        let round = if repeat > 1 {
            format!(" (round {}/{repeat})", run.round + 1)
        } else {
            String::new()
        };
        self.bar.set_message(format!(
            "{} · {} · {}{round}",
            point.suite.name(),
            variant.name,
            point.label,
        ));
        let files = RunFiles {
            dir: self.out.join(point.suite.name()).join(&variant.name),
            stem: if repeat > 1 {
                format!("{}.r{}", point.id, run.round + 1)
            } else {
                point.id.clone()
            },
        };
        // A run that ended before a `--resume` keeps its outcome and does not run again.
        if self.plan.resuming
            && let Some(kept) = run_dir::load_outcome(&files)
        {
            return Ok(kept);
        }
        let busy_note = wait_until_quiet(self.plan);
        let (base, est) = (self.done_ms, self.est_ms[run.point]);
        let bar = &self.bar;
        let mut progress = |secs: f64| {
            bar.set_position((base + (secs * 1000.0).min(est)) as u64);
        };
        let outcome = point::run_point(
            point,
            variant,
            &Binaries {
                server: self.inv.binary_path(&variant.binary, &self.plan.profile),
                loadgen: self.loadgen.clone(),
                agents: self.agents.clone(),
            },
            &self.plan.place,
            self.accounting,
            &files,
            self.out,
            &mut progress,
        )
        .map(|mut m| {
            m.notes.extend(busy_note);
            m
        });
        run_dir::save_outcome(&files, &outcome)?;
        Ok(outcome)
    }

    /// The point's last round is done: a row per server that serves it (one that sits it
    /// out, as srv-floor does a chat or http point, has no row rather than a failed one),
    /// and the summary written again.
    fn point_done(&mut self, index: usize) -> Result<()> {
        let planned = &self.plan.points[index];
        for (s, v) in self.plan.servers.iter().enumerate() {
            if !self.inv.serves(v, planned.workload) {
                continue;
            }
            // The row of the point as this server ran it (its own rate, `bench::shares`).
            let point = &*self.plan.shares.as_run(planned, &v.name);
            let dir = self.out.join(point.suite.name()).join(&v.name);
            let _ = std::fs::create_dir_all(&dir);
            let row = summary::aggregate(point, v, &self.outcomes[s], self.out, &dir);
            self.outcomes[s].clear();
            // A hidden bar (no terminal) prints nothing, so the line goes to stderr itself.
            if self.bar.is_hidden() {
                eprintln!("{}", point_line(&row));
            } else {
                self.bar.println(point_line(&row));
            }
            self.rows.push(row);
        }
        summary::write_summary(self.out, &self.rows)
    }

    /// The rows, the bar cleared and the client hosts' agents stopped.
    fn finish(self) -> Vec<Row> {
        self.bar.finish_and_clear();
        if let Some(agents) = &self.agents {
            agents.stop();
        }
        self.rows
    }
}

/// The client hosts' agents, started and given loadgen, when the load comes from them
/// (`--client-hosts`).
pub(super) fn client_agents(plan: &Plan, loadgen: &Path) -> Result<Option<Arc<Agents>>> {
    let Some(r) = &plan.remote else {
        return Ok(None);
    };
    let agents = Agents::new(
        r.hosts.clone(),
        r.ssh_config.clone(),
        r.loadgen.clone(),
        loadgen,
        r.cpus.clone(),
    )?;
    agents.prepare()?;
    Ok(Some(Arc::new(agents)))
}

/// Waits for the server's and loadgen's CPUs to be quiet (`--quiet-wait`); a note for the
/// point when they were not.
pub(super) fn wait_until_quiet(plan: &Plan) -> Option<String> {
    let wait = plan.quiet_wait;
    if wait <= 0.0 {
        return None;
    }
    let place = &plan.place;
    let cpus: Vec<usize> = place
        .server_cpus
        .as_slice()
        .iter()
        .chain(place.client_cpus.as_slice())
        .copied()
        .collect();
    (!machine::wait_until_quiet(&cpus, 0.9, Duration::from_secs_f64(wait)))
        .then(|| format!("the CPUs were still busy with something else after waiting {wait} s"))
}

/// Whether the sweep goes on after a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    Go,
    Stop,
}

/// A progress bar over the estimated milliseconds of the sweep.
fn progress_bar(total_ms: f64) -> ProgressBar {
    let bar = ProgressBar::new(total_ms as u64);
    bar.set_style(
        ProgressStyle::with_template(
            "{elapsed_precise} [{wide_bar}] {percent:>3}% ETA {eta} {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    // No ticker thread: it would redraw on loadgen's CPU while loadgen measures
    // (`run::point` keeps the harness still there); the bar moves as the sweep tells it.
    bar
}

/// The plots and `report.md` of the run, and the run's tables on the terminal.
pub(super) fn report(plan: &Plan, out: &Path, meta: &Meta, rows: &[Row]) -> Result<()> {
    let place = &plan.place;
    let plots = figures::draw_plots(out, rows, place.workers)?;
    let capacity = crate::record::capacity::read(out)?;
    let input = markdown::Input {
        meta,
        rows,
        plots: &plots,
        variants: &plan.servers,
        skipped: &plan.not_run,
        suites: &plan.suites,
        server_cpus: place.server_cpus.to_string(),
        client_cpus: place.client_cpus.to_string(),
        workers: place.workers,
        capacity: &capacity,
    };
    crate::report::write(out, &input)?;

    stdout::line("");
    stdout::put(markdown::terminal(&input));
    if plan.suites.contains(&Suite::Scaling) {
        stdout::line(super::scaling_stop(&place.server_cpus));
    }
    stdout::line(format_args!(
        "Report: {} (and report.html)",
        out.join("report.md").display()
    ));
    // A run among the others in results/ joins their index.
    let root = crate::plan::project_root();
    let results = root.join("results").canonicalize().ok();
    if results.is_some() && out.parent() == results.as_deref() {
        match crate::report::index::write(&root) {
            Ok(index) => stdout::line(format_args!("Index of every run: {}", index.display())),
            Err(e) => eprintln!("results/index.md not written: {e:#}"),
        }
    }
    if let Some(name) = plan.given["save_baseline"].as_str() {
        let file = run_dir::save_baseline(&root, name, out)?;
        stdout::line(format_args!(
            "Baseline `{name}`: {} ({})",
            out.display(),
            file.display()
        ));
    }
    if meta.interrupted {
        bail!("stopped before the end; the report has what was measured");
    }
    super::exit::all_ran(rows, &plan.refused, out)
}

/// The line printed above the progress bar when a point is done.
pub(super) fn point_line(r: &Row) -> String {
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
