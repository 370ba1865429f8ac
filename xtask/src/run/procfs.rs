//! What a server costs, read from /proc while it runs: CPU time, context switches
//! (voluntary and involuntary) and memory, summed over the server's whole process tree,
//! because `srv-threads --mode process` forks a process per connection.
//!
//! CPU time is the scheduler's own count, `/proc/<pid>/task/<tid>/schedstat` (nanoseconds of
//! each thread on a CPU), summed over every thread of the tree. The tick counters of
//! `/proc/<pid>/stat` (`utime`, `stime`, what `top` shows) are 10 ms samples, and on this
//! kernel a process that runs many short bursts, like a connection process, may go seconds
//! without being charged a tick until it exits; they are used only for the split between user
//! and system time. Context switches are per thread (`status`), summed. A thread or process
//! that exits keeps the counts it was last seen with, so every counter only grows. Memory is
//! the proportional set size (`Pss` of `smaps_rollup`) summed over the tree, so that the pages
//! forked processes share count once; for a single process it is its RSS less its share of
//! shared libraries. What the machine as a whole says (free and stolen CPU time, kernel
//! memory) is `machine`.
//!
//! It may call the run layer's `machine`.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

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
}

/// The fields of `/proc/<pid>/stat` the sampler uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stat {
    ppid: i32,
    utime: u64,
    stime: u64,
    cutime: u64,
    cstime: u64,
    threads: u64,
    starttime: u64,
    rss_pages: u64,
}

/// Parses `/proc/<pid>/stat`. The command name (field 2) may hold spaces and parentheses,
/// so the fields are counted from the last `)`.
fn parse_stat(text: &str) -> Option<Stat> {
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // f[0] is field 3 (state); field n is f[n - 3].
    let num = |n: usize| f.get(n - 3)?.parse::<u64>().ok();
    Some(Stat {
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

/// The pids of `root` and all its descendants, found by scanning `/proc` for parent links.
fn tree(root: i32) -> io::Result<Vec<(i32, Stat)>> {
    let mut stats: HashMap<i32, Stat> = HashMap::new();
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
        if let Some(stat) = parse_stat(&text) {
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

/// The descendants of `root` (not `root` itself), each with its start time, so that a later
/// kill can check that the pid still names the same process.
pub(crate) fn descendants(root: u32) -> Vec<(i32, u64)> {
    let root = i32::try_from(root).unwrap_or(i32::MAX);
    tree(root)
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
    parse_stat(&fs::read_to_string(format!("/proc/{pid}/stat")).ok()?).map(|s| s.starttime)
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
        }
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
        let procs = tree(self.root)?;
        self.members = procs.iter().map(|(p, st)| (*p, st.starttime)).collect();
        let mut s = Sample {
            t,
            procs: procs.len(),
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
        s.user_ticks_s = user as f64 / self.ticks_per_s;
        s.sys_ticks_s = sys as f64 / self.ticks_per_s;
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_from_the_last_parenthesis() {
        let text = "4242 (srv (x) y) S 17 4242 4242 0 -1 4194560 100 0 0 0 \
                    250 75 30 5 20 0 3 0 12345 1000000 512 18446744073709551615";
        let s = parse_stat(text).unwrap();
        assert_eq!(
            s,
            Stat {
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
        assert_eq!(parse_stat("12 (x) S"), None);
    }

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
