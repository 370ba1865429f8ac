//! Where the server's perf counters are scoped (`run::counters`): a cgroup of the `perf_event`
//! controller that holds the whole server. On cgroup v2 every group has the controller, so the
//! group that counts the CPU is the one. On v1 the controller has a hierarchy of its own: the
//! one mounted, else one this mounts beside the others (`<cgroup root>/perf_event`, as root),
//! else, on a hybrid host whose v2 tree holds the controller, a group of the v2 tree. The
//! server joins it between fork and exec with its other groups (`join.rs`).

use std::fs;
use std::path::{Path, PathBuf};

use super::{Accounting, Group, Hierarchy};

/// Whether and where a run scopes its counters to its servers' groups.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Perf {
    /// Not counting (`--counters off`, and the measured rounds of `--counters pass`).
    Off,
    /// No group can carry counters here: why.
    Unavailable(String),
    /// The counting group itself carries them (v2).
    InCounter,
    /// Groups made under this root carry them.
    Under(PathBuf),
}

/// Where perf groups are made beside the counting `hierarchy`, per `/proc/mounts`'s `mounts`;
/// a v1 host without the hierarchy gets it mounted in `mount_dir`'s place. The error says why
/// there are none.
pub(super) fn find_or_mount(mounts: &str, counting: &Hierarchy, mount_dir: &Path) -> Perf {
    if matches!(counting, Hierarchy::V2(_)) {
        return Perf::InCounter;
    }
    let mut v2 = None;
    for line in mounts.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (Some(dir), Some(kind), Some(opts)) = (f.get(1), f.get(2), f.get(3)) else {
            continue;
        };
        if *kind == "cgroup" && opts.split(',').any(|o| o == "perf_event") {
            return Perf::Under(PathBuf::from(dir));
        }
        if *kind == "cgroup2" {
            v2 = Some(PathBuf::from(dir));
        }
    }
    match mount(mount_dir) {
        Ok(()) => Perf::Under(mount_dir.to_path_buf()),
        // A hybrid host binds the controller to its v2 tree, whose every group has it.
        Err(_) if v2.is_some() && bound_to_v2() => Perf::Under(v2.unwrap_or_default()),
        Err(e) => Perf::Unavailable(format!(
            "the cgroup v1 perf_event controller is not mounted and cannot be mounted at {}: {e}",
            mount_dir.display()
        )),
    }
}

/// Mounts the v1 `perf_event` hierarchy at `dir` (made if absent).
fn mount(dir: &Path) -> Result<(), String> {
    fs::create_dir_all(dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
    nix::mount::mount(
        Some("cgroup"),
        dir,
        Some("cgroup"),
        nix::mount::MsFlags::empty(),
        Some("perf_event"),
    )
    .map_err(|e| {
        let _ = fs::remove_dir(dir);
        format!("mount -t cgroup -o perf_event: {e}")
    })
}

/// Whether `/proc/cgroups` puts `perf_event` in no v1 hierarchy (hierarchy 0: the v2 tree's).
fn bound_to_v2() -> bool {
    fs::read_to_string("/proc/cgroups").is_ok_and(|t| {
        t.lines().any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.first() == Some(&"perf_event") && f.get(1) == Some(&"0") && f.get(3) == Some(&"1")
        })
    })
}

impl Accounting {
    /// The run with its counters on (`on`) or off: on, where its groups are made, each gets a
    /// `perf_event` group too (found or mounted here).
    pub(crate) fn with_counters(mut self, on: bool) -> Accounting {
        let Accounting::Cgroups {
            hierarchy, perf, ..
        } = &mut self
        else {
            return self;
        };
        *perf = if on {
            let mounts = fs::read_to_string("/proc/mounts").unwrap_or_default();
            let beside = match &*hierarchy {
                Hierarchy::V1(p) | Hierarchy::V2(p) => p.parent().unwrap_or(p).join("perf_event"),
            };
            find_or_mount(&mounts, hierarchy, &beside)
        } else {
            Perf::Off
        };
        self
    }

