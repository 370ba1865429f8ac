//! A server's CPU time as the kernel keeps it for a whole group of tasks, read at the edges
//! of a measured window: the counter of the server's cgroup, or, where no cgroup was made for
//! it, its process tree's `/proc/<pid>/stat`.
//!
//! Both count every thread that ever ran, not only the live ones: a cgroup's counter
//! (`usage_usec` of v2 `cpu.stat`, v1 `cpuacct.usage`) keeps what exited tasks used, and a
//! process's `utime`/`stime` keep what its exited threads used, its `cutime`/`cstime` what
//! the children it reaped used. Summing the live threads' own counters instead loses a
//! thread that exits between two readings, and a forked child's time once it is reaped.
//!
//! The cgroup's counter is in nanoseconds (v1) or microseconds (v2); the process tree's in
//! clock ticks (10 ms), so the tree is exact only to a tick a process at each edge.
//!
//! Beside them, [`CpuStates`]: what `/proc/stat` says of some CPUs, among it the time spent
//! in interrupts and softirqs, which on loopback is the peer's receive path run on the
//! server's CPU and charged to no task.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// CPU time used so far, nanoseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuTime {
    /// User and system together.
    pub total_ns: u64,
    /// In user mode.
    pub user_ns: u64,
    /// In the kernel on the tasks' behalf.
    pub system_ns: u64,
}

impl CpuTime {
    /// What was used between `self` and `later` (zero where a counter went back).
    pub fn until(self, later: CpuTime) -> CpuTime {
        CpuTime {
            total_ns: later.total_ns.saturating_sub(self.total_ns),
            user_ns: later.user_ns.saturating_sub(self.user_ns),
            system_ns: later.system_ns.saturating_sub(self.system_ns),
        }
    }
}

/// Where a server's CPU time is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CpuSource {
    /// A cgroup directory: v2 (`cpu.stat` with `usage_usec`) or v1 `cpuacct`
    /// (`cpuacct.usage`), told apart by the files it holds.
    Cgroup(PathBuf),
    /// The process tree under this pid, from `/proc/<pid>/stat` of each.
    Tree(u32),
}

impl CpuSource {
    /// The CPU time used so far by everything the source counts.
    pub fn read(&self) -> io::Result<CpuTime> {
        match self {
            CpuSource::Cgroup(dir) => cgroup_cpu(dir),
            CpuSource::Tree(pid) => tree_cpu(*pid),
        }
    }

    /// What the figures come from, for a report: `cgroup v2`, `cgroup v1` or
    /// `process tree`.
    pub fn accounting(&self) -> &'static str {
        match self {
            CpuSource::Cgroup(dir) if dir.join("cpuacct.usage").exists() => "cgroup v1",
            CpuSource::Cgroup(_) => "cgroup v2",
            CpuSource::Tree(_) => "process tree",
        }
    }
}

/// The clock ticks a second of `/proc`'s tick counters (USER_HZ).
fn ticks_per_s() -> u64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .and_then(|hz| u64::try_from(hz).ok())
        .filter(|&hz| hz > 0)
        .unwrap_or(100)
}

fn invalid(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

/// The CPU time of cgroup `dir`, v2 or v1.
pub fn cgroup_cpu(dir: &Path) -> io::Result<CpuTime> {
    let v1 = dir.join("cpuacct.usage");
    if v1.exists() {
        return cgroup_v1_cpu(dir);
    }
    let path = dir.join("cpu.stat");
    let text = fs::read_to_string(&path)?;
    parse_cpu_stat_v2(&text)
        .ok_or_else(|| invalid(format!("{} has no usage_usec line", path.display())))
}

/// v2 `cpu.stat`: `usage_usec`, `user_usec`, `system_usec`.
fn parse_cpu_stat_v2(text: &str) -> Option<CpuTime> {
    let field = |name: &str| {
        text.lines().find_map(|l| {
            let (k, v) = l.split_once(' ')?;
            (k == name).then(|| v.trim().parse::<u64>().ok())?
        })
    };
    Some(CpuTime {
        total_ns: field("usage_usec")? * 1_000,
        user_ns: field("user_usec").unwrap_or(0) * 1_000,
        system_ns: field("system_usec").unwrap_or(0) * 1_000,
    })
}

/// v1 `cpuacct`: the total in ns from `cpuacct.usage`; the split from `cpuacct.usage_user`
/// and `cpuacct.usage_sys` (ns, Linux 4.7 on), else from `cpuacct.stat`'s ticks.
fn cgroup_v1_cpu(dir: &Path) -> io::Result<CpuTime> {
    let read_ns = |name: &str| -> io::Result<u64> {
        let path = dir.join(name);
        fs::read_to_string(&path)?
            .trim()
            .parse()
            .map_err(|e| invalid(format!("{}: {e}", path.display())))
    };
    let total_ns = read_ns("cpuacct.usage")?;
    if let (Ok(user_ns), Ok(system_ns)) =
        (read_ns("cpuacct.usage_user"), read_ns("cpuacct.usage_sys"))
    {
        return Ok(CpuTime {
            total_ns,
            user_ns,
            system_ns,
        });
    }
    let stat = fs::read_to_string(dir.join("cpuacct.stat")).unwrap_or_default();
    let (user, system) = parse_cpuacct_stat(&stat);
    let ns = 1_000_000_000 / ticks_per_s();
    Ok(CpuTime {
        total_ns,
        user_ns: user * ns,
        system_ns: system * ns,
    })
}

/// v1 `cpuacct.stat`: `user` and `system` in clock ticks.
fn parse_cpuacct_stat(text: &str) -> (u64, u64) {
    let mut out = (0, 0);
    for line in text.lines() {
        match line.split_once(' ') {
            Some(("user", v)) => out.0 = v.trim().parse().unwrap_or(0),
            Some(("system", v)) => out.1 = v.trim().parse().unwrap_or(0),
            _ => {}
        }
    }
    out
}

/// The fields of `/proc/<pid>/stat` the tree needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    /// The parent's pid.
    pub ppid: i32,
    /// User ticks of the process, its exited threads included.
    pub utime: u64,
    /// System ticks of the process.
    pub stime: u64,
    /// User ticks of the children it has reaped (and theirs).
    pub cutime: u64,
    /// System ticks of the children it has reaped.
    pub cstime: u64,
    /// Threads now.
    pub threads: u64,
    /// When it started, ticks after boot.
    pub starttime: u64,
    /// Resident pages.
    pub rss_pages: u64,
}

