//! Every server start (and every peer and outside client xtask starts) runs in a cgroup of its
//! own, whose CPU counter counts every thread and process that ever ran in it, exited and
//! reaped included: v2 `cpu.stat` (`usage_usec`, `user_usec`, `system_usec`), v1 `cpuacct`.
//! That counter, read at the edges of the measured window, is the server's CPU. Where no
//! group can be made (not root, no delegated subtree), [`Accounting`] says why, and the run
//! falls back to the process tree's `/proc/<pid>/stat` (see `loadgen::account`).
//!
//! `--server-cpu-quota`: the group's CPU bandwidth is also capped at a fraction of one CPU,
//! so that one load-generator core can outrun the server and a closed-loop point measures the
//! server's capacity under that share, not the load generator.
//!
//! cgroup v1 (`cpu.cfs_period_us`, `cpu.cfs_quota_us`; `cpuacct`, which may be mounted apart
//! from `cpu`, so a v1 group may be two directories) and v2 (`cpu.max`) are both handled.
//! The period is short (2 ms, longer only where the kernel's 1 ms minimum quota needs it): a
//! 100 ms period would let the server run flat out for 50 ms and then stall for 50, which
//! turns the quota into latency spikes rather than a slower CPU. The throttling that remains
//! is counted (`nr_throttled`, throttled time in `cpu.stat`) and reported per point.
//!
//! Every child joins its group between fork and exec ([`Group::join_on_exec`], `join.rs`), so
//! that what it forks at its start is counted too.
//!
//! It may call nothing else of xtask.

mod delegated;
mod join;
mod perf;
mod quota;

pub(crate) use perf::Perf;

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The shortest period the quota uses, in microseconds.
const MIN_PERIOD_US: u64 = 2_000;
/// The kernel's smallest quota per period, in microseconds.
const MIN_QUOTA_US: u64 = 1_000;

/// Which cgroup interface carries the CPU controller here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Hierarchy {
    /// The v1 `cpu` controller mounted at this path.
    V1(PathBuf),
    /// The v2 unified hierarchy mounted at this path, with `cpu` among its controllers.
    V2(PathBuf),
}

/// A CPU share for the server: `fraction` of one CPU, enforced per `period_us`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Quota {
    pub(crate) fraction: f64,
    pub(crate) period_us: u64,
    hierarchy: Hierarchy,
}

/// How a quota held a server back over a stretch of time (`cpu.stat` differences).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Throttle {
    /// The quota, in CPUs.
    pub(crate) quota: f64,
    pub(crate) nr_periods: u64,
    pub(crate) nr_throttled: u64,
    pub(crate) throttled_s: f64,
}

/// Finds the CPU controller in a `/proc/mounts` text: v1 `cpu` first (a hybrid system mounts
/// an empty v2 tree beside it), else v2.
fn find_hierarchy(mounts: &str) -> Option<Hierarchy> {
    find_controller(mounts, "cpu", true)
}

/// Finds where CPU time is counted: v1 `cpuacct` first, else the v2 tree, whose every group
/// has `cpu.stat` whatever its controllers.
fn find_accounting(mounts: &str) -> Option<Hierarchy> {
    find_controller(mounts, "cpuacct", false)
}

/// The v1 hierarchy with `controller` among its options, else the v2 tree (with `controller`
/// among its enabled ones, where `v2_needs_it`).
fn find_controller(mounts: &str, controller: &str, v2_needs_it: bool) -> Option<Hierarchy> {
    let mut v2 = None;
    for line in mounts.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (Some(dir), Some(kind), Some(opts)) = (f.get(1), f.get(2), f.get(3)) else {
            continue;
        };
        match *kind {
            "cgroup" if opts.split(',').any(|o| o == controller) => {
                return Some(Hierarchy::V1(PathBuf::from(dir)));
            }
            "cgroup2" => {
                let controllers = fs::read_to_string(Path::new(dir).join("cgroup.controllers"))
                    .unwrap_or_default();
                if !v2_needs_it || controllers.split_whitespace().any(|c| c == controller) {
                    v2 = Some(Hierarchy::V2(PathBuf::from(dir)));
                }
            }
            _ => {}
        }
    }
    v2
}

/// How a run counts the CPU of what it starts: a cgroup per start (with the run's quota, if
/// it has one), or, where no group can be made, the process tree.
#[derive(Debug, Clone)]
pub(crate) enum Accounting {
    /// Groups under this hierarchy's root count; `quota` caps the servers' groups.
    Cgroups {
        hierarchy: Hierarchy,
        quota: Option<Quota>,
        /// Where the servers' counters are scoped (`with_counters`).
        perf: Perf,
    },
    /// No group could be made here: why.
    Tree { why: String },
}

