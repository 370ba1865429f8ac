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
//! It may call nothing else of xtask.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
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

/// The period for `fraction` of a CPU: 2 ms, or longer where the quota would be under the
/// kernel's 1 ms minimum.
fn period_for(fraction: f64) -> u64 {
    let needed = (MIN_QUOTA_US as f64 / fraction).ceil() as u64;
    needed.max(MIN_PERIOD_US)
}

impl Quota {
    /// Finds a writable CPU controller and checks, by making and removing a group, that a
    /// group can be made there. The error says what is missing.
    pub(crate) fn new(fraction: f64) -> Result<Quota, String> {
        let mounts = fs::read_to_string("/proc/mounts")
            .map_err(|e| format!("cannot read /proc/mounts: {e}"))?;
        let hierarchy = find_hierarchy(&mounts).ok_or_else(|| {
            "this system has no cgroup CPU controller mounted (neither v1 `cpu` nor v2 with \
             `cpu` in cgroup.controllers)"
                .to_string()
        })?;
        if let Hierarchy::V2(root) = &hierarchy {
            // Children of the root get the cpu controller only when the root hands it down.
            let control = root.join("cgroup.subtree_control");
            let has = fs::read_to_string(&control)
                .is_ok_and(|t| t.split_whitespace().any(|c| c == "cpu"));
            if !has {
                fs::write(&control, "+cpu").map_err(|e| {
                    format!(
                        "cannot enable the cpu controller in {}: {e}",
                        control.display()
                    )
                })?;
            }
        }
        let quota = Quota {
            fraction,
            period_us: period_for(fraction),
            hierarchy,
        };
        drop(quota.cap(None).map_err(|e| {
            format!(
                "cannot make a cgroup with a CPU quota under {}: {e} (run as root, or give \
                 this user a delegated cgroup)",
                quota.root().display()
            )
        })?);
        Ok(quota)
    }

    fn root(&self) -> &Path {
        match &self.hierarchy {
            Hierarchy::V1(p) | Hierarchy::V2(p) => p,
        }
    }

    /// The quota in microseconds per period.
    fn quota_us(&self) -> u64 {
        ((self.fraction * self.period_us as f64).round() as u64).max(MIN_QUOTA_US)
    }

    /// Caps `counting` by the quota: in its own directory where it lives in the quota's
    /// hierarchy (v2, or v1 with `cpu` and `cpuacct` mounted together), else in a new group
    /// of the quota's hierarchy, which the returned group holds.
    fn cap(&self, counting: Option<&Group>) -> io::Result<Group> {
        let mut group = match counting {
            Some(g) if g.counter.starts_with(self.root()) => Group {
                dirs: vec![],
                counter: g.counter.clone(),
                quota: None,
                quota_dir: None,
            },
            _ => Group::make(self.root())?,
        };
        let dir = group.counter.clone();
        if matches!(self.hierarchy, Hierarchy::V2(_)) {
            fs::write(
                dir.join("cpu.max"),
                format!("{} {}", self.quota_us(), self.period_us),
            )?;
        } else {
            // The quota is written after the period: a quota above the old period is fine
            // either way, but the kernel checks the pair as it stands after each write.
            fs::write(dir.join("cpu.cfs_period_us"), self.period_us.to_string())?;
            fs::write(dir.join("cpu.cfs_quota_us"), self.quota_us().to_string())?;
        }
        group.quota = Some(self.fraction);
        group.quota_dir = Some(dir);
        Ok(group)
    }
}