    /// Why no start can be counted here at all (no cgroup, or no perf group), or `None`
    /// where a server's group can carry counters.
    pub(crate) fn cannot_count(&self) -> Option<String> {
        match self {
            Accounting::Cgroups {
                perf: Perf::Off | Perf::InCounter | Perf::Under(_),
                ..
            } => None,
            _ => self.perf_dir(None).err(),
        }
    }

    /// Where the counters of a start in `group` are scoped, or why they cannot be.
    pub(crate) fn perf_dir(&self, group: Option<&Group>) -> Result<PathBuf, String> {
        let perf = match self {
            Accounting::Tree { why } => {
                return Err(format!(
                    "not available here: the counters are scoped to the server's cgroup, and \
                     none can be made here ({why}): run as root (with a delegated cgroup, \
                     counting it also needs CAP_PERFMON, or `sudo sysctl \
                     kernel.perf_event_paranoid=-1`)"
                ));
            }
            Accounting::Cgroups { perf, .. } => perf,
        };
        match (perf, group.and_then(|g| g.perf_dir.clone())) {
            (Perf::Off, _) => Err(
                "not counted in these rounds (--counters pass counts a round of its own, off none)"
                    .into(),
            ),
            (Perf::Unavailable(why), _) => Err(format!("not available here: {why}")),
            (_, Some(dir)) => Ok(dir),
            (_, None) => Err("not available here: the server has no cgroup".into()),
        }
    }
}

impl Perf {
    /// Gives a server's `group` its perf group: its own directory (v2), or one made under the
    /// perf hierarchy, which the server joins with the others.
    pub(super) fn attach(&self, group: &mut Group) -> std::io::Result<()> {
        match self {
            Perf::InCounter => group.perf_dir = Some(group.counter.clone()),
            Perf::Under(root) => {
                let mut own = Group::make(root)?;
                group.perf_dir = Some(own.counter.clone());
                group.dirs.append(&mut own.dirs);
            }
            Perf::Off | Perf::Unavailable(_) => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_v1_host_whose_controller_cannot_be_mounted_has_no_counters_and_says_why() {
        // /proc takes no new directory: the mount cannot be made.
        let counting = Hierarchy::V1(PathBuf::from("/proc/ringside-none/cpuacct"));
        let at = Path::new("/proc/ringside-none/perf_event");
        match find_or_mount("", &counting, at) {
            Perf::Unavailable(why) => assert!(why.contains("/proc/ringside-none/perf_event")),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_mounted_v1_controller_is_used_and_v2_needs_none() {
        let mounts = "cgroup /sys/fs/cgroup/perf_event cgroup rw,relatime,perf_event 0 0\n";
        let v1 = Hierarchy::V1(PathBuf::from("/sys/fs/cgroup/cpuacct"));
        let nowhere = Path::new("/proc/ringside-none");
        assert_eq!(
            find_or_mount(mounts, &v1, nowhere),
            Perf::Under(PathBuf::from("/sys/fs/cgroup/perf_event"))
        );
        let v2 = Hierarchy::V2(PathBuf::from("/sys/fs/cgroup"));
        assert_eq!(find_or_mount("", &v2, nowhere), Perf::InCounter);
    }

    #[test]
    fn a_run_that_cannot_count_says_why_and_one_that_can_says_nothing() {
        let tree = Accounting::Tree {
            why: "no cgroup hierarchy is mounted".into(),
        };
        let why = tree.cannot_count().expect("a process tree counts nothing");
        assert!(why.contains("no cgroup hierarchy is mounted"), "{why}");
        let cgroups = |perf| Accounting::Cgroups {
            hierarchy: Hierarchy::V2(PathBuf::from("/sys/fs/cgroup")),
            quota: None,
            perf,
        };
        let none = cgroups(Perf::Unavailable("no perf_event controller".into()));
        assert!(
            none.cannot_count()
                .unwrap()
                .contains("no perf_event controller")
        );
        for can in [Perf::InCounter, Perf::Off] {
            assert_eq!(cgroups(can).cannot_count(), None);
        }
    }
}
