//! The `perf_event_open` system call, for a counter scoped to a cgroup on one CPU, in counting
//! mode (no sampling, no ring buffer): the kernel adds to the counter while a task of the group
//! runs on the CPU, and a `read` of the descriptor gives the count with the time the counter was
//! enabled and the time it ran (the two differ only where hardware counters were multiplexed).
//!
//! This file is one of xtask's two unsafe fences (ARCHITECTURE.md): the system call, which libc
//! has no wrapper for, the adoption of the descriptor it returns, and the ioctl that sets a
//! tracepoint counter's filter.

#![allow(unsafe_code)]

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use nix::libc;

/// `perf_event_attr` as the kernel's first version of it (`PERF_ATTR_SIZE_VER0`, 64 bytes):
/// every kernel since 2.6.31 takes it, and a counting event needs nothing of the later fields.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct Attr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
}

/// `PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING`: a read gives the count,
/// the time enabled and the time running.
const READ_FORMAT: u64 = 1 | 2;
/// `PERF_FLAG_PID_CGROUP | PERF_FLAG_FD_CLOEXEC`.
const FLAGS: libc::c_ulong = 4 | 8;

/// Opens a counter of the event `(kind, config)` for the tasks of the cgroup whose directory
/// `cgroup` is open, on `cpu`, counting from now.
pub(super) fn open(kind: u32, config: u64, cgroup: &File, cpu: usize) -> io::Result<File> {
    let attr = Attr {
        kind,
        size: std::mem::size_of::<Attr>() as u32,
        config,
        read_format: READ_FORMAT,
        // Enabled at once (bit 0, `disabled`, clear); user and kernel both counted.
        flags: 0,
        ..Attr::default()
    };
    let cpu = libc::c_int::try_from(cpu).map_err(|_| io::ErrorKind::InvalidInput)?;
    // SAFETY: [1] `attr` is a `perf_event_attr` of the size it says, alive across the call,
    // which only reads it; [2] the other arguments are integers (the cgroup directory's
    // descriptor stands for the pid under PERF_FLAG_PID_CGROUP, and `cgroup` outlives the
    // call); [3] a non-negative return is a new descriptor that nothing else owns, adopted
    // once.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const Attr,
            cgroup.as_raw_fd(),
            cpu,
            -1 as libc::c_int,
            FLAGS,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = libc::c_int::try_from(fd).map_err(|_| io::ErrorKind::InvalidData)?;
    // SAFETY: see [3] above.
    Ok(File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
}

/// `PERF_EVENT_IOC_SET_FILTER`: `_IOW('$', 6, char *)`.
const SET_FILTER: libc::c_ulong =
    (1 << 30) | ((std::mem::size_of::<usize>() as libc::c_ulong) << 16) | (0x24 << 8) | 6;

/// Has the tracepoint counter `file` count only the events that pass `filter` (ftrace's
/// filter grammar over the tracepoint's fields: `prev_state & 255`).
pub(super) fn set_filter(file: &File, filter: &std::ffi::CStr) -> io::Result<()> {
    // SAFETY: the ioctl reads the NUL-terminated string `filter`, alive across the call, and
    // changes only the counter behind `file`, which this process owns.
    let r = unsafe { libc::ioctl(file.as_raw_fd(), SET_FILTER as _, filter.as_ptr()) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_attribute_is_the_kernels_first_version() {
        assert_eq!(std::mem::size_of::<super::Attr>(), 64);
        // _IOW('$', 6, char *) on a 64-bit target, as linux/perf_event.h makes it.
        if std::mem::size_of::<usize>() == 8 {
            assert_eq!(super::SET_FILTER, 0x4008_2406);
        }
    }
}
