//! `cargo xtask bench`: build the servers and loadgen, run the suites' points against every
//! server, and write `results/<run-id>/` with the summary, histograms, plots and report.
//! This file holds the command line and `run`, the flow as named steps: the arguments
//! placed on the machine, `plan` (the one step that reads them, into a `Plan`), the build,
//! and `sweep`, which runs the points; `search` is the search suite's own flow (from a
//! `SearchPlan`), `list` is `--list`.
//!
//! It may call every layer: plan, run, record and report.

mod accounting;
mod build;
mod capacity;
pub(crate) mod conform;
pub(crate) mod exit;
mod list;
mod parse;
mod plan;
mod resolution;
mod resume;
mod search;
mod settings;
mod shares;
mod sweep;
#[cfg(test)]
mod tests;

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use self::plan::{Plan, SearchPlan};
use crate::plan::Usage;
use crate::plan::placement::{self, CpuList, Placed};
use crate::plan::servers::Inventory;
use crate::plan::suites::{self, CorpusSize, Overrides, Suite};
use crate::plan::topology::Topology;
use crate::run::children;

pub(crate) use self::parse::ConnList;
use self::parse::{non_negative, positive, servers_help};

/// Options of `cargo xtask bench`.
#[derive(Debug, Clone, Args)]
pub(crate) struct BenchArgs {
    /// The suites to run, comma-separated.
    ///
    /// The suites to run, comma-separated: quick (the default, about 5 minutes of runs with the
    /// sixteen default servers on 2 CPUs, the build aside), emper-echo, chat-cpu, chat-room,
    /// memory, kv, http, scaling (workers 1, 2, 4, … up to --server-cpus), search (the
    /// file-content search, alone), capacity (latency under load and capacity at --slo,
    /// alone), and the workloads that change the ranking: churn, idle, sizes, bursts, skew.
    /// `--list` describes them.
    #[arg(
        help_heading = "What to run",
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "quick"
    )]
    pub(crate) suite: Vec<Suite>,

    /// The servers, comma-separated (see `servers_help`).
    #[arg(help_heading = "What to run", long, value_name = "LIST", help = "The servers, comma-separated, with runtime flags (`--list` names them)", long_help = servers_help())]
    pub(crate) servers: Option<String>,

    /// The server the verdicts test every other against.
    ///
    /// The server every other is tested against in the report's verdicts, named in advance;
    /// it must be one of the run's servers [default: floor-epoll for quick, churn, idle, sizes
    /// and bursts, redis for kv and skew, nginx for http, search-fiber for search, where it
    /// runs; else the first of --servers].
    #[arg(help_heading = "What to run", long, value_name = "NAME")]
    pub(crate) reference: Option<String>,

    /// Connection counts to sweep, replacing the suite's.
    ///
    /// Connection counts to sweep, replacing the suite's (chat-room: connections dealt into
    /// rooms; quick: the open-loop point uses the largest).
    #[arg(help_heading = "Load", long, value_name = "LIST")]
    pub(crate) conns: Option<ConnList>,

    /// Run only the points whose id starts with one of these.
    ///
    /// Run only the points whose id starts with one of these, comma-separated, as summary.csv's
    /// `point` column names them: `--suite kv --points article` runs the Go event-loop
    /// article's table alone (`article-set-c50`, `article-get-c50`), `--points
    /// redis-benchmark-get` kv's redis-benchmark GETs. A prefix that starts no point of the
    /// suites is refused.
    #[arg(
        help_heading = "What to run",
        long,
        value_name = "PREFIX,...",
        value_delimiter = ','
    )]
    pub(crate) points: Vec<String>,

    /// Seconds of each point's measured window.
    ///
    /// Seconds of each point's measured window, replacing the suite's (quick 0.5 at equal load
    /// and 0.3 closed loop, emper-echo 10, chat-cpu 60, chat-room 10, memory 3, kv 1.5, http 2,
    /// scaling 1 and 3 at the Figure 7 point, churn, idle and sizes 0.5, bursts and skew 1).
    /// For emper-echo it also replaces the paper's 2500 echoes per connection.
    #[arg(help_heading = "Measurement", long, value_name = "SECS", value_parser = positive)]
    pub(crate) duration: Option<f64>,

    /// Seconds of load before each measured window.
    ///
    /// Seconds of load before each measured window, not recorded (default 1; quick 0.35 at
    /// equal load and 0.15 closed loop, kv and http 0.5, scaling 0.4, chat-cpu 2, churn 0.2,
    /// idle, sizes, bursts and skew 0.35; at least 1 per 2500 connections, idle ones
    /// included).
    #[arg(help_heading = "Measurement", long, value_name = "SECS", value_parser = non_negative)]
    pub(crate) warmup: Option<f64>,

    /// Runs of each point, in counterbalanced rounds [default: quick 5].
    ///
    /// Runs of each point, in rounds over the servers (every server once a round, in a
    /// counterbalanced order: a Williams design, `plan::order`) so that a drift of the
    /// machine spreads over all of them [default: quick 5, search 15, capacity 3, the other
    /// suites 1]. In capacity, the searches of each server's capacity: the capacity is their
    /// median and its interval theirs (3: [min, max], 75% coverage).
    /// The summary gives medians with an interval, latency from the runs' histograms added
    /// together, and the report each server's verdict against the reference (`--reference`),
    /// a column one family holding its false verdicts to 5% (docs/VERDICTS.md). The default
    /// 5 finds a 10% difference at 2% noise in 96% of runs; 3 gives verdicts with little
    /// power; more buy smaller differences and narrower intervals (at 5 the median's interval
    /// is [min, max], 94% coverage; from 6 an order-statistic 95% one).
    #[arg(help_heading = "Measurement", long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100))]
    pub(crate) repeat: Option<u32>,

    /// Run the server under this share of one CPU (a cgroup quota).
    ///
    /// Run the server in a cgroup with this share of one CPU (0.5: half a CPU, enforced every
    /// 2 ms), so that one loadgen core outruns it and closed-loop points measure the server's
    /// capacity under that share. Needs a writable cgroup CPU controller (v1 or v2; root).
    #[arg(help_heading = "Measurement", long, value_name = "FRACTION", value_parser = positive)]
    pub(crate) server_cpu_quota: Option<f64>,

    /// Count what each server's CPU is spent on: pass, on or off.
    ///
    /// Count what each server's CPU is spent on over a window (system calls in all and by
    /// name, context switches, migrations, page faults; instructions, cycles, cache and dTLB
    /// misses where the machine has hardware counters), in its cgroup (docs/METHOD.md, "The
    /// anatomy of a request"): `pass` (the default) in one more round after the measured
    /// ones, whose CPU is not used, since the counters' tracepoints slow every system call of
    /// the machine (1.3-1.5x the CPU per echo here); `on` in every round, the CPU figures
    /// with them; `off` not at all.
    #[arg(
        help_heading = "Measurement",
        long,
        value_enum,
        value_name = "WHEN",
        default_value = "pass"
    )]
    pub(crate) counters: sweep::Counters,

    /// CPUs the server runs on.
    ///
    /// CPUs the server runs on [default: from the machine's topology: on 2 CPUs CPU 1; on
    /// more, whole physical cores of one NUMA node, at most half of the CPUs].
    #[arg(
        help_heading = "Placement and hosts",
        long = "server-cpus",
        value_name = "LIST"
    )]
    pub(crate) server_cpus_given: Option<CpuList>,

    /// CPUs loadgen runs on.
    ///
    /// CPUs loadgen runs on, one loadgen thread per CPU [default: every CPU the server does
    /// not have; on 2 CPUs CPU 0].
    #[arg(
        help_heading = "Placement and hosts",
        long = "client-cpus",
        value_name = "LIST"
    )]
    pub(crate) client_cpus_given: Option<CpuList>,

    /// Drive the load from these hosts over ssh.
    ///
    /// Drive the load from these hosts instead of this one, comma-separated, each as ssh takes
    /// it (`user@host`, a Host of your ssh configuration): `loadgen agent` runs on each over
    /// the system's ssh (BatchMode), the connections and the rate split exactly among them,
    /// their histograms added. --client-cpus then applies on each host (default: unpinned, a
    /// worker per CPU there). Needs --server-addr.
    #[arg(
        help_heading = "Placement and hosts",
        long,
        value_name = "DEST,...",
        value_delimiter = ','
    )]
    pub(crate) client_hosts: Vec<String>,

    /// With --client-hosts: the address the server listens on.
    ///
    /// With --client-hosts: the address the server listens on and the clients reach it at
    /// (an address of this host on the network the client hosts share).
    #[arg(
        help_heading = "Placement and hosts",
        long,
        value_name = "ADDR",
        requires = "client_hosts"
    )]
    pub(crate) server_addr: Option<String>,

    /// With --client-hosts: the ssh configuration file.
    ///
    /// With --client-hosts: the ssh configuration file to use (`ssh -F FILE`).
    #[arg(
        help_heading = "Placement and hosts",
        long,
        value_name = "FILE",
        requires = "client_hosts"
    )]
    pub(crate) ssh_config: Option<PathBuf>,

    /// With --client-hosts: loadgen's path on the hosts.
    ///
    /// With --client-hosts: loadgen's path on the hosts [default: this build's, copied over ssh].
    #[arg(
        help_heading = "Placement and hosts",
        long,
        value_name = "PATH",
        requires = "client_hosts"
    )]
    pub(crate) client_loadgen: Option<String>,

    /// Let the server and loadgen share CPUs.
    ///
    /// Let the server and loadgen share CPUs (they then measure each other); without it,
    /// overlapping --server-cpus and --client-cpus are refused.
    #[arg(help_heading = "Placement and hosts", long)]
    pub(crate) allow_overlap: bool,

    /// The server's CPUs, once placed (`BenchArgs::place`).
    #[arg(skip = CpuList::one(1))]
    pub(crate) server_cpus: CpuList,

    /// Loadgen's CPUs, once placed.
    #[arg(skip = CpuList::one(0))]
    pub(crate) client_cpus: CpuList,

    /// How the CPUs were split, and the machine's topology, once placed.
    #[arg(skip)]
    pub(crate) placed: Option<Placed>,

    /// Server worker threads [default: one per server CPU].
    ///
    /// Server worker threads [default: one per server CPU; scaling sets its own].
    #[arg(help_heading = "Placement and hosts", long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub(crate) workers: Option<u32>,

    /// The rate of the open-loop point (or the first of a capacity search).
    ///
    /// quick: echoes/s of the open-loop point (default 20000); chat-room: MSG deliveries/s
    /// (default 5000); scaling: echoes/s per worker at equal load (default 20000); capacity:
    /// the first rate its search tries (default 1000); bursts: the capacity its loads are
    /// shares of, for every server without one in --capacities (default 40000).
    #[arg(help_heading = "Load", long, value_name = "PER_SEC", value_parser = positive)]
    pub(crate) rate: Option<f64>,

    /// bursts: each server's loads as shares of its own capacity in this capacity run.
    ///
    /// bursts: run each server at 50, 70 and 90% of its own echo capacity as measured by this
    /// capacity run (its directory or its capacity.json), instead of shares of one --rate for
    /// all; measure it as this run (the same --server-cpu-quota, the same machine).
    #[arg(help_heading = "Load", long, value_name = "RUN")]
    pub(crate) capacities: Option<PathBuf>,

    /// capacity: the latency objective [default: p99=5ms].
    ///
    /// capacity: the latency objective each server's capacity is searched at, a percentile
    /// (p50, p90, p95, p99, p99.9, p99.99, max) and a time in us, ms or s: `p99=5ms`,
    /// `p99.9=800us` [default: p99=5ms].
    #[arg(help_heading = "Load", long, value_name = "PCT=TIME")]
    pub(crate) slo: Option<crate::plan::capacity::Slo>,

    /// How open-loop sends are spaced: uniform, poisson, onoff or pareto.
    ///
    /// How open-loop sends are spaced: uniform (evenly, the connections taking turns),
    /// poisson (each connection a Poisson process: bursts, as independent users make them),
    /// onoff (10 ms at twice the rate, 10 ms silent) or pareto (mutilate's fb_ia gaps)
    /// [default: poisson in capacity, uniform elsewhere; bursts sweeps its own]. Latency
    /// counts from the due time.
    #[arg(help_heading = "Load", long, value_enum, value_name = "KIND")]
    pub(crate) arrivals: Option<suites::Arrivals>,

    /// The run directory [default: results/<date>-<time>-<commit>].
    #[arg(help_heading = "Output", long, value_name = "DIR")]
    pub(crate) out: Option<PathBuf>,

    /// Save the run as the baseline NAME, for compare --baseline.
    ///
    /// Save the run, once it ends, as the baseline NAME (results/baselines/NAME, local to
    /// this checkout) for `cargo xtask compare --baseline NAME DIR`; a baseline of that name
    /// is replaced.
    #[arg(help_heading = "Output", long, value_name = "NAME", value_parser = crate::record::run_dir::baseline_name)]
    pub(crate) save_baseline: Option<String>,

    /// The seed of the servers' order in each round.
    ///
    /// The seed that draws which server plays which part of each point's counterbalanced
    /// order; the run records it (`order_seed` in meta.json), and the same seed with the same
    /// suites and servers draws the same orders again [default: a fresh one each run].
    #[arg(help_heading = "Measurement", long, value_name = "N")]
    pub(crate) order_seed: Option<u64>,

    /// Complete the run in DIR, which stopped before its end.
    ///
    /// Complete the run in DIR, which stopped before its end (killed, a lost session, a
    /// power cut): its own options (from its meta.json) again, and only the runs of points
    /// that left no outcome. Takes no other option but --no-build and --quiet-wait.
    #[arg(help_heading = "Output", long, value_name = "DIR", conflicts_with_all = [
        "suite", "servers", "reference", "conns", "points", "duration", "warmup", "repeat", "server_cpu_quota",
        "server_cpus_given", "client_cpus_given", "allow_overlap", "workers", "rate", "out",
        "list", "client_hosts", "server_addr", "ssh_config", "client_loadgen", "order_seed",
        "slo", "arrivals", "save_baseline",
    ])]
    pub(crate) resume: Option<PathBuf>,

    /// This run completes the one in `--out` (set by `--resume`).
    #[arg(skip)]
    pub(crate) resuming: bool,

    /// Describe the suites and the servers, and exit.
    #[arg(help_heading = "What to run", long)]
    pub(crate) list: bool,

    /// Seconds to wait for idle CPUs before each point.
    ///
    /// Before each point, wait up to this many seconds for the server's and loadgen's CPUs to
    /// be idle (90%), so that a point does not measure another program too; 0 does not wait.
    #[arg(help_heading = "Measurement", long, default_value_t = 10.0, value_name = "SECS", value_parser = non_negative)]
    pub(crate) quiet_wait: f64,

    /// Use the binaries already built instead of building them.
    #[arg(help_heading = "Output", long)]
    pub(crate) no_build: bool,

    /// search: the directory tree to search.
    ///
    /// search: the directory tree to search [default: the generated corpus, written once
    /// under target/search-corpus/].
    #[arg(help_heading = "What to run", long, value_name = "DIR")]
    pub(crate) tree: Option<PathBuf>,

    /// search: the generated corpus, full or small.
    ///
    /// search: the generated corpus when no --tree is given: full (about 40,000 files,
    /// 300 MB) or small (2,000 files, 16 MB, for a quick look).
    #[arg(help_heading = "What to run", long, value_enum, default_value = "full")]
    pub(crate) corpus: CorpusSize,

    /// search: the byte string to count in a --tree.
    ///
    /// search: the byte string to count in a --tree (the generated corpus plants its own,
    /// io_uring).
    #[arg(
        help_heading = "What to run",
        long,
        default_value = "io_uring",
        value_name = "STR"
    )]
    pub(crate) needle: String,

    /// search: drop the page cache before every run (root only).
    ///
    /// search: drop the page cache before every run (root only) instead of one untimed
    /// warm-up pass.
    #[arg(help_heading = "What to run", long)]
    pub(crate) cold: bool,

    /// The cargo profile to build and run (release; dev for quick tests of the harness).
    #[arg(long, default_value = "release", hide = true)]
    pub(crate) cargo_profile: String,
}

