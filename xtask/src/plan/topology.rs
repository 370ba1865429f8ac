//! The machine's CPUs as the kernel describes them (`/sys/devices/system/cpu`: each CPU's
//! physical package, core and NUMA node), and the default split of them between the server
//! and loadgen.
//!
//! The rule, on more than two CPUs: the server gets whole physical cores (SMT siblings
//! together, never a core shared with loadgen) from one NUMA node, the highest-numbered ones
//! of the node with the most cores, and as many as fit in half of the machine; loadgen gets
//! every other CPU, so at least as many as the server. A server core split with loadgen, or a
//! server spread over two nodes, would measure the placement instead of the server. On one or
//! two CPUs the split is the historical one: the server on the last CPU, loadgen on the first.
//!
//! It may call nothing else of xtask.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use cpulist::CpuList;

/// One physical core: the CPUs (SMT threads) that share it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Core {
    pub(crate) node: usize,
    pub(crate) package: usize,
    pub(crate) core: usize,
    pub(crate) cpus: Vec<usize>,
}

/// The CPUs this process may use, by core.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Topology {
    /// Cores in the order of their first CPU.
    pub(crate) cores: Vec<Core>,
}

/// The default placement and why it is what it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Split {
    pub(crate) server: Vec<usize>,
    pub(crate) client: Vec<usize>,
    /// One line for people: what the server got and why.
    pub(crate) why: String,
}

fn read_number(path: &Path) -> Result<usize> {
    let text = fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    text.trim()
        .parse()
        .with_context(|| format!("{} holds `{}`, not a number", path.display(), text.trim()))
}

impl Topology {
    /// Reads the topology of `cpus` under `sys` (`/sys/devices/system/cpu` on a real machine).
    /// A CPU without topology files (some virtual machines) counts as a core of its own on
    /// node 0.
    pub(crate) fn read(sys: &Path, cpus: &[usize]) -> Result<Topology> {
        let mut by_core: BTreeMap<(usize, usize, usize), Vec<usize>> = BTreeMap::new();
        for &cpu in cpus {
            let dir = sys.join(format!("cpu{cpu}"));
            if !dir.is_dir() {
                bail!("{} is missing: no CPU {cpu} on this machine", dir.display());
            }
            let topo = dir.join("topology");
            let (package, core) = if topo.is_dir() {
                (
                    read_number(&topo.join("physical_package_id"))?,
                    read_number(&topo.join("core_id"))?,
                )
            } else {
                (0, cpu)
            };
            // `cpuN/nodeM` is a link to the node the CPU belongs to.
            let node = fs::read_dir(&dir)
                .with_context(|| format!("listing {}", dir.display()))?
                .flatten()
                .filter_map(|e| {
                    e.file_name()
                        .to_str()
                        .and_then(|n| n.strip_prefix("node"))
                        .and_then(|n| n.parse().ok())
                })
                .next()
                .unwrap_or(0);
            by_core.entry((node, package, core)).or_default().push(cpu);
        }
        let mut cores: Vec<Core> = by_core
            .into_iter()
            .map(|((node, package, core), mut cpus)| {
                cpus.sort_unstable();
                Core {
                    node,
                    package,
                    core,
                    cpus,
                }
            })
            .collect();
        cores.sort_by_key(|c| c.cpus[0]);
        Ok(Topology { cores })
    }

    /// The topology of the CPUs this process may run on.
    pub(crate) fn of_this_machine() -> Result<Topology> {
        use nix::sched::sched_getaffinity;
        use nix::unistd::Pid;
        let set = sched_getaffinity(Pid::from_raw(0)).context("reading the CPU affinity")?;
        let allowed: Vec<usize> = (0..nix::sched::CpuSet::count())
            .filter(|&c| set.is_set(c).unwrap_or(false))
            .collect();
        Topology::read(Path::new("/sys/devices/system/cpu"), &allowed)
    }

