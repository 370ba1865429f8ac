//! What a run killed before its `Drop` ran left: namespaces of netbed's naming and the ssh
//! tier's temporary directories, whose pid is gone.

use std::fs;
use std::process::{self, Command};
use std::sync::Once;

use crate::ssh::TEMP_PREFIX;
use crate::{IP_TIMEOUT, alive, cmd, remove_namespace, warn};

/// Removes stale namespaces and temporary directories, once per process: a process's own
/// are never stale, so one look when it builds its first test bed finds all there will be.
/// Best effort: a failure is said and does not stop the new test bed.
pub(crate) fn remove_once() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        remove_namespaces();
        remove_temp_dirs();
    });
}

fn remove_namespaces() {
    let list = match cmd::run(Command::new("ip").args(["netns", "list"]), IP_TIMEOUT) {
        Ok(list) => list,
        Err(e) => {
            return warn(&format!(
                "netbed: cannot list namespaces to remove stale ones: {e}"
            ));
        }
    };
    for name in list.lines().filter_map(|l| l.split_whitespace().next()) {
        let Some(pid) = owner(name) else { continue };
        if pid == process::id() || alive(pid) {
            continue;
        }
        match remove_namespace(name) {
            Ok(()) => warn(&format!(
                "netbed: removed {name}, left by process {pid}, which is gone"
            )),
            // Another process may have removed it first.
            Err(e) => warn(&format!(
                "netbed: cannot remove stale namespace {name}: {e}"
            )),
        }
    }
}

/// The ssh tier's directories, `ringside-netbed-<pid>-*` in the temporary directory.
fn remove_temp_dirs() {
    let Ok(entries) = fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(temp_owner) else {
            continue;
        };
        if pid == process::id() || alive(pid) {
            continue;
        }
        // Another process may be removing it too; what is left is harmless.
        if fs::remove_dir_all(entry.path()).is_ok() {
            warn(&format!(
                "netbed: removed {}, left by process {pid}, which is gone",
                entry.path().display()
            ));
        }
    }
}

/// The pid in a name of netbed's, `ringside-<pid>-<n>-{server,client<k>,probe}`; `None`
/// for any other name, which is none of netbed's business.
fn owner(name: &str) -> Option<u32> {
    let mut parts = name.strip_prefix("ringside-")?.splitn(3, '-');
    let pid = parts.next()?.parse().ok()?;
    let n = parts.next()?;
    let role = parts.next()?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let role_ok =
        role == "server" || role == "probe" || role.strip_prefix("client").is_some_and(digits);
    (digits(n) && role_ok).then_some(pid)
}

/// The pid in `ringside-netbed-<pid>-<random>`, the ssh tier's temporary directory.
fn temp_owner(name: &str) -> Option<u32> {
    let (pid, random) = name.strip_prefix(TEMP_PREFIX)?.split_once('-')?;
    if random.is_empty() {
        return None;
    }
    pid.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::{owner, temp_owner};

    #[test]
    fn only_names_of_the_exact_pattern_have_an_owner() {
        assert_eq!(owner("ringside-123-0-server"), Some(123));
        assert_eq!(owner("ringside-123-7-client12"), Some(123));
        assert_eq!(owner("ringside-9-1-probe"), Some(9));
        for other in [
            "ringside-123-0-servers",
            "ringside-123-x-server",
            "ringside-123-0-client",
            "ringside-abc-0-server",
            "ringside-bench",
            "ringside-123-0-client1-extra",
            "other-123-0-server",
        ] {
            assert_eq!(owner(other), None, "{other}");
        }
    }

    #[test]
    fn only_temporary_directories_of_the_exact_pattern_have_an_owner() {
        assert_eq!(temp_owner("ringside-netbed-123-AbC9x"), Some(123));
        for other in [
            "ringside-netbed-123-",
            "ringside-netbed-AbC9x",
            "ringside-netbed-x1-y",
            "ringside-cargo-home.1-2",
        ] {
            assert_eq!(temp_owner(other), None, "{other}");
        }
    }
}
