//! CPU lists as the servers and loadgen take them (`1`, `0,2`, `1-3`), and pinning: the
//! harness starts each child on its CPUs itself, so that a server that ignores `--cpus`
//! (or pins only its workers) still runs where the comparison says it runs.

use std::fmt;
use std::str::FromStr;
use std::sync::Mutex;

use anyhow::{Context, Result, bail};
use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
use nix::unistd::Pid;

/// A non-empty list of CPU numbers, in the order given, without repeats.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CpuList(Vec<usize>);

impl CpuList {
    #[cfg(test)]
    pub(crate) fn single(cpu: usize) -> CpuList {
        CpuList(vec![cpu])
    }

    pub(crate) fn as_slice(&self) -> &[usize] {
        &self.0
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether any CPU is in both lists.
    pub(crate) fn overlaps(&self, other: &CpuList) -> bool {
        self.0.iter().any(|c| other.0.contains(c))
    }

    /// Fails, naming the CPU, when a CPU of the list is not one this process may run on.
    pub(crate) fn check_allowed(&self, what: &str) -> Result<()> {
        let allowed = sched_getaffinity(Pid::from_raw(0)).context("reading the CPU affinity")?;
        for &cpu in &self.0 {
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

    fn cpu_set(&self) -> Result<CpuSet> {
        let mut set = CpuSet::new();
        for &cpu in &self.0 {
            set.set(cpu)
                .with_context(|| format!("CPU {cpu} is beyond what a CPU set can name"))?;
        }
        Ok(set)
    }
}

impl FromStr for CpuList {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let num = |t: &str| {
            t.trim()
                .parse::<usize>()
                .map_err(|_| format!("`{t}` is not a CPU number (write a list like 1, 0,2 or 1-3)"))
        };
        let mut cpus = Vec::new();
        for part in s.split(',') {
            let range = match part.split_once('-') {
                Some((a, b)) => {
                    let (a, b) = (num(a)?, num(b)?);
                    if a > b {
                        return Err(format!("`{part}` is an empty CPU range"));
                    }
                    a..=b
                }
                None => {
                    let a = num(part)?;
                    a..=a
                }
            };
            for cpu in range {
                if !cpus.contains(&cpu) {
                    cpus.push(cpu);
                }
            }
        }
        Ok(CpuList(cpus))
    }
}

impl fmt::Display for CpuList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.0.iter().map(ToString::to_string).collect();
        f.write_str(&parts.join(","))
    }
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
    sched_setaffinity(me, &cpus.cpu_set()?).with_context(|| format!("pinning to CPUs {cpus}"))?;
    let spawned = spawn();
    sched_setaffinity(me, &before).context("restoring the CPU affinity")?;
    Ok(spawned?)
}

/// Pins the calling thread (and the threads it starts from now on) to `cpus`.
pub(crate) fn pin_current_thread(cpus: &CpuList) -> Result<()> {
    sched_setaffinity(Pid::from_raw(0), &cpus.cpu_set()?)
        .with_context(|| format!("pinning the harness to CPUs {cpus}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lists_and_ranges() {
        assert_eq!("1".parse::<CpuList>(), Ok(CpuList(vec![1])));
        assert_eq!("0,2".parse::<CpuList>(), Ok(CpuList(vec![0, 2])));
        assert_eq!("1-3,0".parse::<CpuList>(), Ok(CpuList(vec![1, 2, 3, 0])));
        assert_eq!("1,1".parse::<CpuList>(), Ok(CpuList(vec![1])));
        assert!("3-1".parse::<CpuList>().is_err());
        assert!("x".parse::<CpuList>().is_err());
        assert!("".parse::<CpuList>().is_err());
        assert_eq!(
            "0-2".parse::<CpuList>().map(|c| c.to_string()),
            Ok("0,1,2".into())
        );
    }

    #[test]
    fn overlap() {
        let a: CpuList = "0,1".parse().unwrap();
        assert!(a.overlaps(&CpuList::single(1)));
        assert!(!a.overlaps(&CpuList::single(2)));
    }

    #[test]
    fn a_child_starts_on_the_cpus_it_is_given() {
        let cpu = CpuList::single(0);
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