    /// Every CPU, ascending.
    pub(crate) fn cpus(&self) -> Vec<usize> {
        let mut all: Vec<usize> = self.cores.iter().flat_map(|c| c.cpus.clone()).collect();
        all.sort_unstable();
        all
    }

    /// Threads per core, at most.
    pub(crate) fn smt(&self) -> usize {
        self.cores.iter().map(|c| c.cpus.len()).max().unwrap_or(1)
    }

    /// NUMA nodes with at least one CPU.
    pub(crate) fn nodes(&self) -> usize {
        let mut nodes: Vec<usize> = self.cores.iter().map(|c| c.node).collect();
        nodes.sort_unstable();
        nodes.dedup();
        nodes.len()
    }

    /// One line for the report's header: `16 CPUs: 8 cores × 2 threads, 2 NUMA nodes`.
    pub(crate) fn describe(&self) -> String {
        let n = self.cpus().len();
        let nodes = self.nodes();
        format!(
            "{n} CPU{}: {} core{} × {} thread{}, {nodes} NUMA node{}",
            if n == 1 { "" } else { "s" },
            self.cores.len(),
            if self.cores.len() == 1 { "" } else { "s" },
            self.smt(),
            if self.smt() == 1 { "" } else { "s" },
            if nodes == 1 { "" } else { "s" },
        )
    }

    /// The default placement: see the module's rule.
    pub(crate) fn split(&self) -> Split {
        let all = self.cpus();
        if all.len() <= 2 {
            let (server, client) = match all.as_slice() {
                [only] => (vec![*only], vec![*only]),
                [first, last] => (vec![*last], vec![*first]),
                _ => (Vec::new(), Vec::new()),
            };
            return Split {
                server,
                client,
                why: "two CPUs or fewer: the server on the last, loadgen on the first".into(),
            };
        }
        let half = all.len() / 2;
        // The node with the most cores (the highest-numbered on a tie), and in it the
        // highest-numbered cores that fit in half of the machine.
        let mut per_node: BTreeMap<usize, Vec<&Core>> = BTreeMap::new();
        for c in &self.cores {
            per_node.entry(c.node).or_default().push(c);
        }
        let (&node, cores) = per_node
            .iter()
            .max_by_key(|(node, cores)| (cores.len(), **node))
            .expect("more than two CPUs have a node");
        let mut server: Vec<usize> = Vec::new();
        for core in cores.iter().rev() {
            if server.len() + core.cpus.len() > half {
                break;
            }
            server.extend(&core.cpus);
        }
        let why = if server.is_empty() {
            // A core wider than half of the machine (3 CPUs, 2 threads a core): one thread.
            let last = *cores
                .last()
                .expect("a node has a core")
                .cpus
                .last()
                .expect("a core has a CPU");
            server.push(last);
            format!(
                "one thread of a core: a whole core ({} threads) would leave loadgen fewer CPUs \
                 than the server",
                self.smt()
            )
        } else {
            let whole = server.len() / self.smt().max(1);
            format!(
                "{} whole core{} of NUMA node {node} for the server (at most half of the {} \
                 CPUs), every other CPU for loadgen",
                whole.max(1),
                if whole == 1 { "" } else { "s" },
                all.len()
            )
        };
        server.sort_unstable();
        let client: Vec<usize> = all.into_iter().filter(|c| !server.contains(c)).collect();
        Split {
            server,
            client,
            why,
        }
    }
}

