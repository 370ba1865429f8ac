//! What a server costs, read from /proc while it runs: CPU time, context switches
//! (voluntary and involuntary) and memory, summed over the server's whole process tree,
//! because `srv-threads --mode process` forks a process per connection. These samples, every
//! 500 ms, give the CPU over time and the memory; the CPU of the measured window itself is
//! read at its edges from the server's cgroup (`run::cgroup`, `loadgen::account`), not
//! from these samples.
//!
//! CPU time comes from the server's cgroup where it has one ([`Sampler::counting`]): every
//! task that ever ran in it is counted. Without one it is the scheduler's own count,
//! `/proc/<pid>/task/<tid>/schedstat` (nanoseconds of each thread on a CPU), summed over
//! every thread of the tree seen so far: a thread or process that exits keeps the counts it
//! was last seen with (what it used since, and a thread born and gone between two samples,
//! are lost), so every counter only grows. The user and system split is the cgroup's, or the
//! tick counters of `/proc/<pid>/stat` (`utime`, `stime`, reaped children included).
//! Context switches are per thread (`status`), summed, as no cgroup counts them. Memory is
//! the proportional set size (`Pss` of `smaps_rollup`) summed over the tree, so that the pages
//! forked processes share count once; for a single process it is its RSS less its share of
//! shared libraries. What the machine as a whole says (free and stolen CPU time, kernel
//! memory) is `machine`.
//!
//! Each sample also says whether the server's io_uring rings had completions on the
//! kernel's overflow list then (`run::rings`).
//!
//! It may call the run layer's `machine` and `rings`.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use loadgen::account::{CpuSource, parse_proc_stat, process_tree};

use crate::run::machine::{field, free_ticks, kernel_stack, steal_ticks, tcp_mem_pages};

/// One reading of a server's process tree.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Sample {
    /// Wall-clock time of the reading, in seconds since the Unix epoch (loadgen's interval
    /// log stamps its window on the same clock).
    pub(crate) t: f64,
    /// CPU seconds so far, every thread the tree ever had (schedstat).
    pub(crate) cpu_s: f64,
    /// User CPU seconds so far by the tick counters, reaped children included.
    pub(crate) user_ticks_s: f64,
    /// System CPU seconds so far by the tick counters.
    pub(crate) sys_ticks_s: f64,
    /// Voluntary context switches so far, every thread the tree ever had.
    pub(crate) vol_cs: u64,
    /// Involuntary context switches so far.
    pub(crate) invol_cs: u64,
    /// Memory in bytes (PSS summed over the tree).
    pub(crate) mem_bytes: u64,
    /// Seconds the watched CPUs ran no task so far (idle, iowait, interrupts), summed over
    /// them.
    pub(crate) cpus_free_s: f64,
    /// How many CPUs are watched.
    pub(crate) cpus_watched: usize,
    /// Seconds the hypervisor stole from the watched CPUs so far, summed over them.
    #[serde(default)]
    pub(crate) cpus_steal_s: f64,
    /// The kernel's thread stacks, system-wide (`KernelStack` of /proc/meminfo), in bytes.
    #[serde(default)]
    pub(crate) kernel_stack_bytes: u64,
    /// TCP socket memory, system-wide (`mem` pages of the `TCP:` line of
    /// /proc/net/sockstat), in bytes.
    #[serde(default)]
    pub(crate) socket_mem_bytes: u64,
    /// Processes in the tree.
    pub(crate) procs: usize,
    /// Threads in the tree.
    pub(crate) threads: usize,
    /// Whether some io_uring ring of the server had completions on the kernel's overflow
    /// list (`run::rings`); `None` for a server without a ring.
    #[serde(default)]
    pub(crate) cq_backlog: Option<bool>,
}

/// The descendants of `root` (not `root` itself), each with its start time, so that a later
/// kill can check that the pid still names the same process.
pub(crate) fn descendants(root: u32) -> Vec<(i32, u64)> {
    let root = i32::try_from(root).unwrap_or(i32::MAX);
    process_tree(root)
        .map(|t| {
            t.into_iter()
                .filter(|(p, _)| *p != root)
                .map(|(p, s)| (p, s.starttime))
                .collect()
        })
        .unwrap_or_default()
}