impl Accounting {
    /// Finds where groups that count CPU can be made, and checks it by making one and
    /// removing it; with `quota`, the servers' groups are capped too (the quota has been
    /// checked by [`Quota::new`]).
    pub(crate) fn new(quota: Option<Quota>) -> Accounting {
        let found = fs::read_to_string("/proc/mounts")
            .map_err(|e| format!("cannot read /proc/mounts: {e}"))
            .and_then(|m| {
                find_accounting(&m).ok_or_else(|| {
                    "no cgroup hierarchy is mounted (neither v1 cpuacct nor v2)".to_string()
                })
            })
            .and_then(|h| {
                let root = match &h {
                    Hierarchy::V1(p) | Hierarchy::V2(p) => p.clone(),
                };
                let usable = |dir: &Path| Group::make(dir).and_then(|g| g.holds_a_process());
                let at_root = usable(&root);
                if let (Err(e), Hierarchy::V2(mount)) = (&at_root, &h) {
                    // Not root: the user's delegated subtree, if the run is in one.
                    let own = delegated::own().unwrap_or_default();
                    return delegated::candidates(mount, &own)
                        .into_iter()
                        .find(|dir| usable(dir).is_ok())
                        .map(Hierarchy::V2)
                        .ok_or_else(|| {
                            format!(
                                "cannot make a cgroup under {} and move a process into it ({e}),                                  nor in a delegated subtree of this process's cgroup ({own});                                  run it as root, or in a delegated scope of this user:                                  `systemd-run --user --scope -p Delegate=yes cargo xtask bench …`",
                                root.display()
                            )
                        });
                }
                at_root.map(|()| h).map_err(|e| {
                    format!(
                        "cannot make a cgroup under {} and move a process into it: {e}",
                        root.display()
                    )
                })
            });
        match found {
            Ok(hierarchy) => Accounting::Cgroups {
                hierarchy,
                quota,
                perf: Perf::Off,
            },
            Err(why) => Accounting::Tree { why },
        }
    }

    /// The run's quota, if it has one.
    pub(crate) fn quota(&self) -> Option<&Quota> {
        match self {
            Accounting::Cgroups { quota, .. } => quota.as_ref(),
            Accounting::Tree { .. } => None,
        }
    }

    /// What a run's record and report say of it.
    pub(crate) fn describe(&self) -> String {
        match self {
            Accounting::Cgroups {
                hierarchy: Hierarchy::V1(p),
                ..
            } => format!(
                "cgroup v1 (cpuacct.usage of a group per server start under {}): every thread and process counted, read at the window's edges",
                p.display()
            ),
            Accounting::Cgroups {
                hierarchy: Hierarchy::V2(p),
                ..
            } => format!(
                "cgroup v2 (cpu.stat usage_usec of a group per server start under {}): every thread and process counted, read at the window's edges",
                p.display()
            ),
            Accounting::Tree { why } => format!(
                "process tree (/proc/PID/stat utime+stime+cutime+cstime at the window's edges, exact to a 10 ms tick a process: against quick's 0.5 s window a tick is 2% of a CPU, against a 0.3 s one 3.3%, so a point's CPU per request is that coarse; a process that leaves the tree unreaped is lost): {why}"
            ),
        }
    }

    /// The short name of the accounting: `cgroup v1`, `cgroup v2` or `process tree`.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Accounting::Cgroups {
                hierarchy: Hierarchy::V1(_),
                ..
            } => "cgroup v1",
            Accounting::Cgroups { .. } => "cgroup v2",
            Accounting::Tree { .. } => "process tree",
        }
    }

    /// A fresh group for a server start, capped by the run's quota; `None` where the run
    /// counts by process tree.
    pub(crate) fn server_group(&self) -> io::Result<Option<Group>> {
        self.make(true)
    }

    /// A fresh group for what is not the server (an outside client): counted, never capped.
    pub(crate) fn client_group(&self) -> io::Result<Option<Group>> {
        self.make(false)
    }

    fn make(&self, capped: bool) -> io::Result<Option<Group>> {
        let Accounting::Cgroups {
            hierarchy,
            quota,
            perf,
        } = self
        else {
            return Ok(None);
        };
        let root = match hierarchy {
            Hierarchy::V1(p) | Hierarchy::V2(p) => p,
        };
        let mut counting = Group::make(root)?;
        if capped {
            perf.attach(&mut counting)?;
        }
        match quota.as_ref().filter(|_| capped) {
            None => Ok(Some(counting)),
            Some(q) => {
                let capped = q.cap(Some(&counting))?;
                Ok(Some(counting.with(capped)))
            }
        }
    }
}

/// The counters of `cpu.stat`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct CpuStat {
    nr_periods: u64,
    nr_throttled: u64,
    throttled_s: f64,
}

/// Parses `cpu.stat`: v1 says `throttled_time` in ns, v2 `throttled_usec`.
fn parse_cpu_stat(text: &str) -> CpuStat {
    let mut s = CpuStat::default();
    for line in text.lines() {
        let mut f = line.split_whitespace();
        let (Some(k), Some(v)) = (f.next(), f.next().and_then(|v| v.parse::<u64>().ok())) else {
            continue;
        };
        match k {
            "nr_periods" => s.nr_periods = v,
            "nr_throttled" => s.nr_throttled = v,
            "throttled_time" => s.throttled_s = v as f64 / 1e9,
            "throttled_usec" => s.throttled_s = v as f64 / 1e6,
            _ => {}
        }
    }
    s
}