impl BenchArgs {
    pub(super) fn overrides(&self, workers: usize) -> Overrides {
        Overrides {
            conns: self.conns.as_ref().map(|c| c.0.clone()),
            duration: self.duration,
            warmup: self.warmup,
            rate: self.rate,
            workers,
            server_cpus: Some(self.server_cpus.clone()),
            arrivals: self.arrivals,
        }
    }

    /// Decides the CPUs of the server and of loadgen on the machine `topo` describes, from
    /// what the command line gave and the topology's split; refuses overlapping sets unless
    /// `--allow-overlap`.
    pub(crate) fn place(&mut self, topo: &Topology) -> Result<()> {
        // No loadgen runs beside the search suite's programs: they may take every CPU.
        if self.suites() == [Suite::Search] {
            self.server_cpus = placement::alone(self.server_cpus_given.as_ref(), topo)
                .map_err(|e| anyhow::Error::new(Usage(e.to_string())))?;
            return Ok(());
        }
        let placed = placement::decide(
            self.server_cpus_given.as_ref(),
            self.client_cpus_given.as_ref(),
            self.allow_overlap,
            topo,
        )
        .map_err(|e| anyhow::Error::new(Usage(e.to_string())))?;
        self.server_cpus = placed.server.clone();
        self.client_cpus = placed.client.clone();
        self.placed = Some(placed);
        Ok(())
    }

