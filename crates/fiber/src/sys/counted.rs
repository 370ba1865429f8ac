//! [`Counted`]: a shared reference with an atomic count, as `Arc` without weak references,
//! made for a fiber's lifecycle, where every atomic read-modify-write costs about 11 ns on
//! this project's VM (a locked instruction and the store buffer it drains):
//!
//! - a new value comes with two references at once ([`Counted::new_pair`]: the registry's
//!   and the run queue's), with the count stored, not incremented;
//! - a reference that finds itself the only one (an acquire load reads 1) frees the value
//!   without a read-modify-write, and so do two references of the same value that find
//!   themselves the only two ([`Counted::release_pair`]: a fiber's end, where the worker
//!   holds the registry's and the running one's);
//! - there is no weak count to decrement on the way out (`Arc`'s last drop takes two
//!   read-modify-writes).
//!
//! Reading 1 while holding a reference means no other reference exists: a new one is made
//! only by cloning an existing one, and any such clone (and its drop, with release ordering)
//! is in the count's modification order before the value the acquire load read, so nothing
//! can raise the count afterwards and every use through another reference happened before.
//! The loom models at the end check that a value shared by two threads is freed once, after
//! both are done with it, by a last drop and by a pair's release.

use std::marker::PhantomData;
use std::ops::Deref;
use std::ptr::NonNull;

#[cfg(loom)]
use loom::sync::atomic::{AtomicUsize, Ordering, fence};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicUsize, Ordering, fence};

/// More references than this is a leak in a loop: abort, as `Arc` does, before the count
/// could wrap.
const MAX_REFS: usize = isize::MAX as usize;

/// `repr(C)`: the count first, then the value, whose first fields share its cache line.
#[repr(C)]
struct Inner<T> {
    /// # Invariant
    ///
    /// The number of [`Counted`] values that point here; the value is freed when it goes
    /// to 0, by the reference that takes it there.
    count: AtomicUsize,
    value: T,
    /// Loom reports the value if it is never freed.
    #[cfg(loom)]
    _leak_check: loom::alloc::Track<()>,
}

/// A counted shared reference to a `T` on the heap (see the module's docs).
pub(crate) struct Counted<T> {
    /// # Invariant
    ///
    /// From `blocks::new` in [`Counted::new_pair`], and alive while this reference is:
    /// the count includes it.
    inner: NonNull<Inner<T>>,
    /// Owns a `T` (for drop check and auto traits).
    _owns: PhantomData<Inner<T>>,
}

// SAFETY: as for `Arc<T>`: a reference on another thread may read the `T` (`Sync`) and may
// be the one that drops it (`Send`).
unsafe impl<T: Send + Sync> Send for Counted<T> {}
// SAFETY: as above.
unsafe impl<T: Send + Sync> Sync for Counted<T> {}

impl<T> Counted<T> {
    /// `value` on the heap, with two references to it.
    pub(crate) fn new_pair(value: T) -> (Counted<T>, Counted<T>) {
        let inner = super::blocks::new(Inner {
            count: AtomicUsize::new(2),
            value,
            #[cfg(loom)]
            _leak_check: loom::alloc::Track::new(()),
        });
        let one = || Counted {
            inner,
            _owns: PhantomData,
        };
        (one(), one())
    }

    /// Whether a `T`'s record takes a block of `blocks` (for tests).
    #[cfg(test)]
    pub(crate) const fn in_block() -> bool {
        super::blocks::fits::<Inner<T>>()
    }

    fn inner(&self) -> &Inner<T> {
        // SAFETY: alive while this reference is (the invariant).
        unsafe { self.inner.as_ref() }
    }

    /// Whether the two point to the same value.
    pub(crate) fn ptr_eq(a: &Counted<T>, b: &Counted<T>) -> bool {
        a.inner == b.inner
    }

    /// Drops two references to the same value: without a read-modify-write if they are its
    /// only ones.
    ///
    /// # Panics
    ///
    /// If they point to different values.
    pub(crate) fn release_pair(a: Counted<T>, b: Counted<T>) {
        assert!(
            Counted::ptr_eq(&a, &b),
            "two references to different values"
        );
        if a.inner().count.load(Ordering::Acquire) == 2 {
            // SAFETY: no other reference exists (the module's docs), and neither is used again.
            unsafe { Counted::free(a.inner) };
            std::mem::forget(a);
            std::mem::forget(b);
        } else {
            drop(a);
            drop(b);
        }
    }

    /// Frees the value.
    ///
    /// # Safety
    ///
    /// No reference to it is used afterwards, and every use through another one happened
    /// before (a release decrement read by the caller's acquire).
    unsafe fn free(inner: NonNull<Inner<T>>) {
        // SAFETY: from `blocks::new` (the invariant), freed once (the caller's contract).
        unsafe { super::blocks::free(inner) };
    }
}