/// Parses `/proc/<pid>/stat`. The command name (field 2) may hold spaces and parentheses,
/// so the fields are counted from the last `)`.
pub fn parse_proc_stat(text: &str) -> Option<ProcStat> {
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // f[0] is field 3 (state); field n is f[n - 3].
    let num = |n: usize| f.get(n - 3)?.parse::<u64>().ok();
    Some(ProcStat {
        ppid: f.get(1)?.parse().ok()?,
        utime: num(14)?,
        stime: num(15)?,
        cutime: num(16)?,
        cstime: num(17)?,
        threads: num(20)?,
        starttime: num(22)?,
        rss_pages: num(24)?,
    })
}

/// `root` and all its descendants with their stat, found by scanning `/proc` for parent
/// links; fails when `root` is gone.
pub fn process_tree(root: i32) -> io::Result<Vec<(i32, ProcStat)>> {
    let mut stats: HashMap<i32, ProcStat> = HashMap::new();
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    for entry in fs::read_dir("/proc")? {
        let Ok(entry) = entry else { continue };
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        // A process may exit between the listing and the read: it is simply not counted.
        let Ok(text) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        if let Some(stat) = parse_proc_stat(&text) {
            children.entry(stat.ppid).or_default().push(pid);
            stats.insert(pid, stat);
        }
    }
    let mut out = Vec::new();
    let mut todo = vec![root];
    while let Some(pid) = todo.pop() {
        if let Some(stat) = stats.get(&pid) {
            out.push((pid, *stat));
            if let Some(kids) = children.get(&pid) {
                todo.extend(kids);
            }
        }
    }
    if out.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("process {root} is gone"),
        ));
    }
    Ok(out)
}

/// The CPU time of the tree under `pid`: each process's own (its exited threads included)
/// and its reaped children's.
pub fn tree_cpu(pid: u32) -> io::Result<CpuTime> {
    let root = i32::try_from(pid).map_err(|_| invalid(format!("no such pid {pid}")))?;
    let ns = 1_000_000_000 / ticks_per_s();
    let (mut user, mut system) = (0, 0);
    for (_, s) in process_tree(root)? {
        user += s.utime + s.cutime;
        system += s.stime + s.cstime;
    }
    Ok(CpuTime {
        total_ns: (user + system) * ns,
        user_ns: user * ns,
        system_ns: system * ns,
    })
}

/// What some CPUs did so far, from `/proc/stat`, nanoseconds summed over them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuStates {
    /// Running anything: tasks, interrupts, softirqs (not idle, iowait or stolen).
    pub busy_ns: u64,
    /// Hard interrupts.
    pub irq_ns: u64,
    /// Softirqs: the network's receive path, among others.
    pub softirq_ns: u64,
    /// Taken by the hypervisor.
    pub steal_ns: u64,
    /// Every state, idle included: the wall time times the CPUs, as the ticks count it.
    pub total_ns: u64,
    /// How many CPUs are summed.
    pub cpus: usize,
}

impl CpuStates {
    /// The states of `cpus` now.
    pub fn read(cpus: &[usize]) -> io::Result<CpuStates> {
        Ok(Self::parse(
            &fs::read_to_string("/proc/stat")?,
            cpus,
            ticks_per_s(),
        ))
    }