/// How a run counts the CPU of what it starts: a cgroup per start (with the run's quota, if
/// it has one), or, where no group can be made, the process tree.
#[derive(Debug, Clone)]
pub(crate) enum Accounting {
    /// Groups under this hierarchy's root count; `quota` caps the servers' groups.
    Cgroups {
        hierarchy: Hierarchy,
        quota: Option<Quota>,
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
                Group::make(&root)
                    .and_then(|g| g.holds_a_process())
                    .map(|()| h)
                    .map_err(|e| {
                        format!(
                            "cannot make a cgroup under {} and move a process into it: {e}",
                            root.display()
                        )
                    })
            });
        match found {
            Ok(hierarchy) => Accounting::Cgroups { hierarchy, quota },
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
                "process tree (/proc/PID/stat utime+stime+cutime+cstime at the window's edges, exact to a 10 ms tick a process; a process that leaves the tree unreaped is lost): {why}"
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
        let Accounting::Cgroups { hierarchy, quota } = self else {
            return Ok(None);
        };
        let root = match hierarchy {
            Hierarchy::V1(p) | Hierarchy::V2(p) => p,
        };
        let counting = Group::make(root)?;
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
        })
    }

    /// Checks that a process can be moved into the group (where delegation lets a user make
    /// groups but not move processes between them, it cannot), with a short-lived `sleep`.
    fn holds_a_process(self) -> io::Result<()> {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .stdin(std::process::Stdio::null())
            .spawn()?;
        let moved = self.add(child.id());
        let _ = child.kill();
        let _ = child.wait();
        drop(self);
        moved
    }

    /// This group and `capped` (the quota's, in the same or another hierarchy) as one.
    fn with(mut self, mut capped: Group) -> Group {
        self.dirs.append(&mut capped.dirs);
        self.quota = capped.quota.take();
        self.quota_dir = capped.quota_dir.take();
        self
    }

    /// Moves process `pid` (all its threads; children it forks later follow it) into the
    /// group, in every hierarchy.
    pub(crate) fn add(&self, pid: u32) -> io::Result<()> {
        for dir in &self.dirs {
            fs::write(dir.join("cgroup.procs"), pid.to_string())?;
        }
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
mod tests {
    use super::*;

    #[test]
    fn finds_the_controller_and_picks_a_period() {
        let v1 = "cgroup /sys/fs/cgroup/cpuacct cgroup rw,cpuacct 0 0\n\
                  cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0\n";
        assert_eq!(
            find_hierarchy(v1),
            Some(Hierarchy::V1(PathBuf::from("/sys/fs/cgroup/cpu")))
        );
        let both = "cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,cpu,cpuacct 0 0\n";
        assert!(matches!(find_hierarchy(both), Some(Hierarchy::V1(_))));
        assert_eq!(find_hierarchy("proc /proc proc rw 0 0\n"), None);
        assert_eq!(period_for(0.5), 2_000);
        assert_eq!(period_for(2.0), 2_000);
        assert_eq!(period_for(0.25), 4_000);
        let s = parse_cpu_stat("nr_periods 10\nnr_throttled 4\nthrottled_time 2000000000\n");
        assert_eq!((s.nr_periods, s.nr_throttled, s.throttled_s), (10, 4, 2.0));
        let s = parse_cpu_stat("usage_usec 5\nnr_periods 3\nnr_throttled 1\nthrottled_usec 1500\n");
        assert_eq!(
            (s.nr_periods, s.nr_throttled, s.throttled_s),
            (3, 1, 0.0015)
        );
    }

    #[test]
    fn a_busy_process_in_a_quota_group_is_throttled() {
        let quota = match Quota::new(0.2) {
            Ok(q) => q,
            Err(why) => {
                eprintln!("skipped: cgroups are not writable here: {why}");
                return;
            }
        };
        let group = quota.cap(None).unwrap();
        // A shell that spins for a bounded time; killed below whatever happens.
        let mut child = std::process::Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 2000000 ]; do i=$((i+1)); done"])
            .spawn()
            .unwrap();
        group.add(child.id()).unwrap();
        let before = group.stat();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let mut after = before;
        while after.nr_throttled <= before.nr_throttled && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
            after = group.stat();
        }
        let _ = child.kill();
        let _ = child.wait();
        let t = group.between(before, after).unwrap();
        assert!(t.nr_periods > 0, "{t:?}");
        assert!(t.nr_throttled > 0, "{t:?}");
        drop(group);
    }

    /// What the burning workload (this test binary run again, see [`burn_workload`]) does,
    /// told by this variable: `threads` (threads that burn and exit), `procs` (processes
    /// forked, burning, reaped), `one` (one process that burns).
    const BURN: &str = "RINGSIDE_TEST_BURN";
    /// CPU each burning thread or process uses, by its own clock.
    const BURN_NS: u64 = 40_000_000;
    /// How many threads or processes burn.
    const BURNERS: usize = 6;

    /// Burns `ns` of the calling thread's own CPU time (or, with `process`, the process's)
    /// and returns what its clock says it used.
    fn burn(ns: u64, process: bool) -> u64 {
        use nix::time::{ClockId, clock_gettime};
        let clock = if process {
            ClockId::CLOCK_PROCESS_CPUTIME_ID
        } else {
            ClockId::CLOCK_THREAD_CPUTIME_ID
        };
        let now = || {
            clock_gettime(clock).map_or(0, |t| {
                u64::try_from(t.tv_sec()).unwrap_or(0) * 1_000_000_000
                    + u64::try_from(t.tv_nsec()).unwrap_or(0)
            })
        };
        let mut x = 0u64;
        // Bounded: a few million turns at most between readings of a clock that moves.
        for _ in 0..100_000 {
            if now() >= ns {
                break;
            }
            for i in 0..10_000u64 {
                x = std::hint::black_box(x.wrapping_add(i));
            }
        }
        std::hint::black_box(x);
        now()
    }

    /// Threads that each burn [`BURN_NS`] and exit, joined: what their own clocks say.
    fn burn_in_threads() -> u64 {
        let threads: Vec<_> = (0..BURNERS)
            .map(|_| std::thread::spawn(|| burn(BURN_NS, false)))
            .collect();
        threads.into_iter().map(|t| t.join().unwrap_or(0)).sum()
    }

    /// This test binary run as a burner of kind `kind`, stdin and stdout piped.
    fn burner(kind: &str) -> std::process::Command {
        let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
        cmd.args([
            "--exact",
            "run::cgroup::tests::burn_workload",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(BURN, kind)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped());
        cmd
    }

    /// The number after `BURNED ` in `out`'s lines (the test harness may have begun the
    /// line with the test's name).
    fn burned(out: &mut impl std::io::BufRead) -> u64 {
        let mut line = String::new();
        // Bounded: the burner prints its line and then waits; at its end, EOF.
        while out.read_line(&mut line).unwrap_or(0) > 0 {
            if let Some(n) = line.split("BURNED ").nth(1) {
                return n.trim().parse().unwrap();
            }
            line.clear();
        }
        panic!("the burner said nothing");
    }

    /// The workload of the accounting tests, when this binary is run again as one: it waits
    /// for a line, burns (in threads that exit, in processes it forks and reaps, or itself),
    /// prints what its clocks say it used, and waits for a second line before it exits, so
    /// that it is alive (its process tree readable) when the window's end is read. Run as a
    /// test of its own, it checks that the threads burn what they are asked.
    #[test]
    fn burn_workload() {
        let Ok(kind) = std::env::var(BURN) else {
            let used = burn_in_threads();
            assert!(used >= BURNERS as u64 * BURN_NS, "{used}");
            return;
        };
        let mut line = String::new();
        let stdin = std::io::stdin();
        stdin.read_line(&mut line).unwrap();
        let used = match kind.as_str() {
            "threads" => burn_in_threads(),
            "procs" => {
                let children: Vec<_> = (0..BURNERS)
                    .map(|_| burner("one").spawn().unwrap())
                    .collect();
                children
                    .into_iter()
                    .map(|mut c| {
                        drop(c.stdin.take());
                        let mut out = std::io::BufReader::new(c.stdout.take().unwrap());
                        let n = burned(&mut out);
                        // The rest of what it says (the harness's result), until it exits.
                        std::io::copy(&mut out, &mut std::io::sink()).unwrap();
                        c.wait().unwrap();
                        n
                    })
                    .sum()
            }
            _ => burn(BURN_NS, true),
        };
        println!("\nBURNED {used}");
        stdin.read_line(&mut line).unwrap();
    }

    /// Runs a burner of `kind` in a fresh group: its CPU as the group counts it, as its process
    /// tree counts it, and as its own clocks say. `None` where no group can be made here.
    fn measure_burner(kind: &str) -> Option<(u64, u64, u64)> {
        let accounting = Accounting::new(None);
        if let Accounting::Tree { why } = &accounting {
            // On a benchmark host, where the figures must be exact, a skip is a failure.
            assert!(
                std::env::var_os("RINGSIDE_REQUIRE_CGROUPS").is_none(),
                "RINGSIDE_REQUIRE_CGROUPS is set, but no cgroup can be made here: {why}"
            );
            eprintln!("skipped: cgroups are not writable here: {why}");
            return None;
        }
        let group = accounting.server_group().unwrap().unwrap();
        let mut child = burner(kind).spawn().unwrap();
        group.add(child.id()).unwrap();
        let counter = group.cpu_source();
        let tree = loadgen::account::CpuSource::Tree(child.id());
        let (cg0, tree0) = (counter.read().unwrap(), tree.read().unwrap());
        let mut stdin = child.stdin.take().unwrap();
        std::io::Write::write_all(&mut stdin, b"go\n").unwrap();
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
        let used = burned(&mut out);
        let (cg1, tree1) = (counter.read().unwrap(), tree.read().unwrap());
        std::io::Write::write_all(&mut stdin, b"end\n").unwrap();
        drop(stdin);
        std::io::copy(&mut out, &mut std::io::sink()).unwrap();
        child.wait().unwrap();
        drop(group);
        Some((cg0.until(cg1).total_ns, tree0.until(tree1).total_ns, used))
    }

    /// The group's count is all there (at least 0.98 of what the burners' own clocks say),
    /// and the process tree's agrees with it to a few clock ticks a process.
    fn assert_counted(kind: &str, processes: u64) {
        let Some((group, tree, used)) = measure_burner(kind) else {
            return;
        };
        eprintln!(
            "{kind}: the group counted {group} ns, the process tree {tree}, own clocks {used}"
        );
        assert!(used >= BURNERS as u64 * BURN_NS, "{kind}: burned {used}");
        assert!(
            group as f64 >= 0.98 * used as f64,
            "{kind}: the group counted {group} ns of {used}"
        );
        // The group holds nothing but the burner: what it counts beyond the burning is the
        // burner's start and its reading of stdin, far less than the burning itself.
        assert!(
            group < 2 * used,
            "{kind}: the group counted {group} ns of {used}"
        );
        // Ticks of 10 ms: each process's reading may be a tick short at each edge.
        let slack = 0.05 * group as f64 + (processes * 2 * 10_000_000) as f64;
        assert!(
            (tree as f64 - group as f64).abs() <= slack,
            "{kind}: the process tree counted {tree} ns, the group {group}"
        );
    }

    #[test]
    fn threads_that_exit_are_counted_whole() {
        assert_counted("threads", 1);
    }

    #[test]
    fn processes_forked_and_reaped_are_counted_whole() {
        assert_counted("procs", 1 + BURNERS as u64);
    }
}
