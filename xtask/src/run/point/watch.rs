//! The server watched while a local loadgen or the client hosts' agents drive it: sampled
//! every [`SAMPLE_PERIOD`](super::SAMPLE_PERIOD) between windows, kept still through a local
//! loadgen's window (`quiet`), its death and an interruption caught, the progress told.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::edges::Edges;
use super::{SAMPLE_PERIOD, deadline, io, quiet, unix_now};
use crate::plan::placement::Placement;
use crate::plan::suites::{Load, Point};
use crate::run::agents::{Agents, PointFiles};
use crate::run::cgroup::Group;
use crate::run::children::{self, Proc};
use crate::run::counters::{Counted, Counting, Snapshot};
use crate::run::cpus;
use crate::run::loadgen_cli;
use crate::run::outcome::{Failure, RunFiles};
use crate::run::procfs::{Sample, Sampler};

/// The server watched while the load runs: sampled every [`SAMPLE_PERIOD`], its death
/// and an interruption caught, the progress told.
pub(super) struct Watch<'a> {
    server: &'a mut Proc,
    sampler: Sampler,
    samples: Vec<Sample>,
    next: Instant,
    started: Instant,
    progress: &'a mut dyn FnMut(f64),
    /// Whether to keep still through a local loadgen's window (`quiet::keeps_still`).
    pub(super) keeps_still: bool,
    /// How long the last sample of the server took.
    sample_s: f64,
    /// The server's counters, read at a local loadgen's window's edges.
    pub(super) counting: Option<&'a Counting>,
    /// What they counted over the window, once read at both edges.
    pub(super) counted: Option<Counted>,
    /// The counters read at the first look inside a window the harness watches through.
    first_in_window: Option<Snapshot>,
}

