//! Pinning threads to CPU lists (`1`, `1,3`, `0-3`, the `cpulist` crate's
//! grammar) with `sched_setaffinity`, so that the benchmarks can keep the server
//! on one core and the load generator on another.

use anyhow::Context;
use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
use nix::unistd::Pid;

pub use cpulist::CpuList;

fn cpu_set(cpus: &CpuList) -> anyhow::Result<CpuSet> {
    let mut set = CpuSet::new();
    for &cpu in cpus.as_slice() {
        set.set(cpu)
            .with_context(|| format!("CPU {cpu} is beyond what this system supports"))?;
    }
    Ok(set)
}

/// Pins the calling thread to one CPU.
pub fn pin_current_thread(cpu: usize) -> anyhow::Result<()> {
    pin_current_thread_to(&CpuList::one(cpu))
}

/// Restricts the calling thread to a set of CPUs. Threads it spawns later
/// inherit the set, so calling this first in `main` pins a whole
/// thread-per-connection server.
pub fn pin_current_thread_to(cpus: &CpuList) -> anyhow::Result<()> {
    let set = cpu_set(cpus)?;
    sched_setaffinity(Pid::from_raw(0), &set)
        .with_context(|| format!("cannot pin to CPUs {cpus} (are they online and allowed?)"))
}

/// How many CPUs this process may run on (its affinity mask), at least 1.
pub fn allowed_count() -> usize {
    match sched_getaffinity(Pid::from_raw(0)) {
        Ok(set) => (0..CpuSet::count())
            .filter(|&cpu| set.is_set(cpu).unwrap_or(false))
            .count()
            .max(1),
        Err(_) => std::thread::available_parallelism().map_or(1, |n| n.get()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinning_to_an_allowed_cpu_works_and_a_missing_one_fails() {
        // Run on a fresh thread so the test runner's threads keep their mask.
        std::thread::spawn(|| {
            pin_current_thread(0).expect("CPU 0 is always there");
            assert_eq!(allowed_count(), 1);
            let err = pin_current_thread(100_000).unwrap_err();
            assert!(format!("{err:#}").contains("100000"), "{err:#}");
        })
        .join()
        .unwrap();
    }
}
