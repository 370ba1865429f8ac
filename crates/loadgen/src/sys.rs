//! The few kernel facilities loadgen needs besides sockets: CPU pinning, its own CPU time,
//! the file-descriptor limit, and how busy a set of CPUs was.

use std::io;

use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
use nix::sys::resource::{Resource, getrlimit, setrlimit};
use nix::time::{ClockId, clock_gettime};
use nix::unistd::Pid;

/// CPU time the calling thread has used, user and system, in nanoseconds.
pub(crate) fn thread_cpu_ns() -> u64 {
    // The thread CPU clock exists on every Linux; should it fail, a zero reads as "no CPU
    // used", which the summary shows rather than hides.
    clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID)
        .map(|t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64)
        .unwrap_or(0)
}

/// The calling thread's CPU affinity.
pub(crate) fn affinity() -> io::Result<CpuSet> {
    sched_getaffinity(Pid::from_raw(0)).map_err(io::Error::from)
}

/// Restricts the calling thread to `set`.
pub(crate) fn set_affinity(set: &CpuSet) -> io::Result<()> {
    sched_setaffinity(Pid::from_raw(0), set).map_err(io::Error::from)
}

/// Pins the calling thread to the CPUs in `cpus`.
pub(crate) fn pin(cpus: &[usize]) -> io::Result<()> {
    let mut set = CpuSet::new();
    for &cpu in cpus {
        set.set(cpu).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("CPU {cpu} is beyond what the kernel's CPU set can name"),
            )
        })?;
    }
    set_affinity(&set)
}

/// What became of the file-descriptor limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NofileLimit {
    /// The soft limit in force now.
    pub(crate) soft: u64,
    /// Whether it is at least what was asked for.
    pub(crate) enough: bool,
}

/// Raises the soft `RLIMIT_NOFILE` to `needed` if it is lower, as far as the hard limit allows.
pub(crate) fn raise_nofile(needed: u64) -> io::Result<NofileLimit> {
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE)?;
    if soft >= needed {
        return Ok(NofileLimit { soft, enough: true });
    }
    let target = needed.min(hard);
    setrlimit(Resource::RLIMIT_NOFILE, target, hard)?;
    Ok(NofileLimit {
        soft: target,
        enough: target >= needed,
    })
}

/// CPU time, user and system, of process `pid` and all its threads (those that have exited
/// included), in nanoseconds, from `/proc/<pid>/stat`.
pub(crate) fn process_cpu_ns(pid: u32) -> io::Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // USER_HZ is 100 on every architecture Linux runs this on; sysconf says for sure.
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .filter(|&hz| hz > 0)
        .unwrap_or(100) as u64;
    parse_process_cpu(&stat, hz).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("unexpected /proc/{pid}/stat"),
        )
    })
}

fn parse_process_cpu(stat: &str, hz: u64) -> Option<u64> {
    // The command name may hold spaces and parentheses; the fields after it do not.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace();
    // After the name: state is field 3 of proc(5), utime 14 and stime 15.
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some((utime + stime) * (1_000_000_000 / hz))
}

/// Busy and total jiffies of some CPUs, from `/proc/stat`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct CpuTicks {
    busy: u64,
    total: u64,
}

impl CpuTicks {
    /// Sums the counters of `cpus` as they are now.
    pub(crate) fn read(cpus: &[usize]) -> io::Result<CpuTicks> {
        let stat = std::fs::read_to_string("/proc/stat")?;
        Ok(Self::parse(&stat, cpus))
    }

    fn parse(stat: &str, cpus: &[usize]) -> CpuTicks {
        let mut sum = CpuTicks::default();
        for line in stat.lines() {
            let mut fields = line.split_ascii_whitespace();
            let Some(cpu) = fields
                .next()
                .and_then(|name| name.strip_prefix("cpu"))
                .and_then(|n| n.parse::<usize>().ok())
            else {
                continue;
            };
            if !cpus.contains(&cpu) {
                continue;
            }
            // user nice system idle iowait irq softirq steal; guest time is already in user.
            let v: Vec<u64> = fields.take(8).filter_map(|f| f.parse().ok()).collect();
            if v.len() < 8 {
                continue;
            }
            let idle = v[3] + v[4];
            let total: u64 = v.iter().sum();
            sum.busy += total - idle;
            sum.total += total;
        }
        sum
    }

    /// The fraction of the time between `self` and `later` that the CPUs were busy.
    pub(crate) fn busy_since(self, later: CpuTicks) -> Option<f64> {
        let total = later.total.checked_sub(self.total)?;
        let busy = later.busy.checked_sub(self.busy)?;
        (total > 0).then(|| busy as f64 / total as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_busy_fraction() {
        let a =
            "cpu  10 0 10 100 0 0 0 0 0 0\ncpu0 5 0 5 50 0 0 0 0 0 0\ncpu1 5 0 5 50 0 0 0 0 0 0\n";
        let b = "cpu  10 0 10 100 0 0 0 0 0 0\ncpu0 35 0 35 60 0 0 0 0 0 0\ncpu1 5 0 5 60 0 0 0 0 0 0\n";
        let (a0, b0) = (CpuTicks::parse(a, &[0]), CpuTicks::parse(b, &[0]));
        assert_eq!(a0.busy_since(b0), Some(60.0 / 70.0));
        let (a1, b1) = (CpuTicks::parse(a, &[1]), CpuTicks::parse(b, &[1]));
        assert_eq!(a1.busy_since(b1), Some(0.0));
        assert_eq!(b1.busy_since(a1), None);
    }

    #[test]
    fn proc_pid_stat_cpu() {
        let stat = "4242 (srv (x) y) S 1 4242 4242 0 -1 4194560 187 0 0 0 250 130 0 0 20 0 3 0 1";
        assert_eq!(parse_process_cpu(stat, 100), Some(3_800_000_000));
        assert_eq!(parse_process_cpu("4242 (srv) S 1", 100), None);
        let own = process_cpu_ns(std::process::id()).expect("our own stat");
        assert!(own < 3_600 * 1_000_000_000);
    }

    #[test]
    fn thread_cpu_time_moves() {
        let a = thread_cpu_ns();
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = std::hint::black_box(x.wrapping_add(i));
        }
        assert!(thread_cpu_ns() > a, "{x}");
    }
}