impl<T> Clone for Counted<T> {
    fn clone(&self) -> Counted<T> {
        // Relaxed, as `Arc`'s: the new reference is handed on by whatever synchronizes its
        // receiver with this thread.
        if self.inner().count.fetch_add(1, Ordering::Relaxed) > MAX_REFS {
            std::process::abort();
        }
        Counted {
            inner: self.inner,
            _owns: PhantomData,
        }
    }
}

impl<T> Drop for Counted<T> {
    fn drop(&mut self) {
        let count = &self.inner().count;
        // The only reference: no other can appear (the module's docs).
        let last = count.load(Ordering::Acquire) == 1 || {
            // Release: this reference's uses happen before the free; the last one acquires.
            let last = count.fetch_sub(1, Ordering::Release) == 1;
            if last {
                fence(Ordering::Acquire);
            }
            last
        };
        if last {
            // SAFETY: this was the last reference, and every other one's uses happened
            // before (the acquire above); `self` is not used again.
            unsafe { Counted::free(self.inner) };
        }
    }
}

impl<T> Deref for Counted<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.inner().value
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for Counted<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&**self, f)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn the_value_is_dropped_with_its_last_reference() {
        let probe = Arc::new(());
        let (a, b) = Counted::new_pair(Arc::clone(&probe));
        let c = a.clone();
        assert!(Counted::ptr_eq(&a, &c));
        drop(a);
        drop(b);
        assert_eq!(Arc::strong_count(&probe), 2, "one reference is left");
        drop(c);
        assert_eq!(Arc::strong_count(&probe), 1);
    }

    #[test]
    fn a_released_pair_frees_the_value_only_if_it_was_alone() {
        let probe = Arc::new(());
        let (a, b) = Counted::new_pair(Arc::clone(&probe));
        Counted::release_pair(a, b);
        assert_eq!(Arc::strong_count(&probe), 1);

        let (a, b) = Counted::new_pair(Arc::clone(&probe));
        let waker = b.clone();
        Counted::release_pair(a, b);
        assert_eq!(Arc::strong_count(&probe), 2, "a third reference keeps it");
        assert_eq!(**waker, ());
        drop(waker);
        assert_eq!(Arc::strong_count(&probe), 1);
    }

    #[test]
    #[should_panic(expected = "different values")]
    fn a_pair_of_different_values_is_refused() {
        let (a, _) = Counted::new_pair(1);
        let (b, _) = Counted::new_pair(2);
        Counted::release_pair(a, b);
    }
}

/// The count under every interleaving loom can find.
///
/// Run with `RUSTFLAGS="--cfg loom" cargo test -p fiber --lib loom_model --release`.
#[cfg(all(test, loom))]
mod loom_model {
    use super::*;
    use loom::cell::UnsafeCell;
    use loom::thread;

    /// A value whose drop writes it: loom reports the free if a use on the other thread
    /// (a write, below) did not happen before it.
    struct Cell(UnsafeCell<u32>);

    impl Drop for Cell {
        fn drop(&mut self) {
            self.0.with_mut(|p| {
                // SAFETY: loom checks that no other access is concurrent.
                unsafe { *p = 0 }
            });
        }
    }

    fn touch(c: &Cell) {
        // SAFETY: loom checks that no other access is concurrent; each thread writes only
        // before it lets its reference go.
        c.0.with_mut(|p| unsafe { *p += 1 });
    }

    /// A pair and a clone: one thread uses and drops the clone, the other lets go of its
    /// pair, one at a time or at once. The value must be freed exactly once
    /// (loom's leak check; a second free is a double free), after both threads' uses.
    #[test]
    fn a_value_is_freed_once_after_every_use() {
        for at_once in [true, false] {
            loom::model(move || {
                let (a, b) = Counted::new_pair(Cell(UnsafeCell::new(0)));
                let c = a.clone();
                let other = thread::spawn(move || {
                    touch(&c);
                    drop(c);
                });
                if at_once {
                    Counted::release_pair(a, b);
                } else {
                    drop(a);
                    drop(b);
                }
                other.join().unwrap();
            });
        }
    }

    /// The pair's own free: the clone's thread uses and drops it; the pair's thread lets go
    /// of its two once it sees them alone (a relaxed look, which does not synchronize by
    /// itself), so that `release_pair` frees the value. Fails if `release_pair`'s load is
    /// relaxed. (In the model above loom always runs the pair's release first.)
    #[test]
    fn a_pair_left_alone_frees_the_value_after_the_clones_use() {
        loom::model(|| {
            let (a, b) = Counted::new_pair(Cell(UnsafeCell::new(0)));
            let c = a.clone();
            let other = thread::spawn(move || {
                touch(&c);
                drop(c);
            });
            while a.inner().count.load(Ordering::Relaxed) != 2 {
                thread::yield_now();
            }
            Counted::release_pair(a, b);
            other.join().unwrap();
        });
    }
}
