//! Whether this machine can host a test bed, and if not, one line saying why and what to
//! do: the message a skipped test prints.

use std::fmt;
use std::path::Path;
use std::process::{self, Command};
use std::sync::atomic::Ordering;

use crate::{IP_TIMEOUT, NEXT, cmd};

/// What to install for every tier, in the words of the machines CI runs on.
const INSTALL: &str = "apt-get install openssh-server openssh-client iproute2";

/// Why this machine cannot host a test bed: one line, with what would change that.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skip(String);

impl fmt::Display for Skip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Skip {}

/// Checks the tools (`sshd` given for the ssh tier), then root, then that a namespace can
/// be made and deleted. Tools first: that needs no privilege, so the answer does not depend
/// on who asks.
pub(crate) fn probe(sshd: Option<&Path>) -> Result<(), Skip> {
    if !on_path("ip") {
        return Err(missing("`ip` (iproute2)"));
    }
    if let Some(sshd) = sshd {
        if !sshd.is_file() {
            return Err(missing(&format!("{} (openssh-server)", sshd.display())));
        }
        for tool in ["ssh", "ssh-keygen"] {
            if !on_path(tool) {
                return Err(missing(&format!("`{tool}` (openssh-client)")));
            }
        }
    }
    match effective_uid() {
        Some(0) => {}
        Some(uid) => {
            return Err(Skip(format!(
                "network namespaces need root and this runs as uid {uid} (run the tests as root, as CI does)"
            )));
        }
        None => {
            return Err(Skip(
                "cannot read the effective uid from /proc/self/status".into(),
            ));
        }
    }
    let scratch = format!(
        "ringside-{}-{}-probe",
        process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    cmd::run(
        Command::new("ip").args(["netns", "add", &scratch]),
        IP_TIMEOUT,
    )
    .map_err(|e| {
        Skip(format!(
            "`ip netns add` does not work here: {}",
            one_line(&e.to_string())
        ))
    })?;
    cmd::run(
        Command::new("ip").args(["netns", "del", &scratch]),
        IP_TIMEOUT,
    )
    .map_err(|e| {
        Skip(format!(
            "`ip netns del {scratch}` does not work here: {}",
            one_line(&e.to_string())
        ))
    })?;
    Ok(())
}

fn missing(what: &str) -> Skip {
    Skip(format!(
        "the network test bed needs {what}, which is missing (install: {INSTALL})"
    ))
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Whether `program` is an executable file in a directory of `PATH`.
fn on_path(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let Some(path) = std::env::var_os("PATH") else {
        return false;
    };
    std::env::split_paths(&path).any(|dir| {
        dir.join(program)
            .metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

/// The second field of `Uid:` in /proc/self/status: the effective uid.
fn effective_uid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(2)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_effective_uid_is_read() {
        assert!(effective_uid().is_some());
    }
}
