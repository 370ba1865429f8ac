//! A server's CPU quota (`--server-cpu-quota`): the writable CPU controller found, checked by
//! making a group, and each server's group capped by it.
//!
//! It may call what `cgroup` may.

use std::fs;
use std::io;
use std::path::Path;

use super::{Group, Hierarchy, MIN_PERIOD_US, MIN_QUOTA_US, Quota, find_hierarchy};

/// The period for `fraction` of a CPU: 2 ms, or longer where the quota would be under the
/// kernel's 1 ms minimum.
pub(super) fn period_for(fraction: f64) -> u64 {
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
                "cannot make a cgroup with a CPU quota under {}: {e}. Run it as root (`sudo \
                 env PATH=$PATH cargo xtask bench …`); or, without the quota, make the server \
                 the limit another way: `--servers NAME+compute-us=100` (100 µs of CPU per \
                 echo) or `--client-hosts` (the load from other machines)",
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
    pub(super) fn cap(&self, counting: Option<&Group>) -> io::Result<Group> {
        let mut group = match counting {
            Some(g) if g.counter.starts_with(self.root()) => Group {
                dirs: vec![],
                counter: g.counter.clone(),
                quota: None,
                quota_dir: None,
                perf_dir: None,
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
