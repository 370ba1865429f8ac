//! `cargo xtask bench --suite capacity`, which runs alone, from the [`Plan`]: for each
//! workload of the suite and each server that serves it, the search of `plan::capacity` (a
//! sweep of rates, a bisection, repeats at the rate found), each probe a run of the point at
//! one rate (`run::point`), judged against the objective and recorded as it ends (a row of
//! `summary.csv` per probe); then `capacity.csv`, ranked against each workload's reference
//! server, and the report with the latency-vs-throughput curves.
//!
//! `--resume` walks each search again: a probe whose outcome the run kept is not run again,
//! and since the search asks for the same rates given the same outcomes, it carries on at the
//! first probe that has none.
//!
//! It may call every layer.

use std::path::Path;

use anyhow::Result;
use indicatif::{ProgressBar, ProgressStyle};

use super::plan::Plan;
use super::sweep;
use crate::plan::capacity::{
    Found, Next, Phase, Probe, Search, Slo, client_explains_miss, loadgen_percentile, sustained,
};
use crate::plan::servers::{Inventory, Variant};
use crate::plan::suites::{Arrivals, Load, Point, Stop, Suite, capacity::reference};
use crate::record::capacity::{self, Capacity};
use crate::record::row::Row;
use crate::record::{meta, run_dir, summary};
use crate::run::cgroup::Accounting;
use crate::run::outcome::{Binaries, Failure, RunFiles};
use crate::run::{children, cpus, machine, point};

/// The objective when `--slo` gives none.
pub(super) fn default_slo() -> Slo {
    Slo {
        percentile: "p99".into(),
        limit_us: 5000.0,
    }
}

/// No search makes more probes than this (the default search needs about fifteen).
const MAX_PROBES: usize = 60;

/// Runs the capacity suite (`bench::run` hands over to it).
pub(super) fn run(
    plan: &Plan,
    root: &Path,
    inv: &Inventory,
    accounting: &Accounting,
    slo: &Slo,
) -> Result<()> {
    let (out, mut meta) = sweep::start_record(plan, root, inv, accounting)?;
    let steal_start = machine::machine_steal_ticks();
    // As the sweep does: the harness samples and waits beside loadgen, never on the server's
    // CPUs.
    cpus::pin_current_thread(&plan.place.client_cpus)?;
    let loadgen = inv.binary_path("loadgen", &plan.profile);
    let agents = sweep::client_agents(plan, &loadgen)?;
    let mut cx = Cx {
        plan,
        out: &out,
        accounting,
        slo,
        bins: |v: &Variant| Binaries {
            server: inv.binary_path(&v.binary, &plan.profile),
            loadgen: loadgen.clone(),
            agents: agents.clone(),
        },
        bar: spinner(),
        rows: Vec::new(),
    };
    let pairs: Vec<(&Point, &Variant)> = plan
        .points
        .iter()
        .flat_map(|p| {
            plan.servers
                .iter()
                .filter(|v| inv.serves(v, p.workload))
                .map(move |v| (p, v))
        })
        .collect();
    eprintln!(
        "capacity at {slo}: {} searches (server × workload), each about fifteen probes of {:.1} s; results in {}",
        pairs.len(),
        plan.points.first().map_or(0.0, |p| p.estimate_secs()),
        out.display()
    );
    let mut found = Vec::new();
    for (i, (template, v)) in pairs.iter().enumerate() {
        let Some(c) = cx.search(template, v, (i + 1, pairs.len()))? else {
            break;
        };
        let line = capacity_line(&c);
        cx.say(&line);
        found.push(c);
    }
    cx.bar.finish_and_clear();
    if let Some(a) = &agents {
        a.stop();
    }
    capacity::rank(&mut found);
    capacity::write(&out, &found)?;
    meta.finished = Some(meta::iso8601(std::time::SystemTime::now()));
    meta.interrupted = children::interrupted();
    meta.load_average_end = meta::load_average();
    meta.steal_pct = meta::steal_since(steal_start);
    run_dir::write_meta(&out, &meta)?;
    summary::write_summary(&out, &cx.rows)?;
    println!();
    print!("{}", crate::report::markdown::capacity_table(&found));
    sweep::report(plan, &out, &meta, &cx.rows)
}

/// What the searches share.
struct Cx<'a, B: Fn(&Variant) -> Binaries> {
    plan: &'a Plan,
    out: &'a Path,
    accounting: &'a Accounting,
    slo: &'a Slo,
    bins: B,
    bar: ProgressBar,
    /// A row per probe, as `summary.csv` has them.
    rows: Vec<Row>,
}

