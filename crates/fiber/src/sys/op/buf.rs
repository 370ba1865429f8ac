//! The memory an operation lends the kernel: pooled I/O buffers and small boxed values
//! (an address, a timespec, a counter), reachable only through raw pointers while the
//! kernel may touch them.

use std::ptr::NonNull;

use super::MAX_IO;

/// A heap buffer the kernel may write while an operation is in flight. It is reachable only
/// through raw pointers meanwhile, so no Rust reference aliases the kernel's writes.
///
/// Its bytes start uninitialised (the kernel fills them for a read; a write copies the
/// caller's data in first), and buffers of the common sizes are recycled through a small
/// per-thread pool, so a read costs neither an allocation nor zeroing.
pub(super) struct RawBuf {
    pub(super) ptr: NonNull<u8>,
    /// At most [`MAX_IO`]: a `u32` keeps [`Op`] small (see its size assertion).
    cap: u32,
}

// SAFETY: `RawBuf` owns its allocation like a `Box<[u8]>`; it holds no thread-bound state.
unsafe impl Send for RawBuf {}
// SAFETY: shared access only reads through `&self` methods after the operation completed.
unsafe impl Sync for RawBuf {}

/// Smallest pooled buffer, and the number of power-of-two size classes above it
/// (64 B to 64 KiB).
const POOL_MIN: usize = 64;
const POOL_CLASSES: usize = 11;
/// Buffers kept per class per thread, for classes up to [`POOL_DEEP_MAX`] bytes: twice the
/// fibers a worker runs per round. A blocking-style echo frees its read buffer in one round
/// and takes a new one in the next (after its write completed), so up to a round's worth of
/// buffers of one class is in the pool between rounds. With 32 kept, half of the read
/// buffers of a busy server went back to malloc and came out of it again (a read of
/// `READ_BUF` plus a message, 16,400 bytes, takes a 32 KiB buffer, which glibc frees by
/// coalescing and re-sorting its bins: 3% of srv-fiber's CPU at 1000 connections).
const POOL_DEPTH: usize = 2 * crate::worker::BUDGET;
/// Largest class kept [`POOL_DEPTH`] deep; the 64 KiB class keeps [`POOL_DEPTH_LARGE`]. At
/// most 128 x 64 KiB (the classes up to 32 KiB) + 32 x 64 KiB = 10 MiB per thread stays
/// pooled, and only what a burst of that size once used.
const POOL_DEEP_MAX: usize = 32 * 1024;
const POOL_DEPTH_LARGE: usize = 32;

fn pool_depth(cap: usize) -> usize {
    if cap <= POOL_DEEP_MAX {
        POOL_DEPTH
    } else {
        POOL_DEPTH_LARGE
    }
}

/// Free buffers of one thread, by size class.
struct Pool {
    free: [Vec<NonNull<u8>>; POOL_CLASSES],
}

impl Drop for Pool {
    fn drop(&mut self) {
        for (class, list) in self.free.iter_mut().enumerate() {
            for ptr in list.drain(..) {
                // SAFETY: pooled pointers are allocations of exactly this class's layout,
                // owned by the pool alone, freed once, here.
                unsafe { std::alloc::dealloc(ptr.as_ptr(), layout(POOL_MIN << class)) };
            }
        }
    }
}

thread_local! {
    static POOL: std::cell::RefCell<Pool> = const {
        std::cell::RefCell::new(Pool { free: [const { Vec::new() }; POOL_CLASSES] })
    };
}

fn layout(cap: usize) -> std::alloc::Layout {
    // `cap` is at least 1 and far below `isize::MAX`: the layout is always valid.
    std::alloc::Layout::from_size_align(cap, 1).unwrap_or(std::alloc::Layout::new::<u8>())
}

/// The pool class and capacity for a request of `len` bytes (`None`: too big to pool).
fn class_of(len: usize) -> Option<(usize, usize)> {
    let cap = len.max(POOL_MIN).next_power_of_two();
    let class = (cap / POOL_MIN).trailing_zeros() as usize;
    (class < POOL_CLASSES).then_some((class, cap))
}

impl RawBuf {
    /// A buffer of at least `len` bytes, contents unspecified.
    pub(super) fn uninit(len: usize) -> RawBuf {
        let len = len.clamp(1, MAX_IO);
        if let Some((class, cap)) = class_of(len) {
            let pooled = POOL
                .try_with(|p| p.borrow_mut().free[class].pop())
                .ok()
                .flatten();
            if let Some(ptr) = pooled {
                return RawBuf::from_parts(ptr, cap);
            }
            return RawBuf::alloc(cap);
        }
        RawBuf::alloc(len)
    }

    fn alloc(cap: usize) -> RawBuf {
        let layout = layout(cap);
        // SAFETY: `layout` has a non-zero size.
        let ptr = unsafe { std::alloc::alloc(layout) };
        match NonNull::new(ptr) {
            Some(ptr) => RawBuf::from_parts(ptr, cap),
            None => std::alloc::handle_alloc_error(layout),
        }
    }

