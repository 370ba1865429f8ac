//! The plan step of `cargo xtask bench`: the one place below the command line that reads
//! [`BenchArgs`]. It turns them into a [`Plan`] (the suites and their points, the servers
//! and what does not run, the placement, the repeats, the run directory, the client hosts),
//! and every step after it (the build, the sweep, a point, the record, the report) takes the
//! `Plan` or the part of it it needs; the search suite, which runs alone, gets a
//! [`SearchPlan`].
//!
//! It may call the plan layer, and the run layer's list of outside clients.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Result, bail};

use super::BenchArgs;
use crate::plan::placement::{self, CpuList, Placed, Placement};
use crate::plan::servers::{Inventory, Variant};
use crate::plan::suites::{CorpusSize, Point, Suite};
use crate::plan::{Usage, order};
use crate::run::outside::OutsideClient;

/// Where the load comes from when it is not this host (`--client-hosts`).
#[derive(Debug, Clone)]
pub(super) struct Remote {
    pub(super) hosts: Vec<String>,
    pub(super) ssh_config: Option<PathBuf>,
    /// loadgen's path on the hosts, when given.
    pub(super) loadgen: Option<String>,
    /// `--client-cpus` as given, for each host.
    pub(super) cpus: Option<CpuList>,
}

/// What one `cargo xtask bench` runs, decided before anything runs.
#[derive(Debug)]
pub(super) struct Plan {
    /// The suites in the order given.
    pub(super) suites: Vec<Suite>,
    /// The points of the suites, suite after suite.
    pub(super) points: Vec<Point>,
    /// The servers (and peers) that run.
    pub(super) servers: Vec<Variant>,
    /// What does not run, and why.
    pub(super) not_run: Vec<String>,
    /// The servers named in `--servers` that were refused before the sweep (an outside server
    /// that failed its conformance checks), each with why: in `not_run` too, and the run
    /// exits 1 (`exit::all_ran`).
    pub(super) refused: Vec<String>,
    /// The CPUs, workers and address of the server and loadgen.
    pub(super) place: Placement,
    /// How the CPUs were split, when the topology split them.
    pub(super) placed: Option<Placed>,
    /// Runs of each point of each suite.
    pub(super) repeats: BTreeMap<Suite, usize>,
    /// The run directory asked for (`--out`), else one of its own.
    pub(super) out: Option<PathBuf>,
    /// This run completes the one in `out` (`--resume`).
    pub(super) resuming: bool,
    /// The cargo profile the binaries are built in.
    pub(super) profile: String,
    /// Use the binaries already built.
    pub(super) no_build: bool,
    /// Seconds to wait for quiet CPUs before each point (0: do not wait).
    pub(super) quiet_wait: f64,
    /// The server's share of a CPU (`--server-cpu-quota`).
    pub(super) cpu_quota: Option<f64>,
    /// The client hosts, when the load comes from them.
    pub(super) remote: Option<Remote>,
    /// Each server's capacity the bursts suite's loads are shares of (`--capacities`).
    pub(super) shares: super::shares::Shares,
    /// The seed of the servers' order within each point's rounds (`plan::order`).
    pub(super) order_seed: u64,
    /// The options `meta.json` records as given (`--conns`, `--duration`, `--warmup`,
    /// `--rate`), for the report's reader.
    pub(super) given: serde_json::Value,
}