impl<B: Fn(&Variant) -> Binaries> Cx<'_, B> {
    /// A line above the progress bar (on stderr itself when the bar is hidden).
    fn say(&self, line: &str) {
        if self.bar.is_hidden() {
            eprintln!("{line}");
        } else {
            self.bar.println(line);
        }
    }

    /// The search of `v`'s capacity at `template`'s workload, the `n`th of `of`; `None` when
    /// it was interrupted.
    fn search(
        &mut self,
        template: &Point,
        v: &Variant,
        (n, of): (usize, usize),
    ) -> Result<Option<Capacity>> {
        let search = Search {
            start: match template.load {
                Load::Open { rate } => rate,
                Load::Closed => Search::default().start,
            },
            repeats: self.plan.repeats(Suite::Capacity),
            ..Search::default()
        };
        let mut c = Capacity {
            server: v.name.clone(),
            workload: template.series.clone(),
            objective: self.slo.to_string(),
            cpu_quota: self.plan.cpu_quota,
            arrivals: template.arrivals.name().to_string(),
            reference: reference(&template.series).to_string(),
            ..Capacity::default()
        };
        let mut probes: Vec<Probe> = Vec::new();
        let mut achieved: Vec<f64> = Vec::new();
        for step in 0..MAX_PROBES {
            let (rate, phase) = match search.next(&probes) {
                Next::Done(found) => {
                    c.probes = probes.len();
                    (c.result, c.capacity_per_sec) = describe(found);
                    if matches!(found, Found::Capacity { .. }) {
                        c.set_achieved(&achieved);
                    }
                    return Ok(Some(c));
                }
                Next::Try { rate, phase } => (rate, phase),
            };
            self.bar.set_message(format!(
                "[{n}/{of}] {} · {} @ {rate:.0}/s · {}",
                v.name,
                template.series,
                phase_text(phase)
            ));
            let point = probe(template, rate, step);
            let Some((row, lag, outcome_failed)) = self.probe(&point, v)? else {
                return Ok(None);
            };
            if let Some(why) = outcome_failed {
                c.probes = probes.len() + 1;
                c.result = "failed".into();
                c.failure = Some(why);
                return Ok(Some(c));
            }
            let met = self.meets(&row, &point);
            let client_bound = !met && row.ok > 0 && self.client_may_be_why(&row, &lag);
            self.say(&format!(
                "{}  {}: {}",
                sweep::point_line(&row),
                phase_text(phase),
                if client_bound {
                    "client-bound: the search stops"
                } else if met {
                    "met"
                } else {
                    "missed"
                }
            ));
            if let Phase::Confirm { .. } = phase {
                if met {
                    achieved.extend(row.throughput_per_sec);
                } else {
                    achieved.clear();
                }
            }
            self.rows.push(row);
            summary::write_summary(self.out, &self.rows)?;
            probes.push(Probe {
                rate,
                met,
                client_bound,
            });
        }
        c.probes = probes.len();
        c.result = "unconfirmed".into();
        Ok(Some(c))
    }

    /// One probe: its kept outcome (resuming) or a new run, saved, its row and loadgen's send
    /// lag (`send_lag_us` of its summary, `Null` where there is none); with the reason when the
    /// server could not run at all. `None` when interrupted.
    fn probe(
        &self,
        point: &Point,
        v: &Variant,
    ) -> Result<Option<(Row, serde_json::Value, Option<String>)>> {
        let files = RunFiles {
            dir: self.out.join(point.suite.name()).join(&v.name),
            stem: point.id.clone(),
        };
        let kept = if self.plan.resuming {
            run_dir::load_outcome(&files)
        } else {
            None
        };
        let outcome = match kept {
            Some(o) => o,
            None => {
                if children::interrupted() {
                    return Ok(None);
                }
                let busy = sweep::wait_until_quiet(self.plan);
                let o = point::run_point(
                    point,
                    v,
                    &(self.bins)(v),
                    &self.plan.place,
                    self.accounting,
                    &files,
                    self.out,
                    &mut |_| {},
                )
                .map(|mut m| {
                    m.notes.extend(busy);
                    m
                });
                run_dir::save_outcome(&files, &o)?;
                o
            }
        };
        let failed = match &outcome {
            Err(Failure::Interrupted) => return Ok(None),
            Err(f @ Failure::Start(_)) => Some(f.to_string()),
            _ => None,
        };
        let lag = std::fs::read_to_string(files.path("loadgen.json"))
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .map_or(serde_json::Value::Null, |v| v["send_lag_us"].clone());
        let mut row = summary::aggregate(point, v, &[outcome], self.out, &files.dir);
        row.slo = Some(self.slo.to_string());
        // The curves' x is the rate offered.
        if let Load::Open { rate } = point.load {
            row.x = rate;
        }
        Ok(Some((row, lag, failed)))
    }

    /// Whether the client may be why a probe missed: loadgen's CPU was saturated, or its own
    /// delay in sending explains the miss (`plan::capacity::client_explains_miss`).
    fn client_may_be_why(&self, row: &Row, send_lag: &serde_json::Value) -> bool {
        let slo = self.slo;
        let lag = send_lag[loadgen_percentile(&slo.percentile)].as_f64();
        row.client_bound
            || latency_of(row, &slo.percentile)
                .zip(lag)
                .is_some_and(|(l, lag)| client_explains_miss(l, lag, slo.limit_us))
    }

    /// Whether the probe sustained its rate and met the objective.
    fn meets(&self, row: &Row, point: &Point) -> bool {
        let (Load::Open { rate }, Stop::Duration(window)) = (point.load, point.stop) else {
            return false;
        };
        let Some(achieved) = row.throughput_per_sec else {
            return false;
        };
        row.failure.is_none()
            && row.errors == 0
            && sustained(rate, achieved, window, point.arrivals == Arrivals::Poisson)
            && latency_of(row, &self.slo.percentile).is_some_and(|l| l <= self.slo.limit_us)
    }
}