/// The start time of `pid` (clock ticks after boot), if it is alive.
pub(crate) fn start_time(pid: i32) -> Option<u64> {
    parse_proc_stat(&fs::read_to_string(format!("/proc/{pid}/stat")).ok()?).map(|s| s.starttime)
}

/// The counters of one thread.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct TaskCounters {
    cpu_ns: u64,
    vol: u64,
    invol: u64,
}

impl TaskCounters {
    fn read(task_dir: &std::path::Path) -> Option<TaskCounters> {
        let cpu_ns = fs::read_to_string(task_dir.join("schedstat"))
            .ok()?
            .split_whitespace()
            .next()?
            .parse()
            .ok()?;
        let status = fs::read_to_string(task_dir.join("status")).ok()?;
        Some(TaskCounters {
            cpu_ns,
            vol: field(&status, "voluntary_ctxt_switches").unwrap_or(0),
            invol: field(&status, "nonvoluntary_ctxt_switches").unwrap_or(0),
        })
    }

    fn add(&mut self, o: TaskCounters) {
        self.cpu_ns += o.cpu_ns;
        self.vol += o.vol;
        self.invol += o.invol;
    }
}

/// Samples one process tree, remembering every thread it has seen.
#[derive(Debug, Clone)]
pub(crate) struct Sampler {
    root: i32,
    ticks_per_s: f64,
    page_bytes: u64,
    /// The last counters of each `(pid, tid)` seen.
    tasks: HashMap<(i32, i32), TaskCounters>,
    /// Counters of tasks whose id was reused by a newer task.
    retired: TaskCounters,
    /// The processes of the tree at the last reading, with their start times.
    members: Vec<(i32, u64)>,
    /// CPUs whose whole load is read too, to see what else ran there.
    cpus: Vec<usize>,
    /// Where the tree's CPU time is read when it is counted whole (its cgroup): else the
    /// live threads' schedstat, remembered.
    counter: Option<CpuSource>,
}

impl Sampler {
    pub(crate) fn new(root: u32) -> Sampler {
        use nix::unistd::{SysconfVar, sysconf};
        let ticks = sysconf(SysconfVar::CLK_TCK).ok().flatten().unwrap_or(100);
        let page = sysconf(SysconfVar::PAGE_SIZE)
            .ok()
            .flatten()
            .unwrap_or(4096);
        Sampler {
            root: i32::try_from(root).unwrap_or(i32::MAX),
            ticks_per_s: ticks as f64,
            page_bytes: u64::try_from(page).unwrap_or(4096),
            tasks: HashMap::new(),
            retired: TaskCounters::default(),
            members: Vec::new(),
            cpus: Vec::new(),
            counter: None,
        }
    }

    /// Reads the CPU time (and its user and system split) from `counter`, which counts every
    /// task that ever ran (a cgroup), rather than from the live threads.
    pub(crate) fn counting(mut self, counter: Option<CpuSource>) -> Sampler {
        self.counter = counter;
        self
    }

    /// Also reads how busy `cpus` are, whatever runs on them.
    pub(crate) fn watching(mut self, cpus: &[usize]) -> Sampler {
        self.cpus = cpus.to_vec();
        self
    }

