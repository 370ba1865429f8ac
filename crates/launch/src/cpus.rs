//! CPU lists (`1`, `1,3`, `0-3`) and pinning threads to them with
//! `sched_setaffinity`, so that the benchmarks can keep the server on one core
//! and the load generator on another.

use std::fmt;
use std::str::FromStr;

use anyhow::Context;
use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
use nix::unistd::Pid;

/// A non-empty list of CPU numbers, in the order given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuList(Vec<usize>);

impl CpuList {
    /// The CPUs, in the order given on the command line.
    pub fn as_slice(&self) -> &[usize] {
        &self.0
    }

    /// How many CPUs the list names.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Always false: a parsed list names at least one CPU.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The CPU for worker `i`: the list is used round robin.
    pub fn for_worker(&self, i: usize) -> usize {
        self.0[i % self.0.len()]
    }

    fn to_set(&self) -> anyhow::Result<CpuSet> {
        let mut set = CpuSet::new();
        for &cpu in &self.0 {
            set.set(cpu)
                .with_context(|| format!("CPU {cpu} is beyond what this system supports"))?;
        }
        Ok(set)
    }
}

impl FromStr for CpuList {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("`{s}` is not a CPU list like 1, 1,3 or 0-3");
        let mut cpus = Vec::new();
        for part in s.split(',') {
            match part.split_once('-') {
                Some((lo, hi)) => {
                    let lo: usize = lo.parse().map_err(|_| bad())?;
                    let hi: usize = hi.parse().map_err(|_| bad())?;
                    if lo > hi || hi - lo > 4096 {
                        return Err(bad());
                    }
                    cpus.extend(lo..=hi);
                }
                None => cpus.push(part.parse().map_err(|_| bad())?),
            }
        }
        if cpus.is_empty() {
            return Err(bad());
        }
        Ok(CpuList(cpus))
    }
}

impl fmt::Display for CpuList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, cpu) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{cpu}")?;
        }
        Ok(())
    }
}

/// Pins the calling thread to one CPU.
pub fn pin_current_thread(cpu: usize) -> anyhow::Result<()> {
    pin_current_thread_to(&CpuList(vec![cpu]))
}

/// Restricts the calling thread to a set of CPUs. Threads it spawns later
/// inherit the set, so calling this first in `main` pins a whole
/// thread-per-connection server.
pub fn pin_current_thread_to(cpus: &CpuList) -> anyhow::Result<()> {
    let set = cpus.to_set()?;
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
    fn parses_lists_and_ranges() {
        assert_eq!("1".parse::<CpuList>().unwrap().as_slice(), &[1]);
        assert_eq!("1,3".parse::<CpuList>().unwrap().as_slice(), &[1, 3]);
        assert_eq!(
            "0-2,5".parse::<CpuList>().unwrap().as_slice(),
            &[0, 1, 2, 5]
        );
        assert_eq!("0-2,5".parse::<CpuList>().unwrap().to_string(), "0,1,2,5");
        for bad in ["", ",", "a", "3-1", "1,,2", "-1", "1-"] {
            assert!(bad.parse::<CpuList>().is_err(), "{bad:?} should not parse");
        }
    }

    #[test]
    fn workers_go_round_robin() {
        let l: CpuList = "4,6".parse().unwrap();
        assert_eq!(
            (0..4).map(|i| l.for_worker(i)).collect::<Vec<_>>(),
            [4, 6, 4, 6]
        );
    }

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
