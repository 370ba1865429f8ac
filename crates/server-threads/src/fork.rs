//! The two unsafe operations of `--mode process`, and why each is sound:
//! `fork(2)` from a process that has exactly one thread, and blocks of counts
//! in a shared anonymous mapping that the children update in place.
#![allow(unsafe_code)] // fork(2) and mmap(2) have no safe wrapper.

use std::num::NonZeroUsize;

use anyhow::{Context, bail};
use nix::sys::mman::{MapFlags, ProtFlags, mmap_anonymous};
use nix::unistd::{ForkResult, Pid, fork};

use launch::Snapshot;
use service::counters::Block;

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

/// Blocks of counts per page of the shared mapping; a chunk is mapped whenever every
/// block is taken.
const BLOCKS_PER_CHUNK: usize = 4096 / size_of::<Block>();

/// Blocks of counts in memory shared with every child forked after they were mapped,
/// so that the parent's stop line counts what the children did, even children it had
/// to terminate. Each child process counts into a block of its own (one writer per
/// block: no cache line is shared per message); a reaped child's block keeps its counts
/// and goes to the next child, which adds on.
#[derive(Debug, Default)]
pub(crate) struct SharedBlocks {
    all: Vec<&'static [Block]>,
    free: Vec<&'static Block>,
}

impl SharedBlocks {
    /// A block for one child process, mapping a new chunk if none is free.
    pub(crate) fn take(&mut self) -> anyhow::Result<&'static Block> {
        if self.free.is_empty() {
            let chunk = map_chunk()?;
            self.all.push(chunk);
            self.free.extend(chunk.iter().rev());
        }
        Ok(self.free.pop().expect("a chunk was just mapped"))
    }

    /// Gives back the block of a child that was reaped.
    pub(crate) fn give_back(&mut self, block: &'static Block) {
        self.free.push(block);
    }

    /// What every child counted, reaped or not.
    pub(crate) fn sum(&self) -> Vec<Snapshot> {
        self.all
            .iter()
            .flat_map(|c| c.iter())
            .map(Block::snapshot)
            .collect()
    }
}

fn map_chunk() -> anyhow::Result<&'static [Block]> {
    const LEN: usize = BLOCKS_PER_CHUNK * size_of::<Block>();
    const _: () = assert!(LEN > 0 && align_of::<Block>() <= 4096);
    let len = NonZeroUsize::new(LEN).expect("LEN is not zero (checked at compile time)");
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
    // SAFETY: [1] the mapping is page-aligned, which satisfies Block's alignment
    // (checked at compile time above), and holds BLOCKS_PER_CHUNK blocks;
    // [2] anonymous mappings are zero-filled, and all-zero bytes are a valid Block
    // (its counts are AtomicU64s, zero);
    // [3] the mapping is never unmapped, so the slice may be 'static;
    // [4] all access goes through atomics, so sharing it with other threads and
    // (through MAP_SHARED) other processes is data-race free.
    Ok(unsafe { std::slice::from_raw_parts(ptr.cast::<Block>().as_ptr(), BLOCKS_PER_CHUNK) })
}