    fn from_parts(ptr: NonNull<u8>, cap: usize) -> RawBuf {
        // Every buffer is at most `MAX_IO` bytes (`uninit` clamps, pool classes are smaller).
        let cap = u32::try_from(cap).unwrap_or(u32::MAX);
        RawBuf { ptr, cap }
    }

    pub(super) fn cap(&self) -> usize {
        self.cap as usize
    }

    pub(super) fn from_slice(data: &[u8]) -> RawBuf {
        let buf = RawBuf::uninit(data.len());
        // SAFETY: the buffer has room for `data.len()` bytes, is fresh (no op uses it) and
        // does not overlap `data`.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), buf.ptr.as_ptr(), data.len());
        }
        buf
    }

    /// Copies `data` to the start of the buffer, if it fits; `&mut`: no operation uses it.
    pub(super) fn fill_from(&mut self, data: &[u8]) -> bool {
        if data.len() > self.cap() {
            return false;
        }
        // SAFETY: the buffer has room for `data.len()` bytes, `&mut self` means no op lends
        // it to the kernel, and a slice the caller holds cannot overlap memory this owns.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.as_ptr(), data.len());
        }
        true
    }

    /// Copies the first `n` bytes (clamped to the capacity and to `dst`) into `dst`.
    ///
    /// # Safety
    ///
    /// No operation that may write this buffer is in flight, and its first `n` bytes are
    /// initialised (the kernel reported writing them, or they were copied in).
    pub(super) unsafe fn copy_to(&self, n: usize, dst: &mut [u8]) -> usize {
        // SAFETY: forwarded to the caller.
        let src = unsafe { self.prefix(n) };
        let n = src.len().min(dst.len());
        dst[..n].copy_from_slice(&src[..n]);
        n
    }

    /// The first `n` bytes (clamped to the capacity), borrowed.
    ///
    /// # Safety
    ///
    /// As for [`copy_to`](Self::copy_to), for as long as the borrow lives.
    pub(super) unsafe fn prefix(&self, n: usize) -> &[u8] {
        let n = n.min(self.cap());
        // SAFETY: per the caller the `n` bytes are initialised and nothing writes them while
        // the borrow (tied to `&self`, which owns the allocation) lives.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), n) }
    }
}

impl Drop for RawBuf {
    fn drop(&mut self) {
        if let Some((class, cap)) = class_of(self.cap())
            && cap == self.cap()
        {
            let ptr = self.ptr;
            let kept = POOL
                .try_with(|p| {
                    let mut p = p.borrow_mut();
                    let list = &mut p.free[class];
                    if list.len() < pool_depth(cap) {
                        list.push(ptr);
                        true
                    } else {
                        false
                    }
                })
                .unwrap_or(false);
            if kept {
                return;
            }
        }
        // SAFETY: `ptr` was allocated with `layout(cap)` (by `alloc`, possibly via the pool)
        // and is freed once, here.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), layout(self.cap())) };
    }
}

/// A small value at a fixed heap address the kernel reads or writes (a timespec, an
/// address, an eventfd counter).
pub(super) struct RawBox<T> {
    pub(super) ptr: NonNull<T>,
}

// SAFETY: owns a `T` like `Box<T>`.
unsafe impl<T: Send> Send for RawBox<T> {}
// SAFETY: shared access only reads after the operation completed.
unsafe impl<T: Sync> Sync for RawBox<T> {}

impl<T> RawBox<T> {
    pub(super) fn new(v: T) -> RawBox<T> {
        RawBox {
            ptr: NonNull::from(Box::leak(Box::new(v))),
        }
    }

    /// # Safety
    ///
    /// No operation that may write the value is in flight.
    pub(super) unsafe fn get(&self) -> &T {
        // SAFETY: a live `Box` allocation, not being written per the caller.
        unsafe { self.ptr.as_ref() }
    }
}

impl<T> Drop for RawBox<T> {
    fn drop(&mut self) {
        // SAFETY: from `Box::leak` in `new`, freed once, here.
        drop(unsafe { Box::from_raw(self.ptr.as_ptr()) });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffer_classes_cover_the_pooled_range() {
        assert_eq!(class_of(1), Some((0, 64)));
        assert_eq!(class_of(64), Some((0, 64)));
        assert_eq!(class_of(65), Some((1, 128)));
        assert_eq!(class_of(64 * 1024), Some((10, 64 * 1024)));
        assert_eq!(class_of(64 * 1024 + 1), None);
    }

    #[test]
    fn a_read_buffer_copies_out_only_what_was_written() {
        let buf = RawBuf::from_slice(b"hello");
        let mut dst = [0u8; 8];
        // SAFETY: no op uses the buffer; its first 5 bytes were copied in.
        let n = unsafe { buf.copy_to(5, &mut dst) };
        assert_eq!(&dst[..n], b"hello");
    }
}