/// A cgroup made for one start: a directory in each hierarchy it needs (one, or with v1 and a
/// quota, `cpuacct`'s and `cpu`'s), all removed when dropped.
#[derive(Debug)]
pub(crate) struct Group {
    /// The directories this group made, removed when it is dropped.
    dirs: Vec<PathBuf>,
    /// The directory whose CPU counter is read.
    counter: PathBuf,
    /// The quota in CPUs, where one caps the group.
    quota: Option<f64>,
    /// The directory that holds the quota.
    quota_dir: Option<PathBuf>,
    /// The directory the server's perf counters are scoped to, where they are on.
    perf_dir: Option<PathBuf>,
}

impl Group {
    /// Makes a fresh, empty group under `root`.
    fn make(root: &Path) -> io::Result<Group> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "ringside-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let dir = root.join(name);
        fs::create_dir(&dir)?;
        Ok(Group {
            dirs: vec![dir.clone()],
            counter: dir,
            quota: None,
            quota_dir: None,
            perf_dir: None,
        })
    }

    /// Checks that a process can join the group (where delegation lets a user make groups
    /// but not move processes between them, it cannot), with a short-lived `sleep`.
    fn holds_a_process(self) -> io::Result<()> {
        let mut cmd = Command::new("sleep");
        cmd.arg("5").stdin(std::process::Stdio::null());
        self.join_on_exec(&mut cmd)?;
        let mut child = cmd.spawn()?;
        let _ = child.kill();
        let _ = child.wait();
        drop(self);
        Ok(())
    }

    /// This group and `capped` (the quota's, in the same or another hierarchy) as one.
    fn with(mut self, mut capped: Group) -> Group {
        self.dirs.append(&mut capped.dirs);
        self.quota = capped.quota.take();
        self.quota_dir = capped.quota_dir.take();
        self.perf_dir = self.perf_dir.take().or(capped.perf_dir.take());
        self
    }

    /// Has the child that `cmd` starts join the group, in every hierarchy, between fork and
    /// exec: it is in the group before it runs anything of its own, so every process it ever
    /// forks (a master's workers, forked at once) is born inside. A child that cannot join fails
    /// to spawn, with the error of its write into `cgroup.procs`.
    pub(crate) fn join_on_exec(&self, cmd: &mut Command) -> io::Result<()> {
        join::on_exec(cmd, join::procs_files(&self.dirs)?);
        Ok(())
    }

    /// Where the group's CPU time is read.
    pub(crate) fn cpu_source(&self) -> loadgen::account::CpuSource {
        loadgen::account::CpuSource::Cgroup(self.counter.clone())
    }

    /// The throttling counters of the quota's `cpu.stat` (zero without a quota).
    pub(crate) fn stat(&self) -> CpuStat {
        self.quota_dir
            .as_ref()
            .map_or_else(CpuStat::default, |dir| {
                parse_cpu_stat(&fs::read_to_string(dir.join("cpu.stat")).unwrap_or_default())
            })
    }

    /// The throttling between two readings of [`Group::stat`]; `None` without a quota.
    pub(crate) fn between(&self, a: CpuStat, b: CpuStat) -> Option<Throttle> {
        let quota = self.quota?;
        Some(Throttle {
            quota,
            nr_periods: b.nr_periods.saturating_sub(a.nr_periods),
            nr_throttled: b.nr_throttled.saturating_sub(a.nr_throttled),
            throttled_s: (b.throttled_s - a.throttled_s).max(0.0),
        })
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        // The server has been stopped; its processes may take a moment to leave the group.
        // Halfway, whatever is still in it (a process that left the server's process group,
        // which the stop did not reach) is killed, so that no group is left behind.
        for dir in &self.dirs {
            let gone = (0..50).any(|i| {
                if i == 25 {
                    kill_members(dir);
                }
                let gone = fs::remove_dir(dir).is_ok() || !dir.exists();
                if !gone {
                    std::thread::sleep(Duration::from_millis(20));
                }
                gone
            });
            if !gone {
                eprintln!("warning: could not remove the cgroup {}", dir.display());
            }
        }
    }
}

/// What a failed spawn says after the program's name: where the child was to join `group`,
/// the error (only an errno crosses back from the child) may be its write into the group's
/// `cgroup.procs` rather than its exec.
pub(crate) fn or_joining(group: Option<&Group>) -> &'static str {
    if group.is_some() {
        " (or join its cgroup)"
    } else {
        ""
    }
}

/// SIGKILL to every process still in the group `dir`.
fn kill_members(dir: &Path) {
    let procs = fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
    for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

#[cfg(test)]
mod tests;
