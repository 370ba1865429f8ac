//! Small heap blocks that a thread frees and soon allocates again, kept on a per-thread free
//! list instead of going back to the allocator each time: a spawn and join allocates two (the
//! fiber's [`Counted`](super::counted::Counted) record and its join slot,
//! [`oneshot`](super::oneshot)) and frees both, and glibc's `malloc` and `free` cost about
//! 60 and 110 instructions each on that path, against about 20 for a pop or a push here. Go's
//! runtime keeps the records of finished goroutines on a per-P free list (`gfput`/`gfget`)
//! for the same reason.
//!
//! Every block is one size and alignment ([`BLOCK`]); a type that does not fit goes to the
//! allocator as before. A thread keeps at most [`KEEP`] free blocks and gives them back when
//! it exits. A block freed on another thread than the one that allocated it joins that
//! thread's list: all blocks have the same layout, so any thread may reuse or free any.
//! Under loom every value goes to the allocator (loom tracks each allocation).

use std::alloc::{Layout, alloc, dealloc, handle_alloc_error};
use std::ptr::NonNull;

/// The one layout of the blocks kept here: two cache lines, aligned to them, so that a value
/// whose hot fields come first (a fiber's) finds them all in one line.
const BLOCK: Layout = match Layout::from_size_align(128, 64) {
    Ok(l) => l,
    Err(_) => panic!("a valid layout"),
};

/// Most free blocks a thread keeps.
const KEEP: usize = 64;

/// Whether a `T` goes in a block (known at compile time).
pub(crate) const fn fits<T>() -> bool {
    !cfg!(loom) && size_of::<T>() <= BLOCK.size() && align_of::<T>() <= BLOCK.align()
}

/// A thread's free blocks.
///
/// # Invariant
///
/// Each pointer came from `alloc(BLOCK)`, holds no value, and is referenced nowhere else.
struct FreeList(Vec<NonNull<u8>>);

impl Drop for FreeList {
    fn drop(&mut self) {
        for p in self.0.drain(..) {
            // SAFETY: from `alloc(BLOCK)` and unused (the invariant).
            unsafe { dealloc(p.as_ptr(), BLOCK) };
        }
    }
}

thread_local! {
    static FREE: std::cell::RefCell<FreeList> = const { std::cell::RefCell::new(FreeList(Vec::new())) };
}

/// `value` on the heap; free it with [`free`].
pub(crate) fn new<T>(value: T) -> NonNull<T> {
    if !fits::<T>() {
        return NonNull::from(Box::leak(Box::new(value)));
    }
    let reused = FREE
        .try_with(|f| f.try_borrow_mut().ok().and_then(|mut f| f.0.pop()))
        .ok()
        .flatten();
    let block = reused.unwrap_or_else(|| {
        // SAFETY: BLOCK's size is not zero.
        NonNull::new(unsafe { alloc(BLOCK) }).unwrap_or_else(|| handle_alloc_error(BLOCK))
    });
    let p = block.cast::<T>();
    // SAFETY: the block is unused and large and aligned enough for a `T` (`fits`).
    unsafe { p.as_ptr().write(value) };
    p
}

/// Drops the value and frees its memory.
///
/// # Safety
///
/// `p` came from [`new`] with the same `T`, is freed once, and is not used afterwards.
pub(crate) unsafe fn free<T>(p: NonNull<T>) {
    if !fits::<T>() {
        // SAFETY: from `Box::leak` in `new` (the caller's contract).
        drop(unsafe { Box::from_raw(p.as_ptr()) });
        return;
    }
    // SAFETY: a live `T` that nothing uses afterwards (the caller's contract).
    unsafe { p.as_ptr().drop_in_place() };
    let block = p.cast::<u8>();
    let kept = FREE
        .try_with(|f| match f.try_borrow_mut() {
            Ok(mut f) if f.0.len() < KEEP => {
                f.0.push(block);
                true
            }
            _ => false,
        })
        .unwrap_or(false);
    if !kept {
        // SAFETY: from `alloc(BLOCK)` in `new` (a `T` that fits), now empty.
        unsafe { dealloc(block.as_ptr(), BLOCK) };
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::rc::Rc;

    #[test]
    fn a_freed_block_is_reused_by_the_next_value_on_the_thread() {
        let a = new([1u64; 4]);
        // SAFETY: from `new`, freed once.
        unsafe { free(a) };
        let b = new(7u32);
        assert_eq!(b.cast::<u8>(), a.cast::<u8>());
        // SAFETY: from `new`, read while alive.
        assert_eq!(unsafe { *b.as_ptr() }, 7);
        // SAFETY: from `new`, freed once.
        unsafe { free(b) };
    }

    #[test]
    fn free_drops_the_value_and_large_values_go_to_the_allocator() {
        let rc = Rc::new(());
        let small = new(Rc::clone(&rc));
        let large = new(([0u8; 512], Rc::clone(&rc)));
        assert_eq!(Rc::strong_count(&rc), 3);
        // SAFETY: from `new`, freed once each.
        unsafe {
            free(small);
            free(large);
        }
        assert_eq!(Rc::strong_count(&rc), 1);
        assert!(!fits::<([u8; 512], Rc<()>)>());
    }

    #[test]
    fn a_thread_keeps_at_most_keep_blocks_and_any_thread_may_free_a_block() {
        // Addresses, since a pointer cannot cross threads.
        let addrs: Vec<usize> = (0..KEEP + 10)
            .map(|i| new(i as u64).as_ptr() as usize)
            .collect();
        std::thread::spawn(move || {
            for p in addrs {
                // SAFETY: from `new` on the other thread, freed once, here.
                unsafe { free(NonNull::new(p as *mut u64).unwrap()) };
            }
            assert_eq!(FREE.with(|f| f.borrow().0.len()), KEEP);
        })
        .join()
        .unwrap();
    }
}
