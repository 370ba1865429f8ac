//! Joining a group between fork and exec: a child the harness starts into a group writes its
//! own pid into the group's `cgroup.procs` (in every hierarchy the group spans) before it runs
//! one instruction of its program, so that what the program forks at its start (a master's
//! workers) is born inside. A process moved in after it was spawned leaves behind whatever it
//! forked before the move.
//!
//! The one unsafe of xtask is here: `CommandExt::pre_exec`, whose hook runs in the forked child
//! of a parent with many threads, where only async-signal-safe work is sound. So the paths are
//! made before the fork, and the hook allocates nothing: `getpid`, `open`, `write`, `close`.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;

use nix::fcntl::{OFlag, open};
use nix::sys::stat::Mode;

/// The `cgroup.procs` file of each of `dirs`, as the C strings the hook opens.
pub(super) fn procs_files(dirs: &[PathBuf]) -> io::Result<Vec<CString>> {
    dirs.iter()
        .map(|d| {
            CString::new(d.join("cgroup.procs").as_os_str().as_bytes())
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
        })
        .collect()
}

/// Has the child that `cmd` starts write its pid into each of `procs` between fork and exec.
/// A child that cannot join does not run its program: the spawn fails with the write's error.
#[allow(unsafe_code)]
pub(super) fn on_exec(cmd: &mut Command, procs: Vec<CString>) {
    // SAFETY: the hook runs in the child after fork, where a lock another thread of the
    // parent held stays held forever, so it must be async-signal-safe: [1] it allocates
    // nothing and takes no lock (`procs` was made before the fork and is only borrowed, the
    // pid is written out on the stack); [2] it calls only getpid, open, write and close,
    // which POSIX lists as async-signal-safe; [3] what it changes is the child's own (its
    // cgroup, a descriptor it closes), nothing the parent shares.
    unsafe {
        cmd.pre_exec(move || join(&procs));
    }
}

/// Writes the calling process's pid into each of `procs` (async-signal-safe, see [`on_exec`]).
fn join(procs: &[CString]) -> io::Result<()> {
    let mut digits = [0u8; 10];
    let pid = decimal(std::process::id(), &mut digits);
    for file in procs {
        let fd = open(
            file.as_c_str(),
            OFlag::O_WRONLY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        if nix::unistd::write(&fd, pid)? != pid.len() {
            return Err(io::ErrorKind::WriteZero.into());
        }
    }
    Ok(())
}

/// `n` in decimal, written into the end of `buf` (u32's widest is ten digits).
fn decimal(mut n: u32, buf: &mut [u8; 10]) -> &[u8] {
    let mut start = buf.len();
    // Bounded: ten turns at most, n shrinks tenfold a turn.
    loop {
        start -= 1;
        buf[start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[start..];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pid_is_written_in_decimal() {
        let mut buf = [0u8; 10];
        assert_eq!(decimal(0, &mut buf), b"0");
        assert_eq!(decimal(7, &mut buf), b"7");
        assert_eq!(decimal(4_194_304, &mut buf), b"4194304");
        assert_eq!(decimal(u32::MAX, &mut buf), b"4294967295");
    }
}
