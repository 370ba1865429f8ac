//! Pooled, guard-paged fiber stacks carved from large mappings.
//!
//! One `mmap` per stack would cost one VMA per stack plus one for its guard page, and
//! `vm.max_map_count` (65,530 by default) would cap a process near 32,000 fibers. So the pool
//! maps large regions and carves them into slots. Each slot starts with a guard page:
//!
//! ```text
//!  one mapping (MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE), `per_mapping` slots
//!  low addresses                                                       high addresses
//!  +-------+------------------+-------+------------------+-----+-------+---------------+
//!  | guard | stack 0          | guard | stack 1          | ... | guard | stack n-1     |
//!  +-------+------------------+-------+------------------+-----+-------+---------------+
//!  ^       ^                  ^
//!  limit   grows down from    base of stack 0 = limit of slot 1
//!  of      base of stack 0
//!  slot 0
//! ```
//!
//! The guard page is installed with `madvise(MADV_GUARD_INSTALL)` (Linux 6.13), which marks
//! the page in the page tables and does not split the VMA: a mapping of a thousand stacks stays
//! one VMA. On older kernels the pool falls back to `mprotect(PROT_NONE)`, which splits the
//! mapping into two VMAs per stack; there the fiber count is capped by `vm.max_map_count`
//! again, and hitting it is reported as an error naming that limit.
//!
//! Stacks are handed out lazily (a slot's guard is installed the first time the slot is used)
//! and recycled through a free list; their pages stay resident for the next fiber.

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use super::{cvt, page_size};

/// `MADV_GUARD_INSTALL` from `<linux/mman.h>` (Linux 6.13); not yet in the libc crate.
const MADV_GUARD_INSTALL: libc::c_int = 102;

/// Aim for mappings of about this size, so that few VMAs cover many stacks.
const TARGET_MAPPING_BYTES: usize = 64 << 20;
/// Upper bound on slots per mapping, so small stacks do not make huge mappings.
const MAX_SLOTS_PER_MAPPING: usize = 1024;

/// How a slot's guard page is made inaccessible.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GuardKind {
    /// `madvise(MADV_GUARD_INSTALL)`: no extra VMA.
    Madvise,
    /// `mprotect(PROT_NONE)`: two VMAs per stack.
    Mprotect,
}

/// A pool of stacks of one size, shared by the workers of a runtime.
#[derive(Debug, Clone)]
pub(crate) struct StackPool {
    shared: Arc<PoolShared>,
}

#[derive(Debug)]
struct PoolShared {
    /// Usable bytes per stack (a multiple of the page size).
    stack_size: usize,
    /// Guard bytes per slot (one page).
    guard: usize,
    per_mapping: usize,
    inner: Mutex<PoolInner>,
    in_use: AtomicUsize,
}

#[derive(Debug)]
struct PoolInner {
    /// Lowest addresses of slots that were used and given back.
    free: Vec<usize>,
    mappings: Vec<Mapping>,
    /// Slots of the last mapping not handed out yet.
    next_fresh: usize,
    guard_kind: Option<GuardKind>,
}

/// An owned anonymous mapping, unmapped on drop.
#[derive(Debug)]
struct Mapping {
    addr: usize,
    len: usize,
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: [1] `addr..addr+len` is a mapping this value created and owns alone;
        // [2] the pool drops its mappings only when the last `PooledStack` (each holds an
        // `Arc` of the pool) is gone, so no stack in it is still in use.
        unsafe {
            libc::munmap(self.addr as *mut libc::c_void, self.len);
        }
    }
}

/// Counters of a pool, for `Stats` and the leak tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct PoolCounts {
    pub(crate) in_use: usize,
    pub(crate) carved: usize,
    pub(crate) mappings: usize,
    pub(crate) guard: Option<GuardKind>,
}

/// The fewest usable bytes of any fiber stack: the pool rounds smaller requests up to it, and
/// `coro::on_worker_stack` counts on it to run short runtime calls on the fiber's own stack.
pub(crate) const MIN_STACK_SIZE: usize = 16 * 1024;