impl<'a> Watch<'a> {
    /// Starts watching with a first sample, the baseline (none: the server is gone).
    pub(super) fn start(
        server: &'a mut Proc,
        place: &Placement,
        group: Option<&Group>,
        progress: &'a mut dyn FnMut(f64),
    ) -> Result<Watch<'a>, Failure> {
        let mut sampler = Sampler::new(server.id())
            .watching(place.server_cpus.as_slice())
            .counting(group.map(Group::cpu_source));
        let baseline = sampler
            .sample()
            .map_err(|_| Failure::Start(server.stderr_tail()))?;
        Ok(Watch {
            server,
            sampler,
            samples: vec![baseline],
            next: Instant::now(),
            started: Instant::now(),
            progress,
            keeps_still: true,
            sample_s: 0.0,
            counting: None,
            counted: None,
            first_in_window: None,
        })
    }

    /// A sample if one is due, and the progress told.
    fn tick(&mut self) {
        let began = Instant::now();
        if sample_now(
            &mut self.sampler,
            &mut self.samples,
            self.server,
            &mut self.next,
        ) {
            self.sample_s = began.elapsed().as_secs_f64();
        }
    }

    /// A sample now, due or not: the edges of a window the harness kept still through.
    fn sample_at_edge(&mut self) {
        self.next = Instant::now();
        self.tick();
    }

    /// Tells the progress and sleeps until the next sample, `most` at most.
    fn pause(&mut self, most: Duration) {
        (self.progress)(self.started.elapsed().as_secs_f64());
        std::thread::sleep(
            most.min(Duration::from_millis(50))
                .min(self.next.saturating_duration_since(Instant::now())),
        );
    }

    /// The server's failure if it died.
    fn died(&mut self) -> Option<Failure> {
        let status = self.server.try_wait()?;
        Some(Failure::Died(children::last_words(status, self.server)))
    }

    /// The samples, with one more taken now that the load is over.
    pub(super) fn last_sample(mut self) -> Vec<Sample> {
        if let Ok(s) = self.sampler.sample() {
            self.samples.push(s);
        }
        self.samples
    }

    /// The load from other hosts: the same command line, split among the agents, while
    /// this thread samples the server. Loadgen's own failure is the inner error.
    pub(super) fn remote(
        &mut self,
        agents: &Agents,
        point: &Point,
        args: &[String],
        lg_files: &loadgen_cli::Files<'_>,
        files: &RunFiles,
        edges: &Edges<'_>,
    ) -> Result<Result<(), String>, Failure> {
        let mut local_only = vec![
            "--json",
            "--hist",
            "--hgrm",
            "--interval-log",
            "--cpus",
            "--threads",
        ];
        local_only.extend(loadgen_cli::SERVER_SIDE_FLAGS);
        let remote = loadgen_cli::without(args, &local_only);
        let agent_files = PointFiles {
            json: lg_files.json,
            hist: lg_files.hist,
            hgrm: lg_files.hgrm,
            interval_log: lg_files.interval_log,
            dir: &files.dir,
            stem: &files.stem,
        };
        let rate = match point.load {
            Load::Open { rate } => Some(rate),
            Load::Closed => None,
        };
        let limit = deadline(point);
        let done = std::thread::scope(|scope| {
            let job = scope.spawn(|| {
                agents
                    .run(
                        &remote,
                        point.conns,
                        rate,
                        point.warmup,
                        limit,
                        &agent_files,
                        &|| edges.go(),
                    )
                    .map(drop)
            });
            while !job.is_finished() {
                self.tick();
                edges.observe();
                if let Some(died) = self.died() {
                    return Err(died);
                }
                self.pause(edges.until_next());
            }
            edges.finish();
            Ok(job
                .join()
                .unwrap_or_else(|_| Err("the agents' thread panicked".into())))
        })?;
        if children::interrupted() {
            return Err(Failure::Interrupted);
        }
        Ok(done)
    }

    /// The load from a loadgen on this host's client CPUs, stopped past `limit`.
    /// Loadgen's own failure is the inner error.
    pub(super) fn local(
        &mut self,
        loadgen: &Path,
        args: &[String],
        place: &Placement,
        files: &RunFiles,
        limit: Duration,
    ) -> Result<Result<(), String>, Failure> {
        let mut cmd = Command::new(loadgen);
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let child = cpus::spawn_on(&place.client_cpus, || cmd.spawn())
            .map_err(|e| io("starting loadgen", &e))?;
        let mut lg = Proc::adopt(child, &files.path("loadgen.log"))
            .map_err(|e| io("starting loadgen", &e))?;
        let (mut window, mut announced) = (None, None);
        let mut stilled = false;
        let status = loop {
            self.tick();
            if children::interrupted() {
                return Err(Failure::Interrupted);
            }
            if let Some(status) = lg.try_wait() {
                break status;
            }
            if let Some(died) = self.died() {
                lg.stop(Duration::from_secs(1));
                return Err(died);
            }
            if self.started.elapsed() > limit {
                lg.stop(Duration::from_secs(1));
                return Err(Failure::Timeout(format!(
                    "loadgen ran past {:.0} s; its last words: {}",
                    limit.as_secs_f64(),
                    lg.stderr_tail()
                )));
            }
            announced = announced.or_else(|| quiet::announced(&lg.stderr_lines()));
            if self.keeps_still {
                window = announced;
            } else {
                self.count_inside(announced);
            }
            match quiet::step(unix_now(), window, quiet::lead_s(self.sample_s)) {
                quiet::Step::Still { until } if !stilled => {
                    stilled = true;
                    self.sample_at_edge();
                    if let Some(w) = window {
                        self.count_at_edges(&lg, w);
                    }
                    lg.wait_stderr_end(Duration::from_secs_f64((until - unix_now()).max(0.0)));
                    self.sample_at_edge();
                }
                quiet::Step::Still { .. } => self.pause(Duration::MAX),
                quiet::Step::Watch { most_s } => {
                    self.pause(Duration::from_secs_f64(most_s.min(1.0)));
                }
            }
        };
        Ok(if status.success() {
            Ok(())
        } else {
            Err(format!("{status}: {}", lg.stderr_tail()))
        })
    }
}

impl Watch<'_> {
    /// Reads the counters at the window's two edges, waiting for each (for nothing else:
    /// loadgen's end cuts a wait short, and leaves the window uncounted).
    fn count_at_edges(&mut self, lg: &Proc, (start, end): (f64, f64)) {
        let Some(c) = self.counting else { return };
        let until = |t: f64| lg.wait_stderr_end(Duration::from_secs_f64((t - unix_now()).max(0.0)));
        if until(start) {
            return;
        }
        let a = c.read();
        if until(end) {
            return;
        }
        self.counted = Some(c.between(&a, &c.read()));
    }

    /// Where the harness watches through the window (the chat-cpu suite samples in it): the
    /// counters read at its first look inside the window and at each later one.
    fn count_inside(&mut self, window: Option<(f64, f64)>) {
        let (Some(c), Some((start, end))) = (self.counting, window) else {
            return;
        };
        let now = unix_now();
        if now < start || now > end {
            return;
        }
        let b = c.read();
        match &self.first_in_window {
            None => self.first_in_window = Some(b),
            Some(a) => self.counted = Some(c.between(a, &b)),
        }
    }
}

/// Takes a sample of the server when one is due (every [`SAMPLE_PERIOD`]); whether it did.
fn sample_now(
    sampler: &mut Sampler,
    samples: &mut Vec<Sample>,
    server: &mut Proc,
    next: &mut Instant,
) -> bool {
    let now = Instant::now();
    if now < *next {
        return false;
    }
    if let Ok(s) = sampler.sample() {
        samples.push(s);
        server.remember(sampler.members());
    }
    *next = (*next + SAMPLE_PERIOD).max(now);
    true
}