    fn parse(stat: &str, cpus: &[usize], hz: u64) -> CpuStates {
        let ns = 1_000_000_000 / hz.max(1);
        let mut sum = CpuStates::default();
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
            let [user, nice, system, idle, iowait, irq, softirq, steal] = v[..] else {
                continue;
            };
            sum.total_ns += (user + nice + system + idle + iowait + irq + softirq + steal) * ns;
            sum.busy_ns += (user + nice + system + irq + softirq) * ns;
            sum.irq_ns += irq * ns;
            sum.softirq_ns += softirq * ns;
            sum.steal_ns += steal * ns;
            sum.cpus += 1;
        }
        sum
    }

    /// What the CPUs did between `self` and `later`.
    pub fn until(self, later: CpuStates) -> CpuStates {
        CpuStates {
            busy_ns: later.busy_ns.saturating_sub(self.busy_ns),
            irq_ns: later.irq_ns.saturating_sub(self.irq_ns),
            softirq_ns: later.softirq_ns.saturating_sub(self.softirq_ns),
            steal_ns: later.steal_ns.saturating_sub(self.steal_ns),
            total_ns: later.total_ns.saturating_sub(self.total_ns),
            cpus: later.cpus,
        }
    }

    /// The fraction of the time between `self` and `later` that the CPUs were busy; `None`
    /// where no tick passed, or the counters went back.
    pub fn busy_since(self, later: CpuStates) -> Option<f64> {
        let total = later.total_ns.checked_sub(self.total_ns)?;
        let busy = later.busy_ns.checked_sub(self.busy_ns)?;
        (total > 0).then(|| busy as f64 / total as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgroup_files_parse() {
        let t =
            parse_cpu_stat_v2("usage_usec 1500\nuser_usec 1000\nsystem_usec 500\nnr_periods 0\n")
                .unwrap();
        assert_eq!(
            t,
            CpuTime {
                total_ns: 1_500_000,
                user_ns: 1_000_000,
                system_ns: 500_000
            }
        );
        assert_eq!(parse_cpu_stat_v2("nr_periods 3\n"), None);
        assert_eq!(parse_cpuacct_stat("user 12\nsystem 30\n"), (12, 30));
    }

    #[test]
    fn stat_fields_are_counted_from_the_last_parenthesis() {
        let text = "4242 (srv (x) y) S 17 4242 4242 0 -1 4194560 100 0 0 0 \
                    250 75 30 5 20 0 3 0 12345 1000000 512 18446744073709551615";
        let s = parse_proc_stat(text).unwrap();
        assert_eq!(
            s,
            ProcStat {
                ppid: 17,
                utime: 250,
                stime: 75,
                cutime: 30,
                cstime: 5,
                threads: 3,
                starttime: 12345,
                rss_pages: 512
            }
        );
        assert_eq!(parse_proc_stat("12 (x) S"), None);
    }

    #[test]
    fn cpu_states_of_some_cpus() {
        let stat = "cpu  10 0 10 100 0 1 2 0 0 0\n\
                    cpu0 5 0 5 50 0 0 1 0 0 0\n\
                    cpu1 5 1 5 50 3 2 7 4 0 0\n";
        let s = CpuStates::parse(stat, &[1], 100);
        assert_eq!(
            s,
            CpuStates {
                busy_ns: 20 * 10_000_000,
                irq_ns: 2 * 10_000_000,
                softirq_ns: 7 * 10_000_000,
                steal_ns: 4 * 10_000_000,
                total_ns: 77 * 10_000_000,
                cpus: 1
            }
        );
        let a = "cpu0 5 0 5 50 0 0 0 0 0 0\ncpu1 5 0 5 50 0 0 0 0 0 0\n";
        let b = "cpu0 35 0 35 60 0 0 0 0 0 0\ncpu1 5 0 5 60 0 0 0 0 0 0\n";
        let at = |t, cpu| CpuStates::parse(t, &[cpu], 100);
        assert_eq!(at(a, 0).busy_since(at(b, 0)), Some(60.0 / 70.0));
        assert_eq!(at(a, 1).busy_since(at(b, 1)), Some(0.0));
        assert_eq!(at(b, 1).busy_since(at(a, 1)), None);
        let later = CpuStates {
            busy_ns: s.busy_ns + 5,
            ..s
        };
        assert_eq!(s.until(later).busy_ns, 5);
    }

    #[test]
    fn a_tree_keeps_what_its_reaped_children_used() {
        // The shell forks a child that burns CPU and is reaped; the shell then waits for a
        // line on stdin, so the tree is read with the child gone.
        let mut child = std::process::Command::new("sh")
            .args([
                "-c",
                "(i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done); echo done; read _",
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        std::io::BufRead::read_line(&mut out, &mut line).unwrap();
        let t = tree_cpu(child.id()).unwrap();
        drop(child.stdin.take());
        child.wait().unwrap();
        assert_eq!(line.trim(), "done");
        // 200,000 shell loop turns take well over a tick.
        assert!(t.total_ns >= 10_000_000, "{t:?}");
        assert_eq!(t.total_ns, t.user_ns + t.system_ns);
        assert!(tree_cpu(child.id()).is_err());
    }
}
