//! What the machine as a whole says in /proc, beside a server's own counters: the ticks its
//! CPUs were free or stolen by the hypervisor (`/proc/stat`), the kernel's thread stacks
//! (`/proc/meminfo`) and TCP socket memory (`/proc/net/sockstat`), and a wait for quiet CPUs
//! before a point.
//!
//! It may call nothing else of xtask.

use std::fs;

/// Reads `name:  <number>` from a status-like text (`/proc/*/status`, `smaps_rollup`).
pub(crate) fn field(text: &str, name: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

/// Clock ticks of `cpus` in a `/proc/stat` text that no task ran: idle, iowait, irq and
/// softirq, summed over the CPUs. Idle and iowait are measured exactly on a tickless kernel;
/// user and system are tick samples, which a CPU that wakes briefly and often (a server at one
/// connection) gets charged far more than it ran, so busy time is what remains of the wall
/// clock. Interrupt time is the benchmark's own network traffic, not another program.
pub(crate) fn free_ticks(stat: &str, cpus: &[usize]) -> u64 {
    let mut free = 0;
    for line in stat.lines() {
        let mut f = line.split_whitespace();
        let Some(cpu) = f
            .next()
            .and_then(|n| n.strip_prefix("cpu")?.parse::<usize>().ok())
        else {
            continue;
        };
        if !cpus.contains(&cpu) {
            continue;
        }
        let v: Vec<u64> = f.map(|x| x.parse().unwrap_or(0)).collect();
        // user nice system idle iowait irq softirq steal ...
        free += [3, 4, 5, 6]
            .iter()
            .map(|&i| v.get(i).copied().unwrap_or(0))
            .sum::<u64>();
    }
    free
}

/// Clock ticks the hypervisor stole from `cpus` (the `steal` column of `/proc/stat`).
pub(crate) fn steal_ticks(stat: &str, cpus: &[usize]) -> u64 {
    stat.lines()
        .filter_map(|line| {
            let mut f = line.split_whitespace();
            let cpu = f.next()?.strip_prefix("cpu")?.parse::<usize>().ok()?;
            cpus.contains(&cpu).then(|| f.nth(7)?.parse::<u64>().ok())?
        })
        .sum()
}

/// Stolen and total clock ticks of the whole machine (the `cpu` line of `/proc/stat`), for the
/// steal of a whole run.
pub(crate) fn machine_steal_ticks() -> Option<(u64, u64)> {
    let stat = fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    // user nice system idle iowait irq softirq steal; guest time is inside user already.
    let total: u64 = v.iter().take(8).sum();
    Some((v.get(7).copied().unwrap_or(0), total))
}

/// `KernelStack` of a /proc/meminfo text, in bytes.
pub(crate) fn kernel_stack(meminfo: &str) -> Option<u64> {
    field(meminfo, "KernelStack").map(|kib| kib * 1024)
}

/// The `mem` pages of the `TCP:` line of a /proc/net/sockstat text.
pub(crate) fn tcp_mem_pages(sockstat: &str) -> Option<u64> {
    let line = sockstat.lines().find(|l| l.starts_with("TCP:"))?;
    let mut f = line.split_whitespace();
    while let Some(k) = f.next() {
        if k == "mem" {
            return f.next()?.parse().ok();
        }
    }
    None
}

/// Waits, up to `max`, until `cpus` have been free (no task running) at least `share` of the
/// last quarter second each: a point started while another program runs there would measure
/// both. Returns whether they were. (A quarter second is 25 ticks of `/proc/stat` at 100 Hz:
/// enough to see a busy CPU, short enough to spend before each of a quick run's hundreds
/// of points.)
pub(crate) fn wait_until_quiet(cpus: &[usize], share: f64, max: std::time::Duration) -> bool {
    use std::time::{Duration, Instant};
    let free = |cpu: usize| {
        let stat = fs::read_to_string("/proc/stat").unwrap_or_default();
        free_ticks(&stat, &[cpu])
    };
    let ticks_per_s = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .unwrap_or(100) as f64;
    let until = Instant::now() + max;
    loop {
        let before: Vec<u64> = cpus.iter().map(|&c| free(c)).collect();
        let t0 = Instant::now();
        std::thread::sleep(Duration::from_millis(250));
        let secs = t0.elapsed().as_secs_f64();
        let quiet = cpus
            .iter()
            .zip(&before)
            .all(|(&c, &b)| (free(c).saturating_sub(b)) as f64 / ticks_per_s >= share * secs);
        if quiet {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_ticks_of_some_cpus() {
        let stat = "cpu  9 9 9 9 9 9 9 9 0 0\n\
                    cpu0 1 2 3 100 50 4 5 6 0 0\n\
                    cpu1 10 20 30 100 50 40 50 60 0 0\n\
                    intr 5\n";
        assert_eq!(free_ticks(stat, &[0]), 159);
        assert_eq!(free_ticks(stat, &[1]), 240);
        assert_eq!(free_ticks(stat, &[0, 1]), 399);
        assert_eq!(free_ticks(stat, &[2]), 0);
    }

    #[test]
    fn steal_and_kernel_memory() {
        let stat = "cpu  9 9 9 9 9 9 9 9 0 0\n\
                    cpu0 1 2 3 100 50 4 5 6 0 0\n\
                    cpu1 10 20 30 100 50 40 50 60 0 0\n";
        assert_eq!(steal_ticks(stat, &[0]), 6);
        assert_eq!(steal_ticks(stat, &[0, 1]), 66);
        let meminfo = "MemTotal:  100 kB\nKernelStack:    1332 kB\n";
        assert_eq!(kernel_stack(meminfo), Some(1332 * 1024));
        let sockstat = "sockets: used 11\nTCP: inuse 1 orphan 0 tw 0 alloc 1 mem 238\n\
                        UDP: inuse 0 mem 0\n";
        assert_eq!(tcp_mem_pages(sockstat), Some(238));
        assert_eq!(tcp_mem_pages("TCP: inuse 1"), None);
        let (steal, total) = machine_steal_ticks().unwrap();
        assert!(steal <= total);
    }

    #[test]
    fn status_fields() {
        let text = "Name:\tx\nvoluntary_ctxt_switches:\t12\nnonvoluntary_ctxt_switches:\t3\n";
        assert_eq!(field(text, "voluntary_ctxt_switches"), Some(12));
        assert_eq!(field(text, "nonvoluntary_ctxt_switches"), Some(3));
        assert_eq!(field("Rss:   100 kB\nPss:    80 kB\n", "Pss"), Some(80));
        assert_eq!(field(text, "Pss"), None);
    }
}