impl StackPool {
    /// A pool of stacks with at least `stack_size` usable bytes each (and at least
    /// [`MIN_STACK_SIZE`]).
    pub(crate) fn new(stack_size: usize) -> StackPool {
        let page = page_size();
        let stack_size = stack_size.max(MIN_STACK_SIZE).div_ceil(page) * page;
        let slot = stack_size + page;
        let per_mapping = (TARGET_MAPPING_BYTES / slot).clamp(1, MAX_SLOTS_PER_MAPPING);
        StackPool {
            shared: Arc::new(PoolShared {
                stack_size,
                guard: page,
                per_mapping,
                inner: Mutex::new(PoolInner {
                    free: Vec::new(),
                    mappings: Vec::new(),
                    next_fresh: 0,
                    guard_kind: None,
                }),
                in_use: AtomicUsize::new(0),
            }),
        }
    }

    /// Usable bytes per stack.
    #[cfg(test)]
    pub(crate) fn stack_size(&self) -> usize {
        self.shared.stack_size
    }

    /// Takes a stack from the free list, or carves a new one.
    pub(crate) fn get(&self) -> io::Result<PooledStack> {
        let shared = &self.shared;
        let mut inner = shared.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let bottom = match inner.free.pop() {
            Some(bottom) => bottom,
            None => shared.carve(&mut inner)?,
        };
        drop(inner);
        shared.in_use.fetch_add(1, Ordering::Relaxed);
        Ok(PooledStack {
            bottom,
            pool: Arc::clone(&self.shared),
        })
    }

    pub(crate) fn counts(&self) -> PoolCounts {
        let inner = self
            .shared
            .inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let mappings = inner.mappings.len();
        let carved = mappings.saturating_sub(1) * self.shared.per_mapping + inner.next_fresh;
        PoolCounts {
            in_use: self.shared.in_use.load(Ordering::Relaxed),
            carved,
            mappings,
            guard: inner.guard_kind,
        }
    }
}

impl PoolShared {
    fn slot(&self) -> usize {
        self.stack_size + self.guard
    }

    /// Hands out the next never-used slot, mapping a new region when the last one is full.
    fn carve(&self, inner: &mut PoolInner) -> io::Result<usize> {
        if inner.mappings.is_empty() || inner.next_fresh == self.per_mapping {
            let len = self.slot() * self.per_mapping;
            // SAFETY: a fresh anonymous private mapping at an address the kernel picks
            // aliases no Rust object; the result is checked before use.
            let addr = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                    -1,
                    0,
                )
            };
            if addr == libc::MAP_FAILED {
                return Err(map_count_hint(io::Error::last_os_error()));
            }
            inner.mappings.push(Mapping {
                addr: addr as usize,
                len,
            });
            inner.next_fresh = 0;
        }
        let base = inner.mappings.last().map_or(0, |m| m.addr);
        let bottom = base + inner.next_fresh * self.slot();
        self.install_guard(inner, bottom)?;
        inner.next_fresh += 1;
        Ok(bottom)
    }

    fn install_guard(&self, inner: &mut PoolInner, bottom: usize) -> io::Result<()> {
        if inner.guard_kind != Some(GuardKind::Mprotect) {
            // SAFETY: `bottom..bottom+guard` lies inside a mapping the pool owns and that no
            // stack uses yet; turning it into a guard region cannot invalidate any reference.
            let r = unsafe {
                libc::madvise(bottom as *mut libc::c_void, self.guard, MADV_GUARD_INSTALL)
            };
            match cvt(r) {
                Ok(_) => {
                    inner.guard_kind = Some(GuardKind::Madvise);
                    return Ok(());
                }
                Err(e) if inner.guard_kind.is_none() && e.raw_os_error() == Some(libc::EINVAL) => {
                    inner.guard_kind = Some(GuardKind::Mprotect);
                }
                Err(e) => return Err(e),
            }
        }
        // SAFETY: as above: the page is inside the pool's own mapping and unused.
        let r = unsafe { libc::mprotect(bottom as *mut libc::c_void, self.guard, libc::PROT_NONE) };
        cvt(r).map(drop).map_err(map_count_hint)
    }

    fn release(&self, bottom: usize) {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner.free.push(bottom);
        drop(inner);
        self.in_use.fetch_sub(1, Ordering::Relaxed);
    }
}