impl Plan {
    /// The plan of `args`, placed already (`BenchArgs::place`), with the servers `inv`
    /// can run.
    pub(super) fn new(args: BenchArgs, inv: &Inventory) -> Result<Plan> {
        check_cpus(&args)?;
        super::parse::check_points(&args)?;
        say_placement(&args);
        let (servers, not_run) = choose_servers(&args, inv)?;
        let suites = args.suites();
        let shares = super::shares::Shares::load(args.capacities.as_deref())?;
        say_shares(&shares, &servers, &suites);
        Ok(Plan {
            shares,
            points: points(&args),
            repeats: suites.iter().map(|&s| (s, args.repeats(s))).collect(),
            place: Placement {
                server_cpus: args.server_cpus.clone(),
                client_cpus: args.client_cpus.clone(),
                workers: args.workers(),
                listen: args
                    .server_addr
                    .clone()
                    .unwrap_or_else(|| "127.0.0.1".to_string()),
            },
            given: serde_json::json!({
                "conns": args.conns.as_ref().map(|c| c.0.clone()),
                "points_selected": (!args.points.is_empty()).then(|| args.points.clone()),
                "duration": args.duration,
                "warmup": args.warmup,
                "rate": args.rate,
                "server_addr": args.server_addr,
                "reference": args.reference,
                "arrivals": args.arrivals.map(|a| a.name()),
                "slo": args.slo.as_ref().map(ToString::to_string),
                "save_baseline": args.save_baseline,
                "capacities": args.capacities,
            }),
            remote: (!args.client_hosts.is_empty()).then(|| Remote {
                hosts: args.client_hosts.clone(),
                ssh_config: args.ssh_config.clone(),
                loadgen: args.client_loadgen.clone(),
                cpus: args.client_cpus_given.clone(),
            }),
            suites,
            servers,
            not_run,
            refused: Vec::new(),
            placed: args.placed,
            out: args.out,
            resuming: args.resuming,
            profile: args.cargo_profile,
            no_build: args.no_build,
            quiet_wait: args.quiet_wait,
            cpu_quota: args.server_cpu_quota,
            order_seed: args.order_seed.unwrap_or_else(order::fresh_seed),
        })
    }

    /// Runs of each point of `suite`.
    pub(super) fn repeats(&self, suite: Suite) -> usize {
        self.repeats.get(&suite).copied().unwrap_or(1)
    }

    /// The client hosts' names, none when the load is local.
    pub(super) fn client_hosts(&self) -> &[String] {
        self.remote.as_ref().map_or(&[], |r| &r.hosts)
    }
}

/// What the search suite runs: it runs alone, programs rather than servers under loadgen,
/// so it has a plan of its own.
#[derive(Debug)]
pub(super) struct SearchPlan {
    /// The CPUs the programs run on, and their workers.
    pub(super) cpus: CpuList,
    pub(super) workers: usize,
    /// Runs of each program.
    pub(super) repeat: usize,
    /// The programs `--servers` names, if it does.
    pub(super) programs: Option<String>,
    pub(super) profile: String,
    pub(super) no_build: bool,
    /// The tree to search (`--tree`), else the generated corpus of this size.
    pub(super) tree: Option<PathBuf>,
    pub(super) corpus: CorpusSize,
    pub(super) needle: String,
    /// Drop the page cache before every run.
    pub(super) cold: bool,
    /// The run directory asked for (`--out`).
    pub(super) out: Option<PathBuf>,
    /// The program the others are tested against (`--reference`).
    pub(super) reference: Option<String>,
}

impl SearchPlan {
    /// The plan of `args` (placed already), when the search suite runs alone and counts
    /// something.
    pub(super) fn new(args: BenchArgs) -> Result<SearchPlan> {
        if args.suites().len() > 1 {
            return Err(anyhow::Error::new(Usage(
                "--suite search runs alone; run the other suites in another `cargo xtask bench`"
                    .into(),
            )));
        }
        if !args.points.is_empty() {
            return Err(anyhow::Error::new(Usage(
                "--points selects load points; the search suite has programs (`--servers`)".into(),
            )));
        }
        if args.needle.is_empty() {
            return Err(anyhow::Error::new(Usage(
                "--needle must not be empty".into(),
            )));
        }
        Ok(SearchPlan {
            workers: args.workers(),
            repeat: args.repeats(Suite::Search),
            cpus: args.server_cpus,
            programs: args.servers,
            reference: args.reference,
            profile: args.cargo_profile,
            no_build: args.no_build,
            tree: args.tree,
            corpus: args.corpus,
            needle: args.needle,
            cold: args.cold,
            out: args.out,
        })
    }
}

/// The CPUs given are this process's to use, and remote load has the address to reach the
/// server at.
fn check_cpus(args: &BenchArgs) -> Result<()> {
    placement::check_allowed(&args.server_cpus, "--server-cpus")?;
    if args.client_hosts.is_empty() {
        placement::check_allowed(&args.client_cpus, "--client-cpus")?;
    } else if args.server_addr.is_none() {
        return Err(anyhow::Error::new(Usage(
            "--client-hosts needs --server-addr: the address of this host the clients reach the \
             server at"
                .into(),
        )));
    }
    Ok(())
}

