//! Pinning to CPU lists (`cpulist`'s, the grammar the servers and loadgen take): the
//! harness starts each child on its CPUs itself, so that a server that ignores `--cpus`
//! (or pins only its workers) still runs where the comparison says it runs.
//!
//! It may call the plan layer's `placement` (the CPU lists, checked there).

use std::sync::Mutex;

use anyhow::{Context, Result};
use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
use nix::unistd::Pid;

use crate::plan::placement::CpuList;

fn cpu_set(cpus: &CpuList) -> Result<CpuSet> {
    let mut set = CpuSet::new();
    for &cpu in cpus.as_slice() {
        set.set(cpu)
            .with_context(|| format!("CPU {cpu} is beyond what a CPU set can name"))?;
    }
    Ok(set)
}

/// Serializes the affinity juggling of [`spawn_on`]: another thread spawning at the same
/// moment would otherwise start its child on the wrong CPUs.
static SPAWN: Mutex<()> = Mutex::new(());

/// Runs `spawn` with the calling thread pinned to `cpus`, then restores its affinity. A child
/// inherits the affinity of the thread that forks it, so the child starts on `cpus` before it
/// runs a single instruction of its own.
pub(crate) fn spawn_on<T>(cpus: &CpuList, spawn: impl FnOnce() -> std::io::Result<T>) -> Result<T> {
    let _guard = SPAWN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let me = Pid::from_raw(0);
    let before = sched_getaffinity(me).context("reading the CPU affinity")?;
    sched_setaffinity(me, &cpu_set(cpus)?).with_context(|| format!("pinning to CPUs {cpus}"))?;
    let spawned = spawn();
    sched_setaffinity(me, &before).context("restoring the CPU affinity")?;
    Ok(spawned?)
}

/// Pins the calling thread (and the threads it starts from now on) to `cpus`.
pub(crate) fn pin_current_thread(cpus: &CpuList) -> Result<()> {
    sched_setaffinity(Pid::from_raw(0), &cpu_set(cpus)?)
        .with_context(|| format!("pinning the harness to CPUs {cpus}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_starts_on_the_cpus_it_is_given() {
        let cpu = CpuList::one(0);
        let out = spawn_on(&cpu, || {
            std::process::Command::new("cat")
                .arg("/proc/self/status")
                .output()
        })
        .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text
            .lines()
            .find(|l| l.starts_with("Cpus_allowed_list:"))
            .unwrap();
        assert_eq!(line.split_whitespace().nth(1), Some("0"), "{line}");
    }
}
