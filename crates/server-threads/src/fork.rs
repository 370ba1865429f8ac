//! The two unsafe operations of `--mode process`, and why each is sound:
//! `fork(2)` from a process that has exactly one thread, and a counters block
//! in a shared anonymous mapping that the children update in place.
#![allow(unsafe_code)] // fork(2) and mmap(2) have no safe wrapper.

use std::num::NonZeroUsize;

use anyhow::{Context, bail};
use nix::sys::mman::{MapFlags, ProtFlags, mmap_anonymous};
use nix::unistd::{ForkResult, Pid, fork};

use launch::Counters;

/// Which side of a fork this is.
pub(crate) enum Forked {
    Child,
    Parent(Pid),
}

/// Forks, after checking that this process has a single thread.
pub(crate) fn fork_single_threaded() -> anyhow::Result<Forked> {
    let threads = thread_count().context("counting this process's threads")?;
    if threads != 1 {
        bail!("refusing to fork a process with {threads} threads");
    }
    // SAFETY: fork(2) is unsound in a multi-threaded process because the child
    // inherits locks held by threads that do not exist in it. This process has
    // one thread (checked just above, and process mode never spawns one), so
    // the child's memory holds no lock that another thread owns.
    match unsafe { fork() }.context("fork(2) failed")? {
        ForkResult::Child => Ok(Forked::Child),
        ForkResult::Parent { child } => Ok(Forked::Parent(child)),
    }
}

fn thread_count() -> std::io::Result<usize> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(|| std::io::Error::other("no Threads: line in /proc/self/status"))
}

/// Counters in memory shared with every child forked after this call, so that
/// the parent's stop line counts what the children did, even children it had
/// to terminate.
pub(crate) fn shared_counters() -> anyhow::Result<&'static Counters> {
    let len = NonZeroUsize::new(size_of::<Counters>()).expect("Counters is not zero-sized");
    // SAFETY: an anonymous shared mapping with no address hint aliases nothing
    // that exists; the kernel chooses where it goes.
    let ptr = unsafe {
        mmap_anonymous(
            None,
            len,
            ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
            MapFlags::MAP_SHARED,
        )
    }
    .context("mapping shared counters")?;
    const _: () = assert!(align_of::<Counters>() <= 4096);
    // SAFETY: [1] the mapping is page-aligned, which satisfies Counters'
    // alignment (checked at compile time above), and is `len` bytes long;
    // [2] anonymous mappings are zero-filled, and Counters is a struct of
    // AtomicU64, for which all-zero bytes are a valid value (zero);
    // [3] the mapping is never unmapped, so the reference may be 'static;
    // [4] all access goes through atomics, so sharing it with other threads and
    // (through MAP_SHARED) other processes is data-race free.
    Ok(unsafe { ptr.cast::<Counters>().as_ref() })
}