/// ENOMEM from mmap or mprotect is, in practice, the VMA limit: say so.
fn map_count_hint(e: io::Error) -> io::Error {
    if e.raw_os_error() == Some(libc::ENOMEM) {
        io::Error::new(
            io::ErrorKind::OutOfMemory,
            format!(
                "cannot map another fiber stack ({e}); the process may have hit \
                 vm.max_map_count (see /proc/sys/vm/max_map_count) or the memory limit"
            ),
        )
    } else {
        e
    }
}

/// One stack slot, owned by one coroutine; given back to its pool on drop.
#[derive(Debug)]
pub(crate) struct PooledStack {
    /// Lowest address of the slot: the start of its guard page.
    bottom: usize,
    pool: Arc<PoolShared>,
}

impl Drop for PooledStack {
    fn drop(&mut self) {
        self.pool.release(self.bottom);
    }
}

impl PooledStack {
    /// The top (highest address, page-aligned) of the stack: it grows down from here to its
    /// guard page. `bottom..top` is `guard + stack_size` bytes inside a mapping the pool keeps
    /// alive as long as this value exists (it holds an `Arc` of the pool), the lowest page
    /// a guard (installed before the slot was first handed out), and the slot is handed to
    /// one `PooledStack` at a time.
    pub(crate) fn top(&self) -> usize {
        self.bottom + self.pool.slot()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stacks_are_recycled_and_counted() {
        let pool = StackPool::new(16 * 1024);
        let a = pool.get().expect("carve a stack");
        let b = pool.get().expect("carve a stack");
        assert_ne!(a.bottom, b.bottom);
        assert_eq!(pool.counts().in_use, 2);
        let a_bottom = a.bottom;
        drop(a);
        assert_eq!(pool.counts().in_use, 1);
        let c = pool.get().expect("reuse a stack");
        assert_eq!(
            c.bottom, a_bottom,
            "a freed stack is reused before a new one is carved"
        );
        assert_eq!(pool.counts().carved, 2);
        drop((b, c));
        assert_eq!(pool.counts().in_use, 0);
    }

    #[test]
    fn slots_do_not_overlap_and_keep_a_guard() {
        let pool = StackPool::new(20 * 1024);
        let page = page_size();
        let stacks: Vec<_> = (0..10).map(|_| pool.get().expect("stack")).collect();
        let mut ranges: Vec<_> = stacks.iter().map(|s| (s.bottom, s.top())).collect();
        ranges.sort_unstable();
        for w in ranges.windows(2) {
            assert!(w[0].1 <= w[1].0, "slots overlap: {w:?}");
        }
        for (limit, base) in &ranges {
            assert_eq!(base - limit, pool.stack_size() + page);
            assert_eq!(limit % page, 0);
        }
    }

    #[test]
    fn many_stacks_take_few_mappings() {
        let pool = StackPool::new(16 * 1024);
        let stacks: Vec<_> = (0..3000).map(|_| pool.get().expect("stack")).collect();
        let counts = pool.counts();
        assert_eq!(counts.in_use, 3000);
        assert!(
            counts.mappings <= 3000usize.div_ceil(MAX_SLOTS_PER_MAPPING) + 1,
            "{counts:?}"
        );
        drop(stacks);
        assert_eq!(pool.counts().in_use, 0);
    }

    #[test]
    fn a_coroutine_runs_on_a_pooled_stack() {
        use crate::sys::coro::{FiberCoro, Suspend, suspend};
        let pool = StackPool::new(32 * 1024);
        let stack = pool.get().expect("stack");
        let seen = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let s = std::sync::Arc::clone(&seen);
        let mut co = FiberCoro::new(stack, move || {
            let big = std::hint::black_box([7u8; 4096]);
            assert!(suspend(Suspend::Park).is_some());
            s.store(usize::from(big[100]), std::sync::atomic::Ordering::SeqCst);
        });
        assert_eq!(co.resume().map(|r| r.0), Some(Suspend::Park));
        assert_eq!(co.resume(), None);
        assert_eq!(seen.load(std::sync::atomic::Ordering::SeqCst), 7);
        drop(co.into_stack());
        assert_eq!(pool.counts().in_use, 0);
    }
}