/// Says whose capacities the bursts suite's loads are shares of, and which servers have
/// none there (theirs are shares of `--rate`'s).
fn say_shares(shares: &super::shares::Shares, servers: &[Variant], suites: &[Suite]) {
    let Some(from) = &shares.from else { return };
    if !suites.contains(&Suite::Bursts) {
        eprintln!("--capacities: only the bursts suite takes them; this run has none");
        return;
    }
    eprintln!(
        "bursts: each server at shares of its capacity in {}",
        from.display()
    );
    let missing = shares.missing(servers.iter().map(|v| v.name.as_str()));
    if !missing.is_empty() {
        eprintln!(
            "bursts: no capacity there for {}: theirs are shares of --rate's",
            missing.join(", ")
        );
    }
}

/// Says where the server and loadgen run, and where the scaling suite stops.
fn say_placement(args: &BenchArgs) {
    if let Some(p) = &args.placed {
        eprintln!(
            "placement: server on CPUs {}, loadgen on CPUs {} ({}; {})",
            p.server, p.client, p.why, p.topology
        );
    }
    if args.suites().contains(&Suite::Scaling) {
        eprintln!("{}", super::scaling_stop(&args.server_cpus));
    }
}

/// The servers that run and what does not, with why: `--servers`, or the defaults with
/// each suite's own servers and peers; less the peers and outside clients when the load
/// comes from client hosts. Says what does not run.
fn choose_servers(args: &BenchArgs, inv: &Inventory) -> Result<(Vec<Variant>, Vec<String>)> {
    let (mut variants, mut skipped) = match &args.servers {
        Some(list) => (inv.select(list).map_err(super::exit::refused)?, Vec::new()),
        None => inv.defaults(),
    };
    for suite in args.suites() {
        // A suite's own servers join the defaults (kv's one-owner stores) and so do its peers;
        // what is missing is said, and the rest runs.
        if args.servers.is_none() {
            add_suite_servers(suite, inv, &mut variants, &mut skipped)?;
        }
        // The points of an outside client that is not here are left out (`points`).
        for client in missing_clients(&suite.points(&args.overrides(args.workers()))) {
            skipped.push(format!(
                "{}'s {} points: {}; the loadgen points run",
                suite.name(),
                client.program(),
                client.missing().unwrap_or_default()
            ));
        }
    }
    if !args.client_hosts.is_empty() {
        leave_out_local_load(args, inv, &mut variants, &mut skipped);
    }
    sit_out(&points(args), inv, &mut variants, &mut skipped)?;
    for s in &skipped {
        eprintln!("not running {s}");
    }
    if variants.is_empty() {
        bail!("no server can be built in this checkout");
    }
    if let Some(r) = args.reference.as_deref()
        && !variants.iter().any(|v| v.name == r)
    {
        bail!("--reference {r} is not one of the servers this run measures");
    }
    Ok((variants, skipped))
}

/// Adds `suite`'s own servers (of a server that runs) and its peers to the defaults.
fn add_suite_servers(
    suite: Suite,
    inv: &Inventory,
    variants: &mut Vec<Variant>,
    skipped: &mut Vec<String>,
) -> Result<()> {
    for extra in suite.extra_servers() {
        let base = extra.split('+').next().unwrap_or_default();
        if variants.iter().any(|v| v.name == base) {
            variants.push(inv.parse(extra)?);
        }
    }
    // The capacity suite runs kv and http too, beside their references; churn, sizes and
    // skew their kv points beside redis-server.
    for peer in inv.peers.iter().filter(|p| suite.runs_peers_of(p.suite)) {
        match &peer.missing {
            None => variants.push(peer.variant.clone()),
            Some(why) => skipped.push(format!("{}: {why}", peer.name)),
        }
    }
    Ok(())
}

