//! Where the server and the clients run: the CPU lists of each (`cpulist`'s grammar, the one
//! the servers and loadgen take) and the server's worker count, checked against the CPUs
//! this process may use before anything starts.
//!
//! It may call nothing else of xtask; `run::cpus` pins the children where this says.

use anyhow::{Context, Result, bail};
use nix::sched::sched_getaffinity;
use nix::unistd::Pid;

pub(crate) use cpulist::CpuList;

/// Where the children run.
#[derive(Debug, Clone)]
pub(crate) struct Placement {
    pub(crate) server_cpus: CpuList,
    pub(crate) client_cpus: CpuList,
    pub(crate) workers: usize,
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