    pub(super) fn workers(&self) -> usize {
        self.workers.map_or(self.server_cpus.len(), |w| w as usize)
    }

    /// Runs of each point of `suite`.
    pub(crate) fn repeats(&self, suite: Suite) -> usize {
        self.repeat.unwrap_or_else(|| suite.default_repeats()) as usize
    }

    /// The suites in the order given, without repeats.
    pub(super) fn suites(&self) -> Vec<Suite> {
        let mut out: Vec<Suite> = Vec::new();
        for s in &self.suite {
            if !out.contains(s) {
                out.push(*s);
            }
        }
        out
    }
}

/// Why the scaling suite stops at its last worker count on this machine.
fn scaling_stop(server_cpus: &CpuList) -> String {
    let machine = std::thread::available_parallelism().map_or(1, |n| n.get());
    suites::scaling_stop_reason(server_cpus, machine)
}

/// Runs `cargo xtask bench`: the command line (and a run to resume) placed on this
/// machine, then `--list`, the search suite's own flow, or the sweep: the [`Plan`], the
/// build, and [`sweep::run`].
pub(crate) fn run(mut args: BenchArgs) -> Result<()> {
    if let Some(dir) = args.resume.clone() {
        args = resume::resumed(&dir, &args)?;
    }
    args.place(&Topology::of_this_machine()?)?;
    // Before anything else, so that a user who cannot drop caches learns it at once.
    if args.cold {
        crate::run::search::check_cold()?;
    }
    let root = crate::plan::project_root();
    let inv = Inventory::discover(&root)?;
    if args.list {
        list::list(&args, &inv);
        return Ok(());
    }
    // The search suite runs programs, not servers under loadgen: it has a flow of its own.
    if args.suites().contains(&Suite::Search) {
        return search::run(&SearchPlan::new(args)?, &root, &inv);
    }
    // Before the build: a quota this machine cannot give is a usage error, found at once.
    let quota = args.server_cpu_quota.map(accounting::quota).transpose()?;
    let counters = args.counters;
    children::install_interrupt_handler()?;
    // The capacity suite chooses its rates as it goes: it has a flow of its own.
    if args.suites().contains(&Suite::Capacity) {
        if args.suites().len() > 1 {
            return Err(anyhow::Error::new(Usage(
                "--suite capacity runs alone: its probes are chosen as it goes; run the other \
                 suites apart"
                    .into(),
            )));
        }
        let slo = args.slo.clone().unwrap_or_else(capacity::default_slo);
        let mut plan = Plan::new(args, &inv)?;
        build::build(&mut plan, &root, &inv)?;
        conform::gate(&mut plan)?;
        return capacity::run(
            &plan,
            &root,
            &inv,
            &accounting::accounting_for(quota, counters == sweep::Counters::On)?,
            &slo,
        );
    }
    if args.slo.is_some() {
        return Err(anyhow::Error::new(Usage(
            "--slo is the capacity suite's objective: add --suite capacity".into(),
        )));
    }
    let mut plan = Plan::new(args, &inv)?;
    build::build(&mut plan, &root, &inv)?;
    conform::gate(&mut plan)?;
    let accounting = accounting::accounting_for(quota, counters == sweep::Counters::On)?;
    sweep::run(&plan, &root, &inv, &accounting, counters)
}