    /// Reads the tree now. Fails only when the root process is gone.
    pub(crate) fn sample(&mut self) -> io::Result<Sample> {
        let now = || {
            SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64())
        };
        let before = now();
        let mut s = self.read(before)?;
        // Reading a big tree takes milliseconds while its counters move: the reading is
        // stamped at the middle of it.
        s.t = (before + now()) / 2.0;
        Ok(s)
    }

    /// The processes of the tree when it was last read, with their start times.
    pub(crate) fn members(&self) -> &[(i32, u64)] {
        &self.members
    }

    fn read(&mut self, t: f64) -> io::Result<Sample> {
        let procs = process_tree(self.root)?;
        self.members = procs.iter().map(|(p, st)| (*p, st.starttime)).collect();
        let mut s = Sample {
            t,
            procs: procs.len(),
            cq_backlog: u32::try_from(self.root)
                .ok()
                .and_then(crate::run::rings::read)
                .map(|r| r.backlog),
            ..Sample::default()
        };
        let (mut user, mut sys) = (0u64, 0u64);
        for (pid, stat) in &procs {
            user += stat.utime + stat.cutime;
            sys += stat.stime + stat.cstime;
            s.threads += stat.threads as usize;
            s.mem_bytes += fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
                .ok()
                .and_then(|text| field(&text, "Pss"))
                .map_or(stat.rss_pages * self.page_bytes, |kib| kib * 1024);
            let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
                continue;
            };
            for task in tasks.flatten() {
                let Some(tid) = task
                    .file_name()
                    .to_str()
                    .and_then(|t| t.parse::<i32>().ok())
                else {
                    continue;
                };
                let Some(now) = TaskCounters::read(&task.path()) else {
                    continue;
                };
                let slot = self.tasks.entry((*pid, tid)).or_default();
                // A counter that went down belongs to a new task with a reused id.
                if now.cpu_ns < slot.cpu_ns || now.vol < slot.vol {
                    self.retired.add(*slot);
                }
                *slot = now;
            }
        }
        let mut all = self.retired;
        for c in self.tasks.values() {
            all.add(*c);
        }
        s.cpu_s = all.cpu_ns as f64 / 1e9;
        s.user_ticks_s = user as f64 / self.ticks_per_s;
        s.sys_ticks_s = sys as f64 / self.ticks_per_s;
        if let Some(t) = self.counter.as_ref().and_then(|c| c.read().ok()) {
            s.cpu_s = t.total_ns as f64 / 1e9;
            s.user_ticks_s = t.user_ns as f64 / 1e9;
            s.sys_ticks_s = t.system_ns as f64 / 1e9;
        }
        s.vol_cs = all.vol;
        s.invol_cs = all.invol;
        if !self.cpus.is_empty() {
            let stat = fs::read_to_string("/proc/stat").unwrap_or_default();
            s.cpus_free_s = free_ticks(&stat, &self.cpus) as f64 / self.ticks_per_s;
            s.cpus_watched = self.cpus.len();
            s.cpus_steal_s = steal_ticks(&stat, &self.cpus) as f64 / self.ticks_per_s;
        }
        s.kernel_stack_bytes = fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| kernel_stack(&m))
            .unwrap_or(0);
        s.socket_mem_bytes = fs::read_to_string("/proc/net/sockstat")
            .ok()
            .and_then(|m| tcp_mem_pages(&m))
            .map_or(0, |p| p * self.page_bytes);
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_a_tree_with_a_child() {
        // `sh` forks `sleep`: the tree has two processes. The child is waited on below, so
        // the test leaves nothing running whatever happens.
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 5 & read _; kill $!"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut sampler = Sampler::new(child.id());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let mut seen = 0;
        while std::time::Instant::now() < deadline {
            seen = sampler.sample().unwrap().procs;
            if seen == 2 {
                break;
            }
            std::thread::yield_now();
        }
        let s = sampler.sample().unwrap();
        drop(child.stdin.take());
        child.wait().unwrap();
        assert_eq!(seen, 2);
        assert!(
            s.threads >= 2 && s.mem_bytes > 0 && s.vol_cs > 0 && s.cpu_s > 0.0,
            "{s:?}"
        );
        assert!(Sampler::new(child.id()).sample().is_err());
    }

    #[test]
    fn counters_keep_what_an_exited_child_spent() {
        // The subshell waits for a first line, burns some CPU and exits; the tree then
        // has only the shell, which waits for a second line. The subshell cannot finish
        // before the sampler has seen it, however late this thread gets to run.
        let mut child = std::process::Command::new("sh")
            .args([
                "-c",
                "(read _; i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done); read _",
            ])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let mut sampler = Sampler::new(child.id());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut saw_two = false;
        let mut last = Sample::default();
        let mut monotonic = true;
        while std::time::Instant::now() < deadline {
            let s = sampler.sample().unwrap();
            monotonic &= s.cpu_s >= last.cpu_s && s.vol_cs >= last.vol_cs;
            last = s;
            if !saw_two && s.procs == 2 {
                saw_two = true;
                std::io::Write::write_all(&mut stdin, b"go\n").unwrap();
            }
            if saw_two && s.procs == 1 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        drop(stdin);
        child.wait().unwrap();
        assert!(saw_two && last.procs == 1, "{last:?}");
        assert!(monotonic);
        assert!(last.cpu_s > 0.001, "{last:?}");
    }
}
