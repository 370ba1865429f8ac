//! A user's delegated cgroup subtree, for a run without root on cgroup v2: systemd gives each
//! user one (`user@UID.service`, and any scope or service started with `Delegate=yes`, as
//! `systemd-run --user --scope -p Delegate=yes` does), in which the user may make groups
//! and move its own processes. The groups of a run are made in the nearest ancestor of the
//! run's own cgroup (itself first) that lets them be made and joined.
//!
//! It may call nothing else of xtask.

use std::path::{Path, PathBuf};

/// The cgroup v2 path of this process, from `/proc/self/cgroup`'s `0::` line.
pub(super) fn own() -> Option<String> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    own_of(&text)
}

/// The `0::` line's path of a `/proc/PID/cgroup` text.
fn own_of(text: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(|p| p.trim().to_string())
}

/// Where a run's groups may be made under the v2 tree mounted at `mount`, for a process in
/// the cgroup `own` (`/user.slice/user-1000.slice/user@1000.service/app.slice/x.scope`):
/// that cgroup and each ancestor in turn, nearest first, the mount's root left out (it is
/// tried before).
pub(super) fn candidates(mount: &Path, own: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut path = PathBuf::from(own.trim_start_matches('/'));
    while !path.as_os_str().is_empty() {
        out.push(mount.join(&path));
        if !path.pop() {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_candidates_are_the_own_cgroup_and_its_ancestors_nearest_first() {
        let own = own_of("0::/user.slice/user-1000.slice/user@1000.service/app.slice/run.scope\n")
            .unwrap();
        let c = candidates(Path::new("/sys/fs/cgroup"), &own);
        let c: Vec<String> = c.iter().map(|p| p.display().to_string()).collect();
        assert_eq!(
            c,
            [
                "/sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service/app.slice/run.scope",
                "/sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service/app.slice",
                "/sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service",
                "/sys/fs/cgroup/user.slice/user-1000.slice",
                "/sys/fs/cgroup/user.slice",
            ]
        );
        // At the root (a container's namespace, root itself): nothing more to try.
        assert!(candidates(Path::new("/sys/fs/cgroup"), "/").is_empty());
        assert_eq!(own_of("12:cpu:/x\n0::/a\n").as_deref(), Some("/a"));
        assert_eq!(own_of("12:cpu:/x\n"), None);
    }
}
