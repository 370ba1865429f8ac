//! Where the server and the clients run: the CPU lists of each (`cpulist`'s grammar, the one
//! the servers and loadgen take) and the server's worker count, checked against the CPUs
//! this process may use before anything starts. What the command line leaves open comes from
//! the machine's topology (`topology::Topology::split`); overlapping sets are refused unless
//! asked for.
//!
//! It may call `plan::topology` and nothing else of xtask; `run::cpus` pins the children
//! where this says.

use anyhow::{Context, Result, bail};

use crate::plan::topology::{Core, Topology};
use nix::sched::sched_getaffinity;
use nix::unistd::Pid;

pub(crate) use cpulist::CpuList;

/// Where the children run.
#[derive(Debug, Clone)]
pub(crate) struct Placement {
    pub(crate) server_cpus: CpuList,
    pub(crate) client_cpus: CpuList,
    pub(crate) workers: usize,
    /// The address the server listens on, the one its clients reach it at: 127.0.0.1, or
    /// `--server-addr` when the clients are on other hosts.
    pub(crate) listen: String,
}

/// The CPUs decided for a run, why, and the machine they were decided on; `meta.json` keeps
/// it and the report's header says it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct Placed {
    #[serde(serialize_with = "as_text")]
    pub(crate) server: CpuList,
    #[serde(serialize_with = "as_text")]
    pub(crate) client: CpuList,
    /// How the split was made, for people.
    pub(crate) why: String,
    /// The machine in one line: `16 CPUs: 8 cores × 2 threads, 1 NUMA node`.
    pub(crate) topology: String,
    /// The machine, core by core.
    pub(crate) cores: Vec<Core>,
}

fn as_text<S: serde::Serializer>(cpus: &CpuList, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&cpus.to_string())
}

/// The CPUs of the server and of loadgen: as given, else from the topology's split (the one
/// given set's complement, where only one is given). Overlapping sets are an error unless
/// `allow_overlap`.
pub(crate) fn decide(
    server: Option<&CpuList>,
    client: Option<&CpuList>,
    allow_overlap: bool,
    topo: &Topology,
) -> Result<Placed> {
    let split = topo.split();
    let (split_server, split_client) = split.lists()?;
    let all = topo.cpus();
    let rest = |taken: &CpuList, what: &str| -> Result<CpuList> {
        let left: Vec<String> = all
            .iter()
            .filter(|c| !taken.as_slice().contains(c))
            .map(ToString::to_string)
            .collect();
        if left.is_empty() {
            bail!(
                "{what} takes every CPU this process may use ({taken}): give the other side's CPUs too"
            );
        }
        left.join(",")
            .parse::<CpuList>()
            .map_err(|e| anyhow::anyhow!("{e}"))
    };
    let (server, client, why) = match (server, client) {
        (Some(s), Some(c)) => (s.clone(), c.clone(), "as given".to_string()),
        (Some(s), None) => {
            let c = if all.len() <= 2 && !s.overlaps(&split_client) {
                split_client
            } else {
                rest(s, "--server-cpus")?
            };
            (
                s.clone(),
                c,
                "--server-cpus as given, loadgen on the other CPUs".to_string(),
            )
        }
        (None, Some(c)) => {
            let s = if split_server.overlaps(c) {
                rest(c, "--client-cpus")?
            } else {
                split_server
            };
            (
                s,
                c.clone(),
                "--client-cpus as given, the server on the topology's share".to_string(),
            )
        }
        (None, None) => (split_server, split_client, split.why.clone()),
    };
    if server.overlaps(&client) && !allow_overlap {
        let shared: Vec<String> = server
            .as_slice()
            .iter()
            .filter(|c| client.as_slice().contains(c))
            .map(ToString::to_string)
            .collect();
        bail!(
            "the server (CPUs {server}) and loadgen (CPUs {client}) would share CPU {}: each \
             would measure the other; give them disjoint --server-cpus and --client-cpus, or \
             add --allow-overlap to measure anyway",
            shared.join(",")
        );
    }
    Ok(Placed {
        server,
        client,
        why,
        topology: topo.describe(),
        cores: topo.cores.clone(),
    })
}

/// The CPUs of a run with no loadgen (the search suite): `server` as given, which may be
/// every CPU, else the topology's server share.
pub(crate) fn alone(server: Option<&CpuList>, topo: &Topology) -> Result<CpuList> {
    match server {
        Some(s) => Ok(s.clone()),
        None => Ok(topo.split().lists()?.0),
    }
}

/// Fails, naming the CPU, when a CPU of `cpus` is not one this process may run on.
pub(crate) fn check_allowed(cpus: &CpuList, what: &str) -> Result<()> {
    let allowed = sched_getaffinity(Pid::from_raw(0)).context("reading the CPU affinity")?;
    for &cpu in cpus.as_slice() {
        if !allowed.is_set(cpu).unwrap_or(false) {
            bail!(
                "{what} names CPU {cpu}, which this machine does not have or this process \
                 may not use (the CPUs are 0 to {})",
                std::thread::available_parallelism().map_or(1, |n| n.get()) - 1
            );
        }
    }
    Ok(())
}