/// The latency `percentile` (one of `plan::capacity::PERCENTILES`) of a row, in µs.
pub(crate) fn latency_of(row: &Row, percentile: &str) -> Option<f64> {
    match percentile {
        "p50" => row.p50_us,
        "p90" => row.p90_us,
        "p95" => row.p95_us,
        "p99" => row.p99_us,
        "p99.9" => row.p99_9_us,
        "p99.99" => row.p99_99_us,
        "max" => row.max_us,
        _ => None,
    }
}

/// The point of one probe: the workload's at `rate`, named by its step and rate so that each
/// probe has files of its own and a resumed search finds them. Its Poisson gaps are drawn
/// from a seed of its step's: the repeats of a confirmation draw new ones (with one seed for
/// all, each probe's arrivals would be the same draws, scaled), and every server's nth probe
/// the same.
fn probe(template: &Point, rate: f64, step: usize) -> Point {
    Point {
        id: format!("{}-{step:02}-r{rate:.0}", template.id),
        label: format!("{} @ {rate:.0}/s", template.series),
        load: Load::Open { rate },
        seed: Some(step as u64 + 1),
        ..template.clone()
    }
}

/// What capacity.csv says of a finding: its result and rate.
fn describe(found: Found) -> (String, Option<f64>) {
    let what = match found {
        Found::Capacity { .. } => "capacity",
        Found::ClientBound { .. } => "client-bound",
        Found::Below { .. } => "below",
        Found::Above { .. } => "above",
        Found::Unconfirmed { .. } => "unconfirmed",
    };
    (what.to_string(), Some(found.rate()))
}

/// Where a search stands, for the progress line.
fn phase_text(phase: Phase) -> String {
    match phase {
        Phase::Sweep => "sweep".into(),
        Phase::Bisect { lo, hi } => format!("bracket [{lo:.0}, {hi:.0}]/s"),
        Phase::Confirm { rate } => format!("confirming {rate:.0}/s"),
    }
}

/// The line printed when a search ends.
fn capacity_line(c: &Capacity) -> String {
    let rate = c
        .capacity_per_sec
        .map_or("–".into(), |r| format!("{r:.0}/s"));
    let what = match c.result.as_str() {
        "capacity" => format!("capacity {rate} (confirmed by {} repeats)", c.repeats),
        "client-bound" if c.capacity_per_sec.unwrap_or(0.0) > 0.0 => {
            format!("at least {rate}, client-bound")
        }
        "client-bound" => "client-bound from the first rate tried: nothing of the server".into(),
        "below" => format!("below {rate}: the least rate tried missed the objective"),
        "above" => format!("above {rate}: the highest rate tried met it"),
        "failed" => format!("failed: {}", c.failure.as_deref().unwrap_or("?")),
        _ => format!("not confirmed at {rate}"),
    };
    format!(
        "capacity   {:<18} {:<5} at {}: {what} after {} probes",
        c.server, c.workload, c.objective, c.probes
    )
}

/// A spinner with the elapsed time: the searches' lengths are not known ahead.
fn spinner() -> ProgressBar {
    let bar = ProgressBar::new_spinner();
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} {spinner} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    // No ticker thread: it would redraw on loadgen's CPU while loadgen measures
    // (`run::point` keeps the harness still there); the bar moves as the sweep tells it.
    bar
}
