//! `cargo xtask bench --suite capacity`, which runs alone, from the [`Plan`]: for each
//! workload of the suite and each server that serves it, `--repeat` searches of
//! `plan::capacity` (a sweep of rates, a bisection, the bracket's upper end tried again, the
//! rate found confirmed), each probe a run of the point at one rate (`run::point`), judged
//! against the objective and recorded as it ends (a row of `summary.csv` per probe); then
//! `capacity.csv` (the searches' capacities: their median and interval), ranked against each
//! workload's reference server, and the report with the latency-vs-throughput curves.
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
use super::{resolution, sweep};
use crate::plan::capacity::{Attempt, Found, Next, Phase, Probe, Search, Slo, sustained};
use crate::plan::servers::{Inventory, Variant};
use crate::plan::suites::{Arrivals, Load, Point, Stop, Suite, capacity::reference};
use crate::record::capacity::{self, Capacity};
use crate::record::row::Row;
use crate::record::{meta, run_dir, summary};
use crate::report::stdout;
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

/// No search makes more probes than this (the default search needs about twenty, with noise
/// and the client's retries a few more).
const MAX_PROBES: usize = 60;

/// How one search ended: what it found, or why the server could not run; and its probes.
struct Ended {
    found: Result<Found, String>,
    probes: usize,
}

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
        "capacity at {slo}: {} × {} searches (server × workload, --repeat), the first about 19 probes of {:.1} s, each after it about 12; results in {}",
        pairs.len(),
        plan.repeats(Suite::Capacity),
        plan.points.first().map_or(0.0, |p| p.estimate_secs()),
        out.display()
    );
    for template in plan.points.iter().filter(|p| p.series == "echo") {
        cx.resolve(template, inv)?;
    }
    let mut found = Vec::new();
    for (i, (template, v)) in pairs.iter().enumerate() {
        let Some(c) = cx.capacity(template, v, (i + 1, pairs.len()))? else {
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
    stdout::line("");
    stdout::put(crate::report::markdown::capacity_table(&found));
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

    /// `v`'s capacity at `template`'s workload, the `n`th of `of`: `--repeat` searches, the
    /// first from the workload's first rate, each after it from the capacity the one before
    /// found (`Search::again`); `None` when interrupted.
    fn capacity(
        &mut self,
        template: &Point,
        v: &Variant,
        (n, of): (usize, usize),
    ) -> Result<Option<Capacity>> {
        let mut c = Capacity {
            server: v.name.clone(),
            workload: template.series.clone(),
            objective: self.slo.to_string(),
            cpu_quota: self.plan.cpu_quota,
            arrivals: template.arrivals.name().to_string(),
            reference: reference(&template.series).to_string(),
            ..Capacity::default()
        };
        let first = Search {
            start: match template.load {
                Load::Open { rate } => rate,
                Load::Closed => Search::default().start,
            },
            ..Search::default()
        };
        let mut search = first;
        let mut found = Vec::new();
        let searches = self.plan.repeats(Suite::Capacity);
        for k in 0..searches {
            let Some(end) = self.search(&search, template, v, k, (n, of))? else {
                return Ok(None);
            };
            c.probes += end.probes;
            match end.found {
                Err(why) => {
                    c.searches = k + 1;
                    c.result = "failed".into();
                    c.failure = Some(why);
                    return Ok(Some(c));
                }
                Ok(f) => {
                    search = match f {
                        Found::Capacity { rate } => first.again(rate),
                        _ => first,
                    };
                    found.push(f);
                }
            }
        }
        c.set_findings(&found);
        Ok(Some(c))
    }

    /// The `k`th search (from 0) of `v`'s capacity at `template`'s workload; `None` when it
    /// was interrupted.
    fn search(
        &mut self,
        search: &Search,
        template: &Point,
        v: &Variant,
        k: usize,
        (n, of): (usize, usize),
    ) -> Result<Option<Ended>> {
        let mut probes: Vec<Probe> = Vec::new();
        for step in 0..MAX_PROBES {
            let (rate, phase, attempt) = match search.next(&probes) {
                Next::Done(found) => {
                    return Ok(Some(Ended {
                        found: Ok(found),
                        probes: probes.len(),
                    }));
                }
                Next::Try {
                    rate,
                    phase,
                    attempt,
                } => (rate, phase, attempt),
            };
            self.bar.set_message(format!(
                "[{n}/{of}] {} · {} · search {} @ {rate:.0}/s · {}",
                v.name,
                template.series,
                k + 1,
                phase_text(phase, attempt)
            ));
            let point = probe(template, rate, k, step);
            let Some((row, outcome_failed)) = self.probe(&point, v)? else {
                return Ok(None);
            };
            if let Some(why) = outcome_failed {
                return Ok(Some(Ended {
                    found: Err(why),
                    probes: probes.len() + 1,
                }));
            }
            let met = self.meets(&row, &point);
            let schedule_ok = schedule_kept(&row);
            self.say(&format!(
                "{}  {}: {}",
                sweep::point_line(&row),
                phase_text(phase, attempt),
                if !schedule_ok {
                    format!(
                        "the client did not keep its schedule ({}): tried again",
                        row.schedule_reason
                            .as_deref()
                            .unwrap_or("its self-check failed")
                    )
                } else if met {
                    "met".into()
                } else {
                    "missed".into()
                }
            ));
            self.rows.push(row);
            summary::write_summary(self.out, &self.rows)?;
            probes.push(Probe {
                rate,
                met,
                schedule_ok,
            });
        }
        Ok(Some(Ended {
            found: Ok(Found::Unconfirmed {
                rate: probes
                    .iter()
                    .filter(|p| p.met)
                    .map(|p| p.rate)
                    .fold(0.0, f64::max),
            }),
            probes: probes.len(),
        }))
    }

    /// One probe: its kept outcome (resuming) or a new run, saved, and its row; with the
    /// reason when the server could not run at all. `None` when interrupted.
    fn probe(&self, point: &Point, v: &Variant) -> Result<Option<(Row, Option<String>)>> {
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
        let mut row = summary::aggregate(point, v, &[outcome], self.out, &files.dir);
        row.slo = Some(self.slo.to_string());
        // The curves' x is the rate offered.
        if let Load::Open { rate } = point.load {
            row.x = rate;
        }
        Ok(Some((row, failed)))
    }

    /// The machine's resolution at `template`'s first rate (`bench::resolution`), printed and
    /// kept as a row; an objective below it is refused. Without the floor server built it is
    /// said and skipped.
    fn resolve(&mut self, template: &Point, inv: &Inventory) -> Result<()> {
        let floor = inv.parse(resolution::FLOOR)?;
        let bins = (self.bins)(&floor);
        if !bins.server.is_file() {
            self.say(&format!(
                "resolution: not measured ({} is not built; add {} to --servers)",
                bins.server.display(),
                resolution::FLOOR
            ));
            return Ok(());
        }
        let point = Point {
            id: format!("{}-resolution", template.id),
            label: format!("{} resolution", template.series),
            ..template.clone()
        };
        let Some((row, failed)) = self.probe(&point, &floor)? else {
            return Ok(());
        };
        let (Load::Open { rate }, Some(value_us)) = (point.load, row.latency(&self.slo.percentile))
        else {
            self.say(&format!(
                "resolution: not measured ({})",
                failed
                    .as_deref()
                    .unwrap_or("the floor's probe gave no latency")
            ));
            return Ok(());
        };
        let r = resolution::Resolution {
            rate,
            percentile: self.slo.percentile.clone(),
            value_us,
            schedule_ok: schedule_kept(&row),
        };
        self.say(&r.line());
        self.rows.push(row);
        summary::write_summary(self.out, &self.rows)?;
        match r.refusal(self.slo) {
            Some(why) => Err(anyhow::Error::new(crate::plan::Usage(why))),
            None => Ok(()),
        }
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
            && row
                .latency(&self.slo.percentile)
                .is_some_and(|l| l <= self.slo.limit_us)
    }
}

/// Whether loadgen kept its schedule on a probe (its self-check, `schedule_ok` of the row),
/// so that the probe measured the server; a probe without a self-check (no message sent)
/// has none to fail.
fn schedule_kept(row: &Row) -> bool {
    row.schedule_ok != Some(false)
}

/// The point of one probe: the workload's at `rate`, named by its search (`k`, from 0), step
/// and rate so that each probe has files of its own and a resumed search finds them. Its
/// Poisson gaps are drawn from a seed of its search's and step's: a trial's repeats and each
/// search draw new ones (with one seed for all, each probe's arrivals would be the same
/// draws, scaled), and every server's nth probe of its kth search the same.
fn probe(template: &Point, rate: f64, k: usize, step: usize) -> Point {
    Point {
        id: format!("{}-s{}-{step:02}-r{rate:.0}", template.id, k + 1),
        label: format!("{} @ {rate:.0}/s", template.series),
        load: Load::Open { rate },
        seed: Some((k * MAX_PROBES + step) as u64 + 1),
        ..template.clone()
    }
}

/// Where a search stands, for the progress line.
fn phase_text(phase: Phase, attempt: Attempt) -> String {
    let phase = match phase {
        Phase::Sweep => "sweep".into(),
        Phase::Bisect { lo, hi } => format!("bracket [{lo:.0}, {hi:.0}]/s"),
        Phase::Retest { lo, hi } => format!("bracket [{lo:.0}, {hi:.0}]/s, its upper end again"),
        Phase::Confirm { rate } => format!("confirming {rate:.0}/s"),
    };
    match attempt {
        Attempt::First => phase,
        Attempt::AfterMiss => format!("{phase}, again after a miss"),
        Attempt::AfterClient => format!("{phase}, again: the client's"),
    }
}

/// The line printed when a search ends.
fn capacity_line(c: &Capacity) -> String {
    let rate = c
        .capacity_per_sec
        .map_or("–".into(), |r| format!("{r:.0}/s"));
    let what = match c.result.as_str() {
        "capacity" => match (c.capacity_ci_low, c.capacity_ci_high) {
            (Some(lo), Some(hi)) if c.searches > 1 => format!(
                "capacity {rate} [{lo:.0}, {hi:.0}] (median of {} searches)",
                c.searches
            ),
            _ => format!("capacity {rate} (one search)"),
        },
        "client-bound" if c.capacity_per_sec.unwrap_or(0.0) > 0.0 => {
            format!("at least {rate}, client-bound")
        }
        "client-bound" => "client-bound from the first rate tried: nothing of the server".into(),
        "unconfirmed" => format!("{rate}? not confirmed"),
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