/// Says which server sits out which suite because it does not serve its protocol (srv-go
/// `--model poll` a chat or http suite: it would exit 2), and leaves out a server that serves
/// no point of the run; refuses a run where no server serves any point.
pub(super) fn sit_out(
    points: &[Point],
    inv: &Inventory,
    variants: &mut Vec<Variant>,
    skipped: &mut Vec<String>,
) -> Result<()> {
    if points.is_empty() {
        return Ok(());
    }
    let mut suites: Vec<Suite> = points.iter().map(|p| p.suite).collect();
    suites.dedup();
    for v in variants.iter() {
        for &suite in &suites {
            let mine = || points.iter().filter(|p| p.suite == suite);
            if let Some(flag) = v.echo_only_flag() {
                let mut protos: Vec<&str> = mine()
                    .map(|p| p.workload.proto())
                    .filter(|&p| p != "echo")
                    .collect();
                protos.sort_unstable();
                protos.dedup();
                if !protos.is_empty() {
                    skipped.push(format!(
                        "{} in {}'s {} points: {flag} applies to echo only",
                        v.name,
                        suite.name(),
                        protos.join(" and ")
                    ));
                }
            }
            if mine().any(|p| inv.serves(v, p.workload)) {
                continue;
            }
            if let Some(need) = mine().find_map(|p| v.lacks(p.workload)) {
                skipped.push(format!(
                    "{} in {}: it does not serve {need} (the conformance list's limits)",
                    v.name,
                    suite.name()
                ));
            }
        }
    }
    let before = variants.len();
    variants.retain(|v| points.iter().any(|p| inv.serves(v, p.workload)));
    if variants.is_empty() && before > 0 {
        return Err(anyhow::Error::new(Usage(format!(
            "no server of --servers serves a point of this run ({})",
            skipped.join("; ")
        ))));
    }
    Ok(())
}

/// With client hosts: a peer listens on loopback and an outside client runs here, so
/// neither is load from the client hosts; both are left out, and said so.
fn leave_out_local_load(
    args: &BenchArgs,
    inv: &Inventory,
    variants: &mut Vec<Variant>,
    skipped: &mut Vec<String>,
) {
    variants.retain(|v| {
        let peer = inv.peer(&v.binary).is_some();
        if peer {
            skipped.push(format!(
                "{}: a peer runs with loadgen on this host only, not with --client-hosts",
                v.name
            ));
        }
        !peer
    });
    for suite in args.suites() {
        if suite
            .points(&args.overrides(args.workers()))
            .iter()
            .any(|p| p.workload.outside_client().is_some())
        {
            skipped.push(format!(
                "{}'s points of outside clients: they run on this host, not on --client-hosts",
                suite.name()
            ));
        }
    }
}

/// The outside clients that `points` need and that are not installed.
fn missing_clients(points: &[Point]) -> Vec<&'static dyn OutsideClient> {
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

/// The points of the run, suite after suite, those `--points` names if it does. The points
/// of an outside client that is not installed are left out (`choose_servers` says so).
pub(super) fn points(args: &BenchArgs) -> Vec<Point> {
    let points: Vec<Point> = args
        .suites()
        .into_iter()
        .flat_map(|s| s.points(&args.overrides(args.workers())))
        .filter(|p| {
            args.points.is_empty() || args.points.iter().any(|pre| p.id.starts_with(pre.as_str()))
        })
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

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::super::parse::check_points;
    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        bench: BenchArgs,
    }

    fn parse(args: &[&str]) -> BenchArgs {
        Cli::try_parse_from(std::iter::once("bench").chain(args.iter().copied()))
            .unwrap()
            .bench
    }

    #[test]
    fn points_selects_by_the_start_of_their_ids_and_refuses_what_starts_none() {
        let a = parse(&["--suite", "kv", "--points", "article", "--conns", "1"]);
        check_points(&a).unwrap();
        let all: Vec<Point> = Suite::Kv.points(&a.overrides(1));
        let ids: Vec<String> = all
            .into_iter()
            .filter(|p| a.points.iter().any(|pre| p.id.starts_with(pre.as_str())))
            .map(|p| p.id)
            .collect();
        assert_eq!(ids, ["article-set-c50", "article-get-c50"]);
        // Without redis-benchmark they are left out too; with it, `points` gives these.
        let planned: Vec<String> = points(&a).into_iter().map(|p| p.id).collect();
        assert!(
            planned.iter().all(|id| id.starts_with("article-")),
            "{planned:?}"
        );
        let two = parse(&["--suite", "kv", "--points", "loadgen-get-p1-,article-set"]);
        check_points(&two).unwrap();
        assert!(
            points(&two)
                .iter()
                .all(|p| p.id.starts_with("loadgen-get-p1-c") || p.id == "article-set-c50")
        );
        let wrong = parse(&["--suite", "quick", "--points", "article"]);
        let e = check_points(&wrong).unwrap_err().to_string();
        assert!(e.contains("--points article: no point"), "{e}");
        assert!(parse(&["--points", "a"]).points == ["a"]);
    }
}
