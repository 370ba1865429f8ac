//! `--server-cpu-quota`: the server runs in a cgroup of its own whose CPU bandwidth is capped
//! at a fraction of one CPU, so that one load-generator core can outrun it and a closed-loop
//! point measures the server's capacity under that share, not the load generator.
//!
//! cgroup v1 (`cpu.cfs_period_us`, `cpu.cfs_quota_us`) and v2 (`cpu.max`) are both handled.
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
enum Hierarchy {
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
    let mut v2 = None;
    for line in mounts.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (Some(dir), Some(kind), Some(opts)) = (f.get(1), f.get(2), f.get(3)) else {
            continue;
        };
        match *kind {
            "cgroup" if opts.split(',').any(|o| o == "cpu") => {
                return Some(Hierarchy::V1(PathBuf::from(dir)));
            }
            "cgroup2" => {
                let controllers = fs::read_to_string(Path::new(dir).join("cgroup.controllers"))
                    .unwrap_or_default();
                if controllers.split_whitespace().any(|c| c == "cpu") {
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
        drop(quota.group().map_err(|e| {
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

    /// Makes a fresh group with the quota set; it is removed when dropped.
    pub(crate) fn group(&self) -> io::Result<Group> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "ringside-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let dir = self.root().join(name);
        fs::create_dir(&dir)?;
        let group = Group {
            dir,
            quota: self.fraction,
        };
        if matches!(self.hierarchy, Hierarchy::V2(_)) {
            fs::write(
                group.dir.join("cpu.max"),
                format!("{} {}", self.quota_us(), self.period_us),
            )?;
        } else {
            // The quota is written after the period: a quota above the old period is fine
            // either way, but the kernel checks the pair as it stands after each write.
            fs::write(
                group.dir.join("cpu.cfs_period_us"),
                self.period_us.to_string(),
            )?;
            fs::write(
                group.dir.join("cpu.cfs_quota_us"),
                self.quota_us().to_string(),
            )?;
        }
        Ok(group)
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

/// A cgroup made for one server start.
#[derive(Debug)]
pub(crate) struct Group {
    dir: PathBuf,
    quota: f64,
}

impl Group {
    /// Moves process `pid` (all its threads; children it forks later follow it) into the
    /// group.
    pub(crate) fn add(&self, pid: u32) -> io::Result<()> {
        fs::write(self.dir.join("cgroup.procs"), pid.to_string())
    }

    pub(crate) fn stat(&self) -> CpuStat {
        parse_cpu_stat(&fs::read_to_string(self.dir.join("cpu.stat")).unwrap_or_default())
    }

    /// The throttling between two readings of [`Group::stat`].
    pub(crate) fn between(&self, a: CpuStat, b: CpuStat) -> Throttle {
        Throttle {
            quota: self.quota,
            nr_periods: b.nr_periods.saturating_sub(a.nr_periods),
            nr_throttled: b.nr_throttled.saturating_sub(a.nr_throttled),
            throttled_s: (b.throttled_s - a.throttled_s).max(0.0),
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        // The server has been stopped; its processes may take a moment to leave the group.
        for _ in 0..50 {
            if fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        eprintln!(
            "warning: could not remove the cgroup {}",
            self.dir.display()
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
        let group = quota.group().unwrap();
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
        let t = group.between(before, after);
        assert!(t.nr_periods > 0, "{t:?}");
        assert!(t.nr_throttled > 0, "{t:?}");
        drop(group);
    }
}