impl Split {
    /// The two sets as CPU lists.
    pub(crate) fn lists(&self) -> Result<(CpuList, CpuList)> {
        let list = |cpus: &[usize]| -> Result<CpuList> {
            cpus.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(",")
                .parse::<CpuList>()
                .map_err(|e| anyhow::anyhow!("{e}"))
        };
        Ok((list(&self.server)?, list(&self.client)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake `/sys/devices/system/cpu`: CPU `i` of `cpus` on `(node, package, core)`.
    fn fake(cpus: &[(usize, usize, usize)]) -> (tempfile::TempDir, Vec<usize>) {
        let dir = tempfile::tempdir().unwrap();
        for (i, &(node, package, core)) in cpus.iter().enumerate() {
            let cpu = dir.path().join(format!("cpu{i}"));
            fs::create_dir_all(cpu.join("topology")).unwrap();
            fs::create_dir_all(cpu.join(format!("node{node}"))).unwrap();
            fs::write(
                cpu.join("topology/physical_package_id"),
                format!("{package}\n"),
            )
            .unwrap();
            fs::write(cpu.join("topology/core_id"), format!("{core}\n")).unwrap();
        }
        (dir, (0..cpus.len()).collect())
    }

    #[test]
    fn two_cpus_keep_the_historical_split() {
        let (dir, all) = fake(&[(0, 0, 0), (0, 0, 1)]);
        let t = Topology::read(dir.path(), &all).unwrap();
        let s = t.split();
        assert_eq!((s.server, s.client), (vec![1], vec![0]));
    }

    #[test]
    fn sixteen_cores_split_in_half() {
        let cpus: Vec<_> = (0..16).map(|c| (0, 0, c)).collect();
        let (dir, all) = fake(&cpus);
        let t = Topology::read(dir.path(), &all).unwrap();
        assert_eq!(t.describe(), "16 CPUs: 16 cores × 1 thread, 1 NUMA node");
        let s = t.split();
        assert_eq!(s.server, (8..16).collect::<Vec<_>>());
        assert_eq!(s.client, (0..8).collect::<Vec<_>>());
    }

    #[test]
    fn smt_siblings_stay_together() {
        // 4 cores × 2 threads, siblings numbered apart as Linux does (cpu i and i + 4).
        let cpus: Vec<_> = (0..8).map(|c| (0, 0, c % 4)).collect();
        let (dir, all) = fake(&cpus);
        let t = Topology::read(dir.path(), &all).unwrap();
        assert_eq!(t.smt(), 2);
        let s = t.split();
        assert_eq!(s.server, vec![2, 3, 6, 7]);
        assert_eq!(s.client, vec![0, 1, 4, 5]);
        assert!(s.why.contains("2 whole cores"), "{}", s.why);
    }

    #[test]
    fn the_server_stays_on_one_node_and_loadgen_gets_at_least_as_many() {
        // Two nodes of 6 cores and one of 4: the server takes from a 6-core node (node 1,
        // the higher of the two), at most half the machine (8), so 6 cores.
        let mut cpus = Vec::new();
        for (node, n) in [(0, 6), (1, 6), (2, 4)] {
            for c in 0..n {
                cpus.push((node, node, c));
            }
        }
        let (dir, all) = fake(&cpus);
        let t = Topology::read(dir.path(), &all).unwrap();
        assert_eq!(t.nodes(), 3);
        let s = t.split();
        assert_eq!(s.server, (6..12).collect::<Vec<_>>());
        assert!(s.client.len() >= s.server.len());
        assert!(s.server.iter().all(|c| !s.client.contains(c)));
        assert!(s.why.contains("node 1"), "{}", s.why);
    }

    #[test]
    fn a_core_wider_than_half_gives_one_thread() {
        let (dir, all) = fake(&[(0, 0, 0), (0, 0, 1), (0, 0, 1)]);
        let s = Topology::read(dir.path(), &all).unwrap().split();
        assert_eq!(s.server, vec![2]);
        assert_eq!(s.client, vec![0, 1]);
    }

    #[test]
    fn a_missing_cpu_is_named() {
        let (dir, _) = fake(&[(0, 0, 0)]);
        let e = Topology::read(dir.path(), &[0, 5]).unwrap_err().to_string();
        assert!(e.contains("no CPU 5"), "{e}");
    }

    #[test]
    fn this_machine_reads() {
        let t = Topology::of_this_machine().unwrap();
        assert!(!t.cpus().is_empty());
        let s = t.split();
        assert!(!s.server.is_empty() && !s.client.is_empty());
    }
}
